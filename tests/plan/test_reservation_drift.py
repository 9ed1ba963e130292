"""CapacityReservationDrift in `plan` (`reservationdrift`; aws v1.14.1 `pkg/cloudprovider/drift.go:148`,
`isCapacityReservationDrifted`): a reserved node's reservation — its instance's from `--instances` as v1.14.1 reads
it, else its labels — against the cluster EC2NodeClass's `status.capacityReservations` (terms unchanged), what HEAD's
`capacityReservationSelectorTerms` select in a saved `--capacity-reservations` answer, or HEAD's changed terms alone
(`id` terms decided, `tags` / `instanceMatchCriteria` terms noted, never guessed); the `ReservedCapacity` gate; the
order after subnets; the CLI's JSON, `--redact` and a bad answer; capacity blocks' ends from the status or the
answer; a malformed status is a snapshot problem naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.ec2answers import read_ec2_answers
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.networkdrift import NetworkDriftRules
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.redact import hashed
from karpenter_policy.commands.plan.reservationdrift import ReservationDriftRules
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import listing, pod, write
from tests.plan.test_network_drift import (
    FAKE_SUBNET,
    GROUP,
    START,
    SUBNET_1,
    cluster_class,
    dump,
    imaged,
    instances,
    network_drift,
)
from tests.plan.test_reservation_answers import entry
from tests.plan.v1snapshots import claim, node_class, nodepool, pool_node, v1_policies

SUITE = "aws/karpenter-provider-aws v1.14.1 pkg/cloudprovider/suite_test.go"
RESERVED = "karpenter.sh/capacity-type: reserved"


def reserving_pool() -> str:
    """The default NodePool allowing reserved capacity (else a reserved node would drift on its requirements)."""
    return nodepool().replace("values: [on-demand]}", "values: [on-demand, reserved]}")


def terms(*ids: str, tags: bool = False, criteria: str = "") -> str:
    listed = [f"{{id: {i}}}" for i in ids] + (["{tags: {team: gpu}}"] if tags else []) + (
        [f"{{instanceMatchCriteria: {criteria}}}"] if criteria else [])
    return node_class(extra=f"  capacityReservationSelectorTerms: [{', '.join(listed)}]\n")


def side(document: str) -> PolicySide:
    made = stored_form(yaml.safe_load(document))
    return PolicySide("x", {}, {}, {"default": stored_form(yaml.safe_load(reserving_pool()))}, {"default": made})


def reserved(node_name: str, reservation: str | None) -> list[dict[str, Any]]:
    """A Node and its NodeClaim in `reservation` (None: EC2 moved it to on-demand; the capacity-type controller
    relabelled it so)."""
    labels = {"karpenter.k8s.aws/capacity-reservation-id": reservation} if reservation else {}
    capacity = "reserved" if reservation else "on-demand"
    made = imaged(node_name)
    claimed = claim(node_name, labels=labels, capacity_type=capacity)
    claimed["status"] = made["status"]
    return [pool_node(node_name, capacity_type=capacity, labels=labels), claimed]


def in_reservation(answer: dict[str, Any], reservation: str, preference: str = "capacity-reservations-only"
                   ) -> dict[str, Any]:
    """A DescribeInstances answer whose instances are in `reservation`, launched with `preference`."""
    for found in answer["Reservations"][0]["Instances"]:
        found.update(CapacityReservationId=reservation,
                     CapacityReservationSpecification={"CapacityReservationPreference": preference})
    return answer


def in_cluster(document: str, *reservations: str) -> dict[str, Any]:
    """The cluster's EC2NodeClass, its status resolved (suite_test.go:918-928's `status.capacityReservations`)."""
    made = cluster_class([SUBNET_1], [GROUP], document)
    made["status"]["capacityReservations"] = [
        {"id": r, "availabilityZone": "us-east-1a", "instanceMatchCriteria": "targeted", "instanceType": "m5.large",
         "ownerID": "012345678901", "state": "active", "reservationType": "default"} for r in reservations]
    return made


def test_karpenters_dynamic_capacity_reservation_drift_from_the_clusters_status(tmp_path: Path) -> None:
    """suite_test.go:917 ("should dynamically drift nodeclaims for capacity reservations"): the status lists cr-foo;
    an instance in cr-foo does not drift, one in cr-bar drifts CapacityReservationDrift."""
    classes = side(terms("cr-foo"))
    items = [*reserved("n1", "cr-foo"), *reserved("n2", "cr-bar"), in_cluster(terms("cr-foo"), "cr-foo")]

    reasons, notes, fields = network_drift(tmp_path, classes, classes, items)

    assert reasons == {"n1": (), "n2": (
        "CapacityReservationDrift: reservation cr-bar of node n2 is not among EC2NodeClass default's "
        "spec.capacityReservationSelectorTerms (status.capacityReservations: cr-foo)",)}
    assert fields["n2"] == ("EC2NodeClass default: CapacityReservationDrift (spec.capacityReservationSelectorTerms "
                            "(status.capacityReservations))",)
    assert notes == []


def test_a_node_fallen_back_to_on_demand_does_not_drift(tmp_path: Path) -> None:
    """suite_test.go:949 ("should not drift when capacity reservation falls back to on-demand"): the status no
    longer lists the reservation and the instance left it (relabelled on-demand) — no drift."""
    classes = side(terms("cr-foo"))
    items = [*reserved("n1", None), in_cluster(terms("cr-foo"))]

    reasons, notes, _ = network_drift(tmp_path, classes, classes, items)

    assert reasons == {"n1": ()} and notes == []


def test_changed_id_terms_drift_the_nodes_whose_reservation_they_no_longer_name(tmp_path: Path) -> None:
    """HEAD drops cr-bar from the `id` terms: its node drifts, the field saying the terms changed; cr-foo stays
    selected (the cluster's status shows it exists)."""
    base, head = side(terms("cr-foo", "cr-bar")), side(terms("cr-foo"))
    items = [*reserved("n1", "cr-foo"), *reserved("n2", "cr-bar"),
             in_cluster(terms("cr-foo", "cr-bar"), "cr-foo", "cr-bar")]

    reasons, notes, fields = network_drift(tmp_path, base, head, items)

    assert reasons == {"n1": (), "n2": (
        "CapacityReservationDrift: EC2NodeClass default's spec.capacityReservationSelectorTerms changed → "
        "reservation cr-bar of node n2 is no longer selected (now: cr-foo)",)}
    assert fields["n2"] == ("EC2NodeClass default: CapacityReservationDrift (spec.capacityReservationSelectorTerms "
                            "changed)",)
    assert notes == []


def test_removing_every_term_drifts_every_reserved_node(tmp_path: Path) -> None:
    base, head = side(terms("cr-foo")), side(node_class())
    items = [*reserved("n1", "cr-foo"), *reserved("n2", None), in_cluster(terms("cr-foo"), "cr-foo")]

    reasons, _, _ = network_drift(tmp_path, base, head, items)

    assert reasons["n2"] == ()
    assert reasons["n1"] == ("CapacityReservationDrift: EC2NodeClass default's spec.capacityReservationSelectorTerms "
                             "changed → reservation cr-foo of node n1 is no longer selected (now: none)",)


def test_changed_tag_terms_are_noted_never_guessed(tmp_path: Path) -> None:
    """A `tags` term selects what DescribeCapacityReservations answers at apply time: a node its `id` terms do not
    name is counted in a note, neither drifted nor kept silently."""
    base, head = side(terms("cr-foo")), side(terms(tags=True))
    items = [*reserved("n1", "cr-foo"), in_cluster(terms("cr-foo"), "cr-foo")]

    reasons, notes, _ = network_drift(tmp_path, base, head, items)

    assert reasons == {"n1": ()}
    assert notes == ["1 node of EC2NodeClass default: capacity-reservation drift not assessed: HEAD changes "
                     "spec.capacityReservationSelectorTerms; its tags/instanceMatchCriteria terms select what "
                     "DescribeCapacityReservations answers: give `aws ec2 describe-capacity-reservations --output "
                     "json` as --capacity-reservations"]


def test_an_id_term_the_status_does_not_show_to_exist_is_noted(tmp_path: Path) -> None:
    """drift.go compares with the class's status, which lists only reservations EC2 found: an `id` term naming one the
    snapshot's status does not show may select nothing — noted, not decided."""
    base, head = side(terms("cr-foo")), side(terms("cr-bar"))
    items = [*reserved("n1", "cr-bar"), in_cluster(terms("cr-foo"), "cr-foo")]

    reasons, notes, _ = network_drift(tmp_path, base, head, items)

    assert reasons == {"n1": ()}
    assert notes == ["1 node of EC2NodeClass default: capacity-reservation drift not assessed: HEAD's "
                     "spec.capacityReservationSelectorTerms names reservation cr-bar by id, which the snapshot's "
                     "status.capacityReservations does not show to exist (an id that does not exist selects nothing); "
                     "give `aws ec2 describe-capacity-reservations --output json` as --capacity-reservations"]


def test_it_comes_after_subnet_drift_and_not_at_all_when_subnets_error(tmp_path: Path) -> None:
    """drift.go:68-81: security groups, subnets, then the capacity reservation; an empty `status.subnets` errors
    first (no drift of any kind)."""
    classes = side(terms("cr-foo"))
    items = [*reserved("n1", "cr-bar"), in_cluster(terms("cr-foo"), "cr-foo")]
    items[-1]["status"]["subnets"] = [{"id": SUBNET_1, "zone": "us-east-1a"}]
    answer = in_reservation(instances(FAKE_SUBNET), "cr-bar")

    reasons, _, _ = network_drift(tmp_path, classes, classes, items, instances_answer=answer)
    assert [r.split(":", 1)[0] for r in reasons["n1"]] == ["SubnetDrift", "CapacityReservationDrift"]

    items[-1]["status"]["subnets"] = []
    reasons, _, _ = network_drift(tmp_path, classes, classes, items, instances_answer=answer)
    assert reasons == {"n1": ()}


def test_without_the_cluster_class_and_unchanged_terms_nothing_is_said(tmp_path: Path) -> None:
    classes = side(terms("cr-foo"))
    reasons, notes, _ = network_drift(tmp_path, classes, classes, reserved("n1", "cr-bar"))
    assert reasons == {"n1": ()} and notes == []


def test_a_malformed_status_capacity_reservations_is_a_snapshot_problem() -> None:
    made = stored_form(yaml.safe_load(node_class()))
    made["status"] = {"capacityReservations": [{"state": "active"}]}
    snapshot = read_snapshot(json.dumps(listing(made)).encode(), "s.json")
    assert any("status.capacityReservations[0] has no id" in str(p) for p in snapshot.errors), snapshot.errors


def plan(tmp_path: Path, **options: Any) -> Any:
    base = v1_policies(tmp_path / "base", reserving_pool(), node_classes=(terms("cr-foo", "cr-bar"),))
    head = v1_policies(tmp_path / "head", reserving_pool(), node_classes=(terms("cr-foo"),))
    items = [*reserved("n1", "cr-foo"), pod("web-1", "n1", "web"), *reserved("n2", "cr-bar"),
             pod("web-2", "n2", "web"), in_cluster(terms("cr-foo", "cr-bar"), "cr-foo", "cr-bar")]
    return plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", *items),), start="2026-11-30T09:00:00Z",
                                    output="json", base=base, head=head, consolidation_timeout="0s", **options),
                        load_catalog())


def test_the_plan_puts_the_drifted_reserved_node_in_a_wave_and_redact_hashes_the_ids(tmp_path: Path) -> None:
    result = plan(tmp_path)
    hidden = plan(tmp_path, redact=True)

    assert result.exit_code == 0, result.stderr
    nodes = {n["name"]: n for n in json.loads(result.stdout)["nodes"]}
    assert nodes["n2"]["drifted"] and nodes["n2"]["wave"] is not None and not nodes["n1"]["drifted"]
    assert nodes["n2"]["reasons"] == [
        "CapacityReservationDrift: EC2NodeClass default's spec.capacityReservationSelectorTerms changed → "
        "reservation cr-bar of node n2 is no longer selected (now: cr-foo)"]
    assert hidden.exit_code == 0, hidden.stderr
    assert "cr-bar" not in hidden.stdout and "cr-foo" not in hidden.stdout
    reasons = [r for n in json.loads(hidden.stdout)["nodes"] for r in n["reasons"]]
    assert reasons == [f"CapacityReservationDrift: EC2NodeClass default's spec.capacityReservationSelectorTerms "
                       f"changed → reservation {hashed('cr', 'cr-bar')} of node {hashed('node', 'n2')} is no longer "
                       f"selected (now: {hashed('cr', 'cr-foo')})"]


def block_plan(tmp_path: Path, horizon: str = "24h", reservation_type: str = "capacity-block",
               redact: bool = False, end: str = "2026-11-30T12:00:00Z") -> Any:
    """BASE = HEAD; node n1 in reservation cr-block, whose `endTime` is 12:00 on the plan's day (start 09:00)."""
    same = v1_policies(tmp_path / "p", reserving_pool(), node_classes=(terms("cr-block"),))
    status = in_cluster(terms("cr-block"), "cr-block")
    status["status"]["capacityReservations"][0].update(reservationType=reservation_type,
                                                       endTime=end)
    items = [*reserved("n1", "cr-block"), pod("web-1", "n1", "web"), status]
    return plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", *items),), start="2026-11-30T09:00:00Z",
                                    output="json", base=same, head=same, horizon=horizon, redact=redact),
                        load_catalog())


def test_a_capacity_blocks_nodes_expire_40_minutes_before_its_end(tmp_path: Path) -> None:
    """aws v1.14.1 pkg/controllers/capacityreservation/expiration/controller.go (suite_test.go:93 "should delete
    nodeclaims for expiring capacity blocks"): a capacity block is `expiring` 40 minutes before its `endTime`
    (ec2nodeclass_status.go:238) and its NodeClaims are deleted then — planned as an expiry at 11:20."""
    result = block_plan(tmp_path)

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    (node,) = document["nodes"]
    assert (node["expires"], node["expires_at"]) == (True, "2026-11-30T11:20:00Z")
    assert node["reasons"] == ["expires 2026-11-30T11:20:00Z: capacity block cr-block ends 2026-11-30T12:00:00Z, its "
                               "nodes deleted 40 minutes before (the expiration controller; forceful: no budget, no "
                               "replacement first)"]
    assert [(w["start"][11:19], w["method"], w["nodes"]) for w in document["waves"]] == [
        ("11:20:00", "expiration", ["n1"])]

    hidden = block_plan(tmp_path, redact=True)
    assert hidden.exit_code == 0 and "cr-block" not in hidden.stdout
    assert f"capacity block {hashed('cr', 'cr-block')} ends" in hidden.stdout


def test_a_default_reservation_or_a_block_past_the_horizon_does_not_expire(tmp_path: Path) -> None:
    """suite_test.go:127 ("should not delete nodeclaims for default reservations"): a default reservation's end does
    not delete its nodes early; a block ending beyond `--horizon` is not in the plan."""
    for found in (block_plan(tmp_path / "default", reservation_type="default"),
                  block_plan(tmp_path / "short", horizon="1h")):
        assert found.exit_code == 0, found.stderr
        (node,) = json.loads(found.stdout)["nodes"]
        assert not node["expires"] and node["reasons"] == []


def test_a_bad_end_time_is_a_snapshot_problem() -> None:
    made = stored_form(yaml.safe_load(node_class()))
    made["status"] = {"capacityReservations": [{"id": "cr-1", "endTime": "noon"}]}
    snapshot = read_snapshot(json.dumps(listing(made)).encode(), "s.json")
    assert any("status.capacityReservations[0].endTime is not a time: 'noon'" in str(p) for p in snapshot.errors), (
        snapshot.errors)


def test_a_block_that_ended_at_the_first_moment_a_time_can_say_expires_at_once(tmp_path: Path) -> None:
    """Hostile probe: `endTime: 0001-01-01T00:00:00Z` (40 minutes before it is no datetime) raised OverflowError out of
    the plan; the block ended long ago, so its node expires in the first wave."""
    result = block_plan(tmp_path, end="0001-01-01T00:00:00Z")

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    (node,) = document["nodes"]
    assert node["expires"]
    assert [(w["start"], w["method"], w["nodes"]) for w in document["waves"]] == [
        ("2026-11-30T09:00:00Z", "expiration", ["n1"])]


# --- the saved answers: --capacity-reservations decides tags / criteria terms, --instances the node's reservation ---

OWNER = "012345678901"


def answer(*found: tuple[str, dict[str, str]], kind: str = "default", end: str | None = None) -> dict[str, Any]:
    """`aws ec2 describe-capacity-reservations --output json` of (id, tags) reservations, active, targeted."""
    made = [entry(rid, "us-east-1a", "m5.large", OWNER, "targeted", tags=tags, kind=kind) for rid, tags in found]
    for item in made:
        if end is not None:
            item["EndDate"] = end
    return {"CapacityReservations": made}


def decided(tmp_path: Path, base: PolicySide, head: PolicySide, items: list[dict[str, Any]], *,
            reservations: Any = None, instances_answer: Any = None, gate: bool = True
            ) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """Each v1 node's drift reasons and the notes, the answers given as files, at START."""
    answers = read_ec2_answers(
        (dump(tmp_path, "instances.json", instances_answer),) if instances_answer is not None else (),
        capacity_reservations=(dump(tmp_path, "cr.json", reservations),) if reservations is not None else ())
    snapshot = read_snapshot(json.dumps(listing(*items)).encode(), "s.json")
    assert snapshot.errors == []
    ids = {"n1": "i-n1", "n2": "i-n2"}
    found = ReservationDriftRules(base, head, snapshot.node_classes, answers=answers, instance_ids=ids, now=START,
                                  reserved_capacity=gate)
    network = NetworkDriftRules(base, head, snapshot.node_classes, answers, ids, reservations=found)
    rules = NodePoolDriftRules(base, head, START, snapshot.node_classes, network=network)
    return {name: rules(n).reasons for name, n in fleet_of(snapshot).nodes.items()}, rules.notes()


GPU = {"team": "gpu"}


def test_changed_tag_terms_are_decided_by_the_saved_answer(tmp_path: Path) -> None:
    """HEAD swaps the `id` term for a `tags` term: with the saved DescribeCapacityReservations answer the plan applies
    v1.14.1's query (types.go `QueriesFromSelectorTerms`, the `tag:team` filter) — the node in the untagged cr-foo
    drifts, the node in the tagged cr-gpu does not. Before, both were only counted in a note."""
    base, head = side(terms("cr-foo")), side(terms(tags=True))
    items = [*reserved("n1", "cr-foo"), *reserved("n2", "cr-gpu"), in_cluster(terms("cr-foo"), "cr-foo")]

    reasons, notes = decided(tmp_path, base, head, items, reservations=answer(("cr-foo", {}), ("cr-gpu", GPU)))

    assert reasons == {"n1": (
        "CapacityReservationDrift: EC2NodeClass default's spec.capacityReservationSelectorTerms changed → "
        "reservation cr-foo of node n1 is no longer selected (--capacity-reservations: cr-gpu)",), "n2": ()}
    assert notes == []


def test_instance_match_criteria_terms_are_decided_by_the_saved_answer(tmp_path: Path) -> None:
    """An `instanceMatchCriteria: open` term selects only open reservations (capacityreservation_test.go:209): a node
    in a targeted one drifts."""
    base, head = side(terms("cr-foo")), side(terms(criteria="open"))
    described = answer(("cr-foo", {}), ("cr-open", {}))
    described["CapacityReservations"][1]["InstanceMatchCriteria"] = "open"
    items = [*reserved("n1", "cr-foo"), *reserved("n2", "cr-open"), in_cluster(terms("cr-foo"), "cr-foo")]

    reasons, _ = decided(tmp_path, base, head, items, reservations=described)

    assert reasons["n2"] == () and [r.split(":", 1)[0] for r in reasons["n1"]] == ["CapacityReservationDrift"]


def test_unchanged_terms_without_the_cluster_class_are_decided_by_the_answer(tmp_path: Path) -> None:
    """No EC2NodeClass in the snapshot and the terms unchanged: before, silent; with the answer, the status the
    class's controller writes — an expired reservation (EndDate before --start) is not in it."""
    classes = side(terms(tags=True))
    described = answer(("cr-gpu", GPU), ("cr-old", GPU))
    described["CapacityReservations"][1]["EndDate"] = "2026-11-30T08:00:00+00:00"
    items = [*reserved("n1", "cr-old"), *reserved("n2", "cr-gpu")]

    reasons, notes = decided(tmp_path, classes, classes, items, reservations=described)

    assert reasons == {"n1": (
        "CapacityReservationDrift: reservation cr-old of node n1 is not among EC2NodeClass default's "
        "spec.capacityReservationSelectorTerms (--capacity-reservations: cr-gpu)",), "n2": ()}
    assert notes == []


def test_the_clusters_status_comes_first_when_the_terms_are_unchanged(tmp_path: Path) -> None:
    """The cluster's class keeps HEAD's terms: its status decides, as networkdrift reads `status.subnets` first."""
    classes = side(terms(tags=True))
    items = [*reserved("n1", "cr-gpu"), in_cluster(terms(tags=True), "cr-gpu")]

    reasons, _ = decided(tmp_path, classes, classes, items, reservations=answer(("cr-other", GPU)))

    assert reasons == {"n1": ()}


def unlabelled(node_name: str) -> list[dict[str, Any]]:
    """A reserved node whose reservation-id label is missing (an older Karpenter's)."""
    made = imaged(node_name)
    claimed = claim(node_name, capacity_type="reserved")
    claimed["status"] = made["status"]
    return [pool_node(node_name, capacity_type="reserved"), claimed]


def test_a_node_without_the_label_is_read_by_its_instance(tmp_path: Path) -> None:
    """drift.go:148 reads the instance's `CapacityReservationDetails` (types.go `NewInstance`), never a label: a node
    without the reservation-id label whose saved DescribeInstances entry names cr-bar, launched
    `capacity-reservations-only`, drifts against a status of cr-foo. Before, the missing label made it silent."""
    classes = side(terms("cr-foo"))
    items = [*unlabelled("n1"), in_cluster(terms("cr-foo"), "cr-foo")]

    reasons, _ = decided(tmp_path, classes, classes, items,
                         instances_answer=in_reservation(instances(SUBNET_1), "cr-bar"))

    assert reasons == {"n1": (
        "CapacityReservationDrift: reservation cr-bar of node n1 is not among EC2NodeClass default's "
        "spec.capacityReservationSelectorTerms (status.capacityReservations: cr-foo)",)}


def test_the_instance_decides_over_the_label(tmp_path: Path) -> None:
    """suite_test.go:949 ("should not drift when capacity reservation falls back to on-demand") read off the
    instance: labelled cr-bar, but the instance launched with preference `open` (v1.14.1: on-demand) — no drift; an
    instance in the selected cr-foo under a stale cr-bar label — no drift either. Before, the label drifted both."""
    classes = side(terms("cr-foo"))
    items = [*reserved("n1", "cr-bar"), in_cluster(terms("cr-foo"), "cr-foo")]

    for answer_ in (in_reservation(instances(SUBNET_1), "cr-bar", preference="open"),
                    in_reservation(instances(SUBNET_1), "cr-foo")):
        reasons, _ = decided(tmp_path, classes, classes, items, instances_answer=answer_)
        assert reasons == {"n1": ()}


def test_with_the_reserved_capacity_gate_off_nothing_drifts_so(tmp_path: Path) -> None:
    """types.go `capacityTypeFromInstance`: with `ReservedCapacity` off no instance is read as reserved, so no
    CapacityReservationDrift (`--feature-gates ReservedCapacity=false`)."""
    classes = side(terms("cr-foo"))
    items = [*reserved("n1", "cr-bar"), in_cluster(terms("cr-foo"), "cr-foo")]

    assert decided(tmp_path, classes, classes, items, gate=False)[0] == {"n1": ()}
    assert decided(tmp_path, classes, classes, items)[0]["n1"] != ()


def test_the_plan_reads_the_saved_answer_and_redact_hashes_its_ids(tmp_path: Path) -> None:
    """The CLI's --capacity-reservations: BASE's `id` terms become HEAD's `tags` term; n2's cr-bar is not tagged and
    drifts into a wave; with --redact no reservation id of the answer is printed."""
    base = v1_policies(tmp_path / "base", reserving_pool(), node_classes=(terms("cr-foo", "cr-bar"),))
    head = v1_policies(tmp_path / "head", reserving_pool(), node_classes=(terms(tags=True),))
    items = [*reserved("n1", "cr-foo"), pod("web-1", "n1", "web"), *reserved("n2", "cr-bar"),
             pod("web-2", "n2", "web"), in_cluster(terms("cr-foo", "cr-bar"), "cr-foo", "cr-bar")]
    snapshot = write(tmp_path / "s.json", *items)
    described = dump(tmp_path, "cr.json", answer(("cr-foo", GPU), ("cr-bar", {}), ("cr-secret", GPU)))

    def run(**options: Any) -> Any:
        return plan_command(PlanOptions(snapshot=(snapshot,), start="2026-11-30T09:00:00Z", output="json", base=base,
                                        head=head, consolidation_timeout="0s", capacity_reservations=(described,),
                                        **options), load_catalog())

    result, hidden = run(), run(redact=True)

    assert result.exit_code == 0, result.stderr
    nodes = {n["name"]: n for n in json.loads(result.stdout)["nodes"]}
    assert nodes["n2"]["drifted"] and nodes["n2"]["wave"] is not None and not nodes["n1"]["drifted"]
    assert nodes["n2"]["reasons"] == [
        "CapacityReservationDrift: EC2NodeClass default's spec.capacityReservationSelectorTerms changed → "
        "reservation cr-bar of node n2 is no longer selected (--capacity-reservations: cr-foo, cr-secret)"]
    assert hidden.exit_code == 0, hidden.stderr
    assert not any(i in hidden.stdout for i in ("cr-foo", "cr-bar", "cr-secret"))
    assert f"({hashed('cr', 'cr-foo')}, {hashed('cr', 'cr-secret')})"[1:-1] in hidden.stdout


def test_a_bad_answer_is_exit_2_naming_the_file_and_field(tmp_path: Path) -> None:
    described = dump(tmp_path, "cr.json", {"CapacityReservations": [{"CapacityReservationId": "cr-1", "Tags": 7}]})
    result = plan(tmp_path, capacity_reservations=(described,))
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == f"karpenter-policy plan: {described}: CapacityReservations[0].Tags: not a list: 7\n"


def test_the_gate_off_on_the_command_line_drifts_nothing_so(tmp_path: Path) -> None:
    result = plan(tmp_path, feature_gates="ReservedCapacity=false")
    assert result.exit_code == 0, result.stderr
    assert not any(n["drifted"] for n in json.loads(result.stdout)["nodes"])


def test_a_block_absent_from_the_status_expires_by_the_saved_answer(tmp_path: Path) -> None:
    """expiration/controller.go asks EC2 for the NodeClaims' reservation ids, whatever a class's status lists: a
    capacity block the snapshot's status does not list expires 40 minutes before the `EndDate` of the saved answer
    (ec2nodeclass_status.go:238). Before, it was not known to end; a default reservation's end still deletes
    nothing, and a block not `active` in the answer is not answered."""
    same = v1_policies(tmp_path / "p", reserving_pool(), node_classes=(terms("cr-block"),))
    items = [*reserved("n1", "cr-block"), pod("web-1", "n1", "web")]  # no EC2NodeClass: no status lists it
    snapshot = write(tmp_path / "s.json", *items)

    def run(kind: str, state: str = "active") -> Any:
        described = answer(("cr-block", {}), kind=kind, end="2026-11-30T12:00:00+00:00")
        described["CapacityReservations"][0]["State"] = state
        result = plan_command(PlanOptions(snapshot=(snapshot,), start="2026-11-30T09:00:00Z", output="json",
                                          base=same, head=same, capacity_reservations=(
                                              dump(tmp_path, f"{kind}-{state}.json", described),)), load_catalog())
        assert result.exit_code == 0, result.stderr
        (node,) = json.loads(result.stdout)["nodes"]
        return node

    block = run("capacity-block")
    assert (block["expires"], block["expires_at"]) == (True, "2026-11-30T11:20:00Z")
    assert block["reasons"][0].startswith("expires 2026-11-30T11:20:00Z: capacity block cr-block ends "
                                          "2026-11-30T12:00:00Z")
    assert not run("default")["expires"] and not run("capacity-block", "expired")["expires"]


def test_a_block_whose_end_is_unknown_is_a_note_naming_the_answer(tmp_path: Path) -> None:
    """A node labelled in a capacity block that no class status lists and no saved answer holds: when v1.14.1's
    expiration controller deletes it is not known — a note names `--capacity-reservations` (before: silent). With
    the answer listing the block, the node expires and no note is printed."""
    same = v1_policies(tmp_path / "p", reserving_pool(), node_classes=(terms("cr-block"),))
    node, claimed = reserved("n1", "cr-block")
    for labelled in (node["metadata"]["labels"], claimed["metadata"]["labels"]):
        labelled["karpenter.k8s.aws/capacity-reservation-type"] = "capacity-block"
    snapshot = write(tmp_path / "s.json", node, claimed, pod("web-1", "n1", "web"))

    def notes(*answers: str) -> list[str]:
        result = plan_command(PlanOptions(snapshot=(snapshot,), start="2026-11-30T09:00:00Z", output="json",
                                          base=same, head=same, capacity_reservations=answers), load_catalog())
        assert result.exit_code == 0, result.stderr
        found: list[str] = json.loads(result.stdout)["notes"]
        return [n for n in found if "capacity block" in n]

    assert notes() == ["1 node in capacity blocks no EC2NodeClass status lists: when Karpenter deletes it (40 minutes "
                       "before the block ends) is not planned; give `aws ec2 describe-capacity-reservations --output "
                       "json` as --capacity-reservations"]
    elsewhere = dump(tmp_path, "other.json", answer(("cr-other", {}), kind="capacity-block",
                                                     end="2026-11-30T12:00:00+00:00"))
    assert notes(elsewhere) == ["1 node in capacity blocks no EC2NodeClass status lists: when Karpenter deletes it "
                                "(40 minutes before the block ends) is not planned; the saved --capacity-reservations "
                                "answer does not list their blocks"]
    listed = dump(tmp_path, "cr.json", answer(("cr-block", {}), kind="capacity-block", end="2026-11-30T12:00:00+00:00"))
    assert notes(listed) == []
