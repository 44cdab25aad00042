"""Each cloud's metrics stack as the program synthesizes it: GKE managed collection with GMP
objects, kube-prometheus-stack elsewhere, nothing with `prometheus: none`; the spec's errors."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

import jsonschema
import pytest
from k8s_support import crd_schema, onprem_platform, spec_of
from k8s_support import synthesize as synthesize_onprem

from components.facts import charts
from components.spec import SpecError
from infra import program, stackfile, synth
from k8s_support import REPO

HELM = "kubernetes:helm.sh/v3:Release"


@cache
def _stack(stack: str) -> synth.Synthesis:
    config = stackfile.read(stack, REPO).config
    pulumi_config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    return synth.run(program.main, stackfile.project_name(REPO), stack, pulumi_config)


@cache
def _gke_with_the_chart() -> synth.Synthesis:
    """dev-gcp with `observability.prometheus: kube-prometheus-stack`."""
    config = copy.deepcopy(stackfile.read("dev-gcp", REPO).config)
    config["gpu-platform:platform"]["observability"] = {"prometheus": "kube-prometheus-stack"}
    pulumi_config = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    return synth.run(program.main, stackfile.project_name(REPO), "dev-gcp", pulumi_config)


def _kinds(synthesis: synth.Synthesis) -> set[str]:
    return {obj["kind"] for obj in synthesis.kubernetes_objects()}


def _releases(synthesis: synth.Synthesis) -> set[str]:
    return {r["inputs"]["name"] for r in synthesis.by_type(HELM)}


def test_gke_enables_managed_collection_with_the_kube_state_packages() -> None:
    [cluster] = _stack("dev-gcp").by_type("gcp:container/cluster:Cluster")
    config = cluster["inputs"]["monitoringConfig"]
    assert config["managedPrometheus"]["enabled"] is True
    assert {"DCGM", "POD", "JOBSET", "KUBELET"} <= set(config["enableComponents"])


def test_gke_declares_gmp_objects_that_validate_against_gmp_crds() -> None:
    gmp = [obj for obj in _stack("dev-gcp").kubernetes_objects() if obj["apiVersion"] == "monitoring.googleapis.com/v1"]
    assert {obj["kind"] for obj in gmp} == {"ClusterPodMonitoring", "ClusterRules", "GlobalRules", "PodMonitoring"}
    for obj in gmp:
        schema = crd_schema(obj["apiVersion"], obj["kind"])
        assert schema is not None
        jsonschema.validate(obj, schema)
    assert charts.KUBE_PROMETHEUS_STACK.name not in _releases(_stack("dev-gcp"))


def test_a_misspelt_gmp_field_is_refused() -> None:
    [pod_monitoring] = [o for o in _stack("dev-gcp").kubernetes_objects() if o["kind"] == "ClusterPodMonitoring"]
    wrong = copy.deepcopy(pod_monitoring)
    wrong["spec"]["endpoints"][0]["intervall"] = "15s"
    with pytest.raises(jsonschema.ValidationError, match="intervall"):
        jsonschema.validate(wrong, crd_schema(wrong["apiVersion"], wrong["kind"]))


def test_aws_installs_kube_prometheus_stack_and_the_operator_objects() -> None:
    synthesis = _stack("dev-aws")
    assert charts.KUBE_PROMETHEUS_STACK.name in _releases(synthesis)
    assert {"ServiceMonitor", "PodMonitor", "PrometheusRule"} <= _kinds(synthesis)
    [rule] = [o for o in synthesis.kubernetes_objects() if o["kind"] == "PrometheusRule"]
    jsonschema.validate(rule, crd_schema(rule["apiVersion"], rule["kind"]))
    costs = [r for g in rule["spec"]["groups"] for r in g["rules"] if r.get("record") == "team_pool:gpu_usd_per_hour:usage"]
    assert costs, "AWS pools have catalog prices: a $ rule per pool"


def test_prometheus_none_declares_no_metrics_stack() -> None:
    platform = onprem_platform()
    platform["observability"] = {"prometheus": "none"}
    synthesis = synthesize_onprem(platform)
    assert charts.KUBE_PROMETHEUS_STACK.name not in _releases(synthesis)
    assert not {"ServiceMonitor", "PodMonitor", "PrometheusRule"} & _kinds(synthesis)


def _error(observability: dict[str, Any], cloud_platform: dict[str, Any] | None = None) -> str:
    platform = cloud_platform or onprem_platform()
    platform["observability"] = observability
    with pytest.raises(SpecError) as caught:
        spec_of(platform)
    return str(caught.value)


def test_managed_prometheus_off_gke_is_a_spec_error() -> None:
    assert "platform.observability.prometheus: managed" in _error({"prometheus": "managed"})


def test_amp_off_aws_is_a_spec_error() -> None:
    assert "platform.observability.prometheus: amp" in _error({"prometheus": "amp"})


def test_grafana_with_gke_managed_collection_is_a_spec_error_naming_the_way_to_get_it() -> None:
    gcp = stackfile.read("dev-gcp", REPO).config["gpu-platform:platform"]
    message = _error({"grafana": True}, copy.deepcopy(gcp))
    assert "platform.observability.grafana" in message and "prometheus: kube-prometheus-stack" in message


def test_grafana_on_gke_with_the_chart_is_accepted() -> None:
    gcp = copy.deepcopy(stackfile.read("dev-gcp", REPO).config["gpu-platform:platform"])
    gcp["observability"] = {"prometheus": "kube-prometheus-stack", "grafana": True}
    spec = spec_of(gcp)
    assert spec.observability.grafana_on(spec.cloud)


def test_grafana_without_a_prometheus_is_a_spec_error() -> None:
    assert "platform.observability.grafana" in _error({"prometheus": "none", "grafana": True})


def test_an_unknown_observability_key_is_a_spec_error() -> None:
    assert "platform.observability.grafanna" in _error({"grafanna": True})


def test_defaults_are_the_chart_off_gke_and_managed_on_it() -> None:
    onprem = spec_of(onprem_platform())
    assert (onprem.observability.backend(onprem.cloud), onprem.observability.grafana_on(onprem.cloud)) == (
        "kube-prometheus-stack",
        True,
    )
    gcp = spec_of(stackfile.read("dev-gcp", REPO).config["gpu-platform:platform"])
    assert (gcp.observability.backend(gcp.cloud), gcp.observability.grafana_on(gcp.cloud)) == ("managed", False)


def _prometheus_values(synthesis: synth.Synthesis) -> dict[str, Any]:
    [values] = [r["inputs"]["values"] for r in synthesis.by_type(HELM) if r["inputs"]["name"] == charts.KUBE_PROMETHEUS_STACK.name]
    return values


# kube-prometheus-stack 88.5.3 values.yaml: the components EKS hides and their default rule groups.
EKS_HIDDEN = ("kubeControllerManager", "kubeScheduler", "kubeEtcd", "kubeProxy")
EKS_HIDDEN_RULES = ("kubeControllerManager", "kubeSchedulerAlerting", "kubeSchedulerRecording", "etcd", "kubeProxy")


def test_eks_scrapes_and_alerts_on_no_control_plane_part_it_cannot_reach() -> None:
    values = _prometheus_values(_stack("dev-aws"))
    assert {name: values[name]["enabled"] for name in EKS_HIDDEN} == dict.fromkeys(EKS_HIDDEN, False)
    assert values["defaultRules"]["rules"] == dict.fromkeys(EKS_HIDDEN_RULES, False)
    keys = json.loads((REPO / "tests/data/charts/kube-prometheus-stack-88.5.3.keys.json").read_text())
    assert charts.unknown_values_keys(values, keys) == []
    defaults = json.loads((REPO / "tests/data/charts/kube-prometheus-stack-88.5.3.defaults.json").read_text())["defaults"]
    assert all(defaults[name]["enabled"] is True for name in EKS_HIDDEN)
    assert all(defaults["defaultRules"]["rules"][rule] is True for rule in EKS_HIDDEN_RULES)


def test_the_chart_s_kube_state_metrics_exports_each_node_s_pool_label() -> None:
    # The fleet dashboard's per-pool panels join on kube_node_labels' label_gpu_platform_io_pool.
    values = _prometheus_values(_stack("dev-aws"))
    assert values["kube-state-metrics"]["metricLabelsAllowlist"] == ["nodes=[gpu-platform.io/pool]"]


def test_an_existing_cluster_keeps_the_chart_s_control_plane_scrapes() -> None:
    values = _prometheus_values(synthesize_onprem(onprem_platform()))
    assert not set(EKS_HIDDEN) & set(values) and "defaultRules" not in values


# kubernetes-sigs/kueue@v0.19.2 charts/kueue: the manager pod's labels for release `kueue`
# (templates/_helpers.tpl kueue.selectorLabels) and its metrics container port (manager.yaml).
KUEUE_MANAGER_POD = {"app.kubernetes.io/name": "kueue", "app.kubernetes.io/instance": "kueue", "control-plane": "controller-manager"}
KUEUE_MANAGER_PORTS = {"metrics": 8443, "webhook-server": 9443, "visibility": 8082}
# kubernetes-sigs/jobset@v0.12.0 charts/jobset, release `jobset`: the controller pod's labels
# (jobset.controller.labels: the selector labels, component controller, plus chart and version
# labels), its container ports (templates/controller/deployment.yaml), the metrics Service's
# labels and port (templates/prometheus/manager_metrics_service.yaml) and the metrics reader
# ClusterRole (templates/rbac/auth_proxy_client_clusterrole.yaml).
JOBSET_CONTROLLER_POD = {"app.kubernetes.io/name": "jobset", "app.kubernetes.io/instance": "jobset",
                         "app.kubernetes.io/component": "controller", "app.kubernetes.io/managed-by": "Helm"}
JOBSET_CONTROLLER_PORTS = {"metrics": 8443, "webhook": 9443, "health-probe": 8081}
JOBSET_METRICS_SERVICE = {"labels": {"app.kubernetes.io/name": "jobset", "app.kubernetes.io/instance": "jobset",
                                     "app.kubernetes.io/component": "controller"}, "ports": {"https": 8443}}
# (namespace, pod labels, container ports, metrics reader ClusterRole) per https target.
HTTPS_TARGETS = {
    "kueue": (charts.KUEUE.namespace, KUEUE_MANAGER_POD, KUEUE_MANAGER_PORTS, "kueue-metrics-reader"),
    "jobset": (charts.JOBSET.namespace, JOBSET_CONTROLLER_POD, JOBSET_CONTROLLER_PORTS, "jobset-metrics-reader"),
}


def _https_scrape_problems(objs: list[dict[str, Any]], target: str) -> list[str]:
    """Follows what GMP's collector and controller-runtime's metrics filter do with the target's
    PodMonitoring: select the manager pod and port, read the token Secret (same namespace, the
    collector's own RBAC), and send a token whose account may GET /metrics (the chart's reader)."""
    namespace, pod, ports, reader = HTTPS_TARGETS[target]
    def find(kind: str, name: str | None = None, namespace: str | None = None) -> list[dict[str, Any]]:
        return [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
                and (namespace is None or o["metadata"].get("namespace") == namespace)]
    monitors = find("PodMonitoring", namespace=namespace)
    if len(monitors) != 1:
        return [f"no PodMonitoring in {target}'s namespace"]
    monitor = monitors[0]
    ns = monitor["metadata"]["namespace"]
    problems = []
    if any(pod.get(k) != v for k, v in monitor["spec"]["selector"]["matchLabels"].items()):
        problems.append(f"the selector misses {target}'s manager pod")
    [endpoint] = monitor["spec"]["endpoints"]
    if ports.get(endpoint["port"]) != 8443 or endpoint.get("scheme") != "https":
        problems.append("not the https metrics port")
    ref = endpoint["authorization"]["credentials"]["secret"]
    if ref.get("namespace", ns) != ns:
        problems.append("the token Secret is in another namespace (GMP refuses it)")
    secrets = find("Secret", ref["name"], ns)
    if not secrets or secrets[0].get("type") != "kubernetes.io/service-account-token" or ref["key"] != "token":
        return [*problems, "no service-account-token Secret with key token"]
    account = secrets[0]["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    if not find("ServiceAccount", account, ns):
        problems.append("the token's ServiceAccount is missing")
    readers = [b for b in find("ClusterRoleBinding") if b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader}
               and {"kind": "ServiceAccount", "name": account, "namespace": ns} in b["subjects"]]
    if not readers:
        problems.append(f"the token's account may not GET {target}'s /metrics")
    roles = {r["metadata"]["name"] for r in find("Role", namespace=ns)
             if any("secrets" in rule["resources"] and {"get", "watch"} <= set(rule["verbs"])
                    and ref["name"] in rule.get("resourceNames", [ref["name"]]) for rule in r["rules"])}
    collector = {"kind": "ServiceAccount", "name": "collector", "namespace": "gmp-system"}
    if not any(b["roleRef"]["kind"] == "Role" and b["roleRef"]["name"] in roles and collector in b["subjects"]
               for b in find("RoleBinding", namespace=ns)):
        problems.append("GMP's collector may not read the token Secret")
    return problems


@pytest.mark.parametrize("target", sorted(HTTPS_TARGETS))
def test_gke_scrapes_the_https_controller_with_a_token_that_may_read_its_metrics(target: str) -> None:
    objs = _stack("dev-gcp").kubernetes_objects()
    assert _https_scrape_problems(objs, target) == []
    [monitor] = [o for o in objs if o["kind"] == "PodMonitoring" and o["metadata"]["namespace"] == HTTPS_TARGETS[target][0]]
    jsonschema.validate(monitor, crd_schema(monitor["apiVersion"], monitor["kind"]))


@pytest.mark.parametrize("target", sorted(HTTPS_TARGETS))
def test_without_the_collector_s_secret_access_the_scrape_is_reported(target: str) -> None:
    objs = [o for o in _stack("dev-gcp").kubernetes_objects()
            if o["kind"] != "RoleBinding" or "collector" not in str(o["subjects"]) or o["metadata"]["namespace"] != HTTPS_TARGETS[target][0]]
    assert _https_scrape_problems(objs, target) == ["GMP's collector may not read the token Secret"]


@pytest.mark.parametrize("target", sorted(HTTPS_TARGETS))
def test_without_the_metrics_reader_binding_the_scrape_is_reported(target: str) -> None:
    objs = [o for o in _stack("dev-gcp").kubernetes_objects() if o["kind"] != "ClusterRoleBinding" or f"{target}-scraper" not in o["metadata"]["name"]]
    assert _https_scrape_problems(objs, target) == [f"the token's account may not GET {target}'s /metrics"]


def _chart_grants_prometheus_get_metrics(values: dict[str, Any]) -> bool:
    """kube-prometheus-stack-88.5.3 templates/prometheus/clusterrole.yaml grants nonResourceURLs
    /metrics get, and clusterrolebinding.yaml binds it to Prometheus's account, when
    prometheus.enabled and global.rbac.create (both true by default)."""
    return values.get("prometheus", {}).get("enabled", True) and values.get("global", {}).get("rbac", {}).get("create", True)


def _jobset_service_monitor_problems(objs: list[dict[str, Any]], values: dict[str, Any]) -> list[str]:
    """What the operator and JobSet's metrics filter do with the chart's JobSet ServiceMonitor:
    select the metrics Service in JobSet's namespace by its labels and its https port, send
    Prometheus's own token, whose account must be allowed GET /metrics (the chart's own
    ClusterRole, from its values)."""
    monitors = [o for o in objs if o["kind"] == "ServiceMonitor" and o["metadata"].get("namespace") == charts.JOBSET.namespace]
    if len(monitors) != 1:
        return ["no ServiceMonitor in JobSet's namespace"]
    spec = monitors[0]["spec"]
    problems = []
    if any(JOBSET_METRICS_SERVICE["labels"].get(k) != v for k, v in spec["selector"]["matchLabels"].items()):
        problems.append("the selector misses JobSet's metrics Service")
    [endpoint] = spec["endpoints"]
    if JOBSET_METRICS_SERVICE["ports"].get(endpoint["port"]) != 8443 or endpoint.get("scheme") != "https":
        problems.append("not the https metrics port")
    if endpoint.get("bearerTokenFile") != "/var/run/secrets/kubernetes.io/serviceaccount/token":
        problems.append("no token: the metrics filter refuses the scrape")
    if not _chart_grants_prometheus_get_metrics(values):
        problems.append("Prometheus's account may not GET JobSet's /metrics")
    return problems


def _chart_values(synthesis: synth.Synthesis) -> dict[str, Any]:
    [release] = [r for r in synthesis.by_type(HELM) if r["inputs"]["name"] == charts.KUBE_PROMETHEUS_STACK.name]
    return release["inputs"]["values"]


def test_the_chart_s_prometheus_scrapes_jobset_s_controller_with_its_own_token() -> None:
    synthesis = _stack("dev-aws")
    objs = synthesis.kubernetes_objects()
    assert _jobset_service_monitor_problems(objs, _chart_values(synthesis)) == []
    [monitor] = [o for o in objs if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == "jobset"]
    jsonschema.validate(monitor, crd_schema(monitor["apiVersion"], monitor["kind"]))


def test_without_the_chart_s_rbac_the_jobset_scrape_is_reported() -> None:
    synthesis = _stack("dev-aws")
    values = {**_chart_values(synthesis), "global": {"rbac": {"create": False}}}
    assert _jobset_service_monitor_problems(synthesis.kubernetes_objects(), values) == ["Prometheus's account may not GET JobSet's /metrics"]


def test_the_chart_backend_binds_no_metrics_reader_role_the_chart_already_grants() -> None:
    objs = _stack("dev-aws").kubernetes_objects()
    assert [o["metadata"]["name"] for o in objs if o["kind"] == "ClusterRoleBinding" and "metrics" in o["roleRef"]["name"]] == []


def test_gke_with_the_chart_runs_nvidia_s_exporter_in_the_namespace_its_service_monitor_names() -> None:
    synthesis = _gke_with_the_chart()
    assert charts.DCGM_EXPORTER.name in _releases(synthesis)
    objs = synthesis.kubernetes_objects()
    namespaces = {o["metadata"]["name"] for o in objs if o["kind"] == "Namespace"}
    [monitor] = [o for o in objs if o["kind"] == "ServiceMonitor" and o["metadata"]["name"] == "dcgm-exporter"]
    assert monitor["metadata"]["namespace"] in namespaces


def test_gke_with_the_chart_leaves_gke_s_dcgm_package_off_so_one_collector_reads_each_gpu() -> None:
    [cluster] = _gke_with_the_chart().by_type("gcp:container/cluster:Cluster")
    config = cluster["inputs"].get("monitoringConfig") or {}
    assert "DCGM" not in config.get("enableComponents", [])


def test_nvidia_s_exporter_on_gke_reads_the_driver_gke_installs_on_the_host() -> None:
    [release] = [r for r in _gke_with_the_chart().by_type(HELM) if r["inputs"]["name"] == charts.DCGM_EXPORTER.name]
    values = release["inputs"]["values"]
    volume = {"name": "nvidia-install-dir-host", "hostPath": "/home/kubernetes/bin/nvidia"}
    assert volume in values["extraHostVolumes"]
    assert {"name": volume["name"], "mountPath": "/usr/local/nvidia", "readOnly": True} in values["extraVolumeMounts"]
    assert {"name": "LD_LIBRARY_PATH", "value": "/usr/local/nvidia/lib64"} in values["extraEnv"]
    keys = json.loads((REPO / "tests/data/charts/dcgm-exporter-4.8.2.keys.json").read_text())
    assert charts.unknown_values_keys(values, keys) == []


def _selectors_outside(rules: dict[str, Any], cluster: str) -> list[str]:
    """GlobalRules add no scope (prometheus-engine@v0.17.2 rules_config.go: an empty label set):
    a selector that does not name the cluster reads every cluster of the project."""
    import promql_parser

    unscoped: list[str] = []
    for group in rules["spec"]["groups"]:
        for rule in group["rules"]:
            def visit(node: object, expr: str = rule["expr"]) -> None:
                if isinstance(node, promql_parser.VectorSelector) and not any(
                    m.name == "cluster_name" and m.op == promql_parser.MatchOp.Equal and m.value == cluster
                    for m in node.matchers.matchers
                ):
                    unscoped.append(expr)

            promql_parser.walk(promql_parser.parse(rule["expr"]), visit)
    return unscoped


def _global_rules() -> dict[str, Any]:
    [rules] = [o for o in _stack("dev-gcp").kubernetes_objects() if o["kind"] == "GlobalRules"]
    return rules


def test_gke_s_global_rules_read_only_this_cluster_s_nodes() -> None:
    [cluster] = _stack("dev-gcp").by_type("gcp:container/cluster:Cluster")
    assert _selectors_outside(_global_rules(), cluster["inputs"]["name"]) == []
    [alert] = [r for g in _global_rules()["spec"]["groups"] for r in g["rules"]]
    assert alert["alert"] == "NodeNotReady"
    assert '__name__="kubernetes.io/node/status_condition"' in alert["expr"] and 'condition="Ready"' in alert["expr"]


def test_a_global_rule_without_the_cluster_matcher_is_reported() -> None:
    wrong = copy.deepcopy(_global_rules())
    wrong["spec"]["groups"][0]["rules"][0]["expr"] = 'max({__name__="kubernetes.io/node/status_condition", status="False"}) > 0'
    [cluster] = _stack("dev-gcp").by_type("gcp:container/cluster:Cluster")
    assert _selectors_outside(wrong, cluster["inputs"]["name"]) == [wrong["spec"]["groups"][0]["rules"][0]["expr"]]


def test_gke_with_the_chart_declares_no_gmp_rules() -> None:
    kinds = _kinds(_gke_with_the_chart())
    assert not {"GlobalRules", "ClusterRules"} & kinds and "PrometheusRule" in kinds


def test_gke_with_the_chart_declares_operator_objects_that_validate_against_their_crds() -> None:
    custom = [o for o in _gke_with_the_chart().kubernetes_objects() if o["apiVersion"] == "monitoring.coreos.com/v1"]
    assert {o["kind"] for o in custom} == {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    for obj in custom:
        jsonschema.validate(obj, crd_schema(obj["apiVersion"], obj["kind"]))
