"""Names derived from the spec, shared by the wings, the Kubernetes layer and `gpu-platform job`.

A job renders offline from the stack file alone, so every name it needs (bucket, namespace,
service account) is a pure function of the spec, never read back from the cloud.
"""

from __future__ import annotations

from components.spec import PlatformSpec

# The Kubernetes service account training pods run as, in each team namespace; the wings bind
# it to the cloud identity that may use the bucket (IRSA on AWS, Workload Identity on GCP).
TRAINER_SERVICE_ACCOUNT = "trainer"
# The trainer image's user (training_images/Dockerfile: useradd --uid 10001): jobs run as it and
# the shared data volumes are owned by it.
TRAINER_UID = 10001

# The team a stack without `scheduling.teams` runs as: one queue in the `default` namespace,
# holding every GPU (components.kubernetes.queues).
DEFAULT_TEAM = "default"

# The PersistentVolumeClaim each team namespace holds for jobs' /data (checkpoints, metrics) on
# clusters without a bucket mount: the Kubernetes layer creates it where the wing hands over a
# shared file system (EFS on AWS); on existing clusters the operator provides it.
DATA_CLAIM = "training-data"


def bucket_name(spec: PlatformSpec) -> str:
    return spec.storage.bucket_name or f"{spec.cluster.name}-{spec.environment}-training"


def team_namespace(team: str) -> str:
    return team


def team_namespaces(spec: PlatformSpec) -> list[str]:
    """Where the teams' jobs run: a namespace per team, or `default` for a stack without teams."""
    return [team_namespace(team.name) for team in spec.scheduling.teams] or [team_namespace(DEFAULT_TEAM)]


def local_queue_name(team: str) -> str:
    """The LocalQueue a team's jobs name in their `kueue.x-k8s.io/queue-name` label."""
    return team


def resource_name(spec: PlatformSpec, *parts: str) -> str:
    """`<cluster>-<part>-...`: the prefix every cloud and Kubernetes resource name carries."""
    return "-".join((spec.cluster.name, *parts))
