"""Every knob of the trainer in one place, and the command line that sets them.

The flag names are a contract with the platform (its job templates pass them), so they are
spelt once here and nowhere else. Errors raised here reach the user as one line, so each
message names the flag and what it expected.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, NoReturn


class ConfigError(ValueError):
    """A user mistake: printed as one line, never as a traceback."""


# fp32 weight + AdamW exp_avg + exp_avg_sq, 4 bytes each (torch.optim.AdamW state).
CHECKPOINT_BYTES_PER_PARAMETER = 12


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the decoder; byte-level tokens make the vocabulary a fixed 256."""

    dim: int
    n_layers: int
    n_heads: int
    max_seq_len: int
    vocab_size: int = 256

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def to_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def parameters(self) -> int:
        """Every parameter of trainer.model.GPT, counted without torch, so the platform can size
        jobs (checkpoint time, grace periods) from a preset name alone."""
        per_block = 12 * self.dim * self.dim + 2 * self.dim  # qkv, out, up, down; two norm weights
        embeddings = (self.vocab_size + self.max_seq_len) * self.dim
        return embeddings + self.n_layers * per_block + self.dim + self.dim * self.vocab_size

    @property
    def checkpoint_bytes(self) -> int:
        """What a checkpoint holds: fp32 weights and AdamW's two fp32 moments per parameter."""
        return self.parameters * CHECKPOINT_BYTES_PER_PARAMETER


# Sizes from a CPU smoke test up to roughly one billion parameters (see docs/trainer.md for
# counts). Head dims stay at 64 or 128 so fused attention kernels apply on GPUs.
PRESETS: dict[str, ModelConfig] = {
    "tiny": ModelConfig(dim=64, n_layers=2, n_heads=4, max_seq_len=256),
    "small": ModelConfig(dim=512, n_layers=8, n_heads=8, max_seq_len=1024),
    "medium": ModelConfig(dim=1024, n_layers=16, n_heads=16, max_seq_len=2048),
    "large": ModelConfig(dim=1536, n_layers=24, n_heads=12, max_seq_len=2048),
    "1b": ModelConfig(dim=2048, n_layers=20, n_heads=16, max_seq_len=2048),
}

# ddp: replicate everything; fsdp: shard parameters, gradients and optimizer state over all
# ranks; hsdp: shard within a node, replicate across nodes (trainer.parallel).
PARALLEL_MODES = ("ddp", "fsdp", "hsdp")

# The fabric gate before step 1 of multi-node runs (trainer.fabric): stop, report, or skip.
FABRIC_CHECKS = ("enforce", "warn", "off")


@dataclass(frozen=True)
class TrainConfig:
    data: Path
    # A folder or an s3:// / gs:// URL (trainer.storage), so kept as text: Path would fold "//".
    checkpoint_dir: str
    preset: str
    max_steps: int
    checkpoint_every: int
    global_batch_size: int
    seq_len: int
    seed: int
    metrics_file: Path
    parallel: str = "ddp"
    micro_batch_size: int | None = None
    lr: float = 3e-4
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    log_every: int = 10
    eval_every: int = 100
    eval_samples: int = 64
    keep_checkpoints: int = 3
    async_checkpoint: bool = False
    peak_tflops: float | None = None
    gpu_memory_gib: float | None = None
    # None: decided by the device and the preset (trainer.speed).
    compile: bool | None = None
    activation_checkpointing: bool = False
    dist_timeout_s: float = 600.0
    fabric_check: str = "off"
    fabric_floor_gbps: float | None = None
    fabric_probe_max_mib: int = 256

    @property
    def model(self) -> ModelConfig:
        return PRESETS[self.preset]

    def micro_batch_for(self, world_size: int) -> int:
        """Default to one micro-batch per step: accumulation is only worth it when memory says so."""
        per_rank = self.global_batch_size // world_size
        return self.micro_batch_size if self.micro_batch_size is not None else per_rank

    def accumulation_steps(self, world_size: int) -> int:
        return self.global_batch_size // (world_size * self.micro_batch_for(world_size))

    def check_world(self, world_size: int) -> None:
        """Batch arithmetic is checked before the process group exists, so a typo never hangs."""
        if self.global_batch_size % world_size:
            raise ConfigError(
                f"--global-batch-size {self.global_batch_size} is not divisible by the "
                f"{world_size} processes; use a multiple of {world_size}"
            )
        per_rank = self.global_batch_size // world_size
        micro = self.micro_batch_for(world_size)
        if per_rank % micro:
            raise ConfigError(
                f"--micro-batch-size {micro} does not divide the {per_rank} samples each of "
                f"the {world_size} processes takes per step (--global-batch-size "
                f"{self.global_batch_size})"
            )


@dataclass(frozen=True)
class PrepareConfig:
    input: Path
    output: Path
    val_fraction: float = 0.1


@dataclass(frozen=True)
class ExportConfig:
    checkpoint_dir: str
    output: Path
    prune: float
    quantize: str
    data: Path | None = None
    eval_samples: int = 64


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints the whole usage block on error; the contract is a single line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def _parsed(convert: Callable[[str], float], accept: Callable[[float], bool], expected: str) -> Callable[[str], Any]:
    """An argparse type: `convert` the text, then `accept` the value, or one-line error."""

    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _parsed(int, lambda v: v >= 1, "a positive integer")
_non_negative_int = _parsed(int, lambda v: v >= 0, "an integer >= 0")
# float() reads "inf" and "nan" too; neither is a usable rate, timeout or peak.
_positive_float = _parsed(float, lambda v: math.isfinite(v) and v > 0, "a positive number")
_non_negative_float = _parsed(float, lambda v: math.isfinite(v) and v >= 0, "a number >= 0")
# numpy's PCG64 (the data order) takes only non-negative seeds, torch.manual_seed at most 2**64-1;
# 2**63 keeps the seed a signed 64-bit integer everywhere it is written down.
MAX_SEED = 2**63 - 1
_seed = _parsed(int, lambda v: 0 <= v <= MAX_SEED, f"an integer in [0, {MAX_SEED}]")
# Half-open [0, 1): 0 prunes nothing (or decays to zero), 1 prunes everything.
_fraction = _parsed(float, lambda v: 0.0 <= v < 1.0, "a number in [0, 1)")
# Open (0, 1): a val split of 0 leaves nothing to evaluate, of 1 nothing to train on.
_split_fraction = _parsed(float, lambda v: 0.0 < v < 1.0, "a number in (0, 1)")


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="trainer", description="Byte-level GPT trainer.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)

    prepare = commands.add_parser("prepare", help="turn raw text into train/val token files")
    prepare.add_argument("--input", type=Path, required=True, help="a text file or a folder")
    prepare.add_argument("--output", type=Path, required=True, help="data folder to write")
    prepare.add_argument("--val-fraction", type=_split_fraction, default=0.1,
                         help="share of the bytes held out for evaluation, in (0, 1)")

    train = commands.add_parser("train", help="train (single process or under torchrun)")
    train.add_argument("--data", type=Path, required=True)
    train.add_argument("--checkpoint-dir", required=True,
                       help="a folder shared by all nodes, or an s3:// or gs:// URL")
    train.add_argument("--preset", choices=sorted(PRESETS), required=True)
    train.add_argument("--max-steps", type=_positive_int, required=True)
    train.add_argument("--checkpoint-every", type=_positive_int, required=True)
    train.add_argument("--global-batch-size", type=_positive_int, required=True)
    train.add_argument("--seq-len", type=_positive_int, required=True)
    train.add_argument("--seed", type=_seed, required=True)
    train.add_argument("--metrics-file", type=Path, required=True)
    train.add_argument("--parallel", choices=PARALLEL_MODES, default="ddp")
    train.add_argument("--micro-batch-size", type=_positive_int, default=None)
    train.add_argument("--lr", type=_positive_float, default=3e-4)
    train.add_argument("--min-lr-ratio", type=_fraction, default=0.1)
    train.add_argument("--warmup-steps", type=_non_negative_int, default=100)
    train.add_argument("--weight-decay", type=_non_negative_float, default=0.1)
    train.add_argument("--grad-clip", type=_positive_float, default=1.0)
    train.add_argument("--log-every", type=_positive_int, default=10)
    train.add_argument("--eval-every", type=_non_negative_int, default=100,
                       help="0 evaluates only after the last step")
    train.add_argument("--eval-samples", type=_positive_int, default=64)
    train.add_argument("--keep-checkpoints", type=_non_negative_int, default=3,
                       help="complete checkpoints to keep; 0 keeps all")
    train.add_argument("--async-checkpoint", action="store_true",
                       help="write periodic checkpoints in the background (the last and the SIGTERM save stay synchronous)")
    train.add_argument("--peak-tflops", type=_positive_float, default=None,
                       help="dense bf16 (fp16 without bf16) peak TFLOPS of one accelerator, for MFU")
    train.add_argument("--gpu-memory-gib", type=_positive_float, default=None,
                       help="memory of one accelerator, for the default micro-batch (default: what CUDA reports)")
    train.add_argument("--compile", action=argparse.BooleanOptionalAction, default=None,
                       help="compile each block (default: on for CUDA and the presets where it pays)")
    train.add_argument("--activation-checkpointing", action="store_true")
    train.add_argument("--dist-timeout", dest="dist_timeout_s", type=_positive_float,
                       default=600.0, help="seconds before a stuck collective fails")
    train.add_argument("--fabric-check", choices=FABRIC_CHECKS, default="off",
                       help="multi-node runs: all-reduce probe and NCCL transport check before step 1")
    train.add_argument("--fabric-floor-gbps", type=_positive_float, default=None,
                       help="least all-reduce bus bandwidth (GB/s, as nccl-tests) the fabric check accepts")
    train.add_argument("--fabric-probe-max-mib", type=_positive_int, default=256,
                       help="largest all-reduce of the fabric probe, in MiB (sizes 1, 4, 16, ... up to it)")

    export = commands.add_parser("export", help="prune and quantize a checkpoint for CPU inference")
    export.add_argument("--checkpoint-dir", required=True,
                        help="a checkpoint dir or one step_* folder in it; a folder or an s3:// or gs:// URL")
    export.add_argument("--output", type=Path, required=True)
    export.add_argument("--prune", type=_fraction, required=True, help="fraction of Linear weights to zero")
    export.add_argument("--quantize", choices=("int8", "none"), required=True)
    export.add_argument("--data", type=Path, default=None,
                        help="data folder for the eval loss (default: the one the run trained on)")
    export.add_argument("--eval-samples", type=_positive_int, default=64)
    return parser


def parse(argv: list[str]) -> PrepareConfig | TrainConfig | ExportConfig:
    args = vars(build_parser().parse_args(argv))
    command = args.pop("command")
    if command == "prepare":
        return PrepareConfig(**args)
    if command == "export":
        return ExportConfig(**args)
    cfg = TrainConfig(**args)
    if cfg.seq_len > cfg.model.max_seq_len:
        raise ConfigError(
            f"--seq-len {cfg.seq_len} exceeds the {cfg.model.max_seq_len}-token context of "
            f"preset {cfg.preset!r}"
        )
    return cfg
