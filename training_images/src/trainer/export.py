"""Turn a training checkpoint into a small model for CPU inference, and say what it cost.

Pruning zeroes the smallest-magnitude Linear weights across the whole model (global, so layers
that matter keep more); on its own it does not shrink a dense file, but it is free accuracy
headroom to spend before quantization. Dynamic int8 quantization stores Linear weights in one
byte and quantizes activations on the fly, which is where the size goes down ~4x.

The output is a pickled module (torch.save), so loading it runs code: load only files you made.
"""

from __future__ import annotations

import io
import os
import warnings
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.nn.utils import prune

from trainer.checkpoint import read_state, resolve
from trainer.config import ConfigError, ExportConfig, ModelConfig
from trainer.data import TokenFile, eval_batches
from trainer.model import GPT, lm_loss

EXPORT_FORMAT = "trainer-export-v1"
_EVAL_MICRO_BATCH = 8


def load_checkpoint_model(folder: Path) -> GPT:
    """Only the model's entries are read; the optimizer state stays on disk. No process group
    is needed: DCP reads a checkpoint written by any number of ranks in one process."""
    model = GPT(ModelConfig(**read_state(folder).model))
    wanted = {"model": model.state_dict()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*assuming the intent is to load in a single process")
        dcp.load(wanted, checkpoint_id=folder)
    model.load_state_dict(wanted["model"])
    return model.eval()


def prune_linear(model: nn.Module, amount: float) -> float:
    """Zero `amount` of all Linear weights by global L1 magnitude; returns the sparsity reached."""
    targets = [(m, "weight") for m in model.modules() if isinstance(m, nn.Linear)]
    prune.global_unstructured(targets, pruning_method=prune.L1Unstructured, amount=amount)
    for module, name in targets:
        prune.remove(module, name)
    zeros = sum(int((m.weight == 0).sum()) for m, _ in targets)
    return zeros / sum(m.weight.numel() for m, _ in targets)


def quantize_int8(model: nn.Module) -> tuple[nn.Module, str]:
    """torchao when installed; otherwise the deprecated torch.ao path, kept quiet and guarded
    because a later torch release removes it."""
    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        pass
    else:
        quantize_(model, Int8DynamicActivationInt8WeightConfig())
        return model, "torchao"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.ao\.quantization.*deprecated")
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated")
        try:
            from torch.ao.quantization import quantize_dynamic
        except ImportError:
            raise ConfigError(
                "--quantize int8 needs torchao with this torch: pip install 'gpu-platform-trainer[torchao]'"
            ) from None
        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8), "torch.ao.quantization"


@torch.no_grad()
def eval_loss(model: nn.Module, val: TokenFile, samples: int) -> float:
    total, count = 0.0, 0
    for inputs, targets in eval_batches(val, samples, 0, 1, _EVAL_MICRO_BATCH):
        total += float(lm_loss(model(inputs), targets, reduction="sum"))
        count += targets.numel()
    return total / count


def _serialize(model: nn.Module, model_cfg: dict[str, int], seq_len: int) -> bytes:
    buffer = io.BytesIO()
    torch.save({"format": EXPORT_FORMAT, "model_config": model_cfg, "seq_len": seq_len, "model": model}, buffer)
    return buffer.getvalue()


def load_exported(path: Path) -> tuple[nn.Module, int]:
    """The exported module and the sequence length it was trained at."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated")
        warnings.filterwarnings("ignore", message=r"TypedStorage is deprecated")
        payload = torch.load(path, weights_only=False)
    if not isinstance(payload, dict) or payload.get("format") != EXPORT_FORMAT:
        raise ConfigError(f"{path}: not a {EXPORT_FORMAT} file")
    return payload["model"], int(payload["seq_len"])


def export(cfg: ExportConfig) -> dict[str, object]:
    folder = resolve(cfg.checkpoint_dir)
    state = read_state(folder)
    data_dir = cfg.data or Path(state.data)
    val = TokenFile(data_dir, "val", state.seq_len)
    model = load_checkpoint_model(folder)

    size_before = len(_serialize(model, state.model, state.seq_len))
    loss_before = eval_loss(model, val, cfg.eval_samples)
    sparsity = prune_linear(model, cfg.prune) if cfg.prune > 0 else 0.0
    loss_pruned = eval_loss(model, val, cfg.eval_samples)
    quantizer = "none"
    if cfg.quantize == "int8":
        model, quantizer = quantize_int8(model)
    loss_after = eval_loss(model, val, cfg.eval_samples)

    cfg.output.parent.mkdir(parents=True, exist_ok=True)
    partial = cfg.output.with_name(cfg.output.name + ".partial")
    partial.write_bytes(_serialize(model, state.model, state.seq_len))
    os.replace(partial, cfg.output)
    size_after = cfg.output.stat().st_size
    return {
        "checkpoint": str(folder),
        "step": state.step,
        "output": str(cfg.output),
        "prune_amount": cfg.prune,
        "sparsity": sparsity,
        "quantize": cfg.quantize,
        "quantizer": quantizer,
        "size_bytes_before": size_before,
        "size_bytes_after": size_after,
        "size_ratio": size_after / size_before,
        "eval_samples": min(cfg.eval_samples, val.num_samples),
        "eval_loss_before": loss_before,
        "eval_loss_after_prune": loss_pruned,
        "eval_loss_after": loss_after,
        "eval_loss_change": loss_after - loss_before,
    }
