"""The regions a stack may name, per cloud: data, so a typo in `aws:region` or `gcp:region` is an
error at the stack file instead of a failure (or a fictional zone list) at deploy time.

AWS: every region of the commercial, GovCloud, China and European Sovereign Cloud partitions (AWS
"Regions and Availability Zones" list, late 2026; botocore's endpoint data carries the same
names). Availability-zone letters are assigned per account in the older regions, so zones are
checked by their form only (components.spec.aws_rules).

GCP: every Compute Engine region with its zones (Compute Engine "Regions and zones" page, late
2026), including the AI zones Google offers for accelerators (`us-central1-ai1a`,
`us-south1-ai1b`). GCP zone names are the same in every project, so zones are checked exactly.
"""

from __future__ import annotations

AWS_REGIONS: frozenset[str] = frozenset(
    {
        "us-east-1", "us-east-2", "us-west-1", "us-west-2",
        "af-south-1",
        "ap-east-1", "ap-east-2",
        "ap-south-1", "ap-south-2",
        "ap-northeast-1", "ap-northeast-2", "ap-northeast-3",
        "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4",
        "ap-southeast-5", "ap-southeast-6", "ap-southeast-7",
        "ca-central-1", "ca-west-1",
        "eu-central-1", "eu-central-2",
        "eu-west-1", "eu-west-2", "eu-west-3",
        "eu-south-1", "eu-south-2",
        "eu-north-1",
        "il-central-1",
        "me-south-1", "me-central-1",
        "mx-central-1",
        "sa-east-1",
        "us-gov-east-1", "us-gov-west-1",
        "cn-north-1", "cn-northwest-1",
        "eusc-de-east-1",
    }
)


def _zones(region: str, letters: str, *extra: str) -> tuple[str, ...]:
    return tuple(f"{region}-{letter}" for letter in letters) + extra


GCP_ZONES: dict[str, tuple[str, ...]] = {
    region: zones
    for region, zones in (
        ("africa-south1", _zones("africa-south1", "abc")),
        ("asia-east1", _zones("asia-east1", "abc")),
        ("asia-east2", _zones("asia-east2", "abc")),
        ("asia-northeast1", _zones("asia-northeast1", "abc")),
        ("asia-northeast2", _zones("asia-northeast2", "abc")),
        ("asia-northeast3", _zones("asia-northeast3", "abc")),
        ("asia-south1", _zones("asia-south1", "abc")),
        ("asia-south2", _zones("asia-south2", "abc")),
        ("asia-southeast1", _zones("asia-southeast1", "abc")),
        ("asia-southeast2", _zones("asia-southeast2", "abc")),
        ("australia-southeast1", _zones("australia-southeast1", "abc")),
        ("australia-southeast2", _zones("australia-southeast2", "abc")),
        ("europe-central2", _zones("europe-central2", "abc")),
        ("europe-north1", _zones("europe-north1", "abc")),
        ("europe-north2", _zones("europe-north2", "abc")),
        ("europe-southwest1", _zones("europe-southwest1", "abc")),
        ("europe-west1", _zones("europe-west1", "bcd")),
        ("europe-west2", _zones("europe-west2", "abc")),
        ("europe-west3", _zones("europe-west3", "abc")),
        ("europe-west4", _zones("europe-west4", "abc")),
        ("europe-west6", _zones("europe-west6", "abc")),
        ("europe-west8", _zones("europe-west8", "abc")),
        ("europe-west9", _zones("europe-west9", "abc")),
        ("europe-west10", _zones("europe-west10", "abc")),
        ("europe-west12", _zones("europe-west12", "abc")),
        ("me-central1", _zones("me-central1", "abc")),
        ("me-central2", _zones("me-central2", "abc")),
        ("me-west1", _zones("me-west1", "abc")),
        ("northamerica-northeast1", _zones("northamerica-northeast1", "abc")),
        ("northamerica-northeast2", _zones("northamerica-northeast2", "abc")),
        ("northamerica-south1", _zones("northamerica-south1", "abc")),
        ("southamerica-east1", _zones("southamerica-east1", "abc")),
        ("southamerica-west1", _zones("southamerica-west1", "abc")),
        ("us-central1", _zones("us-central1", "abcf", "us-central1-ai1a")),
        ("us-east1", _zones("us-east1", "bcd")),
        ("us-east4", _zones("us-east4", "abc")),
        ("us-east5", _zones("us-east5", "abc")),
        ("us-south1", _zones("us-south1", "abc", "us-south1-ai1b")),
        ("us-west1", _zones("us-west1", "abc")),
        ("us-west2", _zones("us-west2", "abc")),
        ("us-west3", _zones("us-west3", "abc")),
        ("us-west4", _zones("us-west4", "abc")),
    )
}


def regions(cloud: str) -> list[str]:
    """The region names of `cloud` ("aws" or "gcp"), sorted."""
    return sorted(AWS_REGIONS if cloud == "aws" else GCP_ZONES)
