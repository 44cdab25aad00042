"""The training loop; data, parallelism, checkpoints and metrics live in their own modules."""

from __future__ import annotations

import math
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from types import FrameType

import torch
from torch import nn
from torch.distributed.tensor import DTensor
from torch.optim import Optimizer

from trainer import fabric, fit, limits, meta, metrics_server, parallel, resume
from trainer.checkpoint import Checkpointer, TrainerState
from trainer.config import TrainConfig
from trainer.data import GlobalOrder, RankSlice, TokenFile, TrainBatches, eval_batches, eval_sample_count, read_meta
from trainer.log import log
from trainer.metrics import Metrics, detect_peak_tflops
from trainer.model import GPT, count_params, lm_loss
from trainer.optim import build_optimizer, set_lr
from trainer.storage import Store

# Exit status when a loss or gradient norm stops being finite: a diverged run is neither finished
# (0) nor interrupted (143); restarting it would diverge again from the same checkpoint.
EXIT_NOT_FINITE = 3

# Exit status after a SIGTERM-triggered save: non-zero so torchrun, a Kubernetes Job or JobSet
# count the run as interrupted and start it again (it then resumes), never as finished.
EXIT_PREEMPTED = 143


class StopRequest:
    """SIGTERM (spot reclaim, pod eviction) only sets a flag; ranks agree on it at step ends."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True


@dataclass(frozen=True)
class StepResult:
    """What a step leaves on the device: read on the host only at sync steps (`agree`), so the
    host can queue the next steps while the device still runs this one."""

    loss: torch.Tensor
    grad_norm: torch.Tensor


def to_device(batch: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A copy from pinned memory that the host need not wait for (a pageable source makes the
    CUDA copy synchronous); on CPU the tensor itself."""
    if device.type != "cuda":
        return batch
    return batch.pin_memory().to(device, non_blocking=True)


@dataclass(frozen=True)
class Model:
    """The model as the loop uses it: `core` unwrapped (for eval), `wrapped` by DDP or FSDP (for
    training), its optimizer, and the loss scaler of its precision (a no-op unless fp16)."""

    core: GPT
    wrapped: nn.Module
    optimizer: Optimizer
    precision: parallel.Precision
    scaler: torch.amp.GradScaler


def build_model(cfg: TrainConfig, d: parallel.Dist, precision: parallel.Precision) -> Model:
    torch.manual_seed(cfg.seed)
    with d.device:
        core = GPT(cfg.model)
    compile_blocks = cfg.compile if cfg.compile is not None else parallel.compile_by_default(cfg.preset, d.device)
    wrapped = parallel.parallelize(core, d, cfg.parallel, precision, compile_blocks, cfg.activation_checkpointing)
    optimizer = build_optimizer(wrapped, cfg.lr, cfg.weight_decay, fused=d.device.type == "cuda")
    return Model(core, wrapped, optimizer, precision, precision.grad_scaler(d.device))


def train_step(
    m: Model,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    d: parallel.Dist,
    grad_clip: float,
    before_update: Callable[[], None] = lambda: None,
) -> StepResult:
    """One optimizer step, queued without waiting for the device: no collective of its own, no
    value read back (DDP's and FSDP's gradient reductions run on the device; with fp16, the
    fused AdamW skips a step with inf gradients on the device too). `before_update` runs just
    before the weights change (a background checkpoint finishing its copy)."""
    loss_sum = torch.zeros((), device=d.device)
    for i, (inputs, targets) in enumerate(micro_batches):
        with parallel.grad_sync(m.wrapped, enabled=i == len(micro_batches) - 1):
            with m.precision.autocast(d.device):
                logits = m.wrapped(to_device(inputs, d.device))
            loss = lm_loss(logits, to_device(targets, d.device)) / len(micro_batches)
            m.scaler.scale(loss).backward()
        loss_sum += loss.detach()
    m.scaler.unscale_(m.optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(m.wrapped.parameters(), grad_clip)
    before_update()
    m.scaler.step(m.optimizer)
    m.scaler.update()
    m.optimizer.zero_grad(set_to_none=True)
    return StepResult(loss=loss_sum, grad_norm=grad_norm)


@dataclass(frozen=True)
class Agreed:
    """What every rank learns at a sync step. `finite` is False when any rank's loss at any step
    since the last sync, or the grad norm of this step, was NaN or inf: from there the weights
    are no longer a model worth saving."""

    loss: float
    grad_norm: float
    stopping: bool
    finite: bool


def agree(result: StepResult, stop_requested: bool, nonfinite_losses: torch.Tensor, d: parallel.Dist,
          precision: parallel.Precision) -> Agreed:
    """The one host sync of a sync step: the global mean loss, the grad norm, whether any rank
    was asked to stop, and whether everything stayed finite. The stop flag and the count of
    non-finite losses ride on the loss all-reduce, so every rank learns of any rank's SIGTERM or
    divergence at the same step and they all act on it together. Under fp16 an inf grad norm is
    the loss scaler at work (it skips that step and lowers the scale), not divergence."""
    norm = result.grad_norm.full_tensor() if isinstance(result.grad_norm, DTensor) else result.grad_norm
    flags = torch.tensor([float(stop_requested)], device=d.device)
    shared = torch.cat([result.loss.float().reshape(1), flags, nonfinite_losses.float().reshape(1)])
    parallel.all_reduce_sum(shared)
    loss_total, stops, bad_losses, grad_norm = torch.cat([shared, norm.detach().float().reshape(1)]).tolist()
    loss = loss_total / d.world_size
    finite = bad_losses == 0 and math.isfinite(loss) and (precision.scaled or math.isfinite(grad_norm))
    return Agreed(loss, grad_norm, stops > 0, finite)


@torch.no_grad()
def evaluate(m: Model, val: TokenFile, samples: int, micro: int, d: parallel.Dist) -> float:
    """Mean token loss over the fixed held-out set, summed across ranks; padding weighs 0."""
    m.core.eval()
    totals = torch.zeros(2, dtype=torch.float64, device=d.device)
    for inputs, targets, weights in eval_batches(val, samples, d.rank, d.world_size, micro):
        with m.precision.autocast(d.device):
            logits = m.core(inputs.to(d.device))
        per_sample = lm_loss(logits, targets.to(d.device), reduction="none").view(targets.shape).sum(dim=1)
        weights = weights.to(d.device)
        totals[0] += (per_sample.double() * weights).sum()
        totals[1] += weights.sum() * targets.shape[1]
    m.core.train()
    parallel.all_reduce_sum(totals)
    return float(totals[0] / totals[1])


def restore(cfg: TrainConfig, d: parallel.Dist, m: Model, checkpointer: Checkpointer) -> TrainerState:
    """The state to start from: the newest checkpoint's, loaded into the model, if it may be
    continued with these flags (trainer.resume); otherwise step 0."""
    data_meta = read_meta(cfg.data)
    state = TrainerState(
        step=0,
        consumed_samples=0,
        preset=cfg.preset,
        model=cfg.model.to_dict(),
        seq_len=cfg.seq_len,
        data=str(cfg.data.resolve()),
        data_meta=data_meta,
        schedule=resume.requested_schedule(cfg),
        grad_scaler=None,
    )
    latest = checkpointer.latest()
    if latest is None:
        return state
    folder, saved = latest
    resume.check(cfg, data_meta, saved, folder)
    checkpointer.load(folder, m.wrapped, m.optimizer)
    if saved.grad_scaler is not None and m.scaler.is_enabled():
        m.scaler.load_state_dict(saved.grad_scaler)
    if d.is_main:
        log(f"resumed from {folder} at step {saved.step}", d.rank)
        note = resume.schedule_note(cfg, saved.schedule)
        if note:
            log(note, d.rank)
    return replace(state, step=saved.step, consumed_samples=saved.consumed_samples, schedule=saved.schedule)


def train(cfg: TrainConfig, d: parallel.Dist, precision: parallel.Precision, store: Store,
          train_split: TokenFile, val_split: TokenFile) -> int:
    stop = StopRequest()
    m = build_model(cfg, d, precision)
    checkpointer = Checkpointer(store, cfg.keep_checkpoints, d.rank, d.device, cfg.async_checkpoint)
    state = restore(cfg, d, m, checkpointer)
    if state.step >= cfg.max_steps:
        if d.is_main:
            log(f"checkpoint is at step {state.step}, --max-steps is {cfg.max_steps}: nothing to do", d.rank)
        return 0
    micro = cfg.micro_batch_for(d.world_size)
    if d.is_main and eval_sample_count(val_split, cfg.eval_samples) < cfg.eval_samples:
        log(f"--eval-samples {cfg.eval_samples}: the val split holds {val_split.num_samples} samples of "
            f"--seq-len {cfg.seq_len}; evaluating those", d.rank)
    if d.is_main:
        log(f"preset {cfg.preset}: {count_params(m.core):,} parameters in {precision.name}; global batch "
            f"{cfg.global_batch_size} = {d.world_size} processes x {cfg.accumulation_steps(d.world_size)} "
            f"micro-batches x {micro}", d.rank)
    layout = RankSlice(d.rank, d.world_size, cfg.global_batch_size, micro)
    batches = TrainBatches(train_split, GlobalOrder(train_split.num_samples, cfg.seed), layout, state.consumed_samples)
    peak = cfg.peak_tflops or detect_peak_tflops(d.device)
    metrics = Metrics(cfg.metrics_file, d.is_main, cfg.model, cfg.seq_len, cfg.global_batch_size,
                      d.world_size, peak, d.device, state.step, cfg.max_steps)
    metrics.fabric = fabric.gate(cfg.fabric_check, cfg.fabric_floor_gbps, cfg.fabric_probe_max_mib, d)
    exporter = metrics_server.start(metrics, d.is_main, store)

    loss = float("nan")
    # Steps since the last sync whose loss was not finite, counted on the device (no host wait).
    nonfinite_losses = torch.zeros((), device=d.device)
    # Seconds waited for batches since the last sync step.
    data_wait = 0.0
    while state.step < cfg.max_steps:
        lr = state.schedule.lr_at(state.step)
        set_lr(m.optimizer, lr)
        # Host time blocked on the data loader, apart from the step's compute: a data stall
        # (badput, docs/observability.md).
        fetch_started = time.perf_counter()
        step_batches = batches.next_step()
        data_wait += time.perf_counter() - fetch_started
        result = train_step(m, step_batches, d, cfg.grad_clip, checkpointer.wait_for_staging)
        nonfinite_losses += (~torch.isfinite(result.loss)).float()
        state = replace(state, step=state.step + 1, consumed_samples=batches.consumed)
        last = state.step == cfg.max_steps
        eval_due = last or (cfg.eval_every > 0 and state.step % cfg.eval_every == 0)
        save_due = last or state.step % cfg.checkpoint_every == 0
        if not (eval_due or save_due or state.step % cfg.log_every == 0):
            continue
        # A sync step: the only place the host waits for the device, and where ranks agree on
        # stopping, so a SIGTERM is acted on within --log-every steps.
        agreed = agree(result, stop.requested, nonfinite_losses, d, precision)
        nonfinite_losses.zero_()
        loss, stopping = agreed.loss, agreed.stopping
        if not agreed.finite:
            return _stop_not_finite(cfg, state.step, agreed, checkpointer, d)
        eval_started = time.perf_counter()
        eval_loss = evaluate(m, val_split, cfg.eval_samples, micro, d) if eval_due else None
        metrics.log_step(state.step, loss, lr, agreed.grad_norm, eval_loss, data_wait)
        exporter.log_step(state.step, loss, eval_loss, time.perf_counter() - eval_started, data_wait)
        data_wait = 0.0
        if not (save_due or stopping):
            continue
        # The last save and a stop's are synchronous (after any pending one): the process is
        # about to end. Periodic ones go to the background with --async-checkpoint.
        scaler_state = m.scaler.state_dict() if m.scaler.is_enabled() else None
        saved = replace(state, grad_scaler=scaler_state, loss=loss)
        seconds = checkpointer.save(m.wrapped, m.optimizer, saved, background=not (last or stopping))
        exporter.saved(seconds)
        if stopping and not last:
            checkpointer.close()
            log(f"stop requested: saved {checkpointer.folder(state.step)} in {seconds:.1f}s "
                "(synchronously, after any pending save), exiting", d.rank)
            return EXIT_PREEMPTED
        if d.is_main and (last or not cfg.async_checkpoint):
            log(f"saved {checkpointer.folder(state.step)} in {seconds:.1f}s", d.rank)
    checkpointer.close()
    metrics.summary(state.step, loss)
    return 0


def _stop_not_finite(cfg: TrainConfig, step: int, agreed: Agreed, checkpointer: Checkpointer,
                     d: parallel.Dist) -> int:
    """End a diverged run without saving: its weights are no longer worth resuming from. A
    background save still in flight holds an earlier, finite step, so it is let finish."""
    checkpointer.close()
    if d.is_main:
        kept = checkpointer.newest_finite()
        resume_from = f"the newest finite checkpoint is {kept}" if kept else "no checkpoint was saved"
        log(f"step {step}: loss {agreed.loss} and grad norm {agreed.grad_norm} are not all finite "
            f"(--lr {cfg.lr}); stopping without a checkpoint, {resume_from}", d.rank)
    return EXIT_NOT_FINITE


def run(cfg: TrainConfig) -> int:
    """Check everything checkable before joining the process group: a bad flag must not hang."""
    _, world_size, _ = parallel.world_from_env()
    cfg.check_world(world_size)
    if cfg.parallel == "hsdp":
        parallel.hsdp_mesh_shape(world_size, parallel.local_world_size())
    precision = parallel.device_precision(cfg.parallel)
    cfg = fit.fitted(cfg, world_size, precision)
    limits.prepare(world_size)
    store = Store(cfg.checkpoint_dir)
    meta.check(cfg.data, cfg.model.vocab_size, cfg.seq_len, cfg.preset)
    train_split = TokenFile(cfg.data, "train", cfg.seq_len, cfg.model.vocab_size)
    val_split = TokenFile(cfg.data, "val", cfg.seq_len, cfg.model.vocab_size)
    fabric.prepare(cfg.fabric_check, world_size)
    d = parallel.init_distributed(timedelta(seconds=cfg.dist_timeout_s))
    clean = False
    try:
        code = train(cfg, d, precision, store, train_split, val_split)
        clean = True
        return code
    except fabric.FabricFailure as failure:
        # Said and left for the pod's entry before the teardown, which a SIGTERM may now end:
        # the entry exits with EXIT_FABRIC only where the marker is (components.jobs.torchrun).
        print(f"trainer: error: {failure}", file=sys.stderr, flush=True)
        fabric.record_failure(str(failure))
        return fabric.EXIT_FABRIC
    finally:
        # Finished, saved after a stop, or failed, a rank has nothing left to save, so SIGTERM
        # (torchrun closing the workers to restart them after a sibling failed, the pod's
        # deletion) must end it at once: held by StopRequest, it waited out the teardown (the
        # closing barrier of a group a sibling has left, too) until torchrun's SIGKILL, 30 s
        # later (`_close` in torch/distributed/elastic/multiprocessing/api.py).
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        parallel.shutdown(clean)
