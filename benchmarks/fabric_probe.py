"""The trainer's fabric gate on a GPU machine: the all-reduce probe over NCCL and the network NCCL
logged, exactly as `trainer train --fabric-check` runs them before step 1 (trainer.fabric).

Run under torchrun, one process per GPU, on one node or several:

    torchrun --nproc-per-node 8 benchmarks/fabric_probe.py [--max-mib 256] [--floor-gbps 100]
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29500 \\
        benchmarks/fabric_probe.py --floor-gbps 100

Rank 0 prints one JSON object: every probe size with nccl-tests' algbw and busbw (GB/s), each
rank's node and the NCCL networks it logged, and the verdict the gate would reach with
--floor-gbps. On one GPU the bus bandwidth is 0 (2(n-1)/n with n = 1), and the transport line
still shows that NCCL's INFO lines were captured from the process's own debug file. Exit status:
0, or 3 where the gate would stop a job (a socket fallback across nodes, or busbw under the
floor). Without CUDA it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta

import torch

from trainer import fabric, parallel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-mib", type=int, default=256, help="largest all-reduce, MiB")
    parser.add_argument("--floor-gbps", type=float, default=None, help="bus bandwidth floor to judge against")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(json.dumps({"skipped": "no CUDA device"}))
        return 0
    fabric.capture_nccl_log()
    d = parallel.init_distributed(timedelta(seconds=300))
    try:
        samples = fabric.probe(d, fabric.probe_sizes(args.max_mib))
        ranks = fabric.gather_transports(d)
        report, problem = fabric.verdict("enforce", args.floor_gbps, samples, ranks)
        if d.is_main:
            print(json.dumps({
                "world_size": d.world_size,
                "nodes": d.world_size // parallel.local_world_size(),
                "device": torch.cuda.get_device_name(d.device),
                "nccl": ".".join(str(v) for v in torch.cuda.nccl.version()),
                "report": report.record(),
                "ranks": [{"rank": r, "node": n, "networks": list(t.names)} for r, n, t in ranks],
                "nccl_debug_file": str(fabric.debug_file()),
                "problem": problem,
            }, indent=2))
        # One node has no inter-node fabric: only the floor can fail there.
        return fabric.EXIT_FABRIC if problem and (fabric.multi_node(d.world_size) or args.floor_gbps) else 0
    finally:
        parallel.shutdown(True)


if __name__ == "__main__":
    sys.exit(main())
