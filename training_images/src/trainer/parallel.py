"""Process group life cycle, the numeric precision of the device, and the wrapping of the model
for DDP or FSDP2.

Two upstream hazards shape this module (both in docs/trainer.md):
- Under torchrun, the elastic agent can share its rendezvous TCP store with the workers and
  keeps it across restarts, while the workers' keys are not scoped per attempt
  (pytorch/pytorch#135712): restarted gloo workers can then read the previous attempt's keys
  and hang while connecting. The launch environment sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1,
  which gives every round a fresh store; where the store is shared anyway, its keys are
  prefixed here with the restart count (`_store_prefix`).
- Freeing a gloo process group at interpreter exit can deadlock. `shutdown` ends a run with a
  barrier and an explicit destroy, bounded by a timeout; the CLI then leaves with os._exit so
  the interpreter never tears down what is left.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import ContextManager

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

from trainer.config import ConfigError
from trainer.model import GPT

TEARDOWN_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Dist:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def world_from_env() -> tuple[int, int, int]:
    """(rank, world size, local rank) as torchrun sets them; a plain process is rank 0 of 1."""
    return (
        int(os.environ.get("RANK", "0")),
        int(os.environ.get("WORLD_SIZE", "1")),
        int(os.environ.get("LOCAL_RANK", "0")),
    )


def local_world_size() -> int:
    """Processes on this node, as torchrun sets it; a plain process is alone."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1"))


def hsdp_mesh_shape(world_size: int, per_node: int) -> tuple[int, int]:
    """(replicas, shards) of --parallel hsdp: shard over a node's processes, whose collectives stay
    on NVLink, and replicate across nodes, whose links carry one gradient all-reduce per step."""
    if per_node < 1 or world_size % per_node:
        raise ConfigError(
            f"--parallel hsdp: {world_size} processes do not split into nodes of {per_node} "
            "(LOCAL_WORLD_SIZE); every node must run the same number of processes"
        )
    return world_size // per_node, per_node


@dataclass(frozen=True)
class Precision:
    """How the device computes. Master weights, optimizer state and the loss stay fp32 always;
    `dtype` is the autocast (and FSDP parameter) dtype, None for plain fp32. fp16's narrow range
    needs the loss scaled so small gradients do not flush to zero; bf16 has fp32's range."""

    name: str
    dtype: torch.dtype | None

    @property
    def scaled(self) -> bool:
        return self.dtype == torch.float16

    def autocast(self, device: torch.device) -> ContextManager[object]:
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(device.type, dtype=self.dtype)

    def grad_scaler(self, device: torch.device) -> torch.amp.GradScaler:
        """A GradScaler that is a no-op unless fp16: one code path for every precision."""
        return torch.amp.GradScaler(device.type, enabled=self.scaled)


FP32 = Precision("fp32", None)
BF16 = Precision("bf16", torch.bfloat16)
FP16 = Precision("fp16", torch.float16)


def choose_precision(device_type: str, has_bf16: bool, device_name: str, mode: str) -> Precision:
    """bf16 where the GPU computes it natively (compute capability 8.0 and later: A100, H100,
    L4...), fp16 with a gradient scaler on older GPUs (V100, T4), fp32 on CPU, where tests compare
    exact arithmetic. FSDP and HSDP are refused without bf16: their fp16 path (a sharded loss
    scaler over DTensor gradients) is not one this trainer has been run on."""
    if device_type != "cuda":
        return FP32
    if has_bf16:
        return BF16
    if mode != "ddp":
        raise ConfigError(
            f"--parallel {mode}: the {device_name} has no bf16, and this trainer runs FSDP only in bf16; "
            "use --parallel ddp there (fp16 with a gradient scaler)"
        )
    return FP16


def device_precision(mode: str) -> Precision:
    """The precision of this process's GPU (torchrun's LOCAL_RANK), decided before any process
    group exists so that a refusal never hangs the others."""
    if not torch.cuda.is_available():
        return FP32
    _, _, local_rank = world_from_env()
    with torch.cuda.device(local_rank):
        has_bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
        name = torch.cuda.get_device_name(local_rank)
    return choose_precision("cuda", has_bf16, name, mode)


def _store_prefix() -> str:
    """Keys of one attempt apart from the last one's where the store outlives an attempt: the
    agent's store, shared with the workers (TORCHELASTIC_USE_AGENT_STORE=True), where the
    restart count scopes them. Otherwise (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, as the image
    sets) every rendezvous round hands the workers a fresh store, and the restart count must not
    be used: under c10d a healthy node's workers are restarted without counting a failure
    (torch/distributed/elastic/agent/server/api.py, num_nodes_waiting), so the count differs
    between nodes and their keys would never meet."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return f"trainer/attempt_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
    return "trainer"


def init_distributed(timeout: timedelta) -> Dist:
    """Always create a process group, even for one process, so the trainer has one code path."""
    rank, world_size, local_rank = world_from_env()
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
        backend = "cuda:nccl,cpu:gloo"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    if "MASTER_ADDR" in os.environ:
        store, _, _ = next(dist.rendezvous("env://", rank, world_size, timeout=timeout))
        store.set_timeout(timeout)
    else:
        store = dist.HashStore()
    dist.init_process_group(
        backend,
        store=dist.PrefixStore(_store_prefix(), store),
        rank=rank,
        world_size=world_size,
        timeout=timeout,
        device_id=device if device.type == "cuda" else None,
    )
    return Dist(rank=rank, world_size=world_size, device=device)


# Presets whose blocks are big enough that compiling them (a fused GELU, norms and residual adds,
# fewer kernel launches) outweighs the minutes of compilation at start-up: the estimate
# for `1b` on an H100 is 45-48% MFU compiled against 38-44% eager (docs/trainer.md, "Speed").
# tiny and small runs are short and launch-bound on the CPU side; they stay eager by default.
COMPILE_PRESETS = frozenset({"medium", "large", "1b"})


def compile_by_default(preset: str, device: torch.device) -> bool:
    """--compile when neither --compile nor --no-compile was given: on CUDA, for COMPILE_PRESETS.
    On CPU, where the tests compare exact arithmetic, never."""
    return device.type == "cuda" and preset in COMPILE_PRESETS


def parallelize(
    model: GPT, d: Dist, mode: str, precision: Precision, compile_blocks: bool, activation_checkpointing: bool
) -> nn.Module:
    """Blocks are compiled and sharded one by one: smaller graphs, and FSDP can overlap the
    all-gather of block i+1 with the compute of block i."""
    model.checkpoint_blocks = activation_checkpointing
    if compile_blocks:
        for block in model.blocks:
            block.compile()
    if mode in ("fsdp", "hsdp"):
        policy = MixedPrecisionPolicy(param_dtype=precision.dtype, reduce_dtype=torch.float32 if precision.dtype else None)
        mesh = _hsdp_mesh(d) if mode == "hsdp" else None
        # torchtitan's default policy (pytorch/torchtitan torchtitan/models/llama3/infra/parallelize.py,
        # apply_fsdp): every block but the last frees its gathered weights after forward; the last
        # keeps them, since its backward starts right away and would gather them again. FSDP2's
        # implicit prefetch gathers block i+1 while block i computes.
        last = len(model.blocks) - 1
        for i, block in enumerate(model.blocks):
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=i < last)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        return model
    if d.world_size == 1:
        return model
    return DistributedDataParallel(model, device_ids=[d.device.index] if d.device.type == "cuda" else None)


def _hsdp_mesh(d: Dist) -> DeviceMesh:
    """A 2-D mesh, nodes by local ranks: torchrun numbers a node's processes contiguously, so row i
    is node i. On a 2-D mesh fully_shard places parameters (Replicate(), Shard(0)): sharded
    along dim 1, replicated along dim 0 (torch/distributed/fsdp/_fully_shard/_fully_shard.py)."""
    shape = hsdp_mesh_shape(d.world_size, local_world_size())
    return init_device_mesh(d.device.type, shape, mesh_dim_names=("replicate", "shard"))


@contextmanager
def grad_sync(model: nn.Module, enabled: bool) -> Iterator[None]:
    """Skip the gradient reduction on all but the last micro-batch of a step."""
    if isinstance(model, DistributedDataParallel) and not enabled:
        with model.no_sync():
            yield
        return
    if isinstance(model, FSDPModule):
        model.set_requires_gradient_sync(enabled)
    yield


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def shutdown(clean: bool) -> None:
    """Close the process group within TEARDOWN_TIMEOUT_S, whatever the peers do.

    After a failure the peers may be gone, so the closing barrier is skipped. The work runs in a
    daemon thread: if it hangs, the caller's os._exit still ends the process.
    """
    if not dist.is_initialized():
        return

    def close() -> None:
        if clean:
            dist.barrier()
        dist.destroy_process_group()

    closer = threading.Thread(target=close, name="trainer-teardown", daemon=True)
    closer.start()
    closer.join(TEARDOWN_TIMEOUT_S)
    if closer.is_alive():
        print(
            f"[trainer] process group teardown exceeded {TEARDOWN_TIMEOUT_S:.0f}s; exiting anyway",
            file=sys.stderr,
            flush=True,
        )
