"""What one rank holds at its peak, from the preset's shapes alone, and the micro-batch that fits.

Stdlib only (no torch), so the platform and the trainer read the same figures. The model counts
the tensors the trainer's own code keeps alive (docs/trainer.md, "Memory model"):

- state: fp32 master weights (4 bytes per parameter), fp32 gradients (4) and AdamW's two fp32
  moments (8), divided by the shard degree: the world under fsdp, a node's processes under
  hsdp, 1 under ddp. DDP adds its fp32 gradient buckets (4 per parameter; the reducer copies
  gradients into them, torch/nn/parallel/distributed.py, gradient_as_bucket_view=False).
  FSDP adds the unsharded copies it all-gathers in the compute dtype: the root's parameters
  (embeddings, head) for the whole step, and two blocks at once (the one computing and the
  one prefetched).
- activations, per token of a micro-batch, what autograd saves for the backward pass of each
  block (trainer.model.Block): the residual input of each norm (fp32 under autocast, since
  layer_norm runs in fp32), each Linear's input and the q, k, v it produces, the attention
  output, and the feed-forward's two 4*dim tensors (GELU's input and output). Under bf16
  autocast that is 36 bytes x dim (measured on the issue's scale), in fp32 64 bytes x dim.
  Attention's log-sum-exp adds 4 bytes per head. With activation checkpointing a block keeps
  only its fp32 input, and one block at a time is recomputed with all of its activations.
- outside the blocks, per token: the final norm's input and the head's, the logits (kept by
  train_step until backward ends) and log_softmax's fp32 output, and at the start of backward
  the gradients of both (fp32).
- under DDP with bf16 autocast, the cast cache: a bf16 copy of every matmul weight, which the
  Linear layers also save for backward.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.config import ConfigError, ModelConfig, TrainConfig

GIB = 1 << 30
# Headroom kept free below the GPU's memory when choosing the default micro-batch: the CUDA
# context, NCCL's buffers, the allocator's fragmentation and the compiled kernels' workspaces.
GPU_MARGIN = 0.15
GPU_RESERVED_BYTES = 2 * GIB


@dataclass(frozen=True)
class Estimate:
    """Bytes one rank holds at its peak, by kind.

    Weights, optimizer state and buffers live for the whole run (`steady`). Gradients and
    activations take turns (`step`): optimizer.zero_grad(set_to_none=True) frees the gradients
    before the next forward, and backward frees a block's activations as it creates that
    block's gradients, so the step's peak is the largest sum along backward (see `_step_peak`)."""

    params: int
    grads: int
    optimizer: int
    buffers: int
    activations: int
    step: int

    @property
    def steady(self) -> int:
        return self.params + self.optimizer + self.buffers

    @property
    def total(self) -> int:
        return self.steady + self.step

    def describe(self) -> str:
        parts = ", ".join(f"{name} {getattr(self, name) / GIB:.2f}"
                          for name in ("params", "grads", "optimizer", "buffers", "activations"))
        return f"{self.total / GIB:.2f} GiB ({parts})"


def shard_degree(mode: str, world_size: int, per_node: int) -> int:
    if mode == "fsdp":
        return world_size
    if mode == "hsdp":
        return per_node
    return 1


def _block_params(cfg: ModelConfig) -> int:
    return 12 * cfg.dim * cfg.dim + 2 * cfg.dim


def _block_bytes_per_token(cfg: ModelConfig, compute_bytes: int) -> int:
    """What one block saves per token: the attn and ffn norms' fp32 inputs; in the compute dtype
    the qkv input, q, k and v, the attention output (the out projection's input), the up
    projection's input, GELU's input and output; and attention's fp32 log-sum-exp per head."""
    d = cfg.dim
    return 2 * 4 * d + compute_bytes * (d + 3 * d + d + d + 4 * d + 4 * d) + 4 * cfg.n_heads


def _head_bytes_per_token(cfg: ModelConfig, compute_bytes: int) -> int:
    """The final norm's fp32 input, the head's input and its logits, log_softmax's fp32 output,
    and at the start of backward the fp32 gradients of both."""
    d, v = cfg.dim, cfg.vocab_size
    return 4 * d + compute_bytes * d + compute_bytes * v + 4 * v + 2 * 4 * v


def _step_peak(cfg: ModelConfig, tokens: int, compute_bytes: int, checkpointing: bool, shards: int) -> int:
    """The largest of: the start of backward (every activation, the head's gradient), each
    block's backward (the activations of the blocks below it, its own, recomputed when
    checkpointed, the gradients of every block above it and its own, and the transients of its
    feed-forward's backward), and the end (every gradient).

    The transients, per token: the fp32 gradient flowing down the residual stream, the
    gradients of GELU's output and input (4*dim each, in the compute dtype; GELU's saved output
    is already freed by then), and the logits, which train_step holds until backward returns."""
    block = tokens * _block_bytes_per_token(cfg, compute_bytes)
    transient = tokens * (4 * cfg.dim + compute_bytes * (4 * cfg.dim + cfg.vocab_size))
    kept = tokens * 4 * cfg.dim if checkpointing else block
    block_grad = -(-4 * _block_params(cfg) // shards)
    head_grad = -(-4 * (cfg.dim * cfg.vocab_size + cfg.dim) // shards)
    layers = cfg.n_layers
    start = layers * kept + tokens * _head_bytes_per_token(cfg, compute_bytes) + head_grad
    during = [i * kept + (kept + block if checkpointing else block) + transient + head_grad
              + (layers - i) * block_grad for i in range(layers)]
    end = -(-4 * cfg.parameters // shards)
    return max(start, *during, end)


def estimate(cfg: ModelConfig, micro_batch: int, seq_len: int, mode: str, world_size: int, per_node: int,
             compute_bytes: int, checkpointing: bool) -> Estimate:
    """Peak bytes of one rank; `compute_bytes` is 2 under bf16/fp16 autocast, 4 in fp32."""
    shards = shard_degree(mode, world_size, per_node)
    params = cfg.parameters
    matmul = cfg.n_layers * 12 * cfg.dim * cfg.dim + cfg.dim * cfg.vocab_size
    if mode in ("fsdp", "hsdp"):
        root = params - cfg.n_layers * _block_params(cfg)
        buffers = compute_bytes * (root + 2 * _block_params(cfg)) if shards > 1 else 0
    else:
        buffers = 4 * params if world_size > 1 else 0
        if compute_bytes < 4:
            buffers += compute_bytes * matmul
    tokens = micro_batch * seq_len
    per_token = (4 * cfg.dim if checkpointing else _block_bytes_per_token(cfg, compute_bytes)) * cfg.n_layers
    return Estimate(
        params=-(-4 * params // shards),
        grads=-(-4 * params // shards),
        optimizer=-(-8 * params // shards),
        buffers=buffers,
        activations=tokens * (per_token + _head_bytes_per_token(cfg, compute_bytes)),
        step=_step_peak(cfg, tokens, compute_bytes, checkpointing, shards),
    )


def usable_bytes(gpu_bytes: int) -> int:
    """What the default micro-batch may fill of a GPU's memory."""
    return int(gpu_bytes * (1 - GPU_MARGIN)) - GPU_RESERVED_BYTES


def largest_fitting(cfg: ModelConfig, per_rank: int, seq_len: int, mode: str, world_size: int, per_node: int,
                    compute_bytes: int, checkpointing: bool, gpu_bytes: int) -> int | None:
    """The largest divisor of the per-rank batch whose estimate fits; None when not even 1 does."""
    budget = usable_bytes(gpu_bytes)
    for micro in sorted((m for m in range(1, per_rank + 1) if per_rank % m == 0), reverse=True):
        if estimate(cfg, micro, seq_len, mode, world_size, per_node, compute_bytes, checkpointing).total <= budget:
            return micro
    return None


def micro_batch(cfg: TrainConfig, world_size: int, per_node: int, compute_bytes: int, gpu_bytes: int) -> tuple[int, Estimate]:
    """The micro-batch of `cfg` on GPUs of `gpu_bytes`, and its estimate: an explicit one that does
    not fit is refused, naming the estimate; without one, the largest divisor of the per-rank
    batch that fits (the rest is accumulated). Shared by the trainer (trainer.fit) and by
    `gpu-platform job`, which knows the GPU from its catalog."""
    args = (cfg.seq_len, cfg.parallel, world_size, per_node, compute_bytes, cfg.activation_checkpointing)
    usable = usable_bytes(gpu_bytes)
    where = f"{gpu_bytes / GIB:.0f} GiB of GPU memory, {usable / GIB:.1f} GiB usable"
    if cfg.micro_batch_size is not None:
        needed = estimate(cfg.model, cfg.micro_batch_size, *args)
        if needed.total > usable:
            raise ConfigError(
                f"--micro-batch-size {cfg.micro_batch_size}: preset {cfg.preset} at --seq-len {cfg.seq_len} "
                f"needs an estimated {needed.describe()} per rank, more than the {where}; use a smaller one"
                + ("" if cfg.activation_checkpointing else " or --activation-checkpointing")
            )
        return cfg.micro_batch_size, needed
    per_rank = cfg.global_batch_size // world_size
    micro = largest_fitting(cfg.model, per_rank, *args, gpu_bytes)
    if micro is None:
        raise ConfigError(
            f"preset {cfg.preset} at --seq-len {cfg.seq_len} needs an estimated "
            f"{estimate(cfg.model, 1, *args).describe()} per rank for a micro-batch of 1, more than the {where}"
        )
    return micro, estimate(cfg.model, micro, *args)
