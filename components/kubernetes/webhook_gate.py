"""A Job that completes once Kueue's webhook answers, for Kueue's custom resources to wait on.

Kueue's webhook can refuse connections for a while after its Deployment is available
(kubernetes-sigs/kueue#12008), and every Kueue object goes through it, so creating them as soon
as the Helm release is ready fails now and then. The Pulumi Kubernetes provider waits for a
batch/v1 Job until its `Complete` condition is True (pulumi-kubernetes API docs, batch/v1 Job),
so objects that depend on this Job are created only once the webhook has answered a TLS request.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components.facts import charts

# The chart's webhook Service: `<fullname>-webhook-service`, port 443 (kueue chart 0.19.2,
# templates/webhook/service.yaml and values `webhookService.ports`); the fullname is the
# release's name, which is the chart's.
WEBHOOK_SERVICE = f"{charts.KUEUE.name}-webhook-service"
# A small image with a shell and curl, pinned (Docker Hub curlimages/curl).
CURL_IMAGE = "curlimages/curl:8.11.1"
ATTEMPTS = 60
INTERVAL_S = 5
GATE_NAME = "kueue-webhook-ready"
GATE_UID = 65532


def webhook_url(namespace: str) -> str:
    return f"https://{WEBHOOK_SERVICE}.{namespace}.svc:443/"


def gate_script(namespace: str) -> str:
    """Any TLS answer (even a 404) means the webhook server serves; the certificate is Kueue's
    own, so it is not verified here."""
    return (
        f"for i in $(seq {ATTEMPTS}); do "
        f"curl -sk -o /dev/null --max-time 5 {webhook_url(namespace)} && exit 0; "
        f"sleep {INTERVAL_S}; done; "
        f"echo 'kueue webhook did not answer in {ATTEMPTS * INTERVAL_S}s' >&2; exit 1"
    )


def gate_job(resource_name: str, namespace: str, opts: pulumi.ResourceOptions) -> k8s.batch.v1.Job:
    """The gate, one shape for every stack that installs Kueue (a worker's layer, a fleet
    manager): `opts` carries its dependency on the Kueue release. A Job's template is immutable,
    so a changed one is replaced (and runs again), deleted first."""
    return k8s.batch.v1.Job(
        resource_name,
        metadata=k8s.meta.v1.ObjectMetaArgs(name=GATE_NAME, namespace=namespace),
        spec=k8s.batch.v1.JobSpecArgs(
            backoff_limit=0,
            template=k8s.core.v1.PodTemplateSpecArgs(
                spec=k8s.core.v1.PodSpecArgs(
                    restart_policy="Never",
                    security_context=k8s.core.v1.PodSecurityContextArgs(
                        run_as_non_root=True,
                        run_as_user=GATE_UID,
                        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type="RuntimeDefault"),
                    ),
                    containers=[
                        k8s.core.v1.ContainerArgs(
                            name="wait",
                            image=CURL_IMAGE,
                            command=["sh", "-c", gate_script(namespace)],
                            # An upgrade of Kueue changes the template: the Job is replaced
                            # and the gate runs again against the new webhook.
                            env=[k8s.core.v1.EnvVarArgs(name="KUEUE_VERSION", value=charts.KUEUE.version)],
                            resources=k8s.core.v1.ResourceRequirementsArgs(
                                requests={"cpu": "10m", "memory": "16Mi"}, limits={"memory": "32Mi"}
                            ),
                            security_context=k8s.core.v1.SecurityContextArgs(
                                allow_privilege_escalation=False,
                                capabilities=k8s.core.v1.CapabilitiesArgs(drop=["ALL"]),
                            ),
                        )
                    ],
                )
            ),
        ),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(replace_on_changes=["spec"], delete_before_replace=True)),
    )
