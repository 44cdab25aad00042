"""Which trainer pods the scrape objects select, read the way the Prometheus Operator and GMP read
a label selector, against the pods JobSet makes of a rendered job."""

from __future__ import annotations

from typing import Any

from k8s_support import REPO

from components.jobs import renderer
from components.observability import dashboards, objects
from infra import stackfile
from obs_support import onprem_rule_groups
from promql_names import metric_names

IMAGE = "ghcr.io/acme/trainer:1.0.0"
NODES = 3


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics (matchLabels AND every matchExpression)."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        present, value = expr["key"] in labels, labels.get(expr["key"])
        op = expr["operator"]
        if (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
        if op == "In" and value not in expr["values"]:
            return False
        if op == "NotIn" and value in expr["values"]:
            return False
    return True


def _job_pods() -> tuple[list[dict[str, str]], dict[str, Any]]:
    """Labels of each pod of a 3-node job: its template's, plus what JobSet and the Indexed Job
    controller add per pod (kubernetes-sigs/jobset@v0.12.0 JobSetNameKey/JobIndexKey,
    batch.kubernetes.io/job-completion-index); and the pod template."""
    spec = stackfile.read("onprem", REPO).spec()
    args = ["--preset", "small", "--max-steps", "100", "--checkpoint-every", "50",
            "--global-batch-size", str(NODES * 8), "--seq-len", "512", "--seed", "1", "--data", "/data/d"]
    jobset = renderer.render(spec, renderer.JobRequest(pool="a100-train", nodes=NODES, gpus_per_node=8, team="research",
                                                        tier="production", image=IMAGE, trainer_args=args))
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    base = dict(template["metadata"].get("labels", {}))
    pods = [
        {**base, objects.JOBSET_NAME_LABEL: jobset["metadata"]["name"], "jobset.sigs.k8s.io/job-index": "0",
         "batch.kubernetes.io/job-completion-index": str(index)}
        for index in range(NODES)
    ]
    return pods, template


def _trainer_selectors() -> list[dict[str, Any]]:
    operator = [o for o in objects.operator_scrape_objects() if o["kind"] == "PodMonitor"]
    gmp = [o for o in objects.gmp_scrape_objects() if o["kind"] == "ClusterPodMonitoring"]
    assert len(operator) == 1 and len(gmp) == 1
    return [operator[0]["spec"]["selector"], gmp[0]["spec"]["selector"]]


def test_every_pod_of_a_job_is_scraped_since_any_of_them_may_hold_rank_zero() -> None:
    pods, _ = _job_pods()
    for selector in _trainer_selectors():
        assert [_matches(selector, labels) for labels in pods] == [True] * NODES


def test_pods_outside_any_jobset_are_not_scraped() -> None:
    for selector in _trainer_selectors():
        assert not _matches(selector, {"app": "something-else"})


def test_every_scraped_pod_declares_the_named_metrics_port() -> None:
    _, template = _job_pods()
    ports = [p for c in template["spec"]["containers"] for p in c.get("ports", [])]
    assert {"name": objects.TRAINER_PORT_NAME, "containerPort": objects.TRAINER_METRICS_PORT} in ports


def test_no_rule_or_dashboard_reads_up_which_is_zero_for_pods_without_rank_zero() -> None:
    exprs = [r["expr"] for g in onprem_rule_groups() for r in g["rules"]]
    exprs += [q for board in dashboards.BOARDS for q in dashboards.queries(board)]
    assert exprs and all("up" not in metric_names(expr) for expr in exprs)
