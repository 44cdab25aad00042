"""The pod an admission policy really sees for a rendered Job's pod template: what the Job
controller adds to an Indexed Job's pods and what the API server defaults before admission.

Admission runs on the defaulted object (the API server decodes and defaults a request before the
admission chain), so a policy that pins a container exactly must pin it in this form. Only the
fields the GPUDirect policy compares are modelled:
- the Job controller appends JOB_COMPLETION_INDEX (fieldRef, no apiVersion) to every init
  container and container that has no env of that name, and sets the completion-index annotation
  (kubernetes/kubernetes@v1.32 pkg/controller/job/indexed_job_utils.go
  addCompletionIndexEnvVariables, addCompletionIndexAnnotation);
- the API server's defaults (kubernetes/kubernetes@v1.32 pkg/apis/core/v1/defaults.go):
  SetDefaults_Container (terminationMessagePath /dev/termination-log, terminationMessagePolicy
  File, imagePullPolicy Always for `:latest` or an untagged image, else IfNotPresent),
  SetDefaults_ObjectFieldSelector (apiVersion v1), SetDefaults_Probe (timeoutSeconds 1,
  periodSeconds 10, successThreshold 1, failureThreshold 3), SetDefaults_HTTPGetAction (path /,
  scheme HTTP), SetDefaults_HostPathVolumeSource (type ""), and requests copied from limits
  where a request is unset (SetDefaults_Pod)."""

from __future__ import annotations

import copy
from typing import Any

COMPLETION_INDEX_ENV_NAME = "JOB_COMPLETION_INDEX"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
CONTAINER_DEFAULTS = {"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}
PROBE_DEFAULTS = {"timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def image_pull_policy(image: str) -> str:
    """SetDefaults_Container's pull policy for an image reference."""
    name = image.split("@", 1)[0]
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ""
    return "Always" if "@" not in image and tag in ("", "latest") else "IfNotPresent"


def _probe(probe: dict[str, Any]) -> dict[str, Any]:
    out = {**PROBE_DEFAULTS, **probe}
    if "httpGet" in out:
        out["httpGet"] = {"path": "/", "scheme": "HTTP", **out["httpGet"]}
    return out


def defaulted_container(container: dict[str, Any]) -> dict[str, Any]:
    """A container as the API server stores it."""
    out = {**CONTAINER_DEFAULTS, **copy.deepcopy(container)}
    out.setdefault("imagePullPolicy", image_pull_policy(out.get("image", "")))
    for entry in out.get("env", []):
        ref = entry.get("valueFrom", {}).get("fieldRef")
        if ref is not None:
            ref.setdefault("apiVersion", "v1")
    for name in PROBES:
        if name in out:
            out[name] = _probe(out[name])
    limits = out.get("resources", {}).get("limits")
    if limits:
        out["resources"]["requests"] = {**limits, **out["resources"].get("requests", {})}
    return out


def defaulted_volume(volume: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(volume)
    if "hostPath" in out:
        out["hostPath"].setdefault("type", "")
    return out


def _with_index(container: dict[str, Any], source: str) -> dict[str, Any]:
    env = list(container.get("env", []))
    if not any(e.get("name") == COMPLETION_INDEX_ENV_NAME for e in env):
        env.append({"name": COMPLETION_INDEX_ENV_NAME,
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.{source}['{COMPLETION_INDEX_ANNOTATION}']"}}})
    return {**container, "env": env}


def created_pod(template: dict[str, Any], index: int = 0, pod_index_label: bool = True) -> dict[str, Any]:
    """The Pod object admission sees for index `index` of an Indexed Job with pod template `template`
    (a PodTemplateSpec: metadata and spec). With PodIndexLabel (on by default since 1.28, GA in
    1.32) the appended entry reads the label, before it the annotation."""
    spec = copy.deepcopy(template["spec"])
    source = "labels" if pod_index_label else "annotations"
    for kind in ("initContainers", "containers"):
        if kind in spec:
            spec[kind] = [defaulted_container(_with_index(c, source)) for c in spec[kind]]
    if "volumes" in spec:
        spec["volumes"] = [defaulted_volume(v) for v in spec["volumes"]]
    metadata = copy.deepcopy(template.get("metadata", {}))
    metadata["annotations"] = {**metadata.get("annotations", {}), COMPLETION_INDEX_ANNOTATION: str(index)}
    metadata.setdefault("name", f"pod-{index}")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
