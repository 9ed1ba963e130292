"""deploy/iam-policy.json allows every AWS API the controller calls, and nothing else."""

from __future__ import annotations

import json
import re
from pathlib import Path

import botocore.session
from botocore import xform_name

ROOT = Path(__file__).resolve().parents[2]
AWS_ADAPTER = ROOT / "karpenter_policy" / "cloud" / "aws"
POLICY = ROOT / "deploy" / "iam-policy.json"

#: api.call("ec2", "create_fleet", ...) / api.paginate("pricing", "get_products", ...)
_API_CALL = re.compile(r'(?:call|paginate)\(\s*"(ec2|ssm|pricing)",\s*"([a-z_]+)"')
#: the catalog source's self._collect("describe_instance_types", ...) (EC2)
_CATALOG_CALL = re.compile(r'_collect\(\s*"([a-z_]+)"')
#: What CreateFleet needs besides ec2:CreateFleet: launching, tagging at launch, passing the node role.
IMPLIED = {"ec2:RunInstances", "ec2:CreateTags", "iam:PassRole"}


def called_actions() -> set[str]:
    session = botocore.session.get_session()
    names = {
        service: {xform_name(op): op for op in session.get_service_model(service).operation_names}
        for service in ("ec2", "ssm", "pricing")
    }
    actions = set()
    for source in AWS_ADAPTER.glob("*.py"):
        text = source.read_text()
        for service, method in _API_CALL.findall(text):
            actions.add(f"{service}:{names[service][method]}")
        for method in _CATALOG_CALL.findall(text):
            actions.add(f"ec2:{names['ec2'][method]}")
    return actions


def allowed_actions() -> set[str]:
    policy = json.loads(POLICY.read_text())
    actions: set[str] = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    return actions


def test_every_api_the_adapter_calls_is_allowed() -> None:
    called = called_actions()
    assert {"ec2:CreateFleet", "ec2:TerminateInstances", "pricing:GetProducts", "ssm:GetParameter"} <= called
    assert called | IMPLIED <= allowed_actions()


def test_the_policy_allows_nothing_the_adapter_does_not_use() -> None:
    assert allowed_actions() <= called_actions() | IMPLIED
