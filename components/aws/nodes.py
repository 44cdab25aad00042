"""GPU node groups, one per pool: a managed node group that scales from zero."""

from __future__ import annotations

from typing import Sequence

import pulumi
import pulumi_aws as aws

from components import node_resources
from components.aws import plan, user_data
from components.facts import aws as aws_facts
from components.pools import Pool
from components.spec import NodePoolSpec


def node_launch_template(
    name: str,
    *,
    volume_gib: int,
    data_device: str,
    parent: pulumi.Resource,
    network_interfaces: Sequence[aws.ec2.LaunchTemplateNetworkInterfaceArgs] | None = None,
    placement_group: pulumi.Input[str] | None = None,
    reservation: plan.ReservationTarget | None = None,
    instance_type: str | None = None,
    user_data: str | None = None,
    provisioned_volume: bool = False,
) -> aws.ec2.LaunchTemplate:
    """What every node of the platform gets: IMDSv2 only, one hop (pods cannot borrow the
    node's role), and an encrypted gp3 volume for images and scratch; for a reserved pool, the
    reservation its instances launch into.

    No AMI: EKS picks the AMI from the node group's amiType and bootstraps it, merging `user_data`
    (nodeadm's local storage part, components.aws.user_data) with its own. `provisioned_volume`:
    the volume holds images and scratch, so it gets gp3 IOPS and throughput above the baseline.
    `instance_type` only where EKS reads it from the template (Capacity Blocks).
    """
    return aws.ec2.LaunchTemplate(
        name,
        name=name,
        update_default_version=True,
        metadata_options=aws.ec2.LaunchTemplateMetadataOptionsArgs(
            http_endpoint="enabled",
            http_tokens="required",
            http_put_response_hop_limit=1,
        ),
        block_device_mappings=[
            aws.ec2.LaunchTemplateBlockDeviceMappingArgs(
                device_name=data_device,
                ebs=aws.ec2.LaunchTemplateBlockDeviceMappingEbsArgs(
                    volume_size=volume_gib,
                    volume_type="gp3",
                    iops=aws_facts.GP3_IOPS if provisioned_volume else None,
                    throughput=aws_facts.GP3_THROUGHPUT_MIBS if provisioned_volume else None,
                    encrypted="true",
                    delete_on_termination="true",
                ),
            )
        ],
        network_interfaces=network_interfaces,
        user_data=user_data,
        placement=aws.ec2.LaunchTemplatePlacementArgs(group_name=placement_group) if placement_group else None,
        instance_type=instance_type,
        capacity_reservation_specification=(
            aws.ec2.LaunchTemplateCapacityReservationSpecificationArgs(
                capacity_reservation_preference=reservation.preference,
                capacity_reservation_target=aws.ec2.LaunchTemplateCapacityReservationSpecificationCapacityReservationTargetArgs(
                    capacity_reservation_id=reservation.reservation_id,
                    capacity_reservation_resource_group_arn=reservation.resource_group_arn,
                ),
            )
            if reservation
            else None
        ),
        instance_market_options=(
            aws.ec2.LaunchTemplateInstanceMarketOptionsArgs(market_type=reservation.market_type)
            if reservation and reservation.market_type
            else None
        ),
        tag_specifications=[
            aws.ec2.LaunchTemplateTagSpecificationArgs(resource_type=kind, tags={"Name": name})
            for kind in ("instance", "volume")
        ],
        opts=pulumi.ResourceOptions(parent=parent),
    )


def asg_name(node_group: aws.eks.NodeGroup) -> pulumi.Output[str]:
    """The autoscaling group EKS made for a managed node group (one per group)."""

    def first(resources: Sequence[aws.eks.outputs.NodeGroupResource]) -> str:
        groups = resources[0].autoscaling_groups or []
        return groups[0].name or ""

    return node_group.resources.apply(first)


class GpuNodeGroup(pulumi.ComponentResource):
    """One pool's nodes: labels and taint from the pool facts, min/max from the spec, the
    desired size left to the cluster autoscaler, and ASG tags for scaling up from zero."""

    node_group: aws.eks.NodeGroup
    # The managed node group's autoscaling group, where the autoscaler acts.
    asg_name: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        *,
        cluster_name: str,
        cluster: pulumi.Input[str],
        pool: Pool,
        spec_pool: NodePoolSpec,
        node_role_arn: pulumi.Input[str],
        subnet_ids: list[pulumi.Output[str]],
        security_group_id: pulumi.Input[str],
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        """`after`: what must run before nodes can join (the cluster's networking add-ons)."""
        super().__init__("gpu-platform:aws:GpuNodeGroup", name, None, opts)
        assert pool.instance_type is not None, "AWS pools have a catalog instance type"
        labels = plan.node_labels(pool, spec_pool)
        reservation = plan.reservation_target(spec_pool)
        # Where EKS reads the instance type from the launch template (Capacity Blocks), the node
        # group leaves it out (EKS CreateNodegroup: instance types in one place or the other).
        template_type = pool.instance_type.name if reservation and reservation.instance_type_in_template else None

        interfaces: list[aws.ec2.LaunchTemplateNetworkInterfaceArgs] | None = None
        placement_group: pulumi.Output[str] | None = None
        if plan.placement_group(spec_pool):
            # EFA traffic needs the nodes close together (one zone).
            group = aws.ec2.PlacementGroup(
                name, name=name, strategy="cluster", opts=pulumi.ResourceOptions(parent=self)
            )
            placement_group = group.name
        if spec_pool.efa:
            # A security group that lets the nodes reach each other: the cluster security group
            # allows all traffic within.
            interfaces = [
                aws.ec2.LaunchTemplateNetworkInterfaceArgs(
                    network_card_index=nic.network_card_index,
                    device_index=nic.device_index,
                    interface_type=nic.interface_type,
                    security_groups=[security_group_id],
                    delete_on_termination="true",
                )
                for nic in node_resources.efa_interfaces(pool.instance_type.name)
            ]
        template = node_launch_template(
            name,
            volume_gib=spec_pool.root_volume_gib,
            data_device=aws_facts.DATA_DEVICE[spec_pool.ami_type],
            parent=self,
            network_interfaces=interfaces,
            placement_group=placement_group,
            reservation=reservation,
            instance_type=template_type,
            # nodeadm moves containerd, the kubelet and pod logs onto the instance store; where there
            # is none in use, images and scratch stay on the EBS volume, which then needs the IOPS.
            user_data=user_data.launch_template_user_data(pool.instance_type, spec_pool.ami_type),
            provisioned_volume=not user_data.uses_instance_store(pool.instance_type, spec_pool.ami_type),
        )
        self.node_group = aws.eks.NodeGroup(
            name,
            cluster_name=cluster,
            node_group_name=name,
            node_role_arn=node_role_arn,
            subnet_ids=subnet_ids,
            ami_type=spec_pool.ami_type,
            capacity_type=plan.capacity_type(pool),
            instance_types=None if template_type else [pool.instance_type.name],
            scaling_config=aws.eks.NodeGroupScalingConfigArgs(
                min_size=pool.min_nodes, max_size=pool.max_nodes, desired_size=pool.min_nodes
            ),
            launch_template=aws.eks.NodeGroupLaunchTemplateArgs(id=template.id, version=template.latest_version.apply(str)),
            labels=labels,
            taints=[aws.eks.NodeGroupTaintArgs(key=pool.taint.key, value=pool.taint.value, effect="NO_SCHEDULE")],
            # Replace GPU nodes one at a time: a rolling update evicts training pods.
            update_config=aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=1),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=list(after),
                # The autoscaler owns the desired size; a fixed node group name must go before
                # its replacement can take the name.
                ignore_changes=["scalingConfig.desiredSize"],
                delete_before_replace=True,
            ),
        )
        self.asg_name = asg_name(self.node_group)
        resources = node_resources.template_resources(pool, spec_pool)
        for key, value in plan.asg_tags(cluster_name, pool, labels, resources).items():
            aws.autoscaling.Tag(
                f"{name}:{key}",
                autoscaling_group_name=self.asg_name,
                tag=aws.autoscaling.TagTagArgs(key=key, value=value, propagate_at_launch=False),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"nodeGroupName": self.node_group.node_group_name, "asgName": self.asg_name})
