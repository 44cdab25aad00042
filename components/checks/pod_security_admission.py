"""team-pod-security-held: a team namespace that Pod Security Admission leaves at `privileged`
is held to `restricted` by the GPUDirect ValidatingAdmissionPolicy (components.kubernetes.
gpudirect_admission), read from the synthesized manifests the way the API server reads them: a
binding with the Deny action whose namespaceSelector selects the namespace, naming a policy that
matches pod creation, fails closed and carries every refusal the platform derives for the stack,
with hostPath admitted only at the GPUDirect families' documented host paths.

GKE MPS stacks are the one exception: their pods share the host's IPC namespace, which no
policy could admit without admitting hostIPC (components.kubernetes.pod_security)."""

from __future__ import annotations

import copy
import json
import posixpath
from typing import Any, Callable, Mapping, Sequence

from components.checks import admission_cel
from components.checks.declared import UNKNOWN, Resource, get, items, mapping
from components.checks.isolation import selects
from components.facts.gpudirect import GpuDirect
from components.jobs import renderer
from components.kubernetes import created_pod, gpudirect_admission
from components.kubernetes.pod_security import ENFORCE_LABEL, mps_through_gke
from components.kubernetes.queues import queue_plan
from components.kubernetes.tiers import priority_tiers
from components.pools import derive_pools, fabric_pools
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


PROBE_IMAGE = "registry.invalid/gpu-platform/pod-security-rule:0"
Pod = dict[str, Any]


def _job_pod(spec: PlatformSpec, pool: str, gpus: int) -> Pod | None:
    """The pod the Job controller creates for a two-node job on `pool`, as admission sees it."""
    team = queue_plan(spec, derive_pools(spec)).teams[0].team
    tier = priority_tiers(spec)[0].name
    args = ["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1", "--global-batch-size", str(2 * gpus),
            "--seq-len", "128", "--seed", "0", "--data", "/data/datasets/corpus"]
    try:
        jobset = renderer.render(spec, renderer.JobRequest(pool=pool, nodes=2, gpus_per_node=gpus, team=team, tier=tier,
                                                           image=PROBE_IMAGE, trainer_args=args))
    except renderer.JobError:
        return None  # job-fits-pool reports the jobs the renderer refuses
    return created_pod.created_pod(jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"], index=1)


def _mount_in_daemon(pod: Pod, volume: dict[str, Any], path: str) -> None:
    pod["spec"]["volumes"].append(volume)
    pod["spec"]["initContainers"][0]["volumeMounts"].append({"name": volume["name"], "mountPath": path})


def _repoint(pod: Pod, name: str, path: str) -> None:
    for volume in pod["spec"]["volumes"]:
        if volume["name"] == name:
            volume["hostPath"]["path"] = path


def attacks(family: GpuDirect) -> dict[str, Callable[[Pod], None]]:
    """Pods a team member could create to reach the node through the daemon's exception or the
    NRI device injector; the policy must refuse each one."""
    def trainer(pod: Pod) -> dict[str, Any]:
        return pod["spec"]["containers"][0]

    out: dict[str, Callable[[Pod], None]] = {
        "devices.gke.io annotation for the trainer": lambda pod: pod["metadata"]["annotations"].update(
            {"devices.gke.io/container.trainer": "- path: /dev/sda\n"}),
        "AppArmor Unconfined on the trainer": lambda pod: trainer(pod)["securityContext"].update(
            appArmorProfile={"type": "Unconfined"}),
    }
    daemon = family.daemon
    if daemon is not None:
        libraries = dict(daemon.env).get("LD_LIBRARY_PATH", "/usr/local/nvidia/lib64")
        out |= {
            "a bucket over the daemon's binary directory": lambda pod: _mount_in_daemon(
                pod, {"name": "bucket", "csi": {"driver": "gcsfuse.csi.storage.gke.io", "volumeAttributes": {"bucketName": "b"}}},
                posixpath.dirname(daemon.command[0])),
            "an emptyDir over the daemon's LD_LIBRARY_PATH": lambda pod: _mount_in_daemon(
                pod, {"name": "scratch", "emptyDir": {}}, libraries),
            "the daemon's libraries volume repointed to a writable host path": lambda pod: _repoint(
                pod, daemon.host_mounts[0][0], "/proc/sys"),
            "AppArmor Unconfined on the daemon": lambda pod: pod["spec"]["initContainers"][0].setdefault(
                "securityContext", {}).update(appArmorProfile={"type": "Unconfined"}),
        }
    return out


def probe_holes(policy_spec: Mapping[str, Any], spec: PlatformSpec) -> list[str]:
    """The policy evaluated (cel-python) against each GPUDirect pool's Job-controller pod, which
    it must admit, and against the planted attack pods, which it must refuse."""
    if not admission_cel.available():
        return []
    holes: list[str] = []
    for fabric_pool in fabric_pools(spec):
        pool = next(p for p in derive_pools(spec) if p.name == fabric_pool.pool)
        pod = _job_pod(spec, pool.name, pool.gpus_per_node)
        if pod is None:
            continue
        refused = admission_cel.refusals(policy_spec, pod)
        if refused:
            holes.append(f"the Job controller's pod of a two-node job on pool {pool.name} is refused ({', '.join(refused)})")
            continue
        for name, plant in attacks(fabric_pool.family).items():
            attack = copy.deepcopy(pod)
            plant(attack)
            if not admission_cel.refuses(policy_spec, attack):
                holes.append(f"pool {pool.name}: a pod with {name} is admitted")
    return holes


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
        holes += probe_holes(mapping(get(policy.props, "spec")), spec)
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

