"""Image references as the kubelet's container runtime parses them.

The grammar of distribution/reference (reference.go, "Grammar"; regexp.go), which containerd
and the CRI use to parse `image:`: name [":" tag] ["@" digest], a lowercase path of components
after an optional registry host and port, tags of at most 128 word characters, digests of a
registered algorithm. A reference that fails here fails every pod at ErrImagePull, so `job`
refuses it before anything is submitted.
"""

from __future__ import annotations

import re

_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_DOMAIN = rf"(?:{_DOMAIN_NAME}|{_IPV6})(?::[0-9]+)?"
_REMOTE_NAME = rf"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"

# `\Z`, not `$`, which also matches before a trailing newline.
_REFERENCE = re.compile(rf"^((?:{_DOMAIN}/)?{_REMOTE_NAME})(?::({_TAG}))?(?:@({_DIGEST}))?\Z", re.ASCII)
_NAME = re.compile(rf"^(?:({_DOMAIN})/)?({_REMOTE_NAME})\Z", re.ASCII)

# reference.go RepositoryNameTotalLengthMax: the path without the registry.
PATH_MAX = 255
# Digest algorithms the OCI image spec registers, with the length of their hex encoding
# (opencontainers/image-spec descriptor.md, "Registered algorithms"; go-digest validates it).
DIGEST_HEX_LENGTHS = {"sha256": 64, "sha512": 128}
# normalize.go refuses a 64-hex name without a registry: it reads as an image ID.
_IMAGE_ID = re.compile(r"^[a-f0-9]{64}\Z")


def problem(reference: str) -> str | None:
    """What is wrong with `reference`, in one phrase; None when a runtime can pull it by name."""
    match = _REFERENCE.match(reference)
    if match is None:
        lowered = reference.lower()
        if lowered != reference and _REFERENCE.match(lowered):
            return f"{reference!r}: the repository name must be lowercase"
        return (
            f"{reference!r} is not an image reference: expected [registry[:port]/]path[:tag][@digest], "
            "e.g. ghcr.io/acme/trainer:1.0"
        )
    name, _, digest = match.groups()
    name_match = _NAME.match(name)
    assert name_match is not None, "the reference pattern contains the name pattern"
    domain, path = name_match.groups()
    if len(path) > PATH_MAX:
        return f"{reference!r}: the repository path is longer than {PATH_MAX} characters"
    if domain is None and _IMAGE_ID.match(path):
        return f"{reference!r}: a 64-character hex name is an image ID, not a repository"
    if digest is not None:
        algorithm, encoded = digest.split(":", 1)
        expected = DIGEST_HEX_LENGTHS.get(algorithm)
        if expected is None:
            return f"{reference!r}: digest algorithm {algorithm!r} is not one of {', '.join(DIGEST_HEX_LENGTHS)}"
        if len(encoded) != expected:
            return f"{reference!r}: a {algorithm} digest has {expected} hex digits, got {len(encoded)}"
    return None
