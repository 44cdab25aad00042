"""How fast the YAML loader (infra.yamlfile) refuses hostile files and reads real ones.

Run: .venv/bin/python benchmarks/yaml_bench.py [--repeat 5]
Prints one JSON document of medians in milliseconds: an alias bomb of 10**31 values, lists
nested 5,000 deep, a key written twice at the end of a long file, and the largest stack file.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from infra import yamlfile

REPO = Path(__file__).resolve().parents[1]


def alias_bomb(levels: int) -> str:
    lines = ["x0: &x0 [a, a, a, a, a, a, a, a, a, a]"]
    lines += [f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 10)}]" for n in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


CASES = {
    "alias bomb, 10**31 values": alias_bomb(30),
    "lists nested 5,000 deep": "[" * 5000 + "]" * 5000 + "\n",
    "duplicate key after 5,000 keys": "".join(f"k{n}: {n}\n" for n in range(5000)) + "k0: again\n",
}


def _ms(path: Path, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            yamlfile.load(path)
        except yamlfile.YamlError:
            pass
        times.append(time.perf_counter() - started)
    return round(statistics.median(times) * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    largest = max((REPO / "stacks").glob("Pulumi.*.yaml"), key=lambda p: p.stat().st_size)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in CASES.items():
            path = Path(tmp) / "Pulumi.case.yaml"
            path.write_text(text)
            figures[name] = _ms(path, args.repeat)
    figures[f"{largest.name} ({largest.stat().st_size:,} bytes)"] = _ms(largest, args.repeat)
    print(json.dumps({"unit": "ms (median)", "repeat": args.repeat, "figures": figures}, indent=2))


if __name__ == "__main__":
    main()
