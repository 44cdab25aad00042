"""The CrossGuard pack's entry point: the Pulumi CLI runs this file and talks to the pack over gRPC."""

from pulumi_policy import PolicyPack

from pack import PACK_NAME, policies

PolicyPack(PACK_NAME, policies=policies())
