"""Turn a training checkpoint into a small model for CPU inference, and say what it cost.

Pruning zeroes the smallest-magnitude Linear weights across the whole model (global, so layers
that matter keep more); on its own it does not shrink a dense file, but it is free accuracy
headroom to spend before quantization. Dynamic int8 quantization stores Linear weights in one
byte and quantizes activations on the fly, which is where the size goes down ~4x.

The output file holds the model's shape, the quantizer used and its state dict; `load_exported`
rebuilds the model from it. Quantized state dicts carry packed or subclassed tensors that the
safe (weights-only) loader rejects, so loading unpickles: load only files you made.
"""

from __future__ import annotations

import importlib.util
import io
import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.nn.utils import prune

from trainer.checkpoint import read_state, resolve
from trainer.storage import Store
from trainer.config import ConfigError, ExportConfig, ModelConfig
from trainer.data import TokenFile, eval_batches
from trainer.model import GPT, lm_loss

EXPORT_FORMAT = "trainer-export-v1"
_EVAL_MICRO_BATCH = 8


def load_checkpoint_model(store: Store, folder: str) -> GPT:
    """Only the model's entries are read; the optimizer state stays on disk. No process group
    is needed: DCP reads a checkpoint written by any number of ranks in one process."""
    model = GPT(ModelConfig(**read_state(store, folder).model))
    wanted = {"model": model.state_dict()}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*assuming the intent is to load in a single process")
        dcp.load(wanted, storage_reader=store.reader(folder))
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


@contextmanager
def _quiet_torch_ao() -> Iterator[None]:
    """torch.ao.quantization warns on import and on every quantized tensor it makes."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*torch\.ao\.quantization.*deprecated")
        warnings.filterwarnings("ignore", message=r".*quantize_per_tensor.*deprecated")
        warnings.filterwarnings("ignore", message=r"TypedStorage is deprecated")
        yield


def int8_quantizer() -> str:
    """torchao when installed; otherwise the deprecated torch.ao path while this torch has it."""
    if importlib.util.find_spec("torchao") is not None:
        return "torchao"
    with _quiet_torch_ao():
        try:
            from torch.ao.quantization import quantize_dynamic  # noqa: F401
        except ImportError:
            raise ConfigError(
                "--quantize int8 needs torchao with this torch: pip install 'gpu-platform-trainer[torchao]'"
            ) from None
    return "torch.ao.quantization"


def quantize_int8(model: nn.Module, quantizer: str) -> nn.Module:
    """Dynamic int8 for every Linear: int8 weights, activations quantized per call."""
    if quantizer == "torchao":
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_

        quantize_(model, Int8DynamicActivationInt8WeightConfig())
        return model
    with _quiet_torch_ao():
        from torch.ao.quantization import quantize_dynamic

        return quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)


@torch.no_grad()
def eval_loss(model: nn.Module, val: TokenFile, samples: int) -> float:
    total, count = 0.0, 0
    for inputs, targets, _ in eval_batches(val, samples, 0, 1, _EVAL_MICRO_BATCH):
        total += float(lm_loss(model(inputs), targets, reduction="sum"))
        count += targets.numel()
    return total / count


def _serialize(model: nn.Module, model_cfg: dict[str, int], seq_len: int, quantizer: str) -> bytes:
    buffer = io.BytesIO()
    with _quiet_torch_ao():
        torch.save({"format": EXPORT_FORMAT, "model_config": model_cfg, "seq_len": seq_len,
                    "quantizer": quantizer, "state_dict": model.state_dict()}, buffer)
    return buffer.getvalue()


def load_exported(path: Path) -> tuple[nn.Module, int]:
    """The exported model, ready for CPU inference, and the sequence length it was trained at."""
    with _quiet_torch_ao():
        payload = torch.load(path, weights_only=False)
        if not isinstance(payload, dict) or payload.get("format") != EXPORT_FORMAT:
            raise ConfigError(f"{path}: not a {EXPORT_FORMAT} file")
        model: nn.Module = GPT(ModelConfig(**payload["model_config"]))
        quantizer = payload["quantizer"]
        if quantizer == "torch.ao.quantization":
            model = quantize_int8(model, quantizer)
        # torchao's quantized weights are tensor subclasses: assign them rather than copy into floats.
        model.load_state_dict(payload["state_dict"], assign=quantizer == "torchao")
    return model.eval(), int(payload["seq_len"])


def export(cfg: ExportConfig) -> dict[str, object]:
    quantizer = int8_quantizer() if cfg.quantize == "int8" else "none"
    store = Store(cfg.checkpoint_dir)
    folder = resolve(store)
    state = read_state(store, folder)
    data_dir = cfg.data or Path(state.data)
    val = TokenFile(data_dir, "val", state.seq_len)
    model: nn.Module = load_checkpoint_model(store, folder)

    size_before = len(_serialize(model, state.model, state.seq_len, "none"))
    loss_before = eval_loss(model, val, cfg.eval_samples)
    sparsity = prune_linear(model, cfg.prune) if cfg.prune > 0 else 0.0
    loss_pruned = eval_loss(model, val, cfg.eval_samples)
    if quantizer != "none":
        model = quantize_int8(model, quantizer)
    loss_after = eval_loss(model, val, cfg.eval_samples)

    cfg.output.parent.mkdir(parents=True, exist_ok=True)
    partial = cfg.output.with_name(cfg.output.name + ".partial")
    partial.write_bytes(_serialize(model, state.model, state.seq_len, quantizer))
    os.replace(partial, cfg.output)
    size_after = cfg.output.stat().st_size
    return {
        "checkpoint": folder,
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
