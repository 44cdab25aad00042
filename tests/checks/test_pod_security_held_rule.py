"""team-pod-security-held: the shipped stacks hold, and each planted hole in prod-gcp's policy,
its binding or a team namespace fails the rule."""

from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest
from helpers import platform_of
from k8s_support import spec_of

from components.checks import pod_security_admission as admission
from components.checks.declared import Resource
from components.checks.rules import base, registry
from components.facts.gpudirect import GPUDIRECT
from components.kubernetes import gpudirect_admission, pod_security
from infra.synth import Synthesis

Synthesized = Callable[[str], Synthesis]
RULE = "team-pod-security-held"


def resources_of(result: Synthesis) -> list[Resource]:
    return base.from_synthesis(copy.deepcopy(result.resources))


def violations(resources: list[Resource], stack: str = "prod-gcp") -> list[str]:
    ctx = base.context_of(spec_of(platform_of(stack)))
    return [v.message for v in registry.CHECKS[RULE](resources, ctx)]


def planted(result: Synthesis, type_token: str, change: Callable[[dict[str, Any]], None],
            name: str | None = gpudirect_admission.POLICY_NAME) -> list[Resource]:
    """The resources with the resource of `type_token` named `name` (None: every one) changed by `change`."""
    out: list[Resource] = []
    for r in resources_of(result):
        if r.type == type_token and name in (None, r.props.get("metadata", {}).get("name")):
            props = copy.deepcopy(dict(r.props))
            change(props)
            r = Resource(r.type, r.name, props, r.protect, r.ignore_changes, r.depends_on)
        out.append(r)
    return out


def validation(props: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [v for v in props["spec"]["validations"] if v["message"].startswith(f"{name}:")]
    return found


@pytest.mark.parametrize("stack", ["prod-aws", "prod-gcp", "onprem", "dev-aws", "dev-gcp"])
def test_the_shipped_stacks_hold_their_team_namespaces(synthesized: Synthesized, stack: str) -> None:
    assert violations(resources_of(synthesized(stack)), stack) == []


def test_a_privileged_team_namespace_without_the_binding_fails(synthesized: Synthesized) -> None:
    resources = [r for r in resources_of(synthesized("prod-gcp")) if r.type != admission.BINDING]
    found = violations(resources)
    assert len(found) == 2 and all("no ValidatingAdmissionPolicy binding with the Deny action" in m for m in found)


def test_a_binding_that_only_warns_fails(synthesized: Synthesized) -> None:
    resources = planted(synthesized("prod-gcp"), admission.BINDING, lambda p: p["spec"].update(validationActions=["Warn"]),
                        gpudirect_admission.BINDING_NAME)
    assert len(violations(resources)) == 2


def test_a_binding_that_selects_other_namespaces_fails(synthesized: Synthesized) -> None:
    selector = {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    resources = planted(synthesized("prod-gcp"), admission.BINDING,
                        lambda p: p["spec"]["matchResources"].update(namespaceSelector=selector), gpudirect_admission.BINDING_NAME)
    assert len(violations(resources)) == 2


def test_a_namespace_downgraded_to_privileged_on_a_stack_without_gpudirect_fails(synthesized: Synthesized) -> None:
    resources = planted(synthesized("prod-aws"), admission.NAMESPACE,
                        lambda p: p["metadata"].get("labels", {}).update({pod_security.ENFORCE_LABEL: "privileged"}), None)
    found = violations(resources, "prod-aws")
    assert found and all("enforces Pod Security privileged" in m for m in found)


def test_a_policy_admitting_host_network_fails(synthesized: Synthesized) -> None:
    def plant(props: dict[str, Any]) -> None:
        validation(props, gpudirect_admission.HOST_NAMESPACES)["expression"] = "!(has(object.spec.hostPID) && object.spec.hostPID)"

    found = violations(planted(synthesized("prod-gcp"), admission.POLICY, plant))
    assert any("validation missing or weakened: host-namespaces" in m for m in found)


def test_a_policy_without_its_privileged_refusal_fails(synthesized: Synthesized) -> None:
    def plant(props: dict[str, Any]) -> None:
        props["spec"]["validations"].remove(validation(props, gpudirect_admission.PRIVILEGED))

    found = violations(planted(synthesized("prod-gcp"), admission.POLICY, plant))
    assert any("validation missing or weakened: privileged" in m for m in found)


def test_a_policy_admitting_the_node_s_root_as_host_path_fails(synthesized: Synthesized) -> None:
    def plant(props: dict[str, Any]) -> None:
        [variable] = [v for v in props["spec"]["variables"] if v["name"] == gpudirect_admission.ALLOWED_HOST_PATHS_VARIABLE]
        variable["expression"] = json.dumps([*json.loads(variable["expression"]), "/"])

    found = violations(planted(synthesized("prod-gcp"), admission.POLICY, plant))
    assert any("hostPath admitted outside the GPUDirect plugin's documented paths: /" in m for m in found)


def test_a_policy_exempting_any_image_under_the_daemon_s_name_fails(synthesized: Synthesized) -> None:
    def plant(props: dict[str, Any]) -> None:
        [variable] = [v for v in props["spec"]["variables"] if v["name"] == "daemons"]
        variable["expression"] = "has(object.spec.initContainers) ? object.spec.initContainers : []"

    found = violations(planted(synthesized("prod-gcp"), admission.POLICY, plant))
    assert any("variable daemons differs" in m for m in found)


def test_a_policy_that_fails_open_fails(synthesized: Synthesized) -> None:
    found = violations(planted(synthesized("prod-gcp"), admission.POLICY, lambda p: p["spec"].update(failurePolicy="Ignore")))
    assert any("failurePolicy is not Fail" in m for m in found)


def test_a_stack_whose_daemon_exec_policy_is_gone_fails(synthesized: Synthesized) -> None:
    resources = [r for r in resources_of(synthesized("prod-gcp"))
                 if r.props.get("metadata", {}).get("name") != gpudirect_admission.EXEC_POLICY_NAME]
    found = violations(resources)
    assert len(found) == 2 and all("no bound policy refuses exec into the GPUDirect daemon" in m for m in found)


def test_a_policy_that_stops_matching_pods_fails(synthesized: Synthesized) -> None:
    found = violations(planted(synthesized("prod-gcp"), admission.POLICY,
                               lambda p: p["spec"]["matchConstraints"]["resourceRules"][0].update(resources=["services"])))
    assert len(found) == 2 and all("no bound policy matches pod creation" in m for m in found)


def test_a_policy_whose_match_condition_skips_every_pod_fails(synthesized: Synthesized) -> None:
    found = violations(planted(synthesized("prod-gcp"), admission.POLICY,
                               lambda p: p["spec"].update(matchConditions=[{"name": "never", "expression": "false"}])))
    assert any("matchConditions differ" in m for m in found)


def _mega() -> Any:
    platform = platform_of("prod-gcp")
    platform["nodePools"][0].update(instanceType="a3-megagpu-8g", provisioning="spot")
    platform["nodePools"][0].pop("capacity", None)
    return spec_of(platform)


PROBE_STACKS = {"prod-gcp": lambda: spec_of(platform_of("prod-gcp")), "a3-mega": _mega}


@pytest.mark.parametrize("stack", sorted(PROBE_STACKS))
def test_the_shipped_policy_admits_the_job_controller_s_pods_and_refuses_every_attack(stack: str) -> None:
    spec = PROBE_STACKS[stack]()
    assert admission.probe_holes(gpudirect_admission.policy_spec(spec), spec) == []


ATTACKS = sorted(admission.attacks(GPUDIRECT["a3-highgpu-8g"]))


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_attack_pod_is_refused_by_the_shipped_policy(attack: str) -> None:
    spec = spec_of(platform_of("prod-gcp"))
    pod = admission._job_pod(spec, "h100-train", 8)
    assert pod is not None
    admission.attacks(GPUDIRECT["a3-highgpu-8g"])[attack](pod)
    assert admission.admission_cel.refusals(gpudirect_admission.policy_spec(spec), pod)


@pytest.mark.parametrize(("validation_name", "attack"), [
    ("device-annotations", "devices.gke.io annotation for the trainer"),
    (gpudirect_admission.APPARMOR, "AppArmor Unconfined on the trainer"),
])
def test_a_policy_whose_refusal_is_weakened_is_caught_by_evaluating_it(validation_name: str, attack: str) -> None:
    spec = spec_of(platform_of("prod-gcp"))
    policy = gpudirect_admission.policy_spec(spec)
    [found] = [v for v in policy["validations"] if v["message"].startswith(f"{validation_name}:")]
    found["expression"] = "true"
    assert f"pool h100-train: a pod with {attack} is admitted" in admission.probe_holes(policy, spec)


def test_a_daemon_pin_that_ignores_the_controller_s_env_entry_is_caught_by_evaluating_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from components.kubernetes import gpudirect_pod as fabric

    spec = spec_of(platform_of("prod-gcp"))
    real = fabric.gke_sidecars
    monkeypatch.setattr(fabric, "gke_sidecars", lambda family: [
        {**c, "env": [e for e in c["env"] if e["name"] != "JOB_COMPLETION_INDEX"]} for c in real(family)])
    policy = gpudirect_admission.policy_spec(spec)
    assert any("the Job controller's pod of a two-node job on pool h100-train is refused" in h
               for h in admission.probe_holes(policy, spec))
