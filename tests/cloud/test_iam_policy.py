"""deploy/iam-policy.json allows every AWS API the controller's adapter can call, and nothing else.

The calls are found in the source of ``karpenter_policy/cloud/aws/`` by its syntax tree, not by a pattern per
call style: ``api.call("ec2", "create_fleet")`` and ``api.paginate(...)`` name their service; any other call whose
argument is the name of an operation of one of the adapter's services (``self._call("receive_message")``,
``self._collect("describe_instance_types")``, ``client.get_paginator(...)``) or whose method is one
(``client.describe_images(...)``) is that service's operation. boto3's method names map to IAM actions through
botocore's service models (``create_fleet`` → ``ec2:CreateFleet``); the policy's actions may be wildcards, as IAM
reads them (case-insensitive, ``*`` and ``?``).
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import botocore.session
from botocore import xform_name

ROOT = Path(__file__).resolve().parents[2]
AWS_ADAPTER = ROOT / "karpenter_policy" / "cloud" / "aws"
POLICY = ROOT / "deploy" / "iam-policy.json"
#: The services the adapter talks to (boto3's names).
SERVICES = ("ec2", "eks", "sqs", "ssm", "pricing", "sts", "iam")
#: The adapter's wrappers that take the service first: api.call(service, operation), api.paginate(...).
SERVICE_FIRST = {"call", "paginate"}
#: What CreateFleet needs besides ec2:CreateFleet: launching, tagging at launch, passing the node role.
IMPLIED = {"ec2:RunInstances", "ec2:CreateTags", "iam:PassRole"}
#: Calls IAM does not authorize (AWS: "No permissions are required to perform this operation").
NO_PERMISSION = {"sts:GetCallerIdentity"}


@functools.cache
def operations() -> dict[str, dict[str, str]]:
    """Service → boto3 method name → the operation's (IAM action's) name."""
    session = botocore.session.get_session()
    return {
        service: {xform_name(op): op for op in session.get_service_model(service).operation_names}
        for service in SERVICES
    }


def _services_of(method: str) -> list[str]:
    return [service for service, methods in operations().items() if method in methods]


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def calls_in(tree: ast.AST, where: str) -> set[str]:
    """The IAM actions of the boto3 operations the calls of one module make (see the module docstring)."""
    found: set[str] = set()

    def add(service: str, method: str) -> None:
        operation = operations()[service].get(method)
        assert operation is not None, f"{where}: {service} has no operation {method}"
        found.add(f"{service}:{operation}")

    def named(method: str) -> None:
        services = _services_of(method)
        assert len(services) <= 1, f"{where}: {method} is an operation of {services}: name the service"
        if services:
            add(services[0], method)

    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        arguments = [_literal(a) for a in node.args]
        if isinstance(node.func, ast.Attribute):
            if node.func.attr in SERVICE_FIRST and len(arguments) >= 2 and arguments[0] in SERVICES:
                if arguments[1] is not None:
                    add(arguments[0], arguments[1])
                continue
            named(node.func.attr)
        for argument in arguments:
            if argument is not None:
                named(argument)
    return found


def called_actions(folder: Path = AWS_ADAPTER) -> set[str]:
    actions: set[str] = set()
    for source in sorted(folder.glob("*.py")):
        actions |= calls_in(ast.parse(source.read_text(), str(source)), source.name)
    return actions


def policy_actions(policy: Mapping[str, Any]) -> set[str]:
    actions: set[str] = set()
    for statement in policy["Statement"]:
        assert statement["Effect"] == "Allow"
        listed = statement["Action"]
        actions.update([listed] if isinstance(listed, str) else listed)
    return actions


def not_allowed(actions: Iterable[str], policy: Mapping[str, Any]) -> set[str]:
    """The actions no Action of the policy matches (IAM's wildcards, case-insensitive)."""
    patterns = [p.lower() for p in policy_actions(policy)]
    return {a for a in actions if not any(fnmatch.fnmatchcase(a.lower(), p) for p in patterns)}


def the_policy() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(POLICY.read_text())
    return loaded


def test_the_scan_finds_every_kind_of_call() -> None:
    called = called_actions()
    assert {"ec2:CreateFleet", "ec2:TerminateInstances", "ec2:DescribeInstances"} <= called  # api.call / paginate
    assert {"sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"} <= called  # through SqsQueue._call
    assert "ec2:DescribeInstanceTypes" in called  # the catalog source's _collect("describe_instance_types")
    assert {"pricing:GetProducts", "ssm:GetParameter", "sts:GetCallerIdentity"} <= called
    assert "iam:GetInstanceProfile" in called  # an EC2NodeClass's InstanceProfileReady (instanceprofiles.py)


def test_every_call_the_adapter_can_make_is_allowed_by_the_controllers_policy() -> None:
    missing = not_allowed(called_actions() - NO_PERMISSION, the_policy())
    assert not missing, f"deploy/iam-policy.json does not allow {sorted(missing)}"


def test_the_policy_allows_nothing_the_adapter_does_not_use() -> None:
    assert policy_actions(the_policy()) <= called_actions() | IMPLIED


def test_a_policy_without_the_queue_statement_is_found_wanting() -> None:
    """The check can fail: the policy as it was before the SQS statement (Karpenter's controller policy has them)."""
    policy = the_policy()
    policy["Statement"] = [s for s in policy["Statement"] if s.get("Sid") != "ReadTheInterruptionQueue"]
    assert not_allowed(called_actions() - NO_PERMISSION, policy) == {
        "sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage"}


def test_wildcards_are_read_as_iam_reads_them() -> None:
    policy = {"Statement": [{"Effect": "Allow", "Action": ["ec2:Describe*", "SQS:receivemessage"]}]}
    assert not_allowed({"ec2:DescribeImages", "sqs:ReceiveMessage", "ec2:CreateFleet"}, policy) == {"ec2:CreateFleet"}


def test_a_direct_client_call_and_a_wrapper_are_both_found() -> None:
    tree = ast.parse(
        "client.describe_images(Owners=['self'])\n"
        "self._call('delete_message', ReceiptHandle=r)\n"
        "api.call('ssm', 'get_parameter', Name=n)\n"
        "log.info('describe_images is not called here: a sentence, not an operation name')\n"
    )
    assert calls_in(tree, "example") == {"ec2:DescribeImages", "sqs:DeleteMessage", "ssm:GetParameter"}
