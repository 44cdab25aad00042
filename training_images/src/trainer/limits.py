"""Process limits a rank needs before it joins the process group.

Each gloo process group (the CPU collectives, and the checkpoint group of trainer.checkpoint)
connects every pair of ranks: measured 2(N-1)+3 sockets per rank at N = 2, 4, 8, about 2,000 per
rank at 1,000 ranks, above the common soft RLIMIT_NOFILE of 1,024. Past the limit gloo fails
with a DistNetworkError that names no limit, so the soft limit is raised to the hard one here,
and a hard limit too low for the world size is refused with the figure.

Gloo's lazy init (TORCH_GLOO_LAZY_INIT, torch 2.13
include/torch/csrc/distributed/c10d/ProcessGroupGloo.hpp, getDefaultGlooLazyInit) connects a
pair only when a collective first needs it, which keeps the count down where the algorithms use
only neighbours; the need is still checked for the full mesh, since a barrier or broadcast may
touch every pair.
"""

from __future__ import annotations

import os
import resource

from trainer.config import ConfigError

# Two gloo full meshes per rank (trainer.parallel's process group and the checkpoint group), and
# on rank 0 a third share: with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 rank 0's worker hosts the
# workers' own store, one connection per rank (measured: 20 sockets on rank 0 at N = 6, 13 on the
# others). Every rank is held to the largest figure, rank 0's.
SOCKETS_PER_PEER = 3
# Everything else a rank holds open: stdio, the rendezvous store, data memmaps, checkpoint
# files being written, the interpreter's and CUDA's own.
OTHER_DESCRIPTORS = 256
LAZY_INIT_ENV = "TORCH_GLOO_LAZY_INIT"


def descriptors_needed(world_size: int) -> int:
    return SOCKETS_PER_PEER * (world_size - 1) + OTHER_DESCRIPTORS


def raise_open_files(world_size: int) -> int:
    """Raise the soft limit on open files to the hard one; refuse when even that is too low.
    Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = descriptors_needed(world_size)
    if hard != resource.RLIM_INFINITY and hard < needed:
        raise ConfigError(
            f"the open-file limit (RLIMIT_NOFILE) is {hard} at most, and {world_size} processes need about "
            f"{needed} per process ({SOCKETS_PER_PEER} x (N-1) gloo and store sockets + {OTHER_DESCRIPTORS}); raise the hard "
            "limit (the container runtime's nofile ulimit)"
        )
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def prepare(world_size: int) -> None:
    """Before init_process_group: enough descriptors, and gloo connections made when first used
    (unless the environment chose otherwise)."""
    raise_open_files(world_size)
    os.environ.setdefault(LAZY_INIT_ENV, "1")
