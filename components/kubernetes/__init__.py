"""The cloud-independent GPU layer: any Kubernetes cluster with NVIDIA GPU nodes, made a shared
training platform (device plugin and sharing, priority tiers, Kueue and JobSet, DCGM, teams)."""

from components.kubernetes.data_volume import DataVolume
from components.kubernetes.layer import GpuLayer

__all__ = ["DataVolume", "GpuLayer"]
