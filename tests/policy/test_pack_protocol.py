"""The pack as the Pulumi CLI runs it: `python -m pulumi.policy <engine> policy` with the stack's
config in the environment, answering the analyzer gRPC protocol. Properties arrive as protobuf
values here, numbers as doubles, exactly as in a real preview."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Iterator

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from helpers import REPO, platform_of
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

from components.facts.rule_catalog import RULES


@pytest.fixture(scope="module")
def analyzer() -> Iterator[Any]:
    env = {
        **os.environ,
        "PULUMI_CONFIG": json.dumps({"gpu-platform:platform": json.dumps(platform_of("dev-aws"))}),
        "PULUMI_PROJECT": "gpu-platform",
        "PULUMI_STACK": "dev-aws",
        "PULUMI_DRY_RUN": "true",
    }
    # The engine address is unused by a policy pack; the pack prints the port it serves on.
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulumi.policy", "127.0.0.1:1", "policy"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        proc.kill()
        proc.wait()


def analyze(stub: Any, type_token: str, name: str, props: dict[str, Any]) -> dict[str, str]:
    message = struct_pb2.Struct()
    message.update(props)
    urn = f"urn:pulumi:dev-aws::gpu-platform::{type_token}::{name}"
    response = stub.Analyze(analyzer_pb2.AnalyzeRequest(type=type_token, properties=message, urn=urn, name=name))
    return {d.policyName: d.message for d in response.diagnostics}


def test_the_pack_serves_one_policy_per_rule(analyzer: Any) -> None:
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "gpu-platform"
    assert [p.name for p in info.policies] == [r.id for r in RULES]


def test_a_warm_untainted_dev_node_group_is_reported_over_the_protocol(analyzer: Any) -> None:
    props = {
        "instanceTypes": ["g6.xlarge"],
        "scalingConfig": {"minSize": 1, "maxSize": 2, "desiredSize": 1},
        "taints": [],
        "launchTemplate": {"id": "lt-1", "version": "1"},
    }
    diagnostics = analyze(analyzer, "aws:eks/nodeGroup:NodeGroup", "ml-dev-l4", props)
    assert set(diagnostics) == {"gpu-pool-tainted", "gpu-pool-scale-to-zero", "autoscaler-drift-ignored"}
    assert "keeps 1 node(s) running in dev" in diagnostics["gpu-pool-scale-to-zero"]
