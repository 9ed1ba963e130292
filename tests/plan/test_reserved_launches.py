"""`plan` launches a v1 NodePool's replacements into the capacity reservations HEAD's EC2NodeClass selects, as
Karpenter v1.14.1 would (`commands/plan/reservedlaunches.py`): reserved offerings first, at the reserved price (the
on-demand price ÷ 10,000,000: aws v1.14.1 pkg/providers/instancetype/offering/reserved_capacity_resolver.go), within
each reservation's `AvailableInstanceCount`; each launch takes one, each node deleted out of a reservation gives one
back (aws v1.14.1 pkg/providers/capacityreservation/provider.go `MarkLaunched` / `MarkTerminated`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.capacityreservations import RESERVED_PRICE_DIVISOR
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from tests.plan.snapshots import pod, write
from tests.plan.test_network_drift import dump
from tests.plan.test_reservation_answers import entry
from tests.plan.test_reservation_drift import OWNER, reserved, reserving_pool, terms
from tests.plan.v1snapshots import nodepool, v1_policies

START = "2026-11-30T09:00:00Z"
M5_LARGE = next(t.price_on_demand for t in load_catalog().instance_types if t.name == "m5.large")


def described(**counts: int) -> dict[str, Any]:
    """The saved DescribeCapacityReservations answer: each reservation (m5.large, us-east-1a) with its room."""
    made = []
    for rid, count in sorted(counts.items()):
        item = entry(rid.replace("_", "-"), "us-east-1a", "m5.large", OWNER, "targeted")
        item["AvailableInstanceCount"] = count
        made.append(item)
    return {"CapacityReservations": made}


def rollout(tmp_path: Path, nodes: int, answer: dict[str, Any] | None, *, base_ids: tuple[str, ...] = (
        "cr-foo", "cr-bar"), head_ids: tuple[str, ...] = ("cr-foo",), node_reservation: str = "cr-bar",
            head_pool: str | None = None, base_pool: str | None = None, redact: bool = False) -> dict[str, Any]:
    """`nodes` reserved nodes of the default NodePool (which allows `reserved`) in `node_reservation`, each full
    (a 1500m pod: its replacement is a new node); BASE's class selects `base_ids`, HEAD's `head_ids`; the plan's
    JSON."""
    base = v1_policies(tmp_path / "base", base_pool or reserving_pool(), node_classes=(terms(*base_ids),))
    head = v1_policies(tmp_path / "head", head_pool or reserving_pool(), node_classes=(terms(*head_ids),))
    items = []
    for i in range(nodes):
        items += [*reserved(f"n{i}", node_reservation), pod(f"web-{i}", f"n{i}", "web", cpu="1500m")]
    extra = {} if answer is None else {"capacity_reservations": (dump(tmp_path, "cr.json", answer),)}
    result = plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", *items),), start=START, output="json",
                                      base=base, head=head, consolidation_timeout="0s", redact=redact, **extra),
                          load_catalog())
    assert result.exit_code == 0, result.stderr
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def launched(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Each replacement's capacity type and reservation, in wave order."""
    return [(r["capacity_type"], r["reservation_id"]) for w in plan["waves"] for r in w["replacements"]]


def test_the_first_two_replacements_take_the_2_instance_reservation_the_rest_on_demand(tmp_path: Path) -> None:
    """HEAD drops cr-bar (CapacityReservationDrift of its 4 nodes) and keeps cr-foo, which has room for 2: the
    scheduler takes the reserved offering first (it is the cheapest), so the first two replacements launch into
    cr-foo at the reserved price; the room is gone then, and the other two launch on-demand. Nodes drained out of
    cr-bar give it room back, but HEAD does not select cr-bar."""
    plan = rollout(tmp_path, 4, described(cr_foo=2, cr_bar=0))

    assert launched(plan) == [("reserved", "cr-foo")] * 2 + [("on-demand", None)] * 2
    prices = [r["price"] for w in plan["waves"] for r in w["replacements"]]
    assert prices[:2] == [M5_LARGE / RESERVED_PRICE_DIVISOR] * 2
    assert all(p is not None and p >= M5_LARGE * 0.5 for p in prices[2:])
    assert not any("no replacement launched into a capacity reservation" in n for n in plan["notes"])


def test_with_no_room_no_replacement_is_reserved(tmp_path: Path) -> None:
    plan = rollout(tmp_path, 3, described(cr_foo=0, cr_bar=0))
    assert launched(plan) == [("on-demand", None)] * 3


def test_without_the_saved_answer_no_room_is_assumed_and_a_note_says_so(tmp_path: Path) -> None:
    """v1.14.1's `status.capacityReservations` carries no count: without `--capacity-reservations` the room is not
    known, nothing is launched reserved, and a note names the answer to give."""
    plan = rollout(tmp_path, 2, None)
    assert launched(plan) == [("on-demand", None)] * 2
    assert ("nodepool default: no replacement launched into a capacity reservation: the room of the capacity "
            "reservations EC2NodeClass default selects is not known (no room assumed); give `aws ec2 "
            "describe-capacity-reservations --output json` as --capacity-reservations") in plan["notes"]


def test_an_answer_without_the_count_assumes_no_room(tmp_path: Path) -> None:
    answer = described(cr_foo=5)
    del answer["CapacityReservations"][0]["AvailableInstanceCount"]
    plan = rollout(tmp_path, 1, answer)
    assert launched(plan) == [("on-demand", None)]
    assert any("available instance count of reservation(s) cr-foo is not known" in n for n in plan["notes"])


def test_a_node_deleted_out_of_a_selected_reservation_gives_its_room_back(tmp_path: Path) -> None:
    """HEAD changes the NodePool's labels (static drift of its 3 nodes, all in cr-foo, which HEAD keeps), and cr-foo
    has no room: the first replacement is launched before its node goes (replace before delete) — on-demand; the
    deleted node gives cr-foo one back (`MarkTerminated`), so the next replacement is reserved, and so on."""
    plan = rollout(tmp_path, 3, described(cr_foo=0), base_ids=("cr-foo",), node_reservation="cr-foo",
                   head_pool=reserving_pool().replace("team: web", "team: search"))
    assert launched(plan) == [("on-demand", None), ("reserved", "cr-foo"), ("reserved", "cr-foo")]


def test_with_a_budget_of_3_the_first_wave_cannot_take_the_room_its_drained_nodes_still_hold(tmp_path: Path) -> None:
    """As above with a budget of 3: the three drift commands start in one poll, each launching its replacement before
    its node is drained. v1.14.1 gives cr-foo its room back when an instance is terminated (aws
    pkg/providers/capacityreservation/provider.go `MarkTerminated`, from the NodeClaim's termination after the
    drain, core pkg/controllers/node/termination/controller.go), not when the command starts: none of the three
    replacements finds room in cr-foo, all launch on-demand."""
    budgeted = nodepool(budgets='[{nodes: "3"}]').replace("values: [on-demand]}", "values: [on-demand, reserved]}")
    plan = rollout(tmp_path, 3, described(cr_foo=0), base_ids=("cr-foo",), node_reservation="cr-foo",
                   base_pool=budgeted, head_pool=budgeted.replace("team: web", "team: search"))
    assert launched(plan) == [("on-demand", None)] * 3
    assert len({w["start"] for w in plan["waves"]}) == 1  # one poll: the budget let all three go together


def test_a_capacity_block_expiring_mid_rollout_is_not_offered_to_later_launches(tmp_path: Path) -> None:
    """cr-foo is a capacity block with room for all three replacements, ending 41 minutes after `--start`: `active`
    at the start, `expiring` from 40 minutes before its end (aws v1.14.1 pkg/providers/capacityreservation/types.go
    `capacityReservationExpirationPeriod`), i.e. from 09:01:00. The drift waves start at 09:00:10, 09:01:30 and
    09:02:50: only the first launch finds the block `active`; read at each launch's time, the later two launch
    on-demand (an `expiring` reservation's offerings are unavailable: offering/reserved_capacity_resolver.go)."""
    answer = {"CapacityReservations": [
        {**entry("cr-foo", "us-east-1a", "m5.large", OWNER, "targeted", kind="capacity-block",
                 end=dt.datetime(2026, 11, 30, 9, 41, tzinfo=dt.UTC)), "AvailableInstanceCount": 3},
        {**entry("cr-bar", "us-east-1a", "m5.large", OWNER, "targeted"), "AvailableInstanceCount": 0}]}
    plan = rollout(tmp_path, 3, answer)
    assert [w["start"] for w in plan["waves"]] == ["2026-11-30T09:00:10Z", "2026-11-30T09:01:30Z",
                                                  "2026-11-30T09:02:50Z"]
    assert launched(plan) == [("reserved", "cr-foo"), ("on-demand", None), ("on-demand", None)]


def test_redact_hashes_the_reservation_of_a_replacement(tmp_path: Path) -> None:
    plan = rollout(tmp_path, 1, described(cr_foo=1, cr_bar=0), redact=True)
    ((kind, rid),) = launched(plan)
    assert kind == "reserved" and rid is not None and rid.startswith("cr-") and rid != "cr-foo"


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nodes=st.integers(1, 5), room=st.integers(0, 6))
def test_reserved_launches_never_exceed_the_available_count(tmp_path: Path, nodes: int, room: int) -> None:
    """Whatever the fleet and the room: the replacements launched into cr-foo are as many as it has room for (no
    more), the others on-demand."""
    plan = rollout(tmp_path / f"{nodes}-{room}", nodes, described(cr_foo=room, cr_bar=0))
    found = launched(plan)
    assert len(found) == nodes
    assert found.count(("reserved", "cr-foo")) == min(room, nodes)
    assert all(kind != "reserved" or rid == "cr-foo" for kind, rid in found)
