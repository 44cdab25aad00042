"""What the mock engine answers for the outputs a real provider would compute.

One table, keyed by type token (resources) or function token (invokes), so each wing adds
the outputs its program reads (endpoints, ARNs, zones) in one place. Strings may use
`{name}` (the resource's name), `{region}` (the stack's aws:region or gcp:region) and
`{project}` (the stack's gcp:project).
Everything here is visibly fake: account 000000000000, hosts under `.mock.internal`.
"""

from __future__ import annotations

from typing import Any

import pulumi

MOCK_ACCOUNT = "000000000000"

RESOURCE_OUTPUTS: dict[str, dict[str, Any]] = {
    "aws:eks/cluster:Cluster": {
        "endpoint": "https://{name}.eks.{region}.mock.internal",
        "certificateAuthority": {"data": "bW9jay1jbHVzdGVyLWNh"},
        "identities": [{"oidcs": [{"issuer": "https://oidc.eks.{region}.mock.internal/id/{name}"}]}],
        "version": "1.35",
        "vpcConfig": {"clusterSecurityGroupId": "sg-{name}-cluster"},
    },
    # A managed node group's ASG: eks-<node group name>-<uuid>.
    "aws:eks/nodeGroup:NodeGroup": {
        "resources": [{"autoscalingGroups": [{"name": "eks-{name}-00000000-0000-0000-0000-000000000000"}]}],
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {"latestVersion": 1},
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": {
        "arn": "arn:aws:iam::" + MOCK_ACCOUNT + ":oidc-provider/oidc.eks.{region}.mock.internal/id/{name}",
    },
    "aws:iam/role:Role": {"arn": "arn:aws:iam::" + MOCK_ACCOUNT + ":role/{name}"},
    "aws:kms/key:Key": {"arn": "arn:aws:kms:{region}:" + MOCK_ACCOUNT + ":key/{name}", "keyId": "{name}"},
    "aws:ecr/repository:Repository": {"repositoryUrl": MOCK_ACCOUNT + ".dkr.ecr.{region}.mock.internal/{name}"},
    # Data buckets are declared under their bucket name.
    "aws:s3/bucket:Bucket": {"arn": "arn:aws:s3:::{name}"},
    "docker-build:index:Image": {"ref": "registry.mock.internal/{name}@sha256:" + "0" * 64, "digest": "sha256:" + "0" * 64},
    "gcp:container/cluster:Cluster": {
        "endpoint": "10.0.0.2",
        "masterAuth": {"clusterCaCertificate": "bW9jay1jbHVzdGVyLWNh"},
    },
    # The GCP wing names each of these resources after its cloud name (account id, repository id).
    "gcp:serviceaccount/account:Account": {
        "email": "{name}@{project}.iam.gserviceaccount.com",
        "member": "serviceAccount:{name}@{project}.iam.gserviceaccount.com",
        "name": "projects/{project}/serviceAccounts/{name}@{project}.iam.gserviceaccount.com",
    },
    "gcp:artifactregistry/repository:Repository": {
        "registryUri": "{region}-docker.pkg.dev/{project}/{name}",
    },
}

# Outputs every resource of a package gets unless the table above says otherwise.
PACKAGE_OUTPUTS: dict[str, dict[str, Any]] = {
    "aws": {"arn": "arn:aws:mock:{region}:" + MOCK_ACCOUNT + ":{name}"},
    "gcp": {"selfLink": "https://mock.internal/gcp/{name}"},
}

CALL_RESULTS: dict[str, dict[str, Any]] = {
    "aws:index/getAvailabilityZones:getAvailabilityZones": {
        "names": ["{region}a", "{region}b", "{region}c"],
        "zoneIds": ["mock-az1", "mock-az2", "mock-az3"],
    },
    "aws:index/getCallerIdentity:getCallerIdentity": {
        "accountId": MOCK_ACCOUNT,
        "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:user/mock",
        "userId": "MOCKUSER",
    },
    "aws:index/getPartition:getPartition": {"partition": "aws", "dnsSuffix": "amazonaws.com"},
    "aws:index/getRegion:getRegion": {"name": "{region}", "region": "{region}"},
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": {
        "proxyEndpoint": "https://" + MOCK_ACCOUNT + ".dkr.ecr.{region}.mock.internal",
        "userName": "AWS",
        "password": "mock-ecr-token",
        "authorizationToken": "bW9jaw==",
    },
    "gcp:organizations/getClientConfig:getClientConfig": {"accessToken": "mock-oauth-token", "project": "mock"},
    "gcp:compute/getZones:getZones": {"names": ["{region}-a", "{region}-b", "{region}-c"]},
}


# EC2 instance type offerings by availability zone, as zone letters of the stack's region
# (aws.ec2.get_instance_type_offerings with location type availability-zone). Fake, like everything
# here, but shaped like real regions: the largest GPU types are offered in a few zones only. Types
# not listed are offered in zones a to f.
INSTANCE_TYPE_ZONES: dict[str, str] = {
    "p4d.24xlarge": "ab",
    "p4de.24xlarge": "b",
    "p5.48xlarge": "bc",
    "p5e.48xlarge": "c",
    "p5en.48xlarge": "c",
    "p6-b200.48xlarge": "b",
}
_EVERY_ZONE = "abcdef"
_OFFERINGS = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"


def _offerings(args: dict[str, Any]) -> dict[str, Any]:
    """The zones offering the instance types an `instance-type` filter names."""
    types = [v for f in args.get("filters") or [] if f.get("name") == "instance-type" for v in f.get("values", [])]
    region = _region()
    locations = sorted({f"{region}{letter}" for t in types for letter in INSTANCE_TYPE_ZONES.get(t, _EVERY_ZONE)})
    return {"locations": locations, "instanceTypes": [t for t in types for _ in INSTANCE_TYPE_ZONES.get(t, _EVERY_ZONE)],
            "locationTypes": ["availability-zone"] * len(locations), "id": region}


def _region() -> str:
    return pulumi.Config("aws").get("region") or pulumi.Config("gcp").get("region") or "mock-region-1"


def _project() -> str:
    return pulumi.Config("gcp").get("project") or "mock-project"


def _fill(value: Any, name: str, region: str) -> Any:
    if isinstance(value, str):
        return value.replace("{name}", name).replace("{region}", region).replace("{project}", _project())
    if isinstance(value, list):
        return [_fill(v, name, region) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, name, region) for k, v in value.items()}
    return value


def resource_outputs(type_token: str, name: str) -> dict[str, Any]:
    package = type_token.split(":", 1)[0]
    template = {**PACKAGE_OUTPUTS.get(package, {}), **RESOURCE_OUTPUTS.get(type_token, {})}
    return _fill(template, name, _region())


def call_result(token: str, args: dict[str, Any]) -> dict[str, Any]:
    if token == _OFFERINGS:
        return _offerings(args)
    return _fill(CALL_RESULTS.get(token, {}), "", _region())
