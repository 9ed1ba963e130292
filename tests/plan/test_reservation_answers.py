"""A saved `aws ec2 describe-capacity-reservations --output json` (`plan --capacity-reservations`): read at the edge
(`commands/plan/ec2answers.py`) and applied to an EC2NodeClass's `capacityReservationSelectorTerms` as EC2 applies
v1.14.1's queries (`cloud/capacityreservations.selected`) — the class's `status.capacityReservations` its controller
would write. The cases are aws v1.14.1's `pkg/controllers/nodeclass/capacityreservation_test.go` ("NodeClass Capacity
Reservation Reconciler"), its BeforeEach answer (lines 50-147) saved as the CLI prints it; and the reading of a
DescribeInstances entry's reservation (`pkg/providers/instance/types.go` `capacityTypeFromInstance`)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.cloud.capacityreservations import (
    STATE_ACTIVE,
    STATE_EXPIRING,
    TYPE_CAPACITY_BLOCK,
    CapacityReservation,
    reservation,
    selected,
)
from karpenter_policy.commands.plan.ec2answers import Ec2FileError, read_ec2_answers
from tests.profiles import deterministic

GO = "aws v1.14.1 pkg/controllers/nodeclass/capacityreservation_test.go"
NOW = dt.datetime(2026, 11, 30, 9, 0, tzinfo=dt.UTC)
SELF, ALT = "012345678901", "123456789012"
DISCOVERY = {"karpenter.sh/discovery": "test"}
BLOCK_TAGS = {"reservation-type": "capacity-block"}
INTERRUPTIBLE_TAGS = {"reservation-interruptible": "true"}


def entry(rid: str, zone: str, instance_type: str, owner: str, criteria: str, *, tags: dict[str, str] | None = None,
          kind: str = "default", end: dt.datetime | None = None, interruptible: bool | None = False,
          state: str = "active") -> dict[str, Any]:
    """One DescribeCapacityReservations entry as `--output json` prints it."""
    out: dict[str, Any] = {"CapacityReservationId": rid, "AvailabilityZone": zone, "InstanceType": instance_type,
                           "OwnerId": owner, "InstanceMatchCriteria": criteria, "AvailableInstanceCount": 10,
                           "State": state, "ReservationType": kind}
    if tags:
        out["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
    if end is not None:
        out["EndDate"] = end.isoformat()
    if interruptible is not None:
        out["Interruptible"] = interruptible
    return out


def before_each(block_end: dt.datetime = NOW + dt.timedelta(hours=24)) -> list[dict[str, Any]]:
    """capacityreservation_test.go:50-147."""
    return [
        entry("cr-m5.large-1a-1", "test-zone-1a", "m5.large", SELF, "targeted"),
        entry("cr-m5.large-1a-2", "test-zone-1a", "m5.large", SELF, "targeted", tags=DISCOVERY),
        entry("cr-p5.48xlarge-1a", "test-zone-1a", "p5.48xlarge", ALT, "targeted", tags=BLOCK_TAGS,
              kind="capacity-block", end=block_end),
        entry("cr-m5.large-1b-1", "test-zone-1b", "m5.large", SELF, "targeted"),
        entry("cr-m5.large-1b-2", "test-zone-1b", "m5.large", ALT, "targeted", tags=DISCOVERY),
        entry("cr-m5.large-1a-3", "test-zone-1a", "m5.large", SELF, "open"),
        entry("cr-i-m5.large-1a-1", "test-zone-1a", "m5.large", SELF, "open", tags=INTERRUPTIBLE_TAGS,
              interruptible=True),
        entry("cr-nil-interruptible", "test-zone-1a", "m5.large", SELF, "targeted", interruptible=None),
    ]


def saved(tmp_path: Path, entries: list[dict[str, Any]], name: str = "reservations.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"CapacityReservations": entries}))
    return str(path)


def status(tmp_path: Path, term: dict[str, Any], entries: list[dict[str, Any]] | None = None,
           now: dt.datetime = NOW) -> tuple[CapacityReservation, ...]:
    """The class's status for one term, from the answer saved to a file and read back as `plan` reads it."""
    answers = read_ec2_answers(capacity_reservations=(saved(tmp_path, entries or before_each()),))
    assert answers.capacity_reservations is not None
    return selected([term], answers.capacity_reservations, now)


def ids(found: tuple[CapacityReservation, ...]) -> list[str]:
    return [r.id for r in found]


def test_a_reservation_without_interruptible_is_not_interruptible(tmp_path: Path) -> None:
    """capacityreservation_test.go:149 "should handle capacity reservations with nil Interruptible field"."""
    (found,) = status(tmp_path, {"id": "cr-nil-interruptible"})
    assert found.id == "cr-nil-interruptible" and found.interruptible is False


def test_by_id_the_whole_status_entry(tmp_path: Path) -> None:
    """capacityreservation_test.go:161 "should resolve capacity reservations by ID"."""
    assert status(tmp_path, {"id": "cr-m5.large-1a-1"}) == (CapacityReservation(
        id="cr-m5.large-1a-1", instance_type="m5.large", zone="test-zone-1a", owner=SELF, match_criteria="targeted",
        reservation_type="default", interruptible=False, end_time=None, state=STATE_ACTIVE),)


@pytest.mark.parametrize(("line", "term", "expected"), [
    (182, {"tags": DISCOVERY}, ["cr-m5.large-1a-2", "cr-m5.large-1b-2"]),
    (195, {"tags": DISCOVERY, "ownerID": SELF}, ["cr-m5.large-1a-2"]),
    (209, {"instanceMatchCriteria": "open"}, ["cr-i-m5.large-1a-1", "cr-m5.large-1a-3"]),
    (225, {"instanceMatchCriteria": "targeted"}, ["cr-m5.large-1a-1", "cr-m5.large-1a-2", "cr-m5.large-1b-1",
                                                  "cr-m5.large-1b-2", "cr-nil-interruptible", "cr-p5.48xlarge-1a"]),
    (241, {"instanceMatchCriteria": "targeted", "tags": DISCOVERY}, ["cr-m5.large-1a-2", "cr-m5.large-1b-2"]),
    (258, {"instanceMatchCriteria": "targeted", "tags": DISCOVERY, "ownerID": SELF}, ["cr-m5.large-1a-2"]),
    (318, {"tags": BLOCK_TAGS}, ["cr-p5.48xlarge-1a"]),
    (386, {"tags": INTERRUPTIBLE_TAGS}, ["cr-i-m5.large-1a-1"]),
], ids=lambda v: f"capacityreservation_test.go:{v}" if isinstance(v, int) else None)
def test_karpenters_selector_cases(tmp_path: Path, line: int, term: dict[str, Any], expected: list[str]) -> None:
    """capacityreservation_test.go:182-386 "should resolve capacity reservations by tags / tags + owner / instance
    match criteria 'open' / 'targeted' / with tags / with tags and owner", "should discover capacity block
    reservations" (318) and "should discover interruptible reservations" (386): the ids, sorted as the status."""
    found = status(tmp_path, term)
    assert ids(found) == expected
    if "instanceMatchCriteria" in term:
        assert {r.match_criteria for r in found} == {term["instanceMatchCriteria"]}
    if line == 318:
        assert (found[0].reservation_type, found[0].state) == (TYPE_CAPACITY_BLOCK, STATE_ACTIVE)
    if line == 386:
        assert found[0].interruptible is True


def test_an_expired_reservation_is_left_out(tmp_path: Path) -> None:
    """capacityreservation_test.go:273 "should exclude expired capacity reservations": ending in an hour it is
    listed; two hours on, not."""
    entries = before_each()
    entries[0]["EndDate"] = (NOW + dt.timedelta(hours=1)).isoformat()
    assert ids(status(tmp_path, {"id": "cr-m5.large-1a-1"}, entries)) == ["cr-m5.large-1a-1"]
    assert status(tmp_path, {"id": "cr-m5.large-1a-1"}, entries, NOW + dt.timedelta(hours=2)) == ()


@pytest.mark.parametrize("state", ["expired", "cancelled", "pending", "failed", "scheduled", "payment-pending",
                                   "payment-failed", "assessing", "delayed", "unsupported", "unavailable"])
def test_a_reservation_not_active_is_left_out(tmp_path: Path, state: str) -> None:
    """capacityreservation_test.go:297 "should exclude non-active capacity reservations" (every other state EC2's
    `CapacityReservationState` has): the query asks for `state: active`."""
    entries = before_each()
    entries[0]["State"] = state
    assert status(tmp_path, {"id": "cr-m5.large-1a-1"}, entries) == ()


def test_a_capacity_block_is_expiring_40_minutes_before_its_end(tmp_path: Path) -> None:
    """capacityreservation_test.go:332 "should mark capacity blocks as expiring 40 minutes prior to their endDate"
    and 354 "shouldn't mark default capacity reservations as expiring…"."""
    entries = before_each(block_end=NOW + dt.timedelta(minutes=40))
    for found in entries:
        found["EndDate"] = (NOW + dt.timedelta(minutes=40)).isoformat()
    (block,) = status(tmp_path, {"tags": BLOCK_TAGS}, entries)
    assert (block.id, block.state) == ("cr-p5.48xlarge-1a", STATE_EXPIRING)
    defaults = status(tmp_path, {"tags": DISCOVERY}, entries)
    assert len(defaults) == 2 and {(r.reservation_type, r.state) for r in defaults} == {("default", STATE_ACTIVE)}


def test_tag_values_and_keys_with_ec2s_wildcards(tmp_path: Path) -> None:
    """A tag value `*` asks for the key only (`tag-key`, types.go); any other value is a `tag:<key>` filter, whose
    values EC2 matches with its `*` / `?` wildcards."""
    assert ids(status(tmp_path, {"tags": {"karpenter.sh/discovery": "*"}})) == ["cr-m5.large-1a-2", "cr-m5.large-1b-2"]
    assert ids(status(tmp_path, {"tags": {"reservation-*": "*"}})) == ["cr-i-m5.large-1a-1", "cr-p5.48xlarge-1a"]
    assert ids(status(tmp_path, {"tags": {"reservation-type": "capacity-?lock"}})) == ["cr-p5.48xlarge-1a"]
    assert status(tmp_path, {"tags": {"karpenter.sh/discovery": "tes"}}) == ()


def test_an_owner_alone_selects_nothing_and_an_unknown_id_nothing(tmp_path: Path) -> None:
    """types.go `QueriesFromSelectorTerms`: a term of only `ownerID` makes no query; an id EC2 does not have answers
    nothing (provider.go's NotFound)."""
    assert status(tmp_path, {"ownerID": SELF}) == ()
    assert status(tmp_path, {"id": "cr-0000"}) == ()


def test_a_reservation_v1141_cannot_read_is_left_out(tmp_path: Path) -> None:
    """ec2nodeclass_status.go:237 `CapacityReservationFromEC2`: an unknown instance match criteria or reservation
    type is left out of the status."""
    entries = before_each()
    entries[0]["InstanceMatchCriteria"] = "someday"
    entries[3]["ReservationType"] = "future-kind"
    assert status(tmp_path, {"instanceMatchCriteria": "targeted"}, entries) == status(
        tmp_path, {"instanceMatchCriteria": "targeted"}, [e for i, e in enumerate(entries) if i not in (0, 3)])


# --- the edge: an answer out of shape is an error naming the file and the field ----------------------------------

def test_a_block_ending_in_year_1_is_expiring_not_an_overflow(tmp_path: Path) -> None:
    """Hostile probe: a saved capacity block ending at 0001-01-01T00:00:00+00:00 raised OverflowError (40 minutes
    before it is no datetime) out of `plan`; it reads as expiring (it ended long ago)."""
    answers = read_ec2_answers(capacity_reservations=(saved(tmp_path, before_each(
        block_end=dt.datetime(1, 1, 1, tzinfo=dt.UTC))),))
    assert answers.capacity_reservations is not None
    (block,) = [r for r in answers.capacity_reservations if r["CapacityReservationId"] == "cr-p5.48xlarge-1a"]
    read = reservation(block, NOW)
    assert isinstance(read, CapacityReservation) and read.state == STATE_EXPIRING


@pytest.mark.parametrize(("document", "message"), [
    ({"Reservations": []}, "not what `aws ec2 describe-capacity-reservations --output json` prints "
                           "(no CapacityReservations list)"),
    ({"CapacityReservations": {}}, "CapacityReservations: not a list: {}"),
    ({"CapacityReservations": [7]}, "CapacityReservations[0]: not an object: 7"),
    ({"CapacityReservations": [{"State": "active"}]}, "CapacityReservations[0].CapacityReservationId: missing"),
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "OwnerId": 12}]},
     "CapacityReservations[0].OwnerId: not a string: 12"),
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "EndDate": "noon"}]},
     "CapacityReservations[0].EndDate: not a time: \"noon\""),
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "EndDate": "9999-12-31T23:59:59-05:00"}]},
     'CapacityReservations[0].EndDate: not a time Python can hold in UTC: "9999-12-31T23:59:59-05:00"'),
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "EndDate": 1700000000}]},
     "CapacityReservations[0].EndDate: not a time: 1700000000"),
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "Interruptible": "yes"}]},
     "CapacityReservations[0].Interruptible: not true or false: \"yes\""),
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "Tags": [{"Value": "x"}]}]},
     "CapacityReservations[0].Tags[0].Key: missing"),
    # hostile pass: more room than EC2's 32-bit count can say (a 4,000-digit count was read as room)
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "AvailableInstanceCount": 2**31}]},
     "CapacityReservations[0].AvailableInstanceCount: not a count (an integer, 0 to 2,147,483,647): 2147483648"),
    ({"CapacityReservations": [{"CapacityReservationId": "cr-1", "AvailableInstanceCount": -1}]},
     "CapacityReservations[0].AvailableInstanceCount: not a count (an integer, 0 to 2,147,483,647): -1"),
])
def test_an_answer_out_of_shape_names_the_file_and_field(tmp_path: Path, document: Any, message: str) -> None:
    path = tmp_path / "cr.json"
    path.write_text(json.dumps(document))
    with pytest.raises(Ec2FileError) as raised:
        read_ec2_answers(capacity_reservations=(str(path),))
    assert str(raised.value) == f"{path}: {message}"


def instance(**fields: Any) -> dict[str, Any]:
    return {"Reservations": [{"Instances": [{"InstanceId": "i-1", "ImageId": "ami-1", **fields}]}]}


@pytest.mark.parametrize(("fields", "expected"), [
    ({"CapacityReservationId": "cr-1",
      "CapacityReservationSpecification": {"CapacityReservationPreference": "capacity-reservations-only"}}, "cr-1"),
    ({"CapacityReservationId": "cr-1", "CapacityReservationSpecification": {"CapacityReservationPreference": "open"}},
     ""),
    ({"CapacityReservationId": "cr-1", "SpotInstanceRequestId": "sir-1",
      "CapacityReservationSpecification": {"CapacityReservationPreference": "capacity-reservations-only"}}, ""),
    ({"CapacityReservationSpecification": {"CapacityReservationPreference": "capacity-reservations-only"}}, ""),
    ({}, ""),
], ids=["targeted", "open preference: on-demand", "spot", "no reservation id", "none"])
def test_an_instances_reservation_as_v1141_reads_it(tmp_path: Path, fields: dict[str, Any], expected: str) -> None:
    """aws v1.14.1 pkg/providers/instance/types.go:111-121 `capacityTypeFromInstance`: reserved only with a
    `CapacityReservationId`, preference `capacity-reservations-only` and no `SpotInstanceRequestId`."""
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(instance(**fields)))
    assert read_ec2_answers((str(path),)).reservation_of == {"i-1": expected}


def test_an_instances_reservation_fields_out_of_shape_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(instance(CapacityReservationSpecification={"CapacityReservationPreference": 3})))
    with pytest.raises(Ec2FileError, match=r"Reservations\[0\]\.Instances\[0\]\.CapacityReservationSpecification\."
                                           r"CapacityReservationPreference: not a string: 3"):
        read_ec2_answers((str(path),))


# --- a property over many answers and terms ------------------------------------------------------------------------

_TAGS = st.dictionaries(st.sampled_from(["team", "env"]), st.sampled_from(["ml", "web", "*"]), max_size=2)
_RESERVATIONS = st.lists(st.fixed_dictionaries({
    "CapacityReservationId": st.sampled_from([f"cr-{i}" for i in range(6)]),
    "State": st.sampled_from(["active", "active", "expired", "pending"]),
    "OwnerId": st.sampled_from([SELF, ALT]),
    "InstanceMatchCriteria": st.sampled_from(["open", "targeted", "someday"]),
    "ReservationType": st.sampled_from(["default", "capacity-block"]),
    "InstanceType": st.just("m5.large"),
    "AvailabilityZone": st.just("us-east-1a"),
    "Tags": st.dictionaries(st.sampled_from(["team", "env"]), st.sampled_from(["ml", "web"]), max_size=2).map(
        lambda tags: [{"Key": k, "Value": v} for k, v in tags.items()]),
    "EndDate": st.sampled_from([None, NOW - dt.timedelta(hours=1), NOW + dt.timedelta(minutes=20),
                                NOW + dt.timedelta(days=1)]),
}), unique_by=lambda r: r["CapacityReservationId"], max_size=6)
_TERMS = st.lists(st.one_of(
    st.builds(lambda i: {"id": f"cr-{i}"}, st.integers(0, 7)),
    st.fixed_dictionaries({"tags": _TAGS}, optional={"ownerID": st.sampled_from([SELF, ALT]),
                                                     "instanceMatchCriteria": st.sampled_from(["open", "targeted"])}),
    st.fixed_dictionaries({"instanceMatchCriteria": st.sampled_from(["open", "targeted"])},
                          optional={"ownerID": st.sampled_from([SELF, ALT])}),
), max_size=3)


def _term_selects(term: dict[str, Any], raw: dict[str, Any]) -> bool:
    """The terms' meaning, said plainly (no wildcards in these values but a tag value `*`): an id term its id; a
    tags / criteria term every field it sets; `ownerID` narrows such a term."""
    if "id" in term:
        return bool(raw["CapacityReservationId"] == term["id"])
    if not term.get("tags") and not term.get("instanceMatchCriteria"):
        return False
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    return (term.get("ownerID", raw["OwnerId"]) == raw["OwnerId"]
            and all(k in tags and v in ("*", tags[k]) for k, v in term.get("tags", {}).items())
            and term.get("instanceMatchCriteria", raw["InstanceMatchCriteria"]) == raw["InstanceMatchCriteria"])


@deterministic(200)
@given(_RESERVATIONS, _TERMS, st.randoms(use_true_random=False))
def test_the_status_is_the_terms_ored_over_active_unexpired_readable_reservations(
        raws: list[dict[str, Any]], terms: list[dict[str, Any]], shuffle: Any) -> None:
    """For any answer and terms: a reservation is in the status exactly when some term selects it and it is active,
    not past its end and of a criteria v1.14.1 reads; sorted by id, whatever the answer's order."""
    answer = [{k: v for k, v in raw.items() if v is not None} for raw in raws]
    found = selected(terms, answer, NOW)

    expected = sorted(r["CapacityReservationId"] for r in answer if r["State"] == "active"
                      and r.get("EndDate", NOW + dt.timedelta(days=1)) > NOW
                      and r["InstanceMatchCriteria"] in ("open", "targeted")
                      and any(_term_selects(t, r) for t in terms))
    assert ids(found) == expected
    shuffle.shuffle(answer)
    assert selected(terms, answer, NOW) == found
