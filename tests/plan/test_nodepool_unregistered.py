"""A snapshot's NodePool node that is not registered yet — it still carries `karpenter.sh/unregistered:NoExecute`, its
NodeClaim's `Registered` (or `Initialized`) is not "True" — in `plan`'s v1 waves, as Karpenter v1.14.1 treats one:
no disruption candidate before it is initialized (core pkg/controllers/state/statenode.go `ValidateNodeDisruptable`:
"node isn't initialized"; `Registered()`/`Initialized()`), room in flight for the pods provisioning places
(pkg/controllers/provisioning/scheduling/scheduler.go:594, "first try to schedule against an in-flight real node";
`StateNode.Taints` leaves the unregistered taint out), and a disruption command whose pods would go onto it waits
(pkg/controllers/disruption/helpers.go:138, `UninitializedNodeError`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import listing, pod, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies

START = "2026-11-30T09:00:00Z"
#: created 10 s before the start: initialized (`--node-startup` 60 s) 50 s after it
JUST_LAUNCHED = "2026-11-30T08:59:50Z"
TAINT = {"key": "karpenter.sh/unregistered", "effect": "NoExecute"}


def unregistered(name: str, nodepool_name: str = "default", *, tainted: bool = True,
                 registered: str | None = "Unknown", initialized: str | None = None,
                 created: str = JUST_LAUNCHED) -> list[dict[str, Any]]:
    """A Node (`tainted`: still carrying the unregistered taint) and its NodeClaim, whose `Registered` and
    `Initialized` conditions have those statuses (None: not there)."""
    made = pool_node(name, nodepool_name, created=created)
    if tainted:
        made.setdefault("spec", {})["taints"] = [TAINT]
    claimed = claim(name, nodepool_name, created=created)
    conditions = [{"type": "Launched", "status": "True"}]
    conditions += [{"type": kind, "status": status} for kind, status in (("Registered", registered),
                                                                          ("Initialized", initialized)) if status]
    claimed["status"]["conditions"] = conditions
    return [made, claimed]


def member(name: str, nodepool_name: str = "default", created: str = "2026-11-20T08:00:00Z") -> list[dict[str, Any]]:
    return [pool_node(name, nodepool_name, created=created), claim(name, nodepool_name, created=created)]


def plan(tmp_path: Path, *items: dict[str, Any], relabel: bool = True) -> dict[str, Any]:
    """BASE: `default` and `other`, budgets of 10; HEAD relabels `default` (its nodes drift) when `relabel`."""
    budgets = '[{nodes: "10"}]'
    base = v1_policies(tmp_path / "base", nodepool(budgets=budgets), nodepool("other", labels="team: other"))
    head = v1_policies(tmp_path / "head", nodepool(labels="team: platform" if relabel else "team: web",
                                                   budgets=budgets), nodepool("other", labels="team: other"))
    result = plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", *items),), start=START, output="json",
                                      base=base, head=head, consolidation_timeout="0s"), load_catalog())
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def test_an_unregistered_node_is_no_drift_candidate_until_it_is_initialized(tmp_path: Path) -> None:
    """core v1.14.1 disruption/drift_test.go:380, "should ignore nodes without the initialized label" (and
    statenode.go:219, `ValidateNodeDisruptable`): `d0` and `u0` drift (HEAD relabels their NodePool), a budget of 10;
    `u0`, launched 10 s before the start, is not registered yet. `d0` (its pod kept to us-east-1b, away from `u0`)
    goes at the first poll; `u0` only once initialized, `--node-startup` after its NodeClaim's creation (09:00:50) —
    the old plan took both at once. A note says why it waited."""
    kept = {"topology.kubernetes.io/zone": "us-east-1b"}
    doc = plan(tmp_path, pool_node("d0", zone="us-east-1b"), claim("d0", zone="us-east-1b"),
               pod("web-0", "d0", "web", cpu="1500m", node_selector=kept), *unregistered("u0"))

    assert [(w["start"], w["nodes"]) for w in doc["waves"]] == [("2026-11-30T09:00:10Z", ["d0"]),
                                                                ("2026-11-30T09:00:50Z", ["u0"])]
    assert ("node u0: not registered yet (v1.14.1: no disruption candidate before it is initialized): drift waits "
            "for it, assumed initialized at 2026-11-30T09:00:50Z (--node-startup after its creation); the pods the "
            "plan places may go onto it as onto a node in flight") in doc["notes"]


def test_an_expired_nodes_pods_go_onto_the_unregistered_node_in_flight(tmp_path: Path) -> None:
    """core v1.14.1 provisioning/scheduling/scheduler.go:594 (in-flight nodes first) and statenode.go:311
    (`Taints`: a node not initialized hides `karpenter.sh/unregistered`, a known ephemeral taint,
    pkg/scheduling/taints.go:43): `e0` expired at the start, its 1500m pod is provisioned for as it drains, and
    fits the empty `u0` in flight — no node is launched. The old plan kept the pod off `u0` (it read the taint) and
    launched one."""
    items = [pool_node("e0", created="2026-10-01T00:00:00Z"), claim("e0", created="2026-10-01T00:00:00Z"),
             pod("web-0", "e0", "web", cpu="1500m"), *unregistered("u0", "other")]

    doc = plan(tmp_path, *items, relabel=False)

    (wave,) = doc["waves"]
    assert (wave["nodes"], wave["replacements"], wave["evicted_pods"]) == (["e0"], [], 1)
    assert doc["pending"] == []


def test_a_drift_command_whose_pod_would_go_onto_the_unregistered_node_waits_for_it(tmp_path: Path) -> None:
    """core v1.14.1 disruption/helpers.go:138 (`UninitializedNodeError`): `d0` drifts and its pod fits the empty
    `u0` of the untouched NodePool `other`, in flight. The command is refused until `u0` is initialized (09:00:50),
    then moves the pod onto it without a replacement; the old plan kept the pod off `u0` and launched a node at
    the first poll."""
    doc = plan(tmp_path, *member("d0"), pod("web-0", "d0", "web", cpu="1500m"), *unregistered("u0", "other"))

    (wave,) = doc["waves"]
    assert (wave["start"], wave["nodes"], wave["replacements"]) == ("2026-11-30T09:00:50Z", ["d0"], [])


@given(tainted=st.booleans(), registered=st.sampled_from([None, "True", "False", "Unknown"]),
       initialized=st.sampled_from([None, "True", "False", "Unknown"]))
def test_registered_and_initialized_read_the_taint_and_the_nodeclaims_conditions(
        tainted: bool, registered: str | None, initialized: str | None) -> None:
    """statenode.go:341-357: a NodePool's node is registered when it no longer carries the unregistered taint and
    its NodeClaim's `Registered` is "True" (a snapshot without the condition reads as registered), initialized when
    registered and its `Initialized` is "True" (likewise); the taint is never one a pod must tolerate on it while
    it is not initialized."""
    items = unregistered("u0", tainted=tainted, registered=registered, initialized=initialized)
    node = fleet_of(read_snapshot(json.dumps(listing(*items)).encode(), "s.json")).nodes["u0"]

    expected_registered = not tainted and registered in (None, "True")
    assert node.registered is expected_registered
    assert node.initialized is (expected_registered and initialized in (None, "True"))
    assert (not node.initialized) <= all(t.key != TAINT["key"] for t in node.taints)
