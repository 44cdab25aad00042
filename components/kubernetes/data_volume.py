"""The shared file system a cloud wing hands the layer for jobs' /data, as one claim per team.

Statically provisioned: the wing owns the file system (and any per-team entry points into it),
the layer only binds a PersistentVolume to each team's `training-data` claim, so which cloud
serves it never enters into the layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import pulumi

from components.naming import DATA_CLAIM


@dataclass(frozen=True)
class DataVolume:
    """A CSI volume per team namespace: `handles` maps each namespace to its volume handle."""

    driver: str
    handles: Mapping[str, pulumi.Input[str]]
    # Nominal: a shared file system grows as written, but the API requires a capacity.
    capacity: str = "1Ti"
    mount_options: tuple[str, ...] = field(default_factory=tuple)
    # Per namespace, mount options that replace `mount_options` (a team's own folder of a bucket).
    namespace_mount_options: Mapping[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])
    # CSI volume attributes (PersistentVolume spec.csi.volumeAttributes) the driver reads.
    volume_attributes: Mapping[str, str] = field(default_factory=dict[str, str])
    # TCP ports no pod in a team namespace may open a connection to: the file system's own
    # protocol, where it is reachable over the network, so a pod's one way to the data is the
    # claim the CSI driver mounts (a NetworkPolicy per namespace, components.kubernetes.layer).
    denied_egress_tcp_ports: tuple[int, ...] = field(default_factory=tuple)
    # The wing's resources a volume cannot be mounted without (on EFS the file system policy and
    # the mount targets): the layer's PersistentVolumes wait for them.
    depends_on: tuple[pulumi.Resource, ...] = field(default_factory=tuple)

    def options(self, namespace: str) -> tuple[str, ...]:
        return tuple(self.namespace_mount_options.get(namespace, self.mount_options))


def volume_name(namespace: str) -> str:
    """PersistentVolumes are cluster-scoped: one name per team namespace."""
    return f"{namespace}-{DATA_CLAIM}"
