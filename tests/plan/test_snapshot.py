"""Reading a snapshot: what kubectl prints is read whole; anything of an unexpected shape is a problem naming the
file and the item's index — never a traceback, never "0 nodes"."""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.commands.plan.drift import PolicySide
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules
from karpenter_policy.commands.plan.snapshot import read_snapshot, read_snapshots
from tests.plan.snapshots import daemon_set, listing, node, pdb, pod, write
from tests.plan.v1snapshots import claim, node_class, nodepool, pool_node
from tests.profiles import deterministic


def test_a_list_as_kubectl_prints_it_is_read_by_kind(tmp_path: Path) -> None:
    file = write(tmp_path / "s.json", node("n1"), pod("p1", "n1", "web"), pdb("web", "web", maxUnavailable=1),
                 daemon_set("proxy"), {"apiVersion": "karpenter.sh/v1beta1", "kind": "NodeClaim",
                                       "metadata": {"name": "c1"}, "status": {"nodeName": "n1"}})

    snapshot = read_snapshots([file])

    assert [len(x) for x in (snapshot.nodes, snapshot.pods, snapshot.pdbs, snapshot.daemon_sets,
                             snapshot.node_claims)] == [1, 1, 1, 1, 1]
    assert snapshot.problems == []


def test_several_files_and_stdin_merge_and_a_later_copy_replaces_an_earlier_with_a_warning(tmp_path: Path) -> None:
    first = write(tmp_path / "a.json", node("n1", instance_type="m5.large"))
    stdin = io.BytesIO(json.dumps(listing(node("n1", instance_type="m5.xlarge"), node("n2"))).encode())

    snapshot = read_snapshots([first, "-"], stdin)

    assert {n["metadata"]["name"] for n in snapshot.nodes} == {"n1", "n2"}
    n1 = next(n for n in snapshot.nodes if n["metadata"]["name"] == "n1")
    assert n1["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.xlarge"
    assert [str(p) for p in snapshot.problems] == [
        f"-: item 0: warning: Node n1 is in {first} (item 0) too: this one is used"]


def test_one_object_is_a_list_of_one(tmp_path: Path) -> None:
    (tmp_path / "n.json").write_text(json.dumps(node("n1")))

    assert [n["metadata"]["name"] for n in read_snapshots([str(tmp_path / "n.json")]).nodes] == ["n1"]


def test_an_item_of_a_bad_shape_is_an_error_naming_the_file_and_its_index(tmp_path: Path) -> None:
    bad_pod = pod("p1", "n1", "web")
    bad_pod["spec"]["nodeName"] = 7
    bad_pdb = pdb("web", "web", maxUnavailable="one")
    file = write(tmp_path / "s.json", node("n1"), {"kind": "Node", "metadata": {"labels": {"a": "b"}}}, bad_pod,
                 bad_pdb, "a string", {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"}})

    problems = [str(p) for p in read_snapshots([file]).problems]

    assert problems == [
        f"{file}: item 1: error: an object without a name: None",
        f"{file}: item 2: error: Pod default/p1: spec.nodeName is not a string: 7",
        f"{file}: item 3: error: PodDisruptionBudget default/web: spec.maxUnavailable is neither a count nor a "
        "percentage: 'one'",
        f"{file}: item 4: error: not an object: 'a string'",
        f"{file}: item 5: warning: Service web: not read by plan",
    ]


def test_a_node_whose_room_or_conditions_cannot_be_read_is_an_error_never_an_empty_or_full_node(
    tmp_path: Path,
) -> None:
    """The plan takes a node's room from its `status.allocatable` (and capacity) and its readiness from its
    conditions: a quantity it cannot read is refused, not counted 0 (a node that looks full)."""
    shapes: list[dict[str, Any]] = [{"capacity": "x"}, {"allocatable": {"cpu": "abc", "memory": "1Gi"}},
                                    {"conditions": [1]}, "Ready"]
    items = []
    for index, status in enumerate(shapes):
        bad = node(f"n{index}")
        bad["status"] = status
        items.append(bad)
    file = write(tmp_path / "s.json", *items, node("fine"))

    problems = [str(p) for p in read_snapshots([file]).problems]

    assert problems == [
        f"{file}: item 0: error: Node n0: status.capacity is not a map of quantities: 'x'",
        f"{file}: item 1: error: Node n1: status.allocatable[cpu] is not a quantity: 'abc'",
        f"{file}: item 2: error: Node n2: status.conditions is not a list of objects: [1]",
        f"{file}: item 3: error: Node n3: status is not an object: 'Ready'",
    ]


def test_what_the_api_server_would_refuse_is_an_error_never_a_plan_on_it(tmp_path: Path) -> None:
    """A negative node room, a PDB percentage past 100 % or a PDB with both minAvailable and maxUnavailable cannot come
    from a cluster (the API server refuses each: ValidateResourceQuantityValue, IsNotMoreThan100Percent,
    ValidatePodDisruptionBudgetSpec); a hand-edited or corrupt snapshot holding one is refused, never planned on (a
    node of -4 CPUs looked full and moved its pods elsewhere; a 150 % budget let every pod go)."""
    negative = node("n1")
    negative["status"] = {"allocatable": {"cpu": "-4", "memory": "8Gi", "pods": "29"}}
    negative_capacity = node("n2")
    negative_capacity["status"] = {"capacity": {"memory": "-1Gi"}}
    file = write(tmp_path / "s.json", negative, negative_capacity, pdb("web", "web", maxUnavailable="150%"),
                 pdb("db", "db", minAvailable="101%"), pdb("api", "api", minAvailable=1, maxUnavailable=1),
                 pdb("all", "cache", maxUnavailable="100%"), node("fine"))

    problems = [str(p) for p in read_snapshots([file]).problems]

    assert problems == [
        f"{file}: item 0: error: Node n1: status.allocatable[cpu] must be greater than or equal to 0: '-4'",
        f"{file}: item 1: error: Node n2: status.capacity[memory] must be greater than or equal to 0: '-1Gi'",
        f"{file}: item 2: error: PodDisruptionBudget default/web: spec.maxUnavailable must not be greater than 100%: "
        "'150%'",
        f"{file}: item 3: error: PodDisruptionBudget default/db: spec.minAvailable must not be greater than 100%: "
        "'101%'",
        f"{file}: item 4: error: PodDisruptionBudget default/api: spec: minAvailable and maxUnavailable cannot be both "
        "set",
    ]


def test_pods_bound_to_a_node_the_snapshot_does_not_hold_are_named_in_a_warning() -> None:
    """A snapshot taken without the nodes (`kubectl get pods` alone, a node deleted while kubectl listed) leaves
    pods on a node the plan cannot see: it cannot drain or count them, and says so once per node instead of dropping
    them in silence."""
    snapshot = read_snapshot(json.dumps(listing(node("n1"), pod("p1", "n1", "web"), pod("p2", "gone", "web"),
                                                pod("p3", "gone", "api"), pod("p4", "other", "api"))).encode(),
                             "s.json")

    fleet = fleet_of(snapshot)

    assert [str(p) for p in snapshot.problems] == [
        "s.json: warning: Node gone is not in the snapshot, but 2 pods name it as spec.nodeName: left out of the "
        "plan (take the snapshot with the nodes listed)",
        "s.json: warning: Node other is not in the snapshot, but 1 pod names it as spec.nodeName: left out of the "
        "plan (take the snapshot with the nodes listed)",
    ]
    assert not snapshot.errors
    assert [p.key for p in fleet.pods_on["n1"]] == ["default/p1"]


def test_what_is_not_a_snapshot_is_an_error_never_an_empty_fleet(tmp_path: Path) -> None:
    cases = {"empty.json": "", "yaml.json": "items: []\n", "number.json": "7", "status.json": json.dumps(
        {"kind": "Status", "message": "Unauthorized"}), "items.json": json.dumps({"kind": "List", "items": {}}),
        "nodes.json": json.dumps(listing(pod("p", None, "web")))}
    for name, text in cases.items():
        (tmp_path / name).write_text(text)

    for name in cases:
        snapshot = read_snapshots([str(tmp_path / name)])
        assert snapshot.errors, name
    missing = read_snapshots([str(tmp_path / "absent.json")])
    assert "cannot read" in str(missing.errors[0])
    assert "no Node in the snapshot" in str(read_snapshots([str(tmp_path / "nodes.json")]).errors[-1])


def test_a_pod_spec_the_scheduler_cannot_read_is_a_problem_not_a_pod_left_out() -> None:
    bad = pod("p1", "n1", "web")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    snapshot = read_snapshot(json.dumps(listing(node("n1"), bad)).encode(), "s.json")

    fleet_of(snapshot)

    assert [p.severity for p in snapshot.problems] == ["error"]
    assert "default/p1" in snapshot.problems[0].message


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=12,
)
#: Values that trip code that trusts a field's type: a number where a list or a map belongs, and the reverse.
AWKWARD = [5, -1, 0, True, "x", "", [5], ["x"], [{}], {"a": 5}, {"a": [1]}, {}, [], None, 1e300, "50%", "2026-13-99"]
TEMPLATES = [node("n1"), pod("p1", "n1", "web"), pdb("web", "web", minAvailable="50%"), daemon_set("proxy")]
PATHS = [("metadata",), ("metadata", "name"), ("metadata", "labels"), ("metadata", "creationTimestamp"), ("spec",),
         ("spec", "nodeName"), ("spec", "containers"), ("spec", "minAvailable"), ("spec", "selector"),
         ("spec", "template"), ("status",), ("status", "conditions"), ("kind",), ("metadata", "ownerReferences"),
         ("spec", "tolerations"), ("spec", "nodeSelector"), ("metadata", "annotations"), ("spec", "providerID")]


def _replace(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    target = copy
    for part in path[:-1]:
        if not isinstance(target.get(part), dict):
            target[part] = {}
        target = target[part]
    target[path[-1]] = value
    return copy


@deterministic(300)
@given(st.lists(st.tuples(st.sampled_from(range(len(TEMPLATES))), st.sampled_from(PATHS),
                         st.one_of(st.sampled_from(AWKWARD), JSON)), max_size=6))
def test_hostile_items_are_read_or_named_never_a_traceback(changes: list[tuple[int, tuple[str, ...], Any]]) -> None:
    items = [node("n0")] + [_replace(TEMPLATES[i], path, value) for i, path, value in changes]

    snapshot = read_snapshot(json.dumps(listing(*items)).encode(), "s.json")
    named = {p.index for p in snapshot.problems if p.index is not None}
    read = len(snapshot.nodes) + len(snapshot.pods) + len(snapshot.pdbs) + len(snapshot.daemon_sets)
    if not snapshot.errors:
        fleet_of(snapshot)  # never raises: a spec the scheduler cannot read is one more problem

    assert read + len(named) >= len(items)
    assert all(0 <= index < len(items) for index in named)


@pytest.mark.parametrize("template", range(len(TEMPLATES)))
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("value", AWKWARD, ids=repr)
def test_each_awkward_value_in_each_field_is_read_or_named(template: int, path: tuple[str, ...], value: Any) -> None:
    items = [node("n0"), _replace(TEMPLATES[template], path, value)]

    snapshot = read_snapshot(json.dumps(listing(*items)).encode(), "s.json")
    if not snapshot.errors:
        fleet_of(snapshot)

    read = len(snapshot.nodes) + len(snapshot.pods) + len(snapshot.pdbs) + len(snapshot.daemon_sets)
    assert read + len({p.index for p in snapshot.problems if p.index is not None}) >= 2


@deterministic(200)
@given(JSON)
def test_any_json_value_is_read_or_refused_never_a_traceback(value: Any) -> None:
    snapshot = read_snapshot(json.dumps(value).encode(), "s.json")

    assert snapshot.problems or snapshot.nodes or snapshot.pods or snapshot.pdbs or snapshot.daemon_sets or (
        isinstance(value, dict) and ("items" in value or str(value.get("kind", "")).endswith("List"))
        and not value.get("items"))


def test_json_nested_too_deep_or_a_number_too_long_is_refused_as_not_json() -> None:
    for data in (b"[" * 100_000, b'{"items": [' + b"9" * 5000 + b"]}", b"\xff\xfe"):
        assert "not JSON" in read_snapshot(data, "s.json").errors[0].message



CLAIM_PATHS = [("spec",), ("spec", "expireAfter"), ("spec", "terminationGracePeriod"), ("spec", "nodeClassRef"),
               ("spec", "nodeClassRef", "name"), ("status",), ("status", "nodeName"), ("status", "conditions"),
               ("metadata", "annotations"), ("metadata", "labels"), ("metadata", "creationTimestamp"),
               ("spec", "requirements"), ("kind",), ("status", "providerID")]
CLAIM_VALUES = [*AWKWARD, "Never", "720h", "-5h", "1.5h", "9999999999h", "0", "soon", "n1",
                [{"type": "Drifted", "status": "True", "lastTransitionTime": "soon"}],
                [{"type": "Drifted", "status": "True", "lastTransitionTime": 5}]]


def _v1_plan_never_raises(items: list[dict[str, Any]]) -> tuple[int, int]:
    """Read `items`; when they can be trusted, run v1's drift rules on every node. (NodeClaims read, problems.)"""
    snapshot = read_snapshot(json.dumps(listing(*items)).encode(), "s.json")
    if not snapshot.errors:
        fleet = fleet_of(snapshot)
        rules = NodePoolDriftRules(V1_SIDE, V1_SIDE, dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC))
        for fleet_node in fleet.nodes.values():
            rules(fleet_node)
    return len(snapshot.node_claims), len({p.index for p in snapshot.problems if p.index is not None})


V1_SIDE = PolicySide("x", {}, {}, {"default": stored_form(yaml.safe_load(nodepool()))},
                     {"default": stored_form(yaml.safe_load(node_class()))})


@deterministic(300)
@given(st.lists(st.tuples(st.sampled_from(CLAIM_PATHS), st.one_of(st.sampled_from(CLAIM_VALUES), JSON)),
                min_size=1, max_size=4))
def test_hostile_nodeclaims_are_read_or_named_never_a_traceback(changes: list[tuple[tuple[str, ...], Any]]) -> None:
    hostile = claim("n1")
    for path, value in changes:
        hostile = _replace(hostile, path, value)

    read, named = _v1_plan_never_raises([pool_node("n1"), hostile])

    assert read + named >= 1


@pytest.mark.parametrize("path", CLAIM_PATHS)
@pytest.mark.parametrize("value", CLAIM_VALUES, ids=repr)
def test_each_awkward_value_in_each_nodeclaim_field_is_read_or_named(path: tuple[str, ...], value: Any) -> None:
    read, named = _v1_plan_never_raises([pool_node("n1"), _replace(claim("n1"), path, value)])

    assert read + named >= 1


def test_a_nodeclaims_bad_duration_or_node_name_is_an_error_naming_file_and_index() -> None:
    items = [pool_node("n1"), claim("n1", expire_after="soon"), _replace(claim("n2"), ("status", "nodeName"), 7),
             claim("n3", grace="Never")]

    snapshot = read_snapshot(json.dumps(listing(*items)).encode(), "s.json")

    assert [str(p) for p in snapshot.problems] == [
        "s.json: item 1: error: NodeClaim default-n1: spec.expireAfter is not a duration or Never: 'soon'",
        "s.json: item 2: error: NodeClaim default-n2: status.nodeName is not a string: 7",
        "s.json: item 3: error: NodeClaim default-n3: spec.terminationGracePeriod is not a duration: 'Never'",
    ]
