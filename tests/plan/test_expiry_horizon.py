"""Nodes that expire during the rollout: planned at their expiry time within `--horizon` (default 24h) — Karpenter
v0.31's expiration command at the next poll after the TTL, before any drift left; Karpenter v1.14.1's forceful
deletion at the expiry time itself, whatever the budgets, also of a drifted node still waiting for its budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from tests.plan.snapshots import FULL, node, pod, policies, provisioner, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies

START = "2026-11-30T09:00:00Z"
TTL = "  ttlSecondsUntilExpired: 2592000\n"  # 30 days
#: created 30 days before 11:00 on the plan's day: expires two hours after the start
EXPIRES_AT_11 = "2026-10-31T11:00:00Z"


def run(base: str, head: str, tmp_path: Path, *items: dict[str, Any], **options: Any) -> tuple[int, Any]:
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, output="json", base=base, head=head,
                                      **options), load_catalog())
    assert result.stderr == ""
    return result.exit_code, json.loads(result.stdout)


def waves(doc: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    return [(w["start"][11:19], w["method"], w["nodes"]) for w in doc["waves"]]


def expiry(doc: dict[str, Any], name: str) -> tuple[bool, str | None]:
    (found,) = [n for n in doc["nodes"] if n["name"] == name]
    return found["expires"], found["expires_at"]


def test_a_node_expiring_within_the_horizon_is_replaced_at_its_expiry_time_v1alpha5(tmp_path: Path) -> None:
    same = policies(tmp_path / "p", provisioner(extra=TTL))

    code, doc = run(same, same, tmp_path, node("a", created=EXPIRES_AT_11), pod("web-1", "a", "web"))

    assert code == 0
    assert waves(doc) == [("11:00:10", "expiration", ["a"])]  # noticed at the deprovisioner's next poll
    assert expiry(doc, "a") == (True, "2026-11-30T11:00:00Z")
    (reason,) = doc["nodes"][0]["reasons"]
    assert reason.startswith("expires 2026-11-30T11:00:00Z: created 2026-10-31T11:00:00Z")
    assert doc["end"] == "2026-11-30T11:01:25Z"


def test_a_shorter_horizon_leaves_it_out(tmp_path: Path) -> None:
    same = policies(tmp_path / "p", provisioner(extra=TTL))

    _, doc = run(same, same, tmp_path, node("a", created=EXPIRES_AT_11), pod("web-1", "a", "web"), horizon="1h")

    assert waves(doc) == [] and expiry(doc, "a") == (False, "2026-11-30T11:00:00Z")


def test_an_expiry_during_a_drift_rollout_takes_the_next_command_before_the_drift_left(tmp_path: Path) -> None:
    base = policies(tmp_path / "base", provisioner(extra=TTL))
    head = policies(tmp_path / "head", provisioner(labels="team: platform", extra=TTL))
    # a and c drift (they carry the hash); b carries none and expires at 09:01:00, while a's command runs; each pod
    # fills its node (no other node has room for it: each command launches a replacement)
    items = [node("a", created="2026-11-20T08:00:00Z"), node("c", created="2026-11-20T09:00:00Z"),
             node("b", annotations={}, created="2026-10-31T09:01:00Z"),
             pod("web-1", "a", "web", cpu=FULL), pod("web-2", "b", "web", cpu=FULL), pod("web-3", "c", "web", cpu=FULL)]

    _, doc = run(base, head, tmp_path, *items)

    # a: 10 s poll + 60 s replacement + 15 s drain → 09:01:25, and the loop looks again at once (v0.31.1
    # controller.go:134, `RequeueAfter: immediately`); b is due by then: expiration before drift
    assert waves(doc) == [("09:00:10", "drift", ["a"]), ("09:01:25", "expiration", ["b"]),
                          ("09:02:40", "drift", ["c"])]
    assert expiry(doc, "b") == (True, "2026-11-30T09:01:00Z")


def test_a_nodeclaim_expiring_within_the_horizon_is_deleted_forcefully_at_its_time_v1(tmp_path: Path) -> None:
    same = v1_policies(tmp_path / "p", nodepool())

    code, doc = run(same, same, tmp_path, pool_node("n0", created=EXPIRES_AT_11),
                    claim("n0", created=EXPIRES_AT_11), pod("web-1", "n0", "web"))

    assert code == 0
    assert waves(doc) == [("11:00:00", "expiration", ["n0"])]  # the controller requeues to the expiry time
    assert expiry(doc, "n0") == (True, "2026-11-30T11:00:00Z")
    # forceful: the node goes first (15 s drain), its pod's new node comes then (60 s)
    assert doc["waves"][0]["seconds"] == 75.0


def test_a_drifted_nodeclaim_a_budget_holds_goes_by_expiry_and_the_rollout_finishes(tmp_path: Path) -> None:
    budgets = '[{nodes: "0"}]'
    base = v1_policies(tmp_path / "base", nodepool(budgets=budgets))
    head = v1_policies(tmp_path / "head", nodepool(labels="team: platform", budgets=budgets))
    items = [pool_node("n0", created=EXPIRES_AT_11), claim("n0", created=EXPIRES_AT_11), pod("web-1", "n0", "web")]

    code, never = run(base, head, tmp_path, *items, horizon="1h")
    assert code == 1 and not never["finishes"] and never["waves"] == []

    code, doc = run(base, head, tmp_path, *items)
    assert code == 0 and doc["finishes"] and doc["blocked"] == []
    assert waves(doc) == [("11:00:00", "expiration", ["n0"])]


def test_a_bad_horizon_is_refused_with_exit_2(tmp_path: Path) -> None:
    same = policies(tmp_path / "p", provisioner())
    file = write(tmp_path / "snapshot.json", node("a"))
    for text in ("soon", "-1h"):
        result = plan_command(PlanOptions(snapshot=(file,), start=START, base=same, head=same, horizon=text),
                              load_catalog())
        assert result.exit_code == 2 and "--horizon" in result.stderr and result.stdout == ""


def test_a_long_bad_horizon_is_echoed_shortened(tmp_path: Path) -> None:
    same = policies(tmp_path / "p", provisioner())
    file = write(tmp_path / "snapshot.json", node("a"))
    digits = "9" * 4000

    result = plan_command(PlanOptions(snapshot=(file,), start=START, base=same, head=same, horizon=digits),
                          load_catalog())

    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == ('karpenter-policy plan: --horizon "' + "9" * 56 + '... is not a duration of 0 or more '
                             "(a Go duration up to 2562047h: 24h, 90m, 0s)\n")
