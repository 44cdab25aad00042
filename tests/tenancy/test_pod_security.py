"""Every job `gpu-platform job` renders passes the Pod Security Standards level its namespace
enforces, judged by the controls of the Restricted profile (kubernetes.io/docs/concepts/security/
pod-security-standards, which Pod Security Admission implements), written out here from that page
rather than taken from our own code."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from components.checks.fit import proof
from components.jobs import renderer
from components.kubernetes import pod_security
from components.kubernetes.queues import queue_plan
from components.pools import derive_pools
from components.spec import PlatformSpec
from infra.synth import Synthesis

# Restricted: "Volume Types" - only these.
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}


def restricted_violations(pod: dict[str, Any]) -> list[str]:
    out: list[str] = []
    # Baseline: host namespaces, privileged, capabilities beyond the default set, hostPath, host ports.
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            out.append(f"{field} is set")
    pod_context = pod.get("securityContext", {})
    containers = pod.get("initContainers", []) + pod.get("containers", [])
    for volume in pod.get("volumes", []):
        kind = next(key for key in volume if key != "name")
        if kind not in RESTRICTED_VOLUMES:
            out.append(f"volume {volume['name']} is {kind}")
    # Restricted: seccomp RuntimeDefault or Localhost, on the pod or on every container.
    pod_seccomp = pod_context.get("seccompProfile", {}).get("type")
    for container in containers:
        name = container["name"]
        context = container.get("securityContext", {})
        if context.get("privileged"):
            out.append(f"{name} is privileged")
        if any(port.get("hostPort") for port in container.get("ports", [])):
            out.append(f"{name} uses a host port")
        if context.get("allowPrivilegeEscalation") is not False:
            out.append(f"{name} does not set allowPrivilegeEscalation: false")
        if context.get("runAsNonRoot", pod_context.get("runAsNonRoot")) is not True:
            out.append(f"{name} does not set runAsNonRoot: true")
        if context.get("runAsUser", pod_context.get("runAsUser")) == 0:
            out.append(f"{name} runs as UID 0")
        capabilities = context.get("capabilities", {})
        if "ALL" not in capabilities.get("drop", []):
            out.append(f"{name} does not drop ALL capabilities")
        if set(capabilities.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{name} adds capabilities")
        if context.get("seccompProfile", {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
            out.append(f"{name} has no RuntimeDefault or Localhost seccomp profile")
    return out


def rendered_pods(spec: PlatformSpec) -> list[tuple[str, dict[str, Any]]]:
    pools = derive_pools(spec)
    found: list[tuple[str, dict[str, Any]]] = []
    for pool in pools:
        for team in queue_plan(spec, pools).teams:
            for request in proof.proof_requests(spec, pool, team.team):
                jobset = renderer.render(spec, request)
                pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
                found.append((jobset["metadata"]["namespace"], pod))
    return found


def test_the_checker_sees_what_restricted_refuses() -> None:
    assert restricted_violations({"hostIPC": True, "containers": [{"name": "c"}]}) == [
        "hostIPC is set",
        "c does not set allowPrivilegeEscalation: false",
        "c does not set runAsNonRoot: true",
        "c does not drop ALL capabilities",
        "c has no RuntimeDefault or Localhost seccomp profile",
    ]


@pytest.mark.parametrize("stack", ["dev-aws", "prod-aws", "dev-gcp", "prod-gcp", "onprem"])
def test_rendered_jobs_pass_the_level_their_namespace_enforces(synthesized: Callable[[str], Synthesis], stack: str) -> None:
    from helpers import platform_of
    from k8s_support import spec_of

    spec = spec_of(platform_of(stack))
    levels = {
        obj["metadata"]["name"]: obj["metadata"].get("labels", {}).get(pod_security.ENFORCE_LABEL)
        for obj in synthesized(stack).kubernetes_objects()
        if obj["kind"] == "Namespace"
    }
    pods = rendered_pods(spec)
    assert pods
    for namespace, pod in pods:
        assert levels[namespace] in ("restricted", "privileged")
        if levels[namespace] == "restricted":
            assert restricted_violations(pod) == [], namespace
