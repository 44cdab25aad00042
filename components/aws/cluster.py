"""The EKS control plane, its identities and add-ons, and the small system node group."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import tenancy
from components.aws import iam, plan
from components.aws.nodes import node_launch_template
from components.facts import aws as aws_facts
from components.spec import PlatformSpec

# The system group's AMI: add-ons need no GPU driver.
SYSTEM_AMI_TYPE = "AL2023_x86_64_STANDARD"
SYSTEM_VOLUME_GIB = 50


@dataclass(frozen=True)
class Account:
    """Where the stack deploys: partition (aws, aws-cn, aws-us-gov), region and account id."""

    partition: str
    region: str
    id: str


def _issuer(identities: Sequence[aws.eks.outputs.ClusterIdentity]) -> str:
    oidcs = identities[0].oidcs or []
    return oidcs[0].issuer or ""


class EksCluster(pulumi.ComponentResource):
    """EKS with API access entries, KMS-encrypted secrets, full control-plane logs, IRSA and
    pinned core add-ons; a Kubernetes provider for everything installed on it."""

    cluster: aws.eks.Cluster
    name: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    # Issuer without the scheme: the prefix of IRSA condition keys (`<host>:sub`).
    oidc_issuer_host: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    node_role_arn: pulumi.Output[str]
    system_nodes: aws.eks.NodeGroup
    # Add-ons the rest of the cluster leans on (DNS, pod networking, volumes).
    addons: list[aws.eks.Addon]
    # The IRSA role of each add-on that has one; the EFS CSI driver's is the one identity the file
    # system policy lets mount (components.aws.efs).
    addon_role_arns: dict[str, pulumi.Output[str]]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(
        self,
        name: str,
        spec: PlatformSpec,
        account: Account,
        subnet_ids: list[pulumi.Output[str]],
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("gpu-platform:aws:EksCluster", name, None, opts)
        settings = spec.aws_settings
        prod = spec.environment == "prod"
        child = pulumi.ResourceOptions(parent=self)
        kept = pulumi.ResourceOptions(parent=self, protect=prod)

        # EKS writes control-plane logs here; created first so the retention is ours, not "never".
        logs = aws.cloudwatch.LogGroup(
            f"{name}-control-plane",
            name=f"/aws/eks/{spec.cluster.name}/cluster",
            retention_in_days=plan.log_retention_days(spec.environment),
            opts=child,
        )
        key = aws.kms.Key(
            f"{name}-secrets",
            description=f"Envelope encryption of Kubernetes secrets in EKS cluster {spec.cluster.name}",
            enable_key_rotation=True,
            deletion_window_in_days=30,
            opts=kept,
        )
        aws.kms.Alias(f"{name}-secrets", name=f"alias/{spec.cluster.name}-eks-secrets", target_key_id=key.key_id, opts=child)

        # EKS needs its roles' policies while it creates and deletes what it owns (ENIs, instances):
        # everything that uses a role depends on its attachments, so they exist first and go last
        # (terraform-provider-aws docs, eks_cluster and eks_node_group: depends_on the attachments).
        cluster_role, cluster_policies = self._service_role(
            f"{name}-cluster", "eks.amazonaws.com", aws_facts.CLUSTER_ROLE_POLICIES, account
        )
        encryption = aws.iam.RolePolicy(
            f"{name}-cluster-secrets-key",
            role=cluster_role.id,
            policy=key.arn.apply(lambda arn: json.dumps(iam.cluster_encryption_policy(arn))),
            opts=child,
        )
        public = settings.endpoint_public(spec.environment)
        self.cluster = aws.eks.Cluster(
            name,
            name=spec.cluster.name,
            version=spec.cluster.kubernetes_version,
            role_arn=cluster_role.arn,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=subnet_ids,
                endpoint_private_access=True,
                endpoint_public_access=public,
                public_access_cidrs=settings.endpoint_cidrs() if public else None,
            ),
            access_config=aws.eks.ClusterAccessConfigArgs(
                authentication_mode="API",
                # The identity running `pulumi up` must reach the API to install the GPU layer.
                bootstrap_cluster_creator_admin_permissions=True,
            ),
            # Core add-ons are managed below, at pinned versions, with their own IAM roles.
            bootstrap_self_managed_addons=False,
            encryption_config=aws.eks.ClusterEncryptionConfigArgs(
                resources=["secrets"],
                provider=aws.eks.ClusterEncryptionConfigProviderArgs(key_arn=key.arn),
            ),
            enabled_cluster_log_types=list(aws_facts.CONTROL_PLANE_LOG_TYPES),
            # Explicit, so a version leaving standard support never moves the cluster into paid
            # extended support unasked (EKS CreateCluster upgradePolicy; extended is EKS's default).
            upgrade_policy=aws.eks.ClusterUpgradePolicyArgs(support_type=settings.support_type),
            # EKS refuses DeleteCluster while this is on: docs/aws.md, "Tear down".
            deletion_protection=spec.cluster.deletion_protected(spec.environment),
            opts=pulumi.ResourceOptions(parent=self, protect=prod, depends_on=[logs, encryption, *cluster_policies]),
        )
        self.name = self.cluster.name
        self.security_group_id = self.cluster.vpc_config.apply(lambda c: c.cluster_security_group_id or "")
        self.oidc_issuer = self.cluster.identities.apply(_issuer)
        self.oidc_issuer_host = self.oidc_issuer.apply(lambda issuer: issuer.removeprefix("https://"))
        oidc = aws.iam.OpenIdConnectProvider(
            name,
            url=self.oidc_issuer,
            client_id_lists=[aws_facts.IRSA_AUDIENCE],
            opts=child,
        )
        self.oidc_provider_arn = oidc.arn

        for access in tenancy.eks_access(spec):
            self._access(name, access, account)

        node_role, node_policies = self._service_role(f"{name}-node", "ec2.amazonaws.com", aws_facts.NODE_ROLE_POLICIES, account)
        self.node_role_arn = node_role.arn
        # What a node group must wait for besides its add-ons: its role's policies.
        self.node_role_policies: list[pulumi.Resource] = list(node_policies)
        addon_versions = aws_facts.ADDON_VERSIONS[spec.cluster.kubernetes_version]
        self.addon_role_arns = {}
        # Networking first: nodes only become Ready once the CNI and kube-proxy run.
        networking = [self._addon(name, addon, addon_versions[addon], account) for addon in ("vpc-cni", "kube-proxy")]
        template = node_launch_template(
            f"{name}-system", volume_gib=SYSTEM_VOLUME_GIB, data_device="/dev/xvda", parent=self
        )
        system = settings.system_nodes
        self.system_nodes = aws.eks.NodeGroup(
            f"{name}-system",
            cluster_name=self.cluster.name,
            node_group_name_prefix=f"{spec.cluster.name}-system-",
            node_role_arn=node_role.arn,
            subnet_ids=subnet_ids,
            ami_type=SYSTEM_AMI_TYPE,
            capacity_type="ON_DEMAND",
            instance_types=[system.instance_type],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=system.min_nodes, max_size=system.max_nodes, desired_size=system.min_nodes
            ),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
            labels={plan.SYSTEM_ROLE_LABEL: plan.SYSTEM_ROLE},
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[*networking, *node_policies], ignore_changes=["scalingConfig.desiredSize"]
            ),
        )
        # DNS and volumes need nodes to schedule on.
        after_nodes = pulumi.ResourceOptions(depends_on=[self.system_nodes])
        self.addons = networking + [
            self._addon(name, addon, addon_versions[addon], account, after_nodes)
            for addon in ("coredns", "aws-ebs-csi-driver", "aws-efs-csi-driver")
        ]

        certificate = self.cluster.certificate_authority.apply(lambda ca: ca.data or "")
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.name, self.cluster.endpoint, certificate).apply(
                lambda args: plan.kubeconfig(args[0], args[1], args[2], account.region)
            )
        )
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            enable_server_side_apply=True,
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.addons),
        )
        self.register_outputs(
            {
                "clusterName": self.name,
                "oidcIssuer": self.oidc_issuer,
                "oidcProviderArn": self.oidc_provider_arn,
                "systemNodeGroup": self.system_nodes.node_group_name,
            }
        )

    def _service_role(
        self, name: str, service: str, policies: tuple[str, ...], account: Account
    ) -> tuple[aws.iam.Role, list[aws.iam.RolePolicyAttachment]]:
        """A role `service` assumes, and the attachments of its managed policies."""
        role = aws.iam.Role(
            name,
            assume_role_policy=json.dumps(iam.service_trust_policy(service)),
            opts=pulumi.ResourceOptions(parent=self),
        )
        attachments = [
            aws.iam.RolePolicyAttachment(
                f"{name}-{policy.rsplit('/', 1)[-1]}",
                role=role.name,
                policy_arn=iam.managed_policy_arn(account.partition, policy),
                # Stated, so the synthesis records which role it belongs to (eks-role-policies-first).
                opts=pulumi.ResourceOptions(parent=self, depends_on=[role]),
            )
            for policy in policies
        ]
        return role, attachments

    def irsa_role(self, name: str, subjects: list[str], opts: pulumi.ResourceOptions | None = None) -> aws.iam.Role:
        """A role that exactly `subjects` (system:serviceaccount:<ns>:<sa>) assume through this
        cluster's OIDC provider; `opts` sets its parent."""
        trust = pulumi.Output.all(self.oidc_provider_arn, self.oidc_issuer_host).apply(
            lambda args: json.dumps(iam.irsa_trust_policy(args[0], args[1], subjects))
        )
        return aws.iam.Role(name, assume_role_policy=trust, opts=opts or pulumi.ResourceOptions(parent=self))

    def _addon(
        self,
        name: str,
        addon: str,
        version: str,
        account: Account,
        opts: pulumi.ResourceOptions | None = None,
    ) -> aws.eks.Addon:
        role_arn: pulumi.Output[str] | None = None
        policies: list[pulumi.Resource] = []
        if addon in aws_facts.ADDON_SERVICE_ACCOUNTS:
            subjects = [f"system:serviceaccount:kube-system:{account_name}" for account_name in aws_facts.ADDON_SERVICE_ACCOUNTS[addon]]
            role = self.irsa_role(f"{name}-{addon}", subjects)
            if addon in aws_facts.ADDON_ROLE_POLICIES:
                attachment = aws.iam.RolePolicyAttachment(
                    f"{name}-{addon}",
                    role=role.name,
                    policy_arn=iam.managed_policy_arn(account.partition, aws_facts.ADDON_ROLE_POLICIES[addon]),
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[role]),
                )
                policies.append(attachment)
            role_arn = role.arn
            self.addon_role_arns[addon] = role.arn
        # The VPC CNI's network policy agent: NetworkPolicy objects are only enforced with it
        # (EKS user guide, cni-network-policy-configure); the team namespaces' NFS egress policy
        # depends on it (components.kubernetes.layer).
        configuration = json.dumps(aws_facts.VPC_CNI_CONFIGURATION) if addon == "vpc-cni" else None
        return aws.eks.Addon(
            f"{name}-{addon}",
            cluster_name=self.cluster.name,
            addon_name=addon,
            addon_version=version,
            service_account_role_arn=role_arn,
            configuration_values=configuration,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            opts=pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=self, depends_on=policies), opts),
        )

    def _access(self, name: str, access: tenancy.EksAccess, account: Account) -> None:
        """One IAM principal's access entry (no aws-auth ConfigMap): its teams' Kubernetes groups,
        which the teams' RoleBindings name, and for admins the EKS cluster admin access policy."""
        principal = access.principal_arn.rsplit(":", 1)[-1].replace("/", "-")
        # Admin entries keep the resource names they had before teams had members.
        resource = f"{name}-admin-{principal}" if access.admin else f"{name}-access-{principal}"
        entry = aws.eks.AccessEntry(
            resource,
            cluster_name=self.cluster.name,
            principal_arn=access.principal_arn,
            type="STANDARD",
            kubernetes_groups=list(access.groups) or None,
            opts=pulumi.ResourceOptions(parent=self),
        )
        if not access.admin:
            return
        aws.eks.AccessPolicyAssociation(
            resource,
            cluster_name=self.cluster.name,
            principal_arn=entry.principal_arn,
            policy_arn=f"arn:{account.partition}:eks::aws:cluster-access-policy/{aws_facts.CLUSTER_ADMIN_ACCESS_POLICY}",
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
            opts=pulumi.ResourceOptions(parent=self),
        )
