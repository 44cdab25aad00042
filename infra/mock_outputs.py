"""What the mock engine answers for the outputs a real provider would compute.

One table, keyed by type token (resources) or function token (invokes), so each wing adds
the outputs its program reads (endpoints, ARNs, zones) in one place. Strings may use
`{name}` (the resource's name), `{region}` (the stack's aws:region or gcp:region),
`{project}` (the stack's gcp:project) and `{inputs.PATH}` (a declared input, `tags.0` for the
first tag; the resource's name where the input is not declared, as Pulumi autonames it). A cloud
derives names and URLs from what was declared, so the mock does too: an ECR repository declared
as `ml-dev/trainer` answers `.../ml-dev/trainer`, whatever its Pulumi name.
Everything here is visibly fake: account 000000000000, hosts under `.mock.internal`.
"""

from __future__ import annotations

import re
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
    # An unnamed role is named after its resource (Pulumi auto-naming adds a suffix in the cloud).
    "aws:iam/role:Role": {"arn": "arn:aws:iam::" + MOCK_ACCOUNT + ":role/{name}", "name": "{inputs.name}"},
    # AMP: arn:<partition>:aps:<region>:<account>:workspace/<id>, and the endpoint ending in "/".
    "aws:amp/workspace:Workspace": {
        "arn": "arn:aws:aps:{region}:" + MOCK_ACCOUNT + ":workspace/ws-{name}",
        "prometheusEndpoint": "https://aps-workspaces.{region}.mock.internal/workspaces/ws-{name}/",
    },
    "aws:kms/key:Key": {"arn": "arn:aws:kms:{region}:" + MOCK_ACCOUNT + ":key/{name}", "keyId": "{name}"},
    # <account>.dkr.ecr.<region>.amazonaws.com/<repository name> (ECR Repository.repositoryUri).
    "aws:ecr/repository:Repository": {
        "repositoryUrl": MOCK_ACCOUNT + ".dkr.ecr.{region}.mock.internal/{inputs.name}",
        "arn": "arn:aws:ecr:{region}:" + MOCK_ACCOUNT + ":repository/{inputs.name}",
    },
    "aws:s3/bucket:Bucket": {"arn": "arn:aws:s3:::{inputs.bucket}"},
    # arn:aws:elasticfilesystem:<region>:<account>:file-system/<id> and access-point/<id> (EFS API).
    "aws:efs/fileSystem:FileSystem": {"arn": "arn:aws:elasticfilesystem:{region}:" + MOCK_ACCOUNT + ":file-system/{name}-id"},
    "aws:efs/accessPoint:AccessPoint": {"arn": "arn:aws:elasticfilesystem:{region}:" + MOCK_ACCOUNT + ":access-point/{name}-id"},
    "aws:sqs/queue:Queue": {"arn": "arn:aws:sqs:{region}:" + MOCK_ACCOUNT + ":{inputs.name}"},
    # docker-build Image.ref: "a single fully-qualified tag including the build's digest" once pushed.
    "docker-build:index:Image": {"ref": "{inputs.tags.0}@sha256:" + "0" * 64, "digest": "sha256:" + "0" * 64},
    "gcp:container/cluster:Cluster": {
        "endpoint": "10.0.0.2",
        "masterAuth": {"clusterCaCertificate": "bW9jay1jbHVzdGVyLWNh"},
    },
    "gcp:serviceaccount/account:Account": {
        "email": "{inputs.accountId}@{project}.iam.gserviceaccount.com",
        "member": "serviceAccount:{inputs.accountId}@{project}.iam.gserviceaccount.com",
        "name": "projects/{project}/serviceAccounts/{inputs.accountId}@{project}.iam.gserviceaccount.com",
    },
    # <location>-docker.pkg.dev/<project>/<repository id> (Artifact Registry Repository.registryUri).
    "gcp:artifactregistry/repository:Repository": {
        "registryUri": "{region}-docker.pkg.dev/{project}/{inputs.repositoryId}",
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

# Stack references (pulumi:pulumi:StackReference, input `name`): the outputs of the stacks a fleet
# manager names, by fully qualified stack name, and which of them are secret. infra.offline fills
# them from the workers' own synthesis before the manager's program runs; a stack not answered
# has no outputs, as `pulumi` reports for a stack that was never deployed.
STACK_REFERENCE = "pulumi:pulumi:StackReference"
STACK_REFERENCES: dict[str, dict[str, Any]] = {}
STACK_REFERENCE_SECRETS: dict[str, list[str]] = {}
# The token controller fills `data.token` (base64) of a kubernetes.io/service-account-token Secret.
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
MOCK_TOKEN_B64 = "bW9jay1zZXJ2aWNlLWFjY291bnQtdG9rZW4="


def answer_stack_references(outputs: dict[str, dict[str, Any]], secrets: dict[str, list[str]]) -> None:
    """What the mock engine answers for each stack reference until the next call."""
    STACK_REFERENCES.clear()
    STACK_REFERENCES.update(outputs)
    STACK_REFERENCE_SECRETS.clear()
    STACK_REFERENCE_SECRETS.update(secrets)


def _computed(type_token: str, inputs: dict[str, Any]) -> dict[str, Any] | None:
    """Outputs that depend on more than a template: stack references, service account tokens."""
    if type_token == STACK_REFERENCE:
        name = str(inputs.get("name", ""))
        return {"outputs": STACK_REFERENCES.get(name, {}), "secretOutputNames": STACK_REFERENCE_SECRETS.get(name, [])}
    if type_token == "kubernetes:core/v1:Secret" and inputs.get("type") == SERVICE_ACCOUNT_TOKEN:
        return {"data": {"token": MOCK_TOKEN_B64, "ca.crt": "bW9jay1jbHVzdGVyLWNh"}}
    return None
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


_INPUT = re.compile(r"\{inputs\.([A-Za-z0-9_.]+)\}")


def _input(inputs: dict[str, Any], path: str, name: str) -> str:
    """The declared input at `path` (`tags.0`), or `name` where it is not declared."""
    value: Any = inputs
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return name
    return value if isinstance(value, str) else name


def _fill(value: Any, name: str, region: str, inputs: dict[str, Any]) -> Any:
    if isinstance(value, str):
        value = _INPUT.sub(lambda m: _input(inputs, m.group(1), name), value)
        return value.replace("{name}", name).replace("{region}", region).replace("{project}", _project())
    if isinstance(value, list):
        return [_fill(v, name, region, inputs) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, name, region, inputs) for k, v in value.items()}
    return value


def resource_outputs(type_token: str, name: str, inputs: dict[str, Any] | None = None) -> dict[str, Any]:
    computed = _computed(type_token, inputs or {})
    if computed is not None:
        return computed
    package = type_token.split(":", 1)[0]
    template = {**PACKAGE_OUTPUTS.get(package, {}), **RESOURCE_OUTPUTS.get(type_token, {})}
    return _fill(template, name, _region(), inputs or {})


def call_result(token: str, args: dict[str, Any]) -> dict[str, Any]:
    if token == _OFFERINGS:
        return _offerings(args)
    return _fill(CALL_RESULTS.get(token, {}), "", _region(), {})
