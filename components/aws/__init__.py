"""The AWS wing: `AwsPlatform` builds EKS with GPU pools that scale from zero from the spec."""

from components.aws.platform import AwsPlatform

__all__ = ["AwsPlatform"]
