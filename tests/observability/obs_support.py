"""Support for the observability tests: the rule file of a stack, and promtool."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from k8s_support import onprem_platform, pools_of, spec_of

from components.kubernetes.tiers import priority_tiers
from components.observability.rules import rule_groups


def onprem_rule_groups(platform: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    raw = platform if platform is not None else onprem_platform()
    spec = spec_of(raw)
    return rule_groups(spec, pools_of(raw), priority_tiers(spec))


def promtool() -> str:
    """promtool from Debian's prometheus package, which `make test` installs (setup-prometheus).
    Missing: a failure, not a skip, so CI cannot pass without the rules having been checked."""
    found = shutil.which("promtool")
    assert found, "promtool not found: apt-get install prometheus (make test does: setup-prometheus)"
    return found


def write_rules(folder: Path, groups: list[dict[str, Any]]) -> Path:
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    return path


def run_promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NO_COLOR": "1"})
