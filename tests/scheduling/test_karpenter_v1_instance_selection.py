"""Karpenter v1.14.1's `instance_selection_test.go`, every `It`, on v1.14.1's rules with NodePools.

The reference is `pkg/controllers/provisioning/scheduling/instance_selection_test.go` (kubernetes-sigs/karpenter
v1.14.1, Describe "Instance Type Selection"). Apart from renames (NodePool for Provisioner, offerings as requirements)
its `It`s before `Context("MinValues")` are those of v0.31.1's `provisioner_instance_selection_test.go`: the same
NodePool (capacity type spot or on-demand, arch arm64 or amd64), `fake.InstanceTypesAssorted`, pods and assertions
(the launch at the cheapest price of all types, every type of the NodeClaim meeting the requirements and offering
what is asked; no launch when no type matches; three pods of each size on one node; the cheaper on-demand type). So
they are replayed here from `test_karpenter_scheduling.py` with the cluster on v1.14.1's rules and the templates
NodePools (`v1_replay.py`). The `MinValues` context is ported in `test_karpenter_min_values.py`, case by case.

`INSTANCE_SELECTION_ITS` lists every `It` with the line it starts on; `test_every_it_is_accounted_for` holds that
each is replayed here, ported in the minValues module, or in `NOT_PORTED` with its reason (reported as skips).
"""

from __future__ import annotations

import pytest

from karpenter_policy.scheduling import KARPENTER

from . import test_karpenter_min_values as min_values_suite
from . import test_karpenter_scheduling as v0_31_suite
from . import v1_replay

GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/instance_selection_test.go"
_CHEAPEST = "should schedule on one of the cheapest instances"

#: Every `It` of instance_selection_test.go at v1.14.1: the line it starts on → its name.
INSTANCE_SELECTION_ITS: dict[int, str] = {
    82: _CHEAPEST,
    89: f"{_CHEAPEST} (pod arch = amd64)",
    103: f"{_CHEAPEST} (pod arch = arm64)",
    116: f"{_CHEAPEST} (prov arch = amd64)",
    131: f"{_CHEAPEST} (prov arch = arm64)",
    146: f"{_CHEAPEST} (prov os = windows)",
    161: f"{_CHEAPEST} (pod os = windows)",
    174: f"{_CHEAPEST} (prov os = windows) [second]",
    189: f"{_CHEAPEST} (pod os = linux)",
    202: f"{_CHEAPEST} (pod os = linux) [second]",
    215: f"{_CHEAPEST} (prov zone = test-zone-2)",
    230: f"{_CHEAPEST} (pod zone = test-zone-2)",
    243: f"{_CHEAPEST} (prov ct = spot)",
    258: f"{_CHEAPEST} (pod ct = spot)",
    271: f"{_CHEAPEST} (prov ct = ondemand, prov zone = test-zone-1)",
    291: f"{_CHEAPEST} (pod ct = spot, pod zone = test-zone-1)",
    310: f"{_CHEAPEST} (prov ct = spot, pod zone = test-zone-2)",
    330: f"{_CHEAPEST} (prov ct = ondemand/test-zone-1/arm64/windows)",
    362: f"{_CHEAPEST} (prov = spot/test-zone-2, pod = amd64/linux)",
    396: f"{_CHEAPEST} (pod ct = spot/test-zone-2/amd64/linux)",
    428: "should not schedule if no instance type matches selector (pod arch = arm)",
    448: "should not schedule if no instance type matches selector (pod arch = arm zone=test-zone-2)",
    477: "should not schedule if no instance type matches selector (prov arch = arm / pod zone=test-zone-2)",
    509: "should schedule on an instance with enough resources",
    563: "should schedule on cheaper on-demand instance even when spot price ordering would place other instance types "
         "first",
    621: "MinValues / should schedule respecting the minValues from instance-type requirements",
    693: "MinValues / should schedule respecting the minValues in Gt operator",
    784: "MinValues / scheduler should fail if the minValues in Gt operator is not satisfied",
    870: "MinValues / should schedule respecting the minValues in Lt operator",
    961: "MinValues / scheduler should fail if the minValues in Lt operator is not satisfied",
    1029: "MinValues / should schedule considering the max of the minValues of In and NotIn operators in the "
          "instance-type requirements",
    1121: "MinValues / should schedule considering the max of the minValues of Gt and Lt operators.",
    1234: "MinValues / schedule should fail if minimum number of InstanceTypes is not met as per the minValues in the "
          "requirement",
    1261: "MinValues / schedule should fail if minimum number of InstanceTypes is not met as per the minValues in the "
          "requirement after truncation",
    1331: "MinValues / should schedule and pick the max of minValues of InstanceTypes if multiple operators are used "
          "for the same requirement.",
    1410: "MinValues / should schedule and respect multiple requirement keys with minValues",
}  # fmt: skip

#: A v0.31 `SELECTION` entry (its Go case) → the lines of the v1.14.1 `It`s it replays ("(pod os = linux)" is two
#: identical `It`s at v1.14.1 as at v0.31).
REPLAYED_CHEAPEST: dict[str, tuple[int, ...]] = {
    _CHEAPEST: (82,),
    "(pod arch = amd64)": (89,),
    "(pod arch = arm64)": (103,),
    "(prov arch = amd64)": (116,),
    "(prov arch = arm64)": (131,),
    "(pod os = linux)": (189, 202),
    "(prov zone = test-zone-2)": (215,),
    "(pod zone = test-zone-2)": (230,),
    "(prov ct = spot)": (243,),
    "(pod ct = spot)": (258,),
    "(prov ct = ondemand, prov zone = test-zone-1)": (271,),
    "(pod ct = spot, pod zone = test-zone-1)": (291,),
    "(prov ct = spot, pod zone = test-zone-2)": (310,),
    "(prov = spot/test-zone-2, pod = amd64/linux)": (362,),
    "(pod ct = spot/test-zone-2/amd64/linux)": (396,),
}

#: The `test_instance_selection_should_not_schedule_if_no_instance_type_matches_selector` case (its Go case) → line.
REPLAYED_NO_MATCH: dict[str, int] = {
    "(pod arch = arm)": 428,
    "(pod arch = arm zone=test-zone-2)": 448,
    "(prov arch = arm / pod zone=test-zone-2)": 477,
}

#: A v0.31 suite test without arguments → the line of the v1.14.1 `It` it replays.
REPLAYED: dict[str, int] = {"test_instance_selection_should_schedule_on_cheaper_on_demand_instance": 563}
#: "should schedule on an instance with enough resources" asserts Karpenter's own packing (three pods on one node):
#: replayed under the `karpenter` strategy only, as at v0.31.
ENOUGH_RESOURCES = ("test_instance_selection_should_schedule_on_an_instance_with_enough_resources", 509)

_WINDOWS = (
    "Windows: a node's operating system is its template's (the EC2NodeClass's AMI family or alias), not a property "
    "of the instance type, so no template here offers both Linux and Windows types (as for the v0.31 port)"
)
#: The line of an `It` the model cannot express → why.
NOT_PORTED: dict[int, str] = {146: _WINDOWS, 161: _WINDOWS, 174: _WINDOWS, 330: _WINDOWS}


def _min_values_lines() -> list[int]:
    return [case.line for case in min_values_suite.CASES if case.go == min_values_suite.SELECTION]


def test_every_it_is_accounted_for() -> None:
    """Each `It` of instance_selection_test.go is ported in exactly one place or listed as not ported (36 `It`s:
    21 replayed here, 11 minValues cases, 4 Windows cases not ported)."""
    places = [
        *(line for lines in REPLAYED_CHEAPEST.values() for line in lines),
        *REPLAYED_NO_MATCH.values(),
        *REPLAYED.values(),
        ENOUGH_RESOURCES[1],
        *_min_values_lines(),
        *NOT_PORTED,
    ]
    assert sorted(places) == sorted(INSTANCE_SELECTION_ITS), "an It is missing or ported twice"
    assert len(INSTANCE_SELECTION_ITS) == 36
    assert {entry[0].removeprefix(f"{_CHEAPEST} ") for entry in v0_31_suite.SELECTION} >= set(REPLAYED_CHEAPEST)


@pytest.fixture()
def on_v1_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    v1_replay.on_v1_rules(monkeypatch, v0_31_suite)


def _where(line: int) -> str:
    return f"{GO_FILE}:{line} {INSTANCE_SELECTION_ITS[line]}"


@pytest.mark.parametrize(
    "entry",
    [e for e in v0_31_suite.SELECTION if e[0].removeprefix(f"{_CHEAPEST} ") in REPLAYED_CHEAPEST],
    ids=lambda e: "+".join(f"L{line}" for line in REPLAYED_CHEAPEST[e[0].removeprefix(f"{_CHEAPEST} ")]),
)
def test_v1_cheapest_instance_replay(entry: tuple[object, ...], strategy: str, on_v1_rules: None) -> None:
    """instance_selection_test.go (v1.14.1), "should schedule on one of the cheapest instances ..."."""
    line = REPLAYED_CHEAPEST[str(entry[0]).removeprefix(f"{_CHEAPEST} ")][0]
    v1_replay.replay(v0_31_suite, "test_instance_selection_cheapest", *entry, strategy=strategy, where=_where(line))


@pytest.mark.parametrize("go_case", sorted(REPLAYED_NO_MATCH), ids=lambda c: f"L{REPLAYED_NO_MATCH[c]}")
def test_v1_no_matching_instance_type_replay(go_case: str, strategy: str, on_v1_rules: None) -> None:
    """instance_selection_test.go (v1.14.1), "should not schedule if no instance type matches selector ..."."""
    test = v0_31_suite.test_instance_selection_should_not_schedule_if_no_instance_type_matches_selector
    marks: list[pytest.Mark] = test.pytestmark
    (parametrize,) = (mark for mark in marks if mark.name == "parametrize")
    arguments = next(case for case in parametrize.args[1] if case[0] == go_case)
    name = "test_instance_selection_should_not_schedule_if_no_instance_type_matches_selector"
    v1_replay.replay(v0_31_suite, name, *arguments, strategy=strategy, where=_where(REPLAYED_NO_MATCH[go_case]))


@pytest.mark.parametrize("name", sorted(REPLAYED), ids=lambda n: f"L{REPLAYED[n]}")
def test_v1_instance_selection_replay(name: str, strategy: str, on_v1_rules: None) -> None:
    """instance_selection_test.go (v1.14.1): the `It` REPLAYED names."""
    v1_replay.replay(v0_31_suite, name, strategy=strategy, where=_where(REPLAYED[name]))


def test_v1_l509_enough_resources_replay(on_v1_rules: None) -> None:
    """instance_selection_test.go:509 (v1.14.1) "should schedule on an instance with enough resources"."""
    name, line = ENOUGH_RESOURCES
    v1_replay.replay(v0_31_suite, name, strategy=KARPENTER, where=_where(line))


@pytest.mark.parametrize("line", sorted(NOT_PORTED), ids=lambda line: f"L{line}")
def test_not_ported(line: int) -> None:
    """The `It`s the model cannot express, reported as skips with their reason."""
    pytest.skip(f"{_where(line)}: {NOT_PORTED[line]}")
