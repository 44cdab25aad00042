"""What the GCP wing's builders share: the platform component their resources belong to, and the
spec, project and region they build for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

from components import naming
from components.spec import GcpSpec, PlatformSpec


@dataclass(frozen=True)
class Wing:
    """The GcpPlatform being built: every resource is its child, named from `name` and the spec."""

    name: str
    spec: PlatformSpec
    gcp: GcpSpec
    project: str
    region: str
    parent: pulumi.Resource

    @property
    def prod(self) -> bool:
        return self.spec.environment == "prod"

    def child(self, **options: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.parent, **options)

    def cloud_name(self, *parts: str) -> str:
        return naming.resource_name(self.spec, *parts)
