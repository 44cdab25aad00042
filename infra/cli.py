"""`gpu-platform`: the offline tools around the Pulumi program.

Every command runs the real program (infra.program) under the SDK's mock engine, so what it
shows is what `pulumi up` would declare, without a Pulumi CLI, a cloud account or credentials.
One exit-code contract for every command (the README's command table states it):
0 ok; 1 the command's own finding (a mandatory policy violation, an invalid stack in a review),
or a failure that is not the input's fault (a full disk), with its cause; 2 invalid input of
any kind (a stack file, a flag, a stack name, a git ref), one line per problem. Never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from components.jobs import renderer
from components.spec import PlatformSpec, SpecError, stack_file_schema
from infra import offline, output_folder, stackfile, synth, yamlfile
from components.fleet import job as fleet_job
from components.spec.fleet import worker_stack
from infra.tools import parallel, summary

if TYPE_CHECKING:
    from infra.tools import check

    # What checking one stack gives: its reports, ("invalid", the error text), or the exception.
    Outcome = list[check.StackReport] | tuple[str, str] | Exception

# check, review and simulate import their tools (the schema validators, the simulator) in the
# command, so that a synth does not pay for them: about 0.25 s of a 3 s synth.

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INVALID = 2


class UsageError(Exception):
    """A flag or argument the command cannot use: invalid input, exit 2."""


def _out_path(text: str) -> Path:
    """An --out value: a path; an empty one would mean the current folder, so it is refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty one")
    return Path(text)


def _out_dir(args: argparse.Namespace, stack: str, command: str) -> Path:
    """`--out/STACK`, by default under the checkout's (or the current folder's) build/<command>."""
    out_root = args.out or (stackfile.root_for(args.stack) or Path.cwd()) / "build" / command
    if out_root.exists() and not out_root.is_dir():
        raise UsageError(f"--out {out_root}: not a folder")
    return output_folder.folder(out_root, stack)


def cmd_synth(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    if _is_fleet(args.stack):
        return _synth_fleet(args, started)
    stack_file, spec, result = offline.synthesize(args.stack)
    out_dir = _out_dir(args, stack_file.stack, "synth")
    output_folder.write(synth.files(result, summary.markdown(spec, stack_file.stack, result)), out_dir)
    elapsed = time.perf_counter() - started
    print(f"{stack_file.stack}: {spec.cloud} {spec.environment}, cluster {spec.cluster.name}")
    print(summary.table(spec))
    print(summary.stack_line(spec, result))
    print(
        f"{len(result.resources)} resources, {len(result.kubernetes_objects())} Kubernetes objects"
        f" -> {out_dir} ({elapsed:.1f}s)"
    )
    return EXIT_OK


def _is_fleet(ref: str) -> bool:
    return stackfile.read(ref, stackfile.root_for(ref)).is_fleet


def _synth_fleet(args: argparse.Namespace, started: float) -> int:
    """A manager stack: its workers are synthesized too (in memory), its own files written."""
    result = offline.synthesize_fleet(args.stack)
    synthesis = result.synthesis
    out_dir = _out_dir(args, synthesis.stack, "synth")
    order = synthesis.outputs.get("dispatchOrder", [])
    text = (
        f"# {synthesis.stack}: fleet manager\n\nWorkers, in dispatch order: {', '.join(order)}\n\n"
        + "".join(f"- {model}: {', '.join(ws)}\n" for model, ws in synthesis.outputs.get("dispatchOrderPerGpuModel", {}).items())
    )
    output_folder.write(synth.files(synthesis, text), out_dir)
    print(f"{synthesis.stack}: fleet {result.spec.environment}, manager cluster {result.spec.cluster.name}")
    print(f"workers in dispatch order: {', '.join(order)}")
    print(
        f"{len(synthesis.resources)} resources, {len(synthesis.kubernetes_objects())} Kubernetes objects"
        f" -> {out_dir} ({time.perf_counter() - started:.1f}s)"
    )
    return EXIT_OK


def _fleet_job(args: argparse.Namespace, stack_file: stackfile.StackFile) -> int:
    """`gpu-platform job <fleet stack> --gpu-model ...`: one JobSet for every eligible worker."""
    spec = stack_file.fleet_spec()
    if args.pool is not None:
        raise UsageError("--pool: a fleet job chooses its pool by --gpu-model and size on each worker")
    if args.gpu_model is None:
        raise UsageError("--gpu-model: required on a fleet stack (e.g. H100-80GB)")
    root = stackfile.root_for(args.stack)
    workers = {w: stackfile.read(worker_stack(w), root).spec() for w in spec.fleet.workers}
    request = fleet_job.FleetJobRequest(
        gpu_model=args.gpu_model,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        team=args.team,
        tier=args.tier,
        name=args.name,
        image=args.image,
        trainer_args=args.trainer_args,
        max_restarts=args.max_restarts,
        grace_period=args.grace_period,
    )
    jobset, chosen = fleet_job.render(workers, request)
    print(f"# runs on: {', '.join(f'{w} (pool {p.name})' for w, p in chosen.items())}")
    print(renderer.to_yaml(jobset), end="")
    return EXIT_OK


def cmd_job(args: argparse.Namespace) -> int:
    stack_file = stackfile.read(args.stack, stackfile.root_for(args.stack))
    if stack_file.is_fleet:
        return _fleet_job(args, stack_file)
    if args.pool is None:
        raise UsageError("--pool: required")
    spec = stack_file.spec()
    request = renderer.JobRequest(
        pool=args.pool,
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        team=args.team,
        tier=args.tier,
        name=args.name,
        image=args.image,
        trainer_args=args.trainer_args,
        max_restarts=args.max_restarts,
        grace_period=args.grace_period,
        topology=args.topology,
    )
    print(renderer.to_yaml(renderer.render(spec, request)), end="")
    return EXIT_OK


# A stack's synthesis kept for a fleet manager of the same run: its spec and synthesis, by path.
Known = dict[Path, tuple[PlatformSpec, synth.Synthesis]]


def _check_one(ref: str, known: Known | None = None, keep: bool = False) -> tuple[Outcome, Known]:
    """One stack's reports (a fleet manager's: its own and its workers'), or ("invalid", its
    error text), or the unexpected exception it raised: plain values, so a worker process can
    hand them back; with `keep`, beside it the stack's synthesis for the fleet managers."""
    from infra.tools import check, fleet_check

    try:
        if _is_fleet(ref):
            return list(fleet_check.check_fleet(offline.synthesize_fleet(ref, known=known))), {}
        stack_file, spec, result = offline.synthesize(ref)
    except SpecError as exc:
        return ("invalid", exc.render()), {}
    except (stackfile.StackFileError, yamlfile.YamlError) as exc:
        return ("invalid", f"error: {exc}"), {}
    except Exception as exc:  # noqa: BLE001 - raised by the caller at this stack's turn
        return exc, {}
    kept: Known = {stack_file.path.resolve(): (spec, result)} if keep else {}
    try:
        return [check.check_synthesis(spec, result)], kept
    except Exception as exc:  # noqa: BLE001 - as above
        return exc, kept


def _check_group(refs: list[str], known: Known | None = None, keep: bool = False) -> list[tuple[Outcome, Known]]:
    return [_check_one(ref, known, keep) for ref in refs]


def _fleet_ref(ref: str) -> bool:
    """Whether `ref` names a fleet manager stack; one that does not read is not (its worker
    reports the problem)."""
    try:
        return _is_fleet(ref)
    except Exception:  # noqa: BLE001 - only where to run it
        return False


def _by_cloud(refs: list[str]) -> list[list[str]]:
    """`refs` grouped by the cloud their stack files name, first seen first: a worker that
    checks one cloud's stacks loads only that cloud's SDK modules. A stack file that does not
    read is a group of its own; its worker reports the problem."""
    groups: dict[str, list[str]] = {}
    for ref in dict.fromkeys(refs):
        try:
            platform = stackfile.read(ref, stackfile.root_for(ref)).config.get("gpu-platform:platform")
            cloud = str(platform.get("cloud")) if isinstance(platform, dict) else ref
        except Exception:  # noqa: BLE001 - only where to run it; its worker reports the problem
            cloud = ref
        groups.setdefault(cloud, []).append(ref)
    return list(groups.values())


# The Kubernetes SDK's resource modules that every stack's synthesis loads (the Kubernetes layer
# reaches them lazily through `pulumi_kubernetes`), and the check's own modules.
SHARED_CHECK_MODULES = (
    "pulumi_kubernetes.apiextensions", "pulumi_kubernetes.apiextensions.v1", "pulumi_kubernetes.batch.v1",
    "pulumi_kubernetes.core.v1", "pulumi_kubernetes.helm.v3", "pulumi_kubernetes.helm.v4", "pulumi_kubernetes.meta.v1",
    "pulumi_kubernetes.rbac.v1", "pulumi_kubernetes.scheduling.v1", "pulumi_kubernetes.yaml", "infra.tools.check",
    "infra.tools.fleet_check",
)


def _load_shared_modules() -> None:
    """Loaded before the workers fork, so they are loaded once (about 0.6 s of CPU) rather than
    in every worker and again for the fleet managers."""
    for module in SHARED_CHECK_MODULES:
        importlib.import_module(module)


def cmd_check(args: argparse.Namespace) -> int:
    """Every named stack (all by default) is checked even after an invalid one, so one run lists
    every problem; invalid stacks exit 2, mandatory violations 1. Stacks are synthesized side by
    side (infra.tools.parallel) and reported in the order named."""
    from infra.tools import check

    refs = args.stacks or _every_stack()
    reports: list[check.StackReport] = []
    invalid = 0
    # The fleet managers run after the other stacks, over the workers' syntheses of this run.
    managers = [ref for ref in dict.fromkeys(refs) if _fleet_ref(ref)]
    groups = _by_cloud([ref for ref in refs if ref not in managers])
    if parallel.workers(len(groups)) > 1:
        _load_shared_modules()
    done = parallel.map_in_order(functools.partial(_check_group, keep=bool(managers)), groups)
    results = {ref: result for group, got in zip(groups, done) for ref, result in zip(group, got)}
    known: Known = {path: kept for _, synthesized in results.values() for path, kept in synthesized.items()}
    done = parallel.map_in_order(functools.partial(_check_group, known=known), [[ref] for ref in managers])
    results |= {ref: got[0] for ref, got in zip(managers, done)}
    outcomes = {ref: outcome for ref, (outcome, _) in results.items()}
    for outcome in (outcomes[ref] for ref in refs):
        if isinstance(outcome, Exception):
            raise outcome
        if isinstance(outcome, tuple):
            print(outcome[1], file=sys.stderr)
            invalid += 1
            continue
        for report in outcome:
            reports.append(report)
            for line in report.lines():
                print(line)
    print(check.summary(reports, invalid), file=sys.stderr)
    if invalid:
        return EXIT_INVALID
    return EXIT_FAILURE if any(r.blocking for r in reports) else EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    from infra.tools.simulate import command as simulate

    if _is_fleet(args.stack):
        from infra.tools.simulate import fleet_report as simulate_fleet

        fleet_result = offline.synthesize_fleet(args.stack)
        stack = fleet_result.stack_file.stack
        out_dir = _out_dir(args, stack, "simulate")
        options = simulate.Options(args.trace, out_dir, args.seed, args.horizon_s, args.spot_rate, args.scale_up_s)
        gc.freeze()
        return _simulate(stack, lambda: simulate_fleet.run(stack, fleet_result, options))
    from infra.tools import synth_cache

    stack_file, result = synth_cache.synthesis(args.stack)
    # The SDK modules and the synthesis (some 300,000 objects) live to the end, and the
    # collector walked them again and again while the simulation made its own objects: frozen,
    # it walks only the simulation's (about 1.5 s less of the 100,000-job benchmark). Thawed
    # afterwards, for a caller that runs on (a test session).
    gc.freeze()
    out_dir = _out_dir(args, stack_file.stack, "simulate")
    options = simulate.Options(args.trace, out_dir, args.seed, args.horizon_s, args.spot_rate, args.scale_up_s)
    return _simulate(stack_file.stack, lambda: simulate.run(stack_file.stack, result, options))


def _simulate(stack: str, run: Callable[[], str]) -> int:
    from infra.tools.simulate import command as simulate

    try:
        sys.stdout.write(run())
    except simulate.UsageError as exc:
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        return EXIT_INVALID
    except (simulate.ModelError, simulate.BoundExceeded) as exc:
        # A stack the model refuses or cannot read, or a run past its bound: exit 1, one line.
        print(f"error: simulate {stack}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        gc.unfreeze()
    return EXIT_OK


def _every_stack() -> list[str]:
    """The stack files of the checkout around the current folder; none is a usage error."""
    root = stackfile.find_root(Path.cwd())
    if root is None:
        raise UsageError("nothing to check: no gpu-platform checkout (Pulumi.yaml) here or above; name stack files")
    files = stackfile.stack_files(root)
    if not files:
        raise UsageError(f"nothing to check: no stack files in {root / stackfile.STACKS_DIR}; name stacks or stack files")
    return [str(path) for path in files]


def cmd_review(args: argparse.Namespace) -> int:
    """The report goes to stdout (and --out); a stack invalid at either side is a finding: exit 1."""
    from infra.tools.review import markdown, trees
    from infra.tools.simulate import impact
    from infra.tools.simulate.trace import TraceError, check_rows, read_rows

    if args.out is not None and args.out.is_dir():
        raise UsageError(f"--out {args.out}: a folder; review --out names the report's file")
    try:
        rows = read_rows(args.trace) if args.trace else None
        if rows is not None:
            check_rows(rows, str(args.trace))
        reviews, sha = trees.collect(args.base, args.stacks, skip_unchanged=rows is None)
    except trees.UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except TraceError as exc:
        print("\n".join(exc.problems), file=sys.stderr)
        return EXIT_INVALID
    except trees.ReviewError as exc:
        print(f"error: review failed: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    text = markdown.render(reviews, args.base, sha)
    if rows is not None:
        text += "\n" + impact.section(rows, str(args.trace), reviews)
    if args.out:
        output_folder.write_file(args.out, text)
    sys.stdout.write(text)
    invalid = [r for r in reviews if r.status == "invalid"]
    for r in invalid:
        print(f"error: {r.stack}: invalid ({markdown.invalid_sides(r)}); the report shows its errors", file=sys.stderr)
    return EXIT_FAILURE if invalid else EXIT_OK


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(stack_file_schema(), indent=2, sort_keys=True))
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="gpu-platform", description="Offline tools for the gpu-platform Pulumi program.")
    commands = top.add_subparsers(dest="command", required=True)

    p = commands.add_parser("synth", help="run the program offline and write what it declares")
    p.add_argument("stack", help="a stack name (stacks/Pulumi.<name>.yaml) or a path to a Pulumi.<name>.yaml")
    p.add_argument("--out", type=_out_path, help="output folder (default build/synth); files go to OUT/<stack>")
    p.set_defaults(func=cmd_synth)

    p = commands.add_parser(
        "job",
        help="print a multi-node torchrun JobSet for a stack's pool, team and tier",
        description="Trainer arguments go after `--`, e.g. -- --preset small --max-steps 1000 ...",
    )
    p.add_argument("stack", help="a stack name or a path to a Pulumi.<name>.yaml")
    p.add_argument("--pool", help="the stack's pool (cluster stacks)")
    p.add_argument("--gpu-model", help="fleet stacks: the GPU model, e.g. H100-80GB; the pool is chosen on each worker")
    p.add_argument("--nodes", type=int, required=True)
    p.add_argument("--gpus-per-node", type=int, required=True)
    p.add_argument("--team", help="required when the stack has several teams")
    p.add_argument("--tier", required=True, help="a priority tier, e.g. production, standard")
    p.add_argument("--name", default="train", help="the JobSet's name (default train)")
    p.add_argument("--image", help="trainer image (default: platform.trainer.image)")
    p.add_argument(
        "--max-restarts",
        type=int,
        default=renderer.DEFAULT_MAX_RESTARTS,
        help=f"JobSet restarts after failures; disruptions do not count (default {renderer.DEFAULT_MAX_RESTARTS})",
    )
    p.add_argument(
        "--grace-period",
        type=int,
        metavar="SECONDS",
        help="pods' terminationGracePeriodSeconds and torchrun's shutdown timeout (default: sized for the preset's checkpoint)",
    )
    p.add_argument(
        "--topology",
        choices=("required", "preferred", "none"),
        help="Kueue topology placement at the block level (default: preferred for multi-node jobs on topology-aware pools, else none)",
    )
    p.set_defaults(func=cmd_job)

    p = commands.add_parser(
        "check", help="synthesize stacks and run the policy rules and Kubernetes schema validation on them"
    )
    p.add_argument("stacks", nargs="*", metavar="STACK", help="stack names or stack file paths (default: every stack)")
    p.set_defaults(func=cmd_check)

    p = commands.add_parser("review", help="a Markdown report of what the working tree changes against a git ref")
    p.add_argument("--base", required=True, metavar="REF", help="the git ref to compare with (e.g. origin/main)")
    p.add_argument("stacks", nargs="*", metavar="STACK", help="stack names or stack file paths (default: every stack)")
    p.add_argument("--out", type=_out_path, help="also write the report to this file")
    p.add_argument("--trace", type=Path, metavar="FILE", help="add a Capacity impact section: this job trace simulated on base and head")
    p.set_defaults(func=cmd_review)

    p = commands.add_parser(
        "simulate", help="replay a job trace against what a stack deploys: waits, utilization and cost per team, tier and pool"
    )
    p.add_argument("stack", help="a stack name or a path to a Pulumi.<name>.yaml")
    p.add_argument("--trace", type=Path, required=True, metavar="FILE", help="CSV: id,submit_s,team,tier,pool,nodes,gpus_per_node,duration_s[,checkpoint_every_s]")
    p.add_argument("--out", type=_out_path, help="output folder (default build/simulate); files go to OUT/<stack>")
    p.add_argument("--seed", type=int, default=0, help="seed of the spot interruptions (default 0)")
    p.add_argument("--horizon-s", type=float, metavar="SECONDS", help="end of the simulated time (default: when the last job ends)")
    p.add_argument("--spot-rate", action="append", default=[], metavar="POOL=PER_NODE_DAY", help="spot interruptions per node and day (repeatable)")
    p.add_argument("--scale-up-s", action="append", default=[], metavar="POOL=SECONDS", help="seconds for a new node to take pods (repeatable)")
    p.set_defaults(func=cmd_simulate)

    p = commands.add_parser("schema", help="print the stack file's JSON Schema")
    p.set_defaults(func=cmd_schema)
    return top


def _close_event_loop() -> None:
    """Let the SDK's pending tasks finish and close the loop, so exit prints nothing."""
    try:
        loop = asyncio.get_event_loop()
    except RuntimeError:
        return
    if loop.is_closed():
        return
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # Everything after `--` belongs to the trainer (gpu-platform job ... -- --preset small).
    trainer_args = words[words.index("--") + 1 :] if "--" in words else []
    words = words[: words.index("--")] if "--" in words else words
    args = parser().parse_args(words)
    args.trainer_args = trainer_args
    try:
        return int(args.func(args))
    except SpecError as exc:
        print(exc.render(), file=sys.stderr)
        return EXIT_INVALID
    except renderer.JobError as exc:
        for problem in exc.problems:
            print(f"{args.stack}: {problem}", file=sys.stderr)
        return EXIT_INVALID
    except (stackfile.StackFileError, yamlfile.YamlError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except output_folder.OutputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except BrokenPipeError:
        raise
    except Exception as exc:  # noqa: BLE001 - the CLI's contract: a cause, never a traceback
        print(f"error: {args.command} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        _close_event_loop()


def entrypoint() -> None:
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader closed the pipe early (`gpu-platform schema | head -3`): it has what it
        # wanted. Point stdout at /dev/null so the interpreter's final flush stays quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OK
    # A synthesis leaves some 300,000 objects (the SDK modules, the resources and their
    # outputs); the interpreter's collections at exit walked them all, about 1 s of a 4 s synth.
    # Frozen, they are left to the process's end; the exit handlers still run.
    gc.freeze()
    sys.exit(code)
