"""The ValidatingAdmissionPolicy that keeps team pods at `restricted` on GKE GPUDirect stacks.

A multi-node job on a GPUDirect pool needs two things the Pod Security `restricted` and
`baseline` levels refuse: read-only hostPath mounts of the host's NCCL plugin libraries, and on
TCPX/TCPXO the receive-datapath daemon as a root sidecar with NET_ADMIN (components.kubernetes.gpudirect_pod).
Pod Security Admission exempts pods only through the API server's AdmissionConfiguration file
(kubernetes.io/docs/concepts/security/pod-security-admission "Exemptions"), which GKE does not let
us set; so PSA cannot admit that shape in a `restricted` namespace. Instead the team namespaces
enforce `privileged` for PSA while warning and auditing at `restricted`, and this policy, bound
to every team namespace, re-implements the Restricted profile (kubernetes.io/docs/concepts/
security/pod-security-standards) for every container, with one exception: the family's daemon
sidecar (exact name, pinned image, restartPolicy Always), which may run as root and add exactly
its documented capabilities. hostPath volumes are admitted only at the families' documented host
paths, and only the daemon may mount them writable. No container may be privileged and no pod
may use a host namespace or a host port: hostNetwork on GKE would reach the metadata server as the
node (GKE docs "About Workload Identity Federation for GKE", limitations), so those stay refused.

ValidatingAdmissionPolicy and its binding: admissionregistration.k8s.io/v1, GA in Kubernetes
1.30 (kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy); the CEL here
uses only the standard macros (has, all, exists, filter, map) and `in`.
"""

from __future__ import annotations

import json
from typing import Any

from components.facts.gpudirect import DEVICE_ANNOTATION_PREFIX, GPUDIRECT, Daemon, GpuDirect
from components.kubernetes import gpudirect_pod as fabric
from components.kubernetes import created_pod
from components.pools import fabric_pools
from components.spec import PlatformSpec
from components.tenancy import TEAM_LABEL

POLICY_NAME = "gpu-platform-team-pod-security"
BINDING_NAME = POLICY_NAME
# The variable that lists the hostPath paths the policy admits (read by the check rule).
ALLOWED_HOST_PATHS_VARIABLE = "allowedHostPaths"
# The host paths a container other than the daemon may mount (read-only): the plugin libraries.
TRAINER_HOST_PATHS_VARIABLE = "trainerHostPaths"
# Restricted: "Volume Types" (pod-security-standards); hostPath is added at the listed paths.
RESTRICTED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret")
# Baseline: "Sysctls", the safe set.
SAFE_SYSCTLS = (
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
)
# Baseline: "SELinux", the types a pod may set.
SELINUX_TYPES = ("", "container_t", "container_init_t", "container_kvm_t", "container_engine_t")
# Validation names: the rule requires each of them, unchanged.
HOST_NAMESPACES = "host-namespaces"
PRIVILEGED = "privileged"
VOLUMES = "volume-types"
APPARMOR = "apparmor"


def documented_host_paths() -> list[str]:
    """Every host path a GPUDirect family's manifests mount (components.facts.gpudirect)."""
    paths: set[str] = set()
    for family in GPUDIRECT.values():
        paths |= {host for _, host, _ in family.trainer_mounts}
        if family.daemon is not None:
            paths |= {host for _, host, _ in family.daemon.host_mounts}
    return sorted(paths)


def families(spec: PlatformSpec) -> list[GpuDirect]:
    """The stack's GPUDirect families, once each, in spec order."""
    found: list[GpuDirect] = []
    for pool in fabric_pools(spec):
        if pool.family not in found:
            found.append(pool.family)
    return found


def needed(spec: PlatformSpec) -> bool:
    return bool(families(spec))


def host_paths(spec: PlatformSpec) -> list[str]:
    """The host paths the stack's families mount."""
    paths: set[str] = set()
    for family in families(spec):
        paths |= {host for _, host, _ in family.trainer_mounts}
        if family.daemon is not None:
            paths |= {host for _, host, _ in family.daemon.host_mounts}
    return sorted(paths)


def trainer_host_paths(spec: PlatformSpec) -> list[str]:
    """The host paths the stack's families document for the trainer: no /sys, no /proc/sys."""
    return sorted({host for family in families(spec) for _, host, _ in family.trainer_mounts})


def daemons(spec: PlatformSpec) -> list[Daemon]:
    return [family.daemon for family in families(spec) if family.daemon is not None]


def _lit(value: Any) -> str:
    """A CEL literal of a string or a list of strings (JSON's syntax is CEL's for both)."""
    return json.dumps(value)


# Every field of core/v1 Container on the supported versions (kubernetes/kubernetes@v1.31
# staging/src/k8s.io/api/core/v1/types.go Container). A field the daemon is not rendered with
# must be absent: CEL on a typed object cannot iterate its keys, and `has` on a field the
# schema lacks is a compile error, so the list stays within 1.31's fields.
CONTAINER_FIELDS = (
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env", "resources", "resizePolicy",
    "restartPolicy", "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe", "startupProbe", "lifecycle",
    "terminationMessagePath", "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce", "tty",
)


def daemon_container(family: GpuDirect) -> dict[str, Any]:
    """The daemon sidecar exactly as the job renderer renders it (components.kubernetes.gpudirect_pod)."""
    [container] = fabric.gke_sidecars(family)
    return container


def _equal(expr: str, value: Any) -> str:
    """`expr` equals the JSON value. `dyn` lets a typed object compare with a literal map."""
    return f"dyn({expr}) == {_lit(value)}"


def _is_daemon(family: GpuDirect) -> str:
    """The daemon exactly as rendered (fabric.gke_sidecars), in the form the API server stores
    (components.kubernetes.created_pod): every field it is rendered with equal, the fields the
    API server defaults either unset or at their default, every other field of Container unset
    (no probe or hook of another command, no workingDir or volumeDevices), and every volume it
    mounts exactly the rendered volume, so no bucket, emptyDir or other host path replaces its
    binaries, libraries or the host's /sys."""
    rendered = daemon_container(family)
    stored = created_pod.defaulted_container(rendered)
    terms = [f"has(c.{key}) && {_equal('c.' + key, value)}" for key, value in stored.items() if key in rendered]
    terms += [f"(!has(c.{key}) || {_equal('c.' + key, value)})" for key, value in stored.items() if key not in rendered]
    defaulted_resources = "resources" not in stored
    terms += [
        "(!has(c.resources) || (!has(c.resources.limits) && !has(c.resources.requests) && !has(c.resources.claims)))"
        if key == "resources" and defaulted_resources else f"!has(c.{key})"
        for key in CONTAINER_FIELDS if key not in stored
    ]
    volumes = {v["name"]: v for v in fabric.gke_volumes(family)}
    for mount in rendered.get("volumeMounts", []):
        volume = volumes[mount["name"]]
        forms = " || ".join(_equal("v", form) for form in (volume, created_pod.defaulted_volume(volume)))
        terms.append(
            f"has(object.spec.volumes) && object.spec.volumes.exists(v, v.name == {_lit(mount['name'])})"
            f" && object.spec.volumes.all(v, v.name != {_lit(mount['name'])} || {forms})"
        )
    return "(" + " && ".join(terms) + ")"


# The NRI device injector on TCPX/TCPXO nodes hands a container every host device that the pod's
# `devices.gke.io/container.<name>`, `devices.gke.io/pod` or `devices.gke.io` annotation lists,
# with the uid, gid and mode it asks for (GoogleCloudPlatform/container-engine-accelerators@
# 992db81257553607f1477945f1b3219632991829 nri_device_injector/nri_device_injector.go getDevices,
# toNRIDevice). Only the pinned daemon's own annotation, with exactly the rendered value, passes.
DEVICE_ANNOTATION_KEYS = "devices.gke.io"
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"


def device_annotations(spec: PlatformSpec) -> dict[str, str]:
    """Daemon name -> the device annotation's value the job renderer gives its pods."""
    out: dict[str, str] = {}
    for pool in fabric_pools(spec):
        if pool.family.daemon is not None:
            rendered = fabric.gke_annotations(pool.pool, pool.family)
            out[pool.family.daemon.name] = rendered[DEVICE_ANNOTATION_PREFIX + pool.family.daemon.name]
    return out


def _field(path: str, default: str) -> str:
    """`c.securityContext.<path>` where set, else `default` (a CEL expression); `has` is checked
    at every level, since selecting a missing field is an error in CEL."""
    parts = ["c.securityContext", *(f"c.securityContext.{'.'.join(path.split('.')[: i + 1])}" for i in range(path.count(".") + 1))]
    present = " && ".join(f"has({part})" for part in parts)
    return f"({present} ? c.securityContext.{path} : {default})"


def variables(spec: PlatformSpec) -> list[dict[str, str]]:
    is_daemon = " || ".join(_is_daemon(f) for f in families(spec) if f.daemon is not None) or "false"
    pod = "has(object.spec.securityContext) && has(object.spec.securityContext.{0})"
    return [
        {"name": ALLOWED_HOST_PATHS_VARIABLE, "expression": _lit(host_paths(spec))},
        {"name": TRAINER_HOST_PATHS_VARIABLE, "expression": _lit(trainer_host_paths(spec))},
        {
            "name": "containers",
            "expression": "object.spec.containers"
            " + (has(object.spec.initContainers) ? object.spec.initContainers : [])"
            " + (has(object.spec.ephemeralContainers) ? object.spec.ephemeralContainers : [])",
        },
        # Only init containers run as sidecars; an ephemeral or main container never is the daemon.
        {
            "name": "daemons",
            "expression": f"has(object.spec.initContainers) ? object.spec.initContainers.filter(c, {is_daemon}) : []",
        },
        # Container names are unique across a pod's containers of every kind.
        {"name": "daemonNames", "expression": "variables.daemons.map(c, c.name)"},
        {"name": "others", "expression": "variables.containers.filter(c, !(c.name in variables.daemonNames))"},
        {
            "name": "hostPathVolumes",
            "expression": "has(object.spec.volumes) ? object.spec.volumes.filter(v, has(v.hostPath)).map(v, v.name) : []",
        },
        {"name": "podSeccomp", "expression": f"{pod.format('seccompProfile')} ? object.spec.securityContext.seccompProfile.type : ''"},
        {"name": "podRunAsNonRoot", "expression": f"{pod.format('runAsNonRoot')} ? object.spec.securityContext.runAsNonRoot : false"},
        {"name": "annotations", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
        {"name": "podRunAsUser", "expression": f"{pod.format('runAsUser')} ? object.spec.securityContext.runAsUser : -1"},
    ]


def _validation(name: str, expression: str, message: str, policy: str = POLICY_NAME) -> dict[str, str]:
    return {"expression": expression, "message": f"{name}: {message} (gpu-platform {policy})", "reason": "Forbidden"}


def validations(spec: PlatformSpec) -> list[dict[str, str]]:
    """Baseline's and Restricted's controls, each one CEL rule; the daemon is exempt only from
    running as root, privilege escalation and its capabilities."""
    daemon_caps = sorted({cap for d in daemons(spec) for cap in d.capabilities})
    volume_kinds = " || ".join(f"has(v.{kind})" for kind in RESTRICTED_VOLUMES)
    return [
        _validation(
            HOST_NAMESPACES,
            "!(has(object.spec.hostNetwork) && object.spec.hostNetwork) && !(has(object.spec.hostPID) && object.spec.hostPID)"
            " && !(has(object.spec.hostIPC) && object.spec.hostIPC)",
            "hostNetwork, hostPID and hostIPC must be unset or false",
        ),
        _validation(
            PRIVILEGED,
            f"variables.containers.all(c, !{_field('privileged', 'false')})",
            "no container may be privileged",
        ),
        _validation(
            "host-ports",
            "variables.containers.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0))",
            "no container may use a host port",
        ),
        _validation(
            VOLUMES,
            f"!has(object.spec.volumes) || object.spec.volumes.all(v, {volume_kinds}"
            f" || (has(v.hostPath) && v.hostPath.path in variables.{ALLOWED_HOST_PATHS_VARIABLE}))",
            "volumes are of the restricted types, or hostPath at the GPUDirect plugin's documented paths",
        ),
        _validation(
            "host-path-read-only",
            "variables.others.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m,"
            " !(m.name in variables.hostPathVolumes) || (has(m.readOnly) && m.readOnly)))",
            "only the GPUDirect daemon may mount a hostPath volume writable",
        ),
        _validation(
            "host-path-scope",
            "!has(object.spec.volumes) || variables.others.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, object.spec.volumes.all(v,"
            f" v.name != m.name || !has(v.hostPath) || v.hostPath.path in variables.{TRAINER_HOST_PATHS_VARIABLE})))",
            "only the GPUDirect daemon may mount the host's /sys and /proc/sys; other containers only the plugin libraries",
        ),
        _validation(
            "privilege-escalation",
            "variables.others.all(c, has(c.securityContext) && has(c.securityContext.allowPrivilegeEscalation)"
            " && !c.securityContext.allowPrivilegeEscalation)",
            "containers set allowPrivilegeEscalation: false",
        ),
        _validation(
            "run-as-non-root",
            f"variables.podRunAsUser != 0 && variables.others.all(c, {_field('runAsNonRoot', 'variables.podRunAsNonRoot')} == true"
            f" && {_field('runAsUser', 'variables.podRunAsUser')} != 0)",
            "containers run as non-root (runAsNonRoot: true, runAsUser not 0, nor the pod's runAsUser)",
        ),
        _validation(
            "capabilities",
            "variables.others.all(c, has(c.securityContext) && has(c.securityContext.capabilities)"
            " && has(c.securityContext.capabilities.drop) && 'ALL' in c.securityContext.capabilities.drop"
            " && (!has(c.securityContext.capabilities.add)"
            " || c.securityContext.capabilities.add.all(a, a == 'NET_BIND_SERVICE')))"
            " && variables.daemons.all(c, !has(c.securityContext) || !has(c.securityContext.capabilities)"
            " || !has(c.securityContext.capabilities.add)"
            f" || c.securityContext.capabilities.add.all(a, a in {_lit(daemon_caps)}))",
            "containers drop ALL and add at most NET_BIND_SERVICE; the GPUDirect daemon adds only its documented capabilities",
        ),
        _validation(
            "seccomp",
            f"variables.containers.all(c, {_field('seccompProfile.type', 'variables.podSeccomp')}"
            " in ['RuntimeDefault', 'Localhost'])",
            "every container runs the RuntimeDefault or a Localhost seccomp profile",
        ),
        _validation(
            "proc-mount-and-host-process",
            f"variables.containers.all(c, {_field('procMount', repr('Default'))} == 'Default'"
            f" && !{_field('windowsOptions.hostProcess', 'false')})",
            "procMount stays Default and no container is a Windows host process",
        ),
        _validation(
            "sysctls-and-selinux",
            "!(has(object.spec.securityContext) && has(object.spec.securityContext.sysctls)"
            f" && !object.spec.securityContext.sysctls.all(s, s.name in {_lit(list(SAFE_SYSCTLS))}))"
            " && !(has(object.spec.securityContext) && has(object.spec.securityContext.seLinuxOptions)"
            " && ((has(object.spec.securityContext.seLinuxOptions.type)"
            f" && !(object.spec.securityContext.seLinuxOptions.type in {_lit(list(SELINUX_TYPES))}))"
            " || has(object.spec.securityContext.seLinuxOptions.user) || has(object.spec.securityContext.seLinuxOptions.role)))"
            " && variables.containers.all(c, !(has(c.securityContext) && has(c.securityContext.seLinuxOptions))"
            f" || ((!has(c.securityContext.seLinuxOptions.type) || c.securityContext.seLinuxOptions.type in {_lit(list(SELINUX_TYPES))})"
            " && !has(c.securityContext.seLinuxOptions.user) && !has(c.securityContext.seLinuxOptions.role)))",
            "only the safe sysctls, and no SELinux user, role or custom type",
        ),
        _validation(
            "device-annotations",
            f"variables.annotations.all(k, !k.startsWith({_lit(DEVICE_ANNOTATION_KEYS)}) || variables.daemonNames.exists(n,"
            f" k == {_lit(DEVICE_ANNOTATION_PREFIX)} + n && variables.annotations[k] == {_lit(device_annotations(spec))}[n]))",
            "devices.gke.io annotations only for the GPUDirect daemon, with the devices it is rendered with",
        ),
        # Baseline "AppArmor" (kubernetes/pod-security-admission@v0.31.0 policy/check_appArmorProfile.go):
        # no Unconfined profile, the beta annotation only runtime/default or localhost/*.
        _validation(
            APPARMOR,
            "!(has(object.spec.securityContext) && has(object.spec.securityContext.appArmorProfile)"
            " && object.spec.securityContext.appArmorProfile.type == 'Unconfined')"
            f" && variables.containers.all(c, {_field('appArmorProfile.type', repr(''))} != 'Unconfined')"
            f" && variables.annotations.all(k, !k.startsWith({_lit(APPARMOR_ANNOTATION_PREFIX)})"
            " || variables.annotations[k] == 'runtime/default' || variables.annotations[k].startsWith('localhost/'))",
            "no Unconfined AppArmor profile; the AppArmor annotation is runtime/default or localhost/*",
        ),
    ]


def _unchanged(path: str, empty: str) -> str:
    return f"(has(object.{path}) ? object.{path} : {empty}) == (has(oldObject.{path}) ? oldObject.{path} : {empty})"


# An UPDATE that leaves every container and the annotations as they were changes nothing this
# policy reads: of a pod's spec only container images, activeDeadlineSeconds, tolerations,
# terminationGracePeriodSeconds, schedulingGates and (while gated) nodeSelector and affinity may
# change (kubernetes/kubernetes@v1.32 pkg/apis/core/validation/validation.go ValidatePodUpdate,
# ephemeral containers through their subresource). Such updates (the Job controller removing its
# finalizer, Kueue lifting scheduling gates, status and label writes) are not re-checked, so
# running pods never get stuck after the pin moves; Pod Security Admission skips the same kind
# (kubernetes/pod-security-admission@v0.31.0 admission/admission.go isSignificantPodUpdate).
SIGNIFICANT_UPDATE = "significant-pod-change"


def match_conditions() -> list[dict[str, str]]:
    unchanged = " && ".join([
        _unchanged("metadata.annotations", "{}"),
        "object.spec.containers == oldObject.spec.containers",
        _unchanged("spec.initContainers", "[]"),
        _unchanged("spec.ephemeralContainers", "[]"),
    ])
    return [{
        "name": SIGNIFICANT_UPDATE,
        "expression": f"request.operation != 'UPDATE' || request.subResource == 'ephemeralcontainers' || !({unchanged})",
    }]


def policy_spec(spec: PlatformSpec) -> dict[str, Any]:
    """The policy: pods (and their ephemeral containers) on create and update, failing closed."""
    return {
        "failurePolicy": "Fail",
        "matchConditions": match_conditions(),
        "matchConstraints": {
            "resourceRules": [{
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["pods", "pods/ephemeralcontainers"],
            }]
        },
        "variables": variables(spec),
        "validations": validations(spec),
    }


def binding_spec() -> dict[str, Any]:
    """Bound to every namespace carrying the team label, denying (not only warning)."""
    return {
        "policyName": POLICY_NAME,
        "validationActions": ["Deny"],
        "matchResources": {"namespaceSelector": {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}},
    }


# A team member may exec into a job's containers (components.tenancy's Role); into the daemon,
# root with NET_ADMIN and the host's /sys and /proc/sys, that would hand out the node. This second
# policy refuses exec and attach to the daemon by container name. The API server admits both as
# CONNECT on pods/exec and pods/attach with PodExecOptions / PodAttachOptions as the object; an
# empty container name picks the pod's only regular container, the trainer (the sidecar is an
# init container), so only a named daemon is refused.
EXEC_POLICY_NAME = "gpu-platform-team-daemon-exec"


def exec_policy_spec(spec: PlatformSpec) -> dict[str, Any]:
    names = [daemon.name for daemon in daemons(spec)]
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [{
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CONNECT"],
                "resources": ["pods/exec", "pods/attach"],
            }]
        },
        "validations": [
            _validation(
                "daemon-exec",
                f"!(has(object.container) && object.container in {_lit(names)})",
                "no exec into or attach to the GPUDirect daemon, which runs as root",
                EXEC_POLICY_NAME,
            )
        ],
    }


def exec_binding_spec() -> dict[str, Any]:
    return {**binding_spec(), "policyName": EXEC_POLICY_NAME}
