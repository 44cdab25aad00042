"""Every IAM identity policy the AWS stacks declare, linted by parliament against AWS's own action,
resource and condition-key tables: a condition key an action does not support silently never
matches, which for an Allow means a permission that does not work. (Trust and bucket policies are
resource policies, which parliament's identity-policy checks do not model.)"""

from __future__ import annotations

import json
from typing import Callable

import pytest
from parliament import analyze_policy_string

from infra.synth import Synthesis

DOCUMENT_INPUTS = {"aws:iam/rolePolicy:RolePolicy": "policy", "aws:iam/policy:Policy": "policy"}


@pytest.mark.parametrize("stack", ["dev-aws", "prod-aws"])
def test_every_iam_identity_policy_passes_parliament(synthesized: Callable[[str], Synthesis], stack: str) -> None:
    checked = 0
    for resource in synthesized(stack).resources:
        key = DOCUMENT_INPUTS.get(resource["type"])
        if key is None or key not in resource["inputs"]:
            continue
        document = resource["inputs"][key]
        findings = analyze_policy_string(document if isinstance(document, str) else json.dumps(document)).findings
        assert [(f.issue, f.detail) for f in findings] == [], resource["name"]
        checked += 1
    assert checked >= 3
