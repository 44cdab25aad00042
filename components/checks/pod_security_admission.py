"""team-pod-security-held: a team namespace that Pod Security Admission leaves at `privileged`
is held to `restricted` by the GPUDirect ValidatingAdmissionPolicy (components.kubernetes.
gpudirect_admission), read from the synthesized manifests the way the API server reads them: a
binding with the Deny action whose namespaceSelector selects the namespace, naming a policy that
matches pod creation, fails closed and carries every refusal the platform derives for the stack,
with hostPath admitted only at the GPUDirect families' documented host paths.

GKE MPS stacks are the one exception: their pods share the host's IPC namespace, which no
policy could admit without admitting hostIPC (components.kubernetes.pod_security)."""

from __future__ import annotations

import json
from typing import Mapping, Sequence

from components.checks.declared import UNKNOWN, Resource, get, items, mapping
from components.checks.isolation import selects
from components.kubernetes import gpudirect_admission
from components.kubernetes.pod_security import ENFORCE_LABEL, mps_through_gke
from components.pools import derive_pools
from components.spec import PlatformSpec

NAMESPACE = "kubernetes:core/v1:Namespace"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def _labels(resource: Resource) -> dict[str, str]:
    return {k: v for k, v in mapping(get(resource.props, "metadata", "labels")).items() if isinstance(v, str)}


def _matches(policy: Resource, resource: str, operation: str) -> bool:
    for rule in items(get(policy.props, "spec", "matchConstraints", "resourceRules")):
        groups, resources, operations = (items(get(rule, key)) for key in ("apiGroups", "resources", "operations"))
        if {"", "*"} & set(groups) and {resource, "*"} & set(resources) and {operation, "*"} & set(operations):
            return True
    return False


def _refuses_daemon_exec(policy: Resource, spec: PlatformSpec) -> bool:
    expected = gpudirect_admission.exec_policy_spec(spec)["validations"][0]["expression"]
    present = {get(v, "expression") for v in items(get(policy.props, "spec", "validations"))}
    return (
        _matches(policy, "pods/exec", "CONNECT") and _matches(policy, "pods/attach", "CONNECT")
        and get(policy.props, "spec", "failurePolicy") in (None, "Fail") and expected in present
    )


def _policy_holes(policy: Resource, spec: PlatformSpec | None) -> list[str]:
    """What makes the policy admit more than the stack's GPUDirect pods need."""
    holes: list[str] = []
    if get(policy.props, "spec", "failurePolicy") not in (None, "Fail"):
        holes.append("failurePolicy is not Fail: a pod the policy cannot evaluate would be admitted")
    variables = {get(v, "name"): get(v, "expression") for v in items(get(policy.props, "spec", "variables"))}
    listed = variables.get(gpudirect_admission.ALLOWED_HOST_PATHS_VARIABLE)
    try:
        paths = json.loads(listed) if isinstance(listed, str) else None
    except json.JSONDecodeError:
        paths = None
    if not isinstance(paths, list):
        holes.append(f"variable {gpudirect_admission.ALLOWED_HOST_PATHS_VARIABLE} is not a list of host paths")
    else:
        extra = sorted(set(map(str, paths)) - set(gpudirect_admission.documented_host_paths()))
        if extra:
            holes.append(f"hostPath admitted outside the GPUDirect plugin's documented paths: {', '.join(extra)}")
    conditions = [(get(c, "name"), get(c, "expression")) for c in items(get(policy.props, "spec", "matchConditions"))]
    if conditions != [(c["name"], c["expression"]) for c in gpudirect_admission.match_conditions()]:
        holes.append("matchConditions differ from the platform's: a pod change could skip the policy")
    if spec is not None:
        expected = {v["name"]: v["expression"] for v in gpudirect_admission.variables(spec)}
        for name in sorted(n for n in expected if variables.get(n) != expected[n]):
            holes.append(f"variable {name} differs from what the stack's GPUDirect families need")
        present = {get(v, "expression") for v in items(get(policy.props, "spec", "validations"))}
        for validation in gpudirect_admission.validations(spec):
            if validation["expression"] not in present:
                holes.append(f"validation missing or weakened: {validation['message']}")
    return holes


def _covering(binding: Resource, labels: Mapping[str, str]) -> bool:
    match = mapping(get(binding.props, "spec", "matchResources"))
    if "Deny" not in items(get(binding.props, "spec", "validationActions")):
        return False
    if mapping(get(match, "objectSelector")) or items(get(match, "excludeResourceRules")):
        return False
    return selects(get(match, "namespaceSelector"), labels)


def unheld(resources: Sequence[Resource], teams: Sequence[str], spec: PlatformSpec | None) -> list[tuple[str, str]]:
    """(resource key, message) for each privileged team namespace the policy does not hold."""
    if spec is not None and any(mps_through_gke(spec, pool) for pool in derive_pools(spec)):
        return []
    policies = {get(r.props, "metadata", "name"): r for r in resources if r.type == POLICY}
    bindings = [r for r in resources if r.type == BINDING]
    out: list[tuple[str, str]] = []
    checked: set[tuple[str, str]] = set()
    for namespace in resources:
        if namespace.type != NAMESPACE or get(namespace.props, "metadata", "name") not in teams:
            continue
        labels = _labels(namespace)
        if labels.get(ENFORCE_LABEL) in (None, UNKNOWN, "restricted", "baseline"):
            continue
        name = get(namespace.props, "metadata", "name")
        covering = [b for b in bindings if _covering(b, labels) and get(b.props, "spec", "policyName") in policies]
        if not covering:
            out.append((namespace.key, (
                f"team namespace {name} enforces Pod Security {labels.get(ENFORCE_LABEL)} but no ValidatingAdmissionPolicy "
                f"binding with the Deny action selects it: its pods may use hostNetwork, hostPath / or privileged containers"
            )))
            continue
        pod_policies = [policies[get(b.props, "spec", "policyName")] for b in covering]
        pod_policies = [p for p in pod_policies if _matches(p, "pods", "CREATE")]
        if not pod_policies:
            out.append((namespace.key, f"team namespace {name}: no bound policy matches pod creation"))
        holes = [(p.key, hole) for p in pod_policies for hole in _policy_holes(p, spec)]
        # Every bound policy must pass, so one without holes holds the namespace.
        if len({key for key, _ in holes}) == len(pod_policies):
            out += [(key, f"policy holding team namespace {name} to restricted: {hole}") for key, hole in holes
                    if (key, hole) not in checked]
            checked |= set(holes)
        exec_policies = [policies[get(b.props, "spec", "policyName")] for b in covering]
        if spec is not None and gpudirect_admission.daemons(spec) and not any(_refuses_daemon_exec(p, spec) for p in exec_policies):
            out.append((namespace.key, f"team namespace {name}: no bound policy refuses exec into the GPUDirect daemon"))
    return out

