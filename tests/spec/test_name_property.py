"""Property: random printable and control strings in every name field of the schema either make
the stack invalid (exit 2) or yield artifacts whose every name is valid for its target, read
from resources.json and manifests/ and checked against the naming table.

hypothesis is not a dependency of the project, so the strings come from a seeded generator:
the same cases every run, biased towards long names of valid characters, which are the ones
that pass the field's own rule and can still make a derived name too long.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import yaml
from helpers import stack_config

from components.facts.names import NameKind, name_problem
from infra import cli

SEED = 22
CASES = 36

# Which resource input each cloud reads as which kind of name (the Pulumi type tokens).
INPUT_NAMES: dict[tuple[str, str], NameKind] = {
    ("aws:eks/cluster:Cluster", "name"): "eks-cluster",
    ("aws:eks/nodeGroup:NodeGroup", "nodeGroupName"): "eks-node-group",
    ("aws:eks/nodeGroup:NodeGroup", "nodeGroupNamePrefix"): "eks-node-group-prefix",
    ("aws:s3/bucket:Bucket", "bucket"): "s3-bucket",
    ("aws:ecr/repository:Repository", "name"): "ecr-repository",
    ("gcp:storage/bucket:Bucket", "name"): "gcs-bucket",
    ("gcp:compute/network:Network", "name"): "gce-name",
    ("gcp:compute/subnetwork:Subnetwork", "name"): "gce-name",
    ("gcp:compute/router:Router", "name"): "gce-name",
    ("gcp:compute/routerNat:RouterNat", "name"): "gce-name",
    ("gcp:container/cluster:Cluster", "name"): "gke-cluster",
    ("gcp:container/nodePool:NodePool", "name"): "gke-node-pool",
    ("gcp:serviceaccount/account:Account", "accountId"): "gsa-account-id",
    ("gcp:artifactregistry/repository:Repository", "repositoryId"): "artifact-registry-repository",
}
# Resources Pulumi names itself from the logical name (a random suffix appended).
AUTONAMED: dict[str, NameKind] = {"aws:iam/role:Role": "iam-role-autonamed"}


def random_text(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        alphabet, size = string.ascii_lowercase + string.digits + "-", rng.randint(20, 70)
    elif roll < 0.85:
        alphabet, size = string.printable, rng.randint(0, 40)
    else:
        alphabet, size = string.ascii_lowercase + "".join(map(chr, [*range(0, 32), 127, 0x85, 0xD800])), rng.randint(1, 20)
    return "".join(rng.choice(alphabet) for _ in range(size))


Setter = Callable[[dict[str, Any], str], None]


def _set(*path: Any) -> Setter:
    def setter(platform: dict[str, Any], value: str) -> None:
        here = platform
        for step in path[:-1]:
            here = here.setdefault(step, {}) if isinstance(step, str) else here[step]
        here[path[-1]] = value

    return setter


def _selector(platform: dict[str, Any], value: str) -> None:
    platform["nodePools"][0]["nodeSelector"] = {value: "x", "ok": value}


def _member(platform: dict[str, Any], value: str) -> None:
    platform["scheduling"]["teams"][0]["members"] = [f"group:{value}"]


def _team(platform: dict[str, Any], value: str) -> None:
    team = platform["scheduling"]["teams"][0]
    old = team["name"]
    team["name"] = value
    weights = platform["scheduling"].get("fairSharing", {}).get("weights", {})
    if old in weights:
        weights[value] = weights.pop(old)


def _pool(platform: dict[str, Any], value: str) -> None:
    old = platform["nodePools"][0]["name"]
    platform["nodePools"][0]["name"] = value
    for team in platform["scheduling"].get("teams", []):
        if old in team.get("quotas", {}):
            team["quotas"][value] = team["quotas"].pop(old)


FIELDS: dict[str, list[Setter]] = {
    "dev-aws": [_set("cluster", "name"), _pool, _set("storage", "bucketName"), _set("trainer", "image")],
    "prod-aws": [_set("cluster", "name"), _team],
    "dev-gcp": [_set("cluster", "name"), _pool, _set("storage", "bucketName")],
    "onprem": [_set("cluster", "name"), _pool, _team, _member, _selector],
}


def cases() -> Iterator[tuple[str, Setter, str]]:
    rng = random.Random(SEED)
    stacks = sorted(FIELDS)
    for _ in range(CASES):
        stack = rng.choice(stacks)
        yield stack, rng.choice(FIELDS[stack]), random_text(rng)


def invalid_names(folder: Path) -> list[str]:
    """Every name in the synthesized artifacts that its target refuses, with the target."""
    found: list[str] = []
    document = json.loads((folder / "resources.json").read_text())
    for resource in document["resources"]:
        inputs = resource.get("inputs", {})
        for (kind_type, key), kind in INPUT_NAMES.items():
            if resource["type"] == kind_type and isinstance(inputs.get(key), str) and name_problem(kind, inputs[key]):
                found.append(f"{kind} {inputs[key]!r}")
        autonamed = AUTONAMED.get(resource["type"])
        if autonamed and "name" not in inputs and name_problem(autonamed, resource["name"]):
            found.append(f"{autonamed} {resource['name']!r}")
    for path in sorted((folder / "manifests").rglob("*.yaml")):
        for obj in yaml.safe_load_all(path.read_text()):
            if not isinstance(obj, dict):
                continue
            meta = obj.get("metadata", {})
            kind: NameKind = "dns-label" if obj.get("kind") == "Namespace" else "dns-subdomain"
            checks: list[tuple[NameKind, Any]] = [(kind, meta.get("name"))]
            if "namespace" in meta:
                checks.append(("dns-label", meta["namespace"]))
            for key, value in (meta.get("labels") or {}).items():
                checks += [("label-key", key), ("label-value", value)]
            found += [f"{path.name}: {k} {v!r}" for k, v in checks if not isinstance(v, str) or name_problem(k, v)]
    return found


def test_random_names_are_refused_or_every_derived_name_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes = {0: 0, 2: 0}
    for index, (stack, setter, value) in enumerate(cases()):
        config = stack_config(stack)
        setter(config["gpu-platform:platform"], value)
        path = tmp_path / f"case{index}" / f"Pulumi.{stack}.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump({"config": config}, allow_unicode=False))
        out = tmp_path / f"out{index}"
        code = cli.main(["synth", str(path), "--out", str(out)])
        err = capsys.readouterr().err
        assert code in (0, 2), (stack, value, err)
        assert "Traceback" not in err
        outcomes[code] += 1
        if code == 0:
            assert invalid_names(out / stack) == [], (stack, value)
    assert outcomes[0] >= 3 and outcomes[2] >= 3, f"both outcomes are exercised: {outcomes}"


def test_the_artifact_reader_finds_a_planted_invalid_name(tmp_path: Path) -> None:
    assert cli.main(["synth", "onprem", "--out", str(tmp_path)]) == 0
    folder = tmp_path / "onprem"
    document = json.loads((folder / "resources.json").read_text())
    document["resources"].append({"type": "aws:s3/bucket:Bucket", "name": "b", "inputs": {"bucket": "My_Bucket!!"}})
    document["resources"].append({"type": "aws:iam/role:Role", "name": "r" * 60, "inputs": {}})
    (folder / "resources.json").write_text(json.dumps(document))
    manifest = next((folder / "manifests").rglob("*.yaml"))
    obj = yaml.safe_load(manifest.read_text())
    obj["metadata"]["labels"] = {"bad key!": "v"}
    manifest.write_text(yaml.safe_dump(obj))
    found = invalid_names(folder)
    assert "s3-bucket 'My_Bucket!!'" in found
    assert f"iam-role-autonamed '{'r' * 60}'" in found
    assert f"{manifest.name}: label-key 'bad key!'" in found
