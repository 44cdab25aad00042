"""Where training reads and writes: an image registry and a bucket for datasets and checkpoints."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from components.trainer_image import RegistryLogin
from components import naming
from components.aws import iam, plan
from components.aws.cluster import EksCluster
from components.spec import PlatformSpec

# Old checkpoint versions (a step folder rewritten, a run resumed over) are kept this long.
NONCURRENT_CHECKPOINT_DAYS = 30
INCOMPLETE_UPLOAD_DAYS = 7


class TrainingStorage(pulumi.ComponentResource):
    """ECR for trainer images; a versioned, KMS-encrypted, private, TLS-only S3 bucket; and an IRSA
    role per team for its trainer, which can use its team's prefix of that bucket and nothing else
    (components.tenancy)."""

    repository_url: pulumi.Output[str]
    registry: RegistryLogin
    bucket_name: pulumi.Output[str]
    # The key of datasets and checkpoints, for whatever else holds training data.
    data_key_arn: pulumi.Output[str]
    # Per team namespace, the ARN of the role its `trainer` service account assumes.
    trainer_role_arns: dict[str, pulumi.Output[str]]

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        cluster: EksCluster,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-platform:aws:TrainingStorage", name, None, opts)
        prod = spec.environment == "prod"
        child = pulumi.ResourceOptions(parent=self)
        kept = pulumi.ResourceOptions(parent=self, protect=prod)

        repository = aws.ecr.Repository(
            f"{name}-trainer",
            name=f"{spec.cluster.name}/trainer",
            image_tag_mutability="IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="AES256")],
            # Images rebuild from the Dockerfile; outside prod a stack may go with its images.
            force_delete=not prod,
            opts=child,
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-trainer", repository=repository.name, policy=plan.ecr_lifecycle_policy(), opts=child
        )
        self.repository_url = repository.repository_url
        # Short-lived ECR push credentials, read at deploy time (ECR GetAuthorizationToken).
        token = aws.ecr.get_authorization_token_output(registry_id=repository.registry_id)
        self.registry = RegistryLogin(
            repository_url=repository.repository_url,
            address=token.proxy_endpoint,
            username=token.user_name,
            password=pulumi.Output.secret(token.password),
        )

        key = aws.kms.Key(
            f"{name}-data",
            description=f"Datasets and checkpoints of {spec.cluster.name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            opts=kept,
        )
        self.data_key_arn = key.arn
        bucket_name = naming.bucket_name(spec)
        bucket = aws.s3.Bucket(bucket_name, bucket=bucket_name, force_destroy=False, opts=kept)
        aws.s3.BucketOwnershipControls(
            bucket_name,
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        aws.s3.BucketPublicAccessBlock(
            bucket_name,
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            bucket_name,
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            bucket_name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="aws:kms", kms_master_key_id=key.arn
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketPolicy(
            bucket_name,
            bucket=bucket.id,
            policy=bucket.arn.apply(lambda arn: json.dumps(iam.tls_only_bucket_policy(arn))),
            opts=child,
        )
        aws.s3.BucketLifecycleConfiguration(
            bucket_name,
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-old-checkpoint-versions",
                    status="Enabled",
                    # The whole bucket: trainers write under teams/<team>/ (or anywhere, without
                    # teams) and admins under datasets/; every overwritten version expires, as on GKE.
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=NONCURRENT_CHECKPOINT_DAYS
                    ),
                ),
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="abort-incomplete-uploads",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=INCOMPLETE_UPLOAD_DAYS
                    ),
                ),
            ],
            # Noncurrent-version rules act on a versioned bucket.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        self.bucket_name = bucket.bucket

        self.trainer_role_arns = {}
        for identity in plan.trainer_identities(spec):
            role = cluster.irsa_role(f"{name}-{identity.resource_suffix}", [identity.subject], child)
            aws.iam.RolePolicy(
                f"{name}-{identity.resource_suffix}",
                role=role.id,
                policy=pulumi.Output.all(bucket.arn, key.arn).apply(
                    lambda arns, team=identity.team: json.dumps(iam.trainer_policy(arns[0], arns[1], team))
                ),
                opts=child,
            )
            self.trainer_role_arns[identity.namespace] = role.arn
        self.register_outputs(
            {"registryUrl": self.repository_url, "bucketName": self.bucket_name, "trainerRoleArns": self.trainer_role_arns}
        )
