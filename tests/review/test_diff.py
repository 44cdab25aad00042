"""The review's diff engine on hand-built resources: property paths, replacements, pool capacity,
the Mermaid diagram, and stable output."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from components.checks import declared
from infra.tools.review import diff, markdown
from infra.tools.review.diff import Change


def record(type_token: str, name: str, inputs: dict[str, Any], parent: str | None = None, custom: bool = True, **options: Any) -> dict[str, Any]:
    return {
        "type": type_token,
        "name": name,
        "parent": parent,
        "custom": custom,
        "provider": None,
        "inputs": inputs,
        "options": {
            "protect": False,
            "ignoreChanges": [],
            "dependsOn": [],
            "deleteBeforeReplace": False,
            "retainOnDelete": False,
            "replaceOnChanges": [],
            **options,
        },
    }


POOL_COMPONENT = "gpu-platform:aws:GpuPool::ml-dev-train"


def node_group(**changes: Any) -> dict[str, Any]:
    inputs = {
        "instanceTypes": ["g6.12xlarge"],
        "capacityType": "SPOT",
        "scalingConfig": {"minSize": 0, "maxSize": 2, "desiredSize": 0},
        "labels": {"gpu-platform.io/pool": "train"},
    }
    inputs.update(changes)
    return record(declared.EKS_NODE_GROUP, "ml-dev-train", inputs, parent=POOL_COMPONENT)


def stack(*records: dict[str, Any]) -> list[dict[str, Any]]:
    return [record("gpu-platform:aws:GpuPool", "ml-dev-train", {}, custom=False), *records]


def changed(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[diff.ResourceChange]:
    return diff.diff_resources(before, after)[2]


# --- values ---------------------------------------------------------------------------------


def test_nested_changes_are_reported_at_their_json_path() -> None:
    before = {"scalingConfig": {"minSize": 0, "maxSize": 2}, "instanceTypes": ["g6.xlarge"]}
    after = {"scalingConfig": {"minSize": 0, "maxSize": 4}, "instanceTypes": ["g6.2xlarge"]}
    assert diff.diff_values(before, after) == [
        Change("instanceTypes[0]", "g6.xlarge", "g6.2xlarge"),
        Change("scalingConfig.maxSize", 2, 4),
    ]


def test_a_subtree_present_on_one_side_is_one_change() -> None:
    [change] = diff.diff_values({}, {"launchTemplate": {"id": "lt-1", "version": "1"}})
    assert change.path == "launchTemplate" and change.after == {"id": "lt-1", "version": "1"}


def test_named_items_are_matched_by_name_not_position() -> None:
    before = {"nodePools": [{"name": "a", "maxNodes": 1}, {"name": "b", "maxNodes": 2}]}
    after = {"nodePools": [{"name": "new", "maxNodes": 1}, {"name": "a", "maxNodes": 1}, {"name": "b", "maxNodes": 3}]}
    assert [c.path for c in diff.diff_values(before, after)] == ["nodePools[name=b].maxNodes", "nodePools[name=new]"]


def test_identical_values_have_no_changes() -> None:
    value = {"a": [1, {"b": None}], "c": {}}
    assert diff.diff_values(value, copy.deepcopy(value)) == []


# --- resources and replacements -------------------------------------------------------------


def test_resources_are_added_removed_and_changed_by_type_and_name() -> None:
    bucket = record(declared.S3_BUCKET, "data", {"bucket": "b"})
    added, removed, diffs = diff.diff_resources(stack(node_group(), bucket), stack(node_group(capacityType="ON_DEMAND"), record(declared.LAUNCH_TEMPLATE, "lt", {})))
    assert added == [f"{declared.LAUNCH_TEMPLATE}::lt"]
    assert removed == [f"{declared.S3_BUCKET}::data"]
    assert [(d.key, [c.path for c in d.changes]) for d in diffs] == [(f"{declared.EKS_NODE_GROUP}::ml-dev-train", ["capacityType"])]


def test_an_instance_type_change_replaces_the_node_group() -> None:
    [diff] = changed(stack(node_group()), stack(node_group(instanceTypes=["g6.48xlarge"])))
    assert diff.replacing == ["instanceTypes[0]"]


@pytest.mark.parametrize("field, value", [("amiType", "BOTTLEROCKET_x86_64_NVIDIA"), ("capacityType", "ON_DEMAND")])
def test_ami_and_capacity_type_changes_replace_the_node_group(field: str, value: str) -> None:
    [diff] = changed(stack(node_group()), stack(node_group(**{field: value})))
    assert diff.replacing == [field]


def test_a_resize_updates_the_node_group_in_place() -> None:
    [diff] = changed(stack(node_group()), stack(node_group(scalingConfig={"minSize": 0, "maxSize": 6, "desiredSize": 0})))
    assert (diff.replacing, [c.path for c in diff.changes]) == ([], ["scalingConfig.maxSize"])


def test_adding_a_launch_template_to_a_node_group_replaces_it() -> None:
    [diff] = changed(stack(node_group()), stack(node_group(launchTemplate={"id": "lt-1", "version": "1"})))
    assert diff.replacing == ["launchTemplate"]


def gke_pool(**node_config: Any) -> dict[str, Any]:
    config = {"machineType": "g2-standard-8", "guestAccelerators": [{"type": "nvidia-l4", "count": 1}], **node_config}
    return record(declared.GKE_NODE_POOL, "ml-dev-l4", {"nodeConfig": config, "autoscaling": {"totalMaxNodeCount": 2}})


@pytest.mark.parametrize(
    "change, path",
    [
        ({"machineType": "g2-standard-24"}, "nodeConfig.machineType"),
        ({"guestAccelerators": [{"type": "nvidia-l4", "count": 2}]}, "nodeConfig.guestAccelerators[0].count"),
        ({"spot": True}, "nodeConfig.spot"),
    ],
)
def test_gke_machine_type_accelerator_and_spot_changes_replace_the_node_pool(change: dict[str, Any], path: str) -> None:
    [diff] = changed([gke_pool()], [gke_pool(**change)])
    assert diff.replacing == [path]


def test_a_gke_label_change_updates_the_node_pool_in_place() -> None:
    [diff] = changed([gke_pool()], [gke_pool(labels={"team": "research"})])
    assert diff.replacing == []


def priority_class(value: int, description: str = "") -> dict[str, Any]:
    inputs = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "training"}, "value": value, "description": description}
    return record(declared.PRIORITY_CLASS, "training", inputs)


def test_a_priority_class_value_change_replaces_it() -> None:
    [diff] = changed([priority_class(100)], [priority_class(200)])
    assert diff.replacing == ["value"]


def test_a_priority_class_description_change_does_not() -> None:
    [diff] = changed([priority_class(100)], [priority_class(100, "for training")])
    assert diff.replacing == []


def test_renaming_a_kubernetes_object_replaces_it() -> None:
    renamed = priority_class(100)
    renamed["inputs"]["metadata"]["name"] = "train"
    [diff] = changed([priority_class(100)], [renamed])
    assert diff.replacing == ["metadata.name"]


@pytest.mark.parametrize("path_value", [("name", "ml-dev-2"), ("roleArn", "arn:aws:iam::0:role/other")])
def test_cluster_settings_that_recreate_the_cluster_are_replacements(path_value: tuple[str, str]) -> None:
    path, value = path_value
    before = record(declared.EKS_CLUSTER, "ml-dev", {"name": "ml-dev", "roleArn": "arn:aws:iam::0:role/eks", "version": "1.32"})
    after = copy.deepcopy(before)
    after["inputs"][path] = value
    [diff] = changed([before], [after])
    assert diff.replacing == [path]


def test_a_cluster_version_upgrade_is_in_place() -> None:
    before = record(declared.EKS_CLUSTER, "ml-dev", {"name": "ml-dev", "version": "1.32"})
    after = record(declared.EKS_CLUSTER, "ml-dev", {"name": "ml-dev", "version": "1.33"})
    assert changed([before], [after])[0].replacing == []


def test_a_new_parent_moves_the_urn_and_replaces() -> None:
    moved = node_group()
    moved["parent"] = "gpu-platform:aws:Cluster::ml-dev"
    [diff] = changed([node_group()], [moved])
    assert diff.replacing == ["@parent"]


def test_replace_on_changes_of_the_resource_is_honoured() -> None:
    before = record("kubernetes:apps/v1:Deployment", "d", {"spec": {"replicas": 1}}, replaceOnChanges=["spec"])
    after = record("kubernetes:apps/v1:Deployment", "d", {"spec": {"replicas": 2}}, replaceOnChanges=["spec"])
    assert changed([before], [after])[0].replacing == ["spec.replicas"]


def test_option_changes_are_shown_under_options() -> None:
    protected = node_group()
    protected["options"]["protect"] = True
    [diff] = changed([node_group()], [protected])
    assert [c.path for c in diff.changes] == ["@options.protect"] and diff.replacing == []


# --- pools and capacity ---------------------------------------------------------------------


def pool(name: str, **changes: Any) -> dict[str, Any]:
    base = {
        "name": name,
        "gpu": "L4",
        "instanceType": "g6.12xlarge",
        "gpusPerNode": 4,
        "minNodes": 0,
        "maxNodes": 2,
        "capacity": "spot",
        "sharing": "none",
        "usdPerNodeHour": 4.6,
    }
    return {**base, **changes}


def test_a_pool_resize_is_not_a_replacement() -> None:
    [change] = diff.diff_pools([pool("a")], [pool("a", maxNodes=4)], "aws")
    assert (change.status, [c.path for c in change.changes], change.replacing) == ("changed", ["maxNodes"], [])


def test_a_pool_instance_type_change_is_a_replacement() -> None:
    [change] = diff.diff_pools([pool("a")], [pool("a", instanceType="g6.48xlarge", gpusPerNode=8)], "aws")
    assert change.replacing == ["gpusPerNode", "instanceType"]


def test_a_sharing_change_replaces_only_on_gke() -> None:
    sharing = "time-slicing x4"
    assert diff.diff_pools([pool("a")], [pool("a", sharing=sharing)], "aws")[0].replacing == []
    assert diff.diff_pools([pool("a")], [pool("a", sharing=sharing)], "gcp")[0].replacing == ["sharing"]


def test_pools_are_added_and_removed_by_name() -> None:
    changes = diff.diff_pools([pool("a")], [pool("b")], "aws")
    assert [(c.name, c.status) for c in changes] == [("a", "removed"), ("b", "added")]


def test_capacity_counts_gpus_and_dollars_at_min_and_max_scale() -> None:
    cap = diff.capacity([pool("a", minNodes=1), pool("b", gpusPerNode=1, maxNodes=3, usdPerNodeHour=1.0)])
    assert (cap.max_gpus, cap.usd_min, cap.usd_max) == (11, pytest.approx(4.6), pytest.approx(12.2))


def test_existing_nodes_have_gpus_but_no_price() -> None:
    cap = diff.capacity([pool("a", usdPerNodeHour=None, instanceType=None)])
    assert (cap.max_gpus, cap.usd_min, cap.usd_max) == (8, None, None)


# --- the report -----------------------------------------------------------------------------


def snapshot(records: list[dict[str, Any]], pools: list[dict[str, Any]], **platform: Any) -> dict[str, Any]:
    config = {"gpu-platform:platform": {"cloud": "aws", "environment": "dev", "cluster": {"name": "ml-dev"}, **platform}}
    return {"project": "gpu-platform", "config": config, "resources": records, "outputs": {}, "pools": pools}


def test_the_components_diagram_marks_changed_components() -> None:
    before = snapshot(stack(node_group()), [pool("train")])
    after = snapshot(stack(node_group(instanceTypes=["g6.48xlarge"])), [pool("train")])
    text = "\n".join(markdown.mermaid(diff.review_stack("dev-aws", before, after)))
    assert 'c0["aws:GpuPool<br/>ml-dev-train (1)"]' in text
    assert "stack --> c0" in text and "class c0 changed" in text


def test_identical_snapshots_are_unchanged_and_render_one_line() -> None:
    snap = snapshot(stack(node_group()), [pool("train")])
    result = diff.review_stack("dev-aws", snap, copy.deepcopy(snap))
    assert result.status == "unchanged"
    assert markdown.render([result], "main", "0" * 40).splitlines()[-1] == "- `dev-aws`: no changes"


def test_the_report_is_the_same_text_for_the_same_inputs() -> None:
    before = snapshot(stack(node_group()), [pool("train")])
    after = snapshot(stack(node_group(instanceTypes=["g6.48xlarge"]), record(declared.S3_BUCKET, "data", {})), [pool("train", maxNodes=3)])
    first = markdown.render([diff.review_stack("dev-aws", before, after)], "main", "a" * 40)
    second = markdown.render([diff.review_stack("dev-aws", copy.deepcopy(before), copy.deepcopy(after))], "main", "a" * 40)
    assert first == second
    assert f"`{declared.EKS_NODE_GROUP}::ml-dev-train`: **replaced**" in first


INVALID = {"error": "stacks/Pulumi.dev-aws.yaml: platform.cloud: expected 'aws'"}


def test_a_stack_invalid_in_the_working_tree_shows_its_spec_errors() -> None:
    result = diff.review_stack("dev-aws", snapshot(stack(node_group()), [pool("train")]), INVALID)
    assert result.status == "invalid"
    assert markdown.render_stack(result) == [
        "### `dev-aws`: invalid",
        "",
        "The stack file in the working tree is invalid; nothing was synthesized or compared:",
        "",
        "```",
        "stacks/Pulumi.dev-aws.yaml: platform.cloud: expected 'aws'",
        "```",
        "",
    ]


@pytest.mark.parametrize(("base_invalid", "head_invalid", "sides"), [(True, False, "base"), (False, True, "working tree"), (True, True, "base and working tree")])
def test_an_invalid_stack_shows_no_policy_capacity_or_resource_figures(base_invalid: bool, head_invalid: bool, sides: str) -> None:
    valid = snapshot(stack(node_group()), [pool("train")])
    result = diff.review_stack("dev-aws", INVALID if base_invalid else valid, INVALID if head_invalid else copy.deepcopy(valid))
    text = markdown.render([result], "main", "0" * 40)
    assert f"| `dev-aws` | invalid ({sides}) | - | - | - | - | - |" in text.splitlines()
    assert "pass" not in text and "→" not in text and "**Resources**" not in text
    assert text.count("platform.cloud: expected 'aws'") == base_invalid + head_invalid


def test_a_replaced_node_group_is_one_replacement() -> None:
    before = snapshot(stack(node_group()), [pool("train")])
    after = snapshot(stack(node_group(instanceTypes=["g6.48xlarge"])), [pool("train", instanceType="g6.48xlarge")])
    result = diff.review_stack("dev-aws", before, after)
    assert result.replacements == 1
    warnings = [line for line in markdown.render_stack(result) if line.startswith("> - ")]
    assert warnings == [
        "> - pool `train`: `instanceType` g6.12xlarge → g6.48xlarge replaces the pool's node group / node pool"
        f" (`{declared.EKS_NODE_GROUP}::ml-dev-train`): its nodes are recreated and running pods evicted"
    ]


def test_a_pool_replacement_without_its_resource_replaced_still_counts_once() -> None:
    records = stack(node_group())
    result = diff.review_stack(
        "dev-aws", snapshot(records, [pool("train")]), snapshot(copy.deepcopy(records), [pool("train", capacity="on-demand")])
    )
    assert result.replacements == 1


def test_a_change_to_an_absent_value_keeps_absent_through_a_worker_process() -> None:
    change = Change("spec.replicas", diff.ABSENT, 2)
    assert pickle.loads(pickle.dumps(change)).before is diff.ABSENT
