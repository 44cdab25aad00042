"""The GPUDirect admission policy, evaluated offline with a CEL interpreter (cel-python) the way
the API server evaluates a ValidatingAdmissionPolicy: its variables in order under `variables`,
then every validation against `object` (kubernetes.io/docs/reference/access-authn-authz/
validating-admission-policy). The rendered two-node GPUDirect jobs must pass; each hole of the
Pod Security Standards' Restricted profile must fail."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pytest
from helpers import platform_of
from k8s_support import spec_of

from components.checks import admission_cel
from components.jobs import renderer
from components.kubernetes import created_pod, gpudirect_admission, pod_security
from components.spec import PlatformSpec
from infra.synth import Synthesis

Synthesized = Callable[[str], Synthesis]
TRAINER_ARGS = ["--preset", "tiny", "--max-steps", "1", "--checkpoint-every", "1", "--global-batch-size", "16",
                "--seq-len", "128", "--seed", "0", "--data", "/data/datasets/corpus"]


def refusals(policy: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """The names of the validations that refuse the creation of `pod`; an evaluation error counts
    as a refusal, as it does under failurePolicy Fail."""
    return refusals_of(policy, pod)


def refusals_of(policy: dict[str, Any], request_object: dict[str, Any], old: dict[str, Any] | None = None,
                sub_resource: str = "") -> list[str]:
    """As the API server: no refusal where a matchCondition is false (CREATE, or UPDATE from `old`)."""
    return admission_cel.refusals(policy, request_object, old, sub_resource)


def mega_spec() -> PlatformSpec:
    """prod-gcp with its H100 pool on A3 Mega (GPUDirect-TCPXO)."""
    platform = platform_of("prod-gcp")
    pool = platform["nodePools"][0]
    pool.update(instanceType="a3-megagpu-8g", provisioning="spot")
    pool.pop("capacity", None)
    return spec_of(platform)


def template_of(spec: PlatformSpec, pool: str) -> dict[str, Any]:
    """The pod template of a two-node job's JobSet, as rendered."""
    jobset = renderer.render(spec, renderer.JobRequest(
        pool=pool, nodes=2, gpus_per_node=8, team="research", tier="production",
        image="registry.invalid/trainer:1", trainer_args=TRAINER_ARGS))
    return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]


def pod_template(spec: PlatformSpec, pool: str) -> dict[str, Any]:
    """The Pod the Job controller creates from that template, as the API server admits it."""
    return created_pod.created_pod(template_of(spec, pool), index=1)


@pytest.fixture(scope="module")
def prod() -> PlatformSpec:
    return spec_of(platform_of("prod-gcp"))


@pytest.fixture(scope="module")
def tcpx(prod: PlatformSpec) -> tuple[dict[str, Any], dict[str, Any]]:
    """prod-gcp's policy and a two-node TCPX job's pod on h100-train."""
    return gpudirect_admission.policy_spec(prod), pod_template(prod, "h100-train")


def trainer(pod: dict[str, Any]) -> dict[str, Any]:
    [container] = pod["spec"]["containers"]
    return container


@pytest.mark.parametrize("pool", ["h100-train", "h200-train"])
def test_the_rendered_two_node_gpudirect_jobs_pass_the_policy(prod: PlatformSpec, pool: str) -> None:
    assert refusals(gpudirect_admission.policy_spec(prod), pod_template(prod, pool)) == []


def test_the_rendered_two_node_tcpxo_job_passes_the_policy() -> None:
    spec = mega_spec()
    pod = pod_template(spec, "h100-train")
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["tcpxo-daemon"]
    assert refusals(gpudirect_admission.policy_spec(spec), pod) == []


def test_the_tcpx_pod_really_carries_the_daemon_and_host_paths_the_policy_excepts(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, pod = tcpx
    assert [c["name"] for c in pod["spec"]["initContainers"]] == ["tcpx-daemon"]
    assert {v["hostPath"]["path"] for v in pod["spec"]["volumes"] if "hostPath" in v} == {"/home/kubernetes/bin/nvidia/lib64", "/sys", "/proc/sys"}


@pytest.mark.parametrize("field", ["hostNetwork", "hostPID", "hostIPC"])
def test_a_pod_in_a_host_namespace_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]], field: str) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"][field] = True
    assert refusals(policy, pod) == [gpudirect_admission.HOST_NAMESPACES]


def test_a_host_path_of_the_node_s_root_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}})
    trainer(pod)["volumeMounts"].append({"name": "root", "mountPath": "/host", "readOnly": True})
    assert refusals(policy, pod) == [gpudirect_admission.VOLUMES, "host-path-scope"]


def test_a_writable_mount_of_the_plugin_s_host_path_by_the_trainer_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    for mount in trainer(pod)["volumeMounts"]:
        mount.pop("readOnly", None)
    assert refusals(policy, pod) == ["host-path-read-only"]


def test_a_privileged_trainer_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    trainer(pod)["securityContext"]["privileged"] = True
    assert refusals(policy, pod) == [gpudirect_admission.PRIVILEGED]


def test_a_privileged_daemon_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["initContainers"][0]["securityContext"]["privileged"] = True
    found = refusals(policy, pod)
    assert gpudirect_admission.PRIVILEGED in found and "run-as-non-root" in found


def test_an_extra_capability_in_the_trainer_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    trainer(pod)["securityContext"]["capabilities"]["add"] = ["NET_ADMIN"]
    assert refusals(policy, pod) == ["capabilities"]


def test_a_root_trainer_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    trainer(pod)["securityContext"]["runAsUser"] = 0
    assert refusals(policy, pod) == ["run-as-non-root"]


def test_a_daemon_capability_beyond_the_documented_ones_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["initContainers"][0]["securityContext"]["capabilities"]["add"].append("SYS_ADMIN")
    found = refusals(policy, pod)
    assert "capabilities" in found and "run-as-non-root" in found


def test_a_sidecar_with_the_daemon_s_name_but_another_image_gets_no_exception(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["initContainers"][0]["image"] = "registry.invalid/anything:1"
    assert refusals(policy, pod) == ["host-path-read-only", "host-path-scope", "privilege-escalation", "run-as-non-root", "capabilities",
                                     "device-annotations"]


def test_an_unconfined_seccomp_profile_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    trainer(pod)["securityContext"]["seccompProfile"] = {"type": "Unconfined"}
    assert refusals(policy, pod) == ["seccomp"]


def test_a_host_port_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    trainer(pod)["ports"] = [{"containerPort": 8080, "hostPort": 8080}]
    assert refusals(policy, pod) == ["host-ports"]


def test_gpudirect_team_namespaces_warn_and_audit_at_restricted_and_are_bound_to_the_policy(synthesized: Synthesized) -> None:
    from components.checks import isolation

    objects = synthesized("prod-gcp").kubernetes_objects()
    [binding] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
                 and o["metadata"]["name"] == gpudirect_admission.BINDING_NAME]
    [policy] = [o for o in objects if o["kind"] == "ValidatingAdmissionPolicy"
                and o["metadata"]["name"] == gpudirect_admission.POLICY_NAME]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] == gpudirect_admission.POLICY_NAME
    assert binding["spec"]["validationActions"] == ["Deny"]
    for team in ("research", "applied"):
        [namespace] = [o for o in objects if o["kind"] == "Namespace" and o["metadata"]["name"] == team]
        labels = namespace["metadata"]["labels"]
        assert labels[pod_security.ENFORCE_LABEL] == "privileged"
        assert labels[pod_security.WARN_LABEL] == labels[pod_security.AUDIT_LABEL] == "restricted"
        assert isolation.selects(binding["spec"]["matchResources"]["namespaceSelector"], labels)


def test_stacks_without_gpudirect_pools_declare_no_policy(synthesized: Synthesized) -> None:
    kinds = {o["kind"] for o in synthesized("dev-gcp").kubernetes_objects()}
    assert "ValidatingAdmissionPolicy" not in kinds and "ValidatingAdmissionPolicyBinding" not in kinds


@pytest.mark.parametrize("version", ["1.31", "1.33", "1.35"])
def test_the_policy_and_binding_validate_as_admissionregistration_v1_with_unknown_fields_as_errors(
    synthesized: Synthesized, version: str
) -> None:
    from infra.tools import check

    objects = [o for o in synthesized("prod-gcp").kubernetes_objects() if o["apiVersion"] == "admissionregistration.k8s.io/v1"]
    assert sorted(o["kind"] for o in objects) == ["ValidatingAdmissionPolicy"] * 2 + ["ValidatingAdmissionPolicyBinding"] * 2
    for obj in objects:
        assert check.schema_problem(obj, version) is None


@pytest.mark.parametrize("change", [
    {"command": ["/bin/sh", "-c", "cat /hostprocsysfs/kernel/hostname"]},
    {"args": ["--anything"]},
    {"env": [{"name": "LD_PRELOAD", "value": "/tmp/x.so"}]},
    {"lifecycle": {"postStart": {"exec": {"command": ["/bin/sh", "-c", "id"]}}}},
])
def test_the_daemon_image_with_another_command_environment_or_hook_gets_no_exception(
    tcpx: tuple[dict[str, Any], dict[str, Any]], change: dict[str, Any]
) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["initContainers"][0].update(change)
    assert "run-as-non-root" in refusals(policy, pod)


@pytest.mark.parametrize(("options", "refused"), [
    ({"kind": "PodExecOptions", "container": "tcpx-daemon", "command": ["sh"]}, ["daemon-exec"]),
    ({"kind": "PodAttachOptions", "container": "tcpx-daemon"}, ["daemon-exec"]),
    ({"kind": "PodExecOptions", "container": "trainer", "command": ["sh"]}, []),
    ({"kind": "PodExecOptions", "command": ["sh"]}, []),
])
def test_exec_into_the_daemon_is_refused_and_into_the_trainer_allowed(
    prod: PlatformSpec, options: dict[str, Any], refused: list[str]
) -> None:
    assert refusals_of(gpudirect_admission.exec_policy_spec(prod), {"apiVersion": "v1", **options}) == refused



def _without_own_completion_index(template: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(template)
    for daemon in out["spec"]["initContainers"]:
        daemon["env"] = [e for e in daemon["env"] if e["name"] != created_pod.COMPLETION_INDEX_ENV_NAME]
    return out


def test_the_created_pod_carries_the_controller_s_completion_index_on_the_trainer(prod: PlatformSpec) -> None:
    pod = pod_template(prod, "h100-train")
    [entry] = [e for e in trainer(pod)["env"] if e["name"] == created_pod.COMPLETION_INDEX_ENV_NAME]
    assert entry["valueFrom"]["fieldRef"] == {
        "apiVersion": "v1", "fieldPath": "metadata.labels['batch.kubernetes.io/job-completion-index']"}


@pytest.mark.parametrize("pod_index_label", [True, False])
def test_the_daemon_passes_whichever_completion_index_source_the_controller_uses(prod: PlatformSpec, pod_index_label: bool) -> None:
    pod = created_pod.created_pod(template_of(prod, "h100-train"), pod_index_label=pod_index_label)
    assert refusals(gpudirect_admission.policy_spec(prod), pod) == []


def test_a_daemon_without_its_own_completion_index_entry_is_refused_once_the_controller_appends_one(prod: PlatformSpec) -> None:
    pod = created_pod.created_pod(_without_own_completion_index(template_of(prod, "h100-train")))
    assert "run-as-non-root" in refusals(gpudirect_admission.policy_spec(prod), pod)


def test_the_pin_follows_the_rendered_daemon_when_its_probe_and_resources_change(
    prod: PlatformSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components.kubernetes import gpudirect_pod as fabric

    real = fabric.gke_sidecars

    def with_probe(family: Any) -> list[dict[str, Any]]:
        return [{**c, "startupProbe": {"tcpSocket": {"port": 8080}}, "resources": {"limits": {"cpu": "1"}}} for c in real(family)]

    monkeypatch.setattr(fabric, "gke_sidecars", with_probe)
    pod = pod_template(prod, "h100-train")
    assert pod["spec"]["initContainers"][0]["startupProbe"]["periodSeconds"] == 10
    assert refusals(gpudirect_admission.policy_spec(prod), pod) == []


def _mount_over(pod: dict[str, Any], volume: dict[str, Any], path: str) -> None:
    pod["spec"]["volumes"].append(volume)
    pod["spec"]["initContainers"][0]["volumeMounts"].append({"name": volume["name"], "mountPath": path})


DAEMON_ATTACKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "bucket-over-daemon-binary-dir": lambda pod: _mount_over(
        pod, {"name": "b", "csi": {"driver": "gcsfuse.csi.storage.gke.io", "volumeAttributes": {"bucketName": "x"}}},
        "/tcpgpudmarxd/build/app"),
    "empty-dir-over-ld-library-path": lambda pod: _mount_over(pod, {"name": "e", "emptyDir": {}}, "/usr/local/nvidia/lib64"),
    "libraries-repointed-to-writable-host-path": lambda pod: next(
        v for v in pod["spec"]["volumes"] if v["name"] == "libraries")["hostPath"].update(path="/proc/sys"),
    "libraries-replaced-by-empty-dir": lambda pod: pod["spec"]["volumes"].__setitem__(
        [v["name"] for v in pod["spec"]["volumes"]].index("libraries"), {"name": "libraries", "emptyDir": {}}),
    "sub-path-on-a-daemon-mount": lambda pod: pod["spec"]["initContainers"][0]["volumeMounts"][0].update(subPath="x"),
    "working-dir": lambda pod: pod["spec"]["initContainers"][0].update(workingDir="/hostprocsysfs"),
    "volume-devices": lambda pod: pod["spec"]["initContainers"][0].update(volumeDevices=[{"name": "e", "devicePath": "/dev/x"}]),
    "security-context-changed": lambda pod: pod["spec"]["initContainers"][0]["securityContext"].update(
        seccompProfile={"type": "Localhost", "localhostProfile": "x"}),
}


@pytest.mark.parametrize("attack", sorted(DAEMON_ATTACKS))
def test_a_daemon_with_other_mounts_volumes_or_fields_loses_its_exception(tcpx: tuple[dict[str, Any], dict[str, Any]], attack: str) -> None:
    policy, pod = copy.deepcopy(tcpx)
    DAEMON_ATTACKS[attack](pod)
    assert "run-as-non-root" in refusals(policy, pod)


def test_the_trainer_may_not_mount_the_host_s_sys_even_read_only(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    trainer(pod)["volumeMounts"].append({"name": "sys", "mountPath": "/hostsys", "readOnly": True})
    assert refusals(policy, pod) == ["host-path-scope"]


DEVICES = "- path: /dev/sda\n"


@pytest.mark.parametrize("key", ["devices.gke.io/container.trainer", "devices.gke.io/pod", "devices.gke.io"])
def test_a_device_annotation_for_anything_but_the_daemon_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]], key: str) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["metadata"]["annotations"][key] = DEVICES
    assert refusals(policy, pod) == ["device-annotations"]


def test_the_daemon_s_device_annotation_with_another_device_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["metadata"]["annotations"]["devices.gke.io/container.tcpx-daemon"] += DEVICES
    assert refusals(policy, pod) == ["device-annotations"]


def test_the_daemon_s_device_annotation_without_the_pinned_daemon_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["initContainers"][0]["image"] = "registry.invalid/anything:1"
    assert "device-annotations" in refusals(policy, pod)


@pytest.mark.parametrize("where", ["pod", "trainer", "daemon"])
def test_an_unconfined_apparmor_profile_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]], where: str) -> None:
    policy, pod = copy.deepcopy(tcpx)
    target = {"pod": pod["spec"], "trainer": trainer(pod), "daemon": pod["spec"]["initContainers"][0]}[where]
    target["securityContext"]["appArmorProfile"] = {"type": "Unconfined"}
    assert gpudirect_admission.APPARMOR in refusals(policy, pod)


@pytest.mark.parametrize(("value", "refused"), [("unconfined", True), ("runtime/default", False), ("localhost/k8s-x", False)])
def test_the_apparmor_annotation_admits_only_runtime_default_and_localhost(
    tcpx: tuple[dict[str, Any], dict[str, Any]], value: str, refused: bool
) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/tcpx-daemon"] = value
    assert refusals(policy, pod) == ([gpudirect_admission.APPARMOR] if refused else [])


def _old_daemon_image(pod: dict[str, Any]) -> dict[str, Any]:
    """The pod as created before the daemon's image was bumped: no longer the pinned daemon."""
    out = copy.deepcopy(pod)
    out["spec"]["initContainers"][0]["image"] = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.11"
    return out


@pytest.mark.parametrize("change", ["finalizer-removed", "scheduling-gate-lifted", "label-added"])
def test_a_metadata_or_gate_only_update_of_a_pod_with_an_old_daemon_is_not_rechecked(
    tcpx: tuple[dict[str, Any], dict[str, Any]], change: str
) -> None:
    policy, pod = copy.deepcopy(tcpx)
    old = _old_daemon_image(pod)
    old["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    old["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/topology"}]
    new = copy.deepcopy(old)
    {"finalizer-removed": lambda: new["metadata"].pop("finalizers"),
     "scheduling-gate-lifted": lambda: new["spec"].pop("schedulingGates"),
     "label-added": lambda: new["metadata"].setdefault("labels", {}).update(x="y")}[change]()
    assert refusals(policy, old) and refusals_of(policy, new, old=old) == []


def test_an_update_that_changes_a_container_is_rechecked(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    new = copy.deepcopy(pod)
    trainer(new)["image"] = "registry.invalid/trainer:2"
    new["spec"]["initContainers"][0]["image"] = "registry.invalid/anything:1"
    assert "run-as-non-root" in refusals_of(policy, new, old=pod)


def test_an_update_that_adds_a_device_annotation_is_rechecked(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    new = copy.deepcopy(pod)
    new["metadata"]["annotations"]["devices.gke.io/pod"] = DEVICES
    assert refusals_of(policy, new, old=pod) == ["device-annotations"]


def test_an_ephemeral_container_update_is_always_checked(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    new = copy.deepcopy(pod)
    new["spec"]["ephemeralContainers"] = [{"name": "debug", "image": "busybox", "securityContext": {"privileged": True}}]
    assert gpudirect_admission.PRIVILEGED in refusals_of(policy, new, old=pod, sub_resource="ephemeralcontainers")


def test_the_exec_policy_s_message_names_the_exec_policy(prod: PlatformSpec) -> None:
    [validation] = gpudirect_admission.exec_policy_spec(prod)["validations"]
    assert validation["message"].endswith(f"(gpu-platform {gpudirect_admission.EXEC_POLICY_NAME})")


@pytest.mark.parametrize("options", [{"type": "spc_t"}, {"user": "system_u"}, {"role": "system_r"}])
def test_a_pod_level_selinux_user_role_or_custom_type_is_refused(tcpx: tuple[dict[str, Any], dict[str, Any]], options: dict[str, str]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["securityContext"]["seLinuxOptions"] = options
    assert refusals(policy, pod) == ["sysctls-and-selinux"]


def test_a_pod_level_root_user_is_refused_even_where_every_container_overrides_it(tcpx: tuple[dict[str, Any], dict[str, Any]]) -> None:
    policy, pod = copy.deepcopy(tcpx)
    pod["spec"]["securityContext"]["runAsUser"] = 0
    assert trainer(pod)["securityContext"]["runAsUser"] != 0
    assert refusals(policy, pod) == ["run-as-non-root"]
