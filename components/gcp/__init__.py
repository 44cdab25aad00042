"""The GCP wing: GKE with GPU node pools, built from the platform spec."""

from components.gcp.platform import GcpPlatform

__all__ = ["GcpPlatform"]
