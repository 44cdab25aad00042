"""The product label the fit proof expects GPU feature discovery to write, read the way GFD reads
the device plugin config (k8s-device-plugin v0.20.0): `-SHARED` for MPS as for time-slicing, and
a per-resource `rename` ignored unless `renameByDefault` is set."""

from __future__ import annotations

from typing import Any

import yaml

from components.checks.declared import HELM_RELEASE, Resource
from components.checks.fit.cluster import Cluster
from components.pools import DEVICE_PLUGIN_CONFIG_LABEL

PRODUCT = "NVIDIA-L40S"


def product_with(sharing: dict[str, Any]) -> str:
    values = {"gfd": {"enabled": True}, "config": {"map": {"shared": yaml.safe_dump({"version": "v1", "sharing": sharing})}}}
    cluster = Cluster([Resource(HELM_RELEASE, "nvidia-device-plugin", {"chart": "nvidia-device-plugin", "values": values})])
    return cluster.gfd_product({DEVICE_PLUGIN_CONFIG_LABEL: "shared"}, PRODUCT)


def gpu(replicas: int, **extra: Any) -> dict[str, Any]:
    return {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas, **extra}]}


def test_time_sliced_gpus_are_labelled_shared() -> None:
    assert product_with({"timeSlicing": gpu(4)}) == f"{PRODUCT}-SHARED"


def test_mps_replicated_gpus_are_labelled_shared() -> None:
    assert product_with({"mps": gpu(4)}) == f"{PRODUCT}-SHARED"


def test_mps_wins_over_time_slicing() -> None:
    assert product_with({"mps": gpu(1), "timeSlicing": gpu(4)}) == PRODUCT


def test_a_single_replica_is_not_shared() -> None:
    assert product_with({"timeSlicing": gpu(1)}) == PRODUCT


def test_gfd_ignores_a_per_resource_rename() -> None:
    assert product_with({"timeSlicing": gpu(4, rename="nvidia.com/gpu-shared")}) == f"{PRODUCT}-SHARED"
    assert product_with({"mps": gpu(4, rename="nvidia.com/gpu-shared")}) == f"{PRODUCT}-SHARED"


def test_rename_by_default_keeps_the_product() -> None:
    assert product_with({"timeSlicing": {**gpu(4), "renameByDefault": True}}) == PRODUCT
    assert product_with({"mps": {**gpu(4), "renameByDefault": True}}) == PRODUCT
