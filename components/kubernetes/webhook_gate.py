"""A Job that completes once Kueue's webhook answers, for Kueue's custom resources to wait on.

Kueue's webhook can refuse connections for a while after its Deployment is available
(kubernetes-sigs/kueue#12008), and every Kueue object goes through it, so creating them as soon
as the Helm release is ready fails now and then. The Pulumi Kubernetes provider waits for a
batch/v1 Job until its `Complete` condition is True (pulumi-kubernetes API docs, batch/v1 Job),
so objects that depend on this Job are created only once the webhook has answered a TLS request.
"""

from __future__ import annotations

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
