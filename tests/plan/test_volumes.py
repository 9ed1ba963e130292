"""`plan` reads the pods' volumes — the snapshot's PersistentVolumeClaims, PersistentVolumes and StorageClasses
(`kubectl get …,pvc,pv,storageclass`) — as the controller's disruption simulation does (`model.volumes`, the one
reading): a moved pod keeps to its volume's zone in a drift wave (v0.31.1 `VolumeTopology.Inject`, v1.14.1
`SimulateScheduling` → the volume requirements), in provisioning after a forceful deletion, and in consolidation; a pod
Karpenter v1.14.1 ignores for its claims (`ValidatePersistentVolumeClaims`) is left pending with its reason; a snapshot
without the volume kinds says so in a note; `--redact` hashes the new kinds' names as the pods' references; a malformed
volume object is exit 2 naming the file, item and field."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.checks.proof.placement import templates_for
from karpenter_policy.checks.repository import load_repository
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.nodepoolwaves import nodepool_budgets, plan_nodepool_waves
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.redact import hashed, redact_snapshot
from karpenter_policy.commands.plan.snapshot import read_snapshot
from karpenter_policy.commands.plan.waves import PdbBudgets, Replacements, Timing
from karpenter_policy.scheduling import InstanceTable, NodeClaimTemplate
from karpenter_policy.simulate.consolidation import consolidate_now
from tests.plan.snapshots import (
    EBS_ZONE,
    FULL,
    node,
    pod,
    policies,
    provisioner,
    pv,
    pvc,
    storage_class,
    with_claim,
    write,
)
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies
from tests.profiles import deterministic

START = "2026-11-30T09:00:00Z"
INITIALIZED = {"karpenter.sh/initialized": "true"}


def v031_sides(root: Path) -> tuple[str, str]:
    """BASE and HEAD: `default` relabelled (its nodes drift), `other` untouched (its nodes are room)."""
    base = policies(root / "base", provisioner(), provisioner("other", labels="team: other"))
    head = policies(root / "head", provisioner(labels="team: platform"), provisioner("other", labels="team: other"))
    return base, head


def run(sides: tuple[str, str], tmp_path: Path, *items: dict[str, Any], redact: bool = False,
        output: str = "json") -> CommandOutput:
    file = write(tmp_path / "snapshot.json", *items)
    return plan_command(PlanOptions(snapshot=(file,), start=START, output=output, base=sides[0], head=sides[1],
                                    redact=redact), load_catalog())


def plan(sides: tuple[str, str], tmp_path: Path, *items: dict[str, Any]) -> dict[str, Any]:
    result = run(sides, tmp_path, *items)
    assert result.stderr == ""
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def drifted_db(zone_of_volume: str) -> list[dict[str, Any]]:
    """A drifted node in us-east-1a running `db-0`, whose volume is in `zone_of_volume`, and an untouched node of
    `other` with room in us-east-1b (its name sorts first: the scheduler asks it first)."""
    return [node("d0", zone="us-east-1a"), node("a-spare", provisioner="other", zone="us-east-1b"),
            with_claim(pod("db-0", "d0", "db", cpu=FULL, owner=("StatefulSet", "db")), "data-db-0"),
            pvc("data-db-0", volume="pv-db-0"), pv("pv-db-0", zone_of_volume), storage_class("gp3")]


def test_a_drift_wave_keeps_a_pod_with_a_zone_a_volume_in_zone_a(tmp_path: Path) -> None:
    """v0.31.1 `simulateScheduling` (deprovisioning/helpers.go) runs the provisioner's scheduler, whose
    `VolumeTopology.Inject` (provisioning/scheduling/volumetopology.go:48) puts the PersistentVolume's zone in the
    pod's required terms: the room in us-east-1b is no place for `db-0`, so the drift command launches its
    replacement in us-east-1a. The old plan, which read no volumes, moved it onto `a-spare` in us-east-1b and
    launched nothing."""
    doc = plan(v031_sides(tmp_path), tmp_path, *drifted_db("us-east-1a"))

    (wave,) = doc["waves"]
    assert wave["nodes"] == ["d0"]
    assert [(r["instance_type"], r["zone"]) for r in wave["replacements"]] == [("m5.large", "us-east-1a")]
    assert doc["pending"] == [] and doc["notes"] == [n for n in doc["notes"] if "PersistentVolume" not in n]


def test_a_pod_whose_volume_is_in_the_rooms_zone_moves_onto_that_room(tmp_path: Path) -> None:
    """The same fleet with the volume in us-east-1b: the room there takes the pod and nothing is launched — the
    volume decides, not the pod's old node."""
    doc = plan(v031_sides(tmp_path), tmp_path, *drifted_db("us-east-1b"))

    (wave,) = doc["waves"]
    assert wave["replacements"] == []


def v1_sides(root: Path) -> tuple[str, str]:
    base = v1_policies(root / "base", nodepool(budgets='[{nodes: "100%"}]'), nodepool("other", labels="team: other"))
    head = v1_policies(root / "head", nodepool(labels="team: platform", budgets='[{nodes: "100%"}]'),
                       nodepool("other", labels="team: other"))
    return base, head


def member(name: str, pool: str = "default", zone: str = "us-east-1a") -> list[dict[str, Any]]:
    return [pool_node(name, pool, zone=zone), claim(name, pool, zone=zone)]


def test_a_wait_for_first_consumer_classs_allowed_topologies_keep_an_unbound_claims_pod_in_them(
        tmp_path: Path) -> None:
    """v1.14.1 `SimulateScheduling` (disruption/helpers.go:53) → the provisioner's `getVolumeTopologyRequirements`:
    an unbound claim brings its StorageClass's first `allowedTopologies` term (volumetopology.go `getRequirements`).
    The class `gp3-b` (WaitForFirstConsumer) allows us-east-1b only, so `db-0` leaves the drifted node in us-east-1a
    for the room on `b-room` (us-east-1b), not for `a-room`'s in us-east-1a that the scheduler asks first; a
    WaitForFirstConsumer class is no reason for v1.14.1 to ignore the pod (only Immediate is). The old plan put it
    on `a-room`."""
    items = [*member("d0"), *member("a-room", "other"), *member("b-room", "other", zone="us-east-1b"),
             with_claim(pod("db-0", "d0", "db", owner=("StatefulSet", "db")), "data-db-0"),
             pvc("data-db-0", storage_class="gp3-b"), storage_class("gp3-b", ["us-east-1b"])]
    snapshot = read_snapshot(json.dumps({"kind": "List", "items": items}).encode(), "snapshot.json")
    start = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
    fleet = fleet_of(snapshot, start)
    head = load_repository([v1_sides(tmp_path)[1]], prove=True, catalog=load_catalog())
    templates = templates_for(head.checked, InstanceTable.of_catalog(load_catalog()))
    rollout = plan_nodepool_waves(fleet, {"d0": NodeDrift(drifted=True, reasons=("x",))},
                                  nodepool_budgets({"default": {"spec": {}}}), start, Timing(),
                                  PdbBudgets(fleet.pdbs, fleet.pod_objects), Replacements(templates, fleet.daemons))

    (wave,) = rollout.waves
    assert [(landing.node, [p.key for p in landing.pods]) for landing in wave.landings or []] == [
        ("b-room", ["default/db-0"])]


def test_a_consolidation_move_that_would_take_a_pod_out_of_its_volumes_zone_is_not_offered(tmp_path: Path) -> None:
    """The controller's own consolidation (v0.31.1 multi-node and single-node: `simulateScheduling` with the volume
    topology injected) on the snapshot's volumes. HEAD launches only in us-east-1b. `n0` (us-east-1a) runs `db-0`,
    whose volume is in us-east-1a; `n1` (us-east-1b) runs a small pod. Replacing both by one node (in us-east-1b)
    would take `db-0` out of its volume's zone, and so would deleting `n0` onto `n1`'s room: neither is offered —
    `n1` goes, its pod onto `n0`. The old plan could not read the volumes: it held `n0` with "cannot read its pods'
    volumes"."""
    directory = policies(tmp_path / "head", provisioner(zones="[us-east-1b]") + "  consolidation: {enabled: true}\n")
    items = [node("n0", zone="us-east-1a", labels=INITIALIZED), node("n1", zone="us-east-1b", labels=INITIALIZED),
             with_claim(pod("db-0", "n0", "db", cpu=FULL, owner=("StatefulSet", "db")), "data-db-0"),
             pod("web-0", "n1", "web", cpu="100m"),
             pvc("data-db-0", volume="pv-db-0"), pv("pv-db-0", "us-east-1a"), storage_class("gp3")]

    def consolidation(*snapshot: dict[str, Any]) -> dict[str, Any]:
        file = write(tmp_path / "snapshot.json", *snapshot)
        result = plan_command(PlanOptions(snapshot=(file,), start=START, base=directory, head=directory,
                                          output="json"), load_catalog(), consolidate=consolidate_now)
        found: dict[str, Any] = json.loads(result.stdout)["consolidation"]
        return found

    kept = consolidation(*items)

    assert [(m["removed"], m["launched"]) for m in kept["moves"]] == [(["n1"], [])]
    assert "cannot read its pods' volumes" not in {n["node"]: n["reason"] for n in kept["not_candidates"]}.get(
        "n0", "")
    # the same pod with its volume in us-east-1b may leave n0
    moved = consolidation(*items[:-2], pv("pv-db-0", "us-east-1b"), items[-1])
    assert "n0" in [n for move in moved["moves"] for n in move["removed"]]


def test_a_snapshot_without_the_volume_kinds_says_so_and_plans_the_pods_as_before(tmp_path: Path) -> None:
    """Pods with claims in a snapshot taken without `pvc,pv,storageclass`: their zones are unknown — a note says
    so and what to add to the kubectl command, and they are planned as before (onto the room in us-east-1b),
    never silently as volume-less. The old plan said nothing."""
    items = [i for i in drifted_db("us-east-1a") if i["kind"] not in ("PersistentVolumeClaim", "PersistentVolume",
                                                                     "StorageClass")]

    doc = plan(v031_sides(tmp_path), tmp_path, *items)

    assert doc["waves"][0]["replacements"] == []
    assert ("1 pod with PersistentVolumeClaims, but the snapshot holds no PersistentVolumeClaims and no "
            "PersistentVolumes and no StorageClasses: their volumes' zones are not known: they are planned as if they "
            "had no volume; add pvc,pv,storageclass to the snapshot (`kubectl get "
            "nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json`)") in doc["notes"]


def test_a_snapshot_with_claims_but_no_persistent_volumes_names_the_kind_missing(tmp_path: Path) -> None:
    items = [i for i in drifted_db("us-east-1a") if i["kind"] != "PersistentVolume"]

    doc = plan(v031_sides(tmp_path), tmp_path, *items)

    (note,) = [n for n in doc["notes"] if "PersistentVolumeClaims" in n]
    assert note.startswith("1 pod with PersistentVolumeClaims, but the snapshot holds no PersistentVolumes: the "
                           "zones of the volumes it lacks are not known; add pv to the snapshot")


def test_a_pod_v1_ignores_for_its_claim_is_left_pending_with_the_reason(tmp_path: Path) -> None:
    """A removed NodePool's node goes at once and its pods are provisioned for: v1.14.1's `GetPendingPods` →
    `Validate` → `ValidatePersistentVolumeClaims` (volumetopology.go) ignores `db-0`, whose claim is being deleted
    — it is left pending with v1.14.1's reason, as the controller reports it. The old plan moved it onto the room."""
    base = v1_policies(tmp_path / "base", nodepool(), nodepool("legacy", labels="team: legacy"))
    head = v1_policies(tmp_path / "head", nodepool())
    items = [*member("old", "legacy"), *member("room"),
             with_claim(pod("db-0", "old", "db", owner=("StatefulSet", "db")), "data-db-0"),
             pvc("data-db-0", volume="pv-db-0", deleting=True), pv("pv-db-0", "us-east-1a"), storage_class("gp3")]

    result = run((base, head), tmp_path, *items)

    assert result.exit_code == 1
    (pending,) = json.loads(result.stdout)["pending"]
    assert pending["pod"] == "default/db-0"
    assert "persistentvolumeclaim is being deleted (PersistentVolumeClaim default/data-db-0)" in pending["reason"]


def test_redaction_hashes_the_volume_kinds_names_as_the_pods_references(tmp_path: Path) -> None:
    """`--redact`: a claim's, volume's and class's names become `pvc-…`, `pv-…`, `sc-…`, hashed alike wherever they
    are referenced (a pod's `claimName`, a claim's `volumeName` and `storageClassName`; a generic ephemeral
    volume's claim `<pod>-<volume>` as the pod's redacted volume names it), the zones kept — the plan is the same
    plan, and no name of the snapshot's is in any output."""
    ephemeral = pod("cache-0", "d0", "cache", cpu="100m")
    ephemeral["spec"]["volumes"] = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "storageClassName": "secret-class"}}}}]
    scratch = pvc("cache-0-scratch", volume="secret-volume-2", storage_class="secret-class")
    scratch["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "cache-0", "uid": "u",
                                               "controller": True}]
    items = [node("d0", zone="us-east-1a"), node("a-spare", provisioner="other", zone="us-east-1b"),
             with_claim(pod("db-0", "d0", "db", cpu=FULL, owner=("StatefulSet", "db")), "secret-claim",
                        volume="secret-data"),
             ephemeral, scratch,
             pvc("secret-claim", volume="secret-volume", storage_class="secret-class"),
             pv("secret-volume", "us-east-1a"), pv("secret-volume-2", "us-east-1a"),
             storage_class("secret-class")]
    snapshot = read_snapshot(json.dumps({"kind": "List", "items": items}).encode(), "snapshot.json")

    redacted = redact_snapshot(snapshot)

    pods = {p["metadata"]["name"]: p for p in redacted.pods}
    db = pods[hashed("pod", "db-0")]
    assert db["spec"]["volumes"] == [{"name": hashed("vol", "secret-data"),
                                      "persistentVolumeClaim": {"claimName": hashed("pvc", "secret-claim")}}]
    claims = {c["metadata"]["name"]: c for c in redacted.persistent_volume_claims}
    bound = claims[hashed("pvc", "secret-claim")]
    assert bound["spec"] == {"volumeName": hashed("pv", "secret-volume"), "storageClassName": hashed("sc",
                                                                                                   "secret-class")}
    assert bound["metadata"]["annotations"] == {"pv.kubernetes.io/bind-completed": "yes"}
    assert f"{hashed('pod', 'cache-0')}-{hashed('vol', 'scratch')}" in claims  # the ephemeral claim: its pod's name
    assert [v["metadata"]["name"] for v in redacted.persistent_volumes] == [hashed("pv", "secret-volume"),
                                                                            hashed("pv", "secret-volume-2")]
    assert redacted.persistent_volumes[0]["spec"]["nodeAffinity"] == items[6]["spec"]["nodeAffinity"]  # zones kept
    assert [c["metadata"]["name"] for c in redacted.storage_classes] == [hashed("sc", "secret-class")]

    sides = v031_sides(tmp_path)
    shown = run(sides, tmp_path, *items, redact=True)
    plain = json.loads(run(sides, tmp_path, *items).stdout)
    assert shown.exit_code == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert [(r["instance_type"], r["zone"]) for w in doc["waves"] for r in w["replacements"]] == [
        (r["instance_type"], r["zone"]) for w in plain["waves"] for r in w["replacements"]] == [
        ("m5.large", "us-east-1a")]
    for output in ("json", "text", "markdown"):
        printed = run(sides, tmp_path, *items, redact=True, output=output)
        assert "secret" not in printed.stdout + printed.stderr


def test_a_malformed_persistent_volume_is_exit_2_naming_file_item_and_field(tmp_path: Path) -> None:
    broken = pv("pv-db-0", "us-east-1a")
    broken["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"] = "us-east-1a"
    items = [*drifted_db("us-east-1a")[:4], broken]

    result = run(v031_sides(tmp_path), tmp_path, *items)

    assert result.exit_code == 2 and result.stdout == ""
    assert (f"{tmp_path / 'snapshot.json'}: item 4: error: PersistentVolume pv-db-0: "
            "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions: matchExpressions must be a list"
            ) in result.stderr
    assert "Traceback" not in result.stderr


def test_a_malformed_claim_and_class_are_exit_2_too(tmp_path: Path) -> None:
    claim_item = pvc("data-db-0", volume="pv-db-0")
    claim_item["spec"]["volumeName"] = 7
    sc = storage_class("gp3", ["us-east-1a"])
    sc["allowedTopologies"][0]["matchLabelExpressions"] = "zone"

    result = run(v031_sides(tmp_path), tmp_path, node("d0"), claim_item, sc)

    assert result.exit_code == 2
    assert "item 1: error: PersistentVolumeClaim default/data-db-0: spec.volumeName must be a string" in result.stderr
    assert "item 2: error: StorageClass gp3: allowedTopologies[0]: matchLabelExpressions must be a list" in (
        result.stderr)


# --- the property: wherever the waves move a pod, it stays in its volume's zone -----------------------------------

ZONES = ("us-east-1a", "us-east-1b")
CPUS = ("100m", "500m", "900m", FULL)


@pytest.fixture(scope="module")
def pool_templates(tmp_path_factory: pytest.TempPathFactory) -> list[NodeClaimTemplate]:
    directory = v1_policies(tmp_path_factory.mktemp("pool"), nodepool(), nodepool("other", labels="team: other"))
    repository = load_repository([directory], prove=True, catalog=load_catalog())
    return templates_for(repository.checked, InstanceTable.of_catalog(load_catalog()))


@deterministic(40)
@given(fleet_shape=st.lists(st.tuples(st.sampled_from(ZONES), st.lists(
           st.tuples(st.sampled_from(CPUS), st.sampled_from((None, *ZONES))), max_size=3)), min_size=1, max_size=5),
       spares=st.lists(st.sampled_from(ZONES), max_size=3),
       expiring=st.sets(st.integers(0, 4), max_size=2))
def test_every_pod_the_waves_move_stays_in_its_volumes_zone(
        pool_templates: list[NodeClaimTemplate], fleet_shape: list[tuple[str, list[tuple[str, str | None]]]],
        spares: list[str], expiring: set[int]) -> None:
    """Drifted nodes (some expired at the start: deleted forcefully, their pods provisioned for) in either zone,
    their pods each with no volume or one in either zone, and untouched spare nodes with room in either zone:
    across Karpenter v1.14.1's waves, every landing of a pod with a volume — onto a spare, another drifted node, an
    earlier wave's replacement or its own wave's — is in its volume's zone, and no such pod is left pending (HEAD
    launches in both zones)."""
    items: list[dict[str, Any]] = [storage_class("gp3")]
    volume_zone: dict[str, str] = {}
    for i, (zone, pods) in enumerate(fleet_shape):
        items += [pool_node(f"n{i}", zone=zone, created=f"2026-11-20T08:{i:02d}:00Z"),
                  claim(f"n{i}", zone=zone, created=f"2026-11-20T08:{i:02d}:00Z")]
        for j, (cpu, volume) in enumerate(pods):
            made = pod(f"p{i}-{j}", f"n{i}", f"app{j}", cpu=cpu, memory="256Mi", owner=("StatefulSet", f"app{j}"))
            if volume is not None:
                items += [with_claim(made, f"data-{i}-{j}"), pvc(f"data-{i}-{j}", volume=f"pv-{i}-{j}"),
                          pv(f"pv-{i}-{j}", volume)]
                volume_zone[f"default/p{i}-{j}"] = volume
            else:
                items.append(made)
    for i, zone in enumerate(spares):
        items += [pool_node(f"spare{i}", "other", zone=zone), claim(f"spare{i}", "other", zone=zone)]
    fleet = fleet_of(read_snapshot(json.dumps({"kind": "List", "items": items}).encode(), "s.json"))
    start = dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC)
    drift = {f"n{i}": NodeDrift(drifted=True, reasons=("x",), expires=i in expiring,
                                expires_at=start if i in expiring else None) for i in range(len(fleet_shape))}

    rollout = plan_nodepool_waves(fleet, drift, nodepool_budgets({"default": {"spec": {}}}), start, Timing(),
                                  PdbBudgets([], fleet.pod_objects), Replacements(pool_templates, fleet.daemons))

    zone_of = {name: node.zone for name, node in fleet.nodes.items()}
    for wave in rollout.waves:
        for landing in wave.landings or []:
            if landing.replacement is not None:
                zone_of[landing.node] = landing.replacement.zone
            for moved in landing.pods:
                if moved.key in volume_zone:
                    assert zone_of[landing.node] == volume_zone[moved.key], (moved.key, landing.node)
    assert not [p for p in rollout.pending if p.pod in volume_zone]


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(("", "a", "In", EBS_ZONE)),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                        st.sampled_from(("key", "operator", "values", "matchExpressions", "matchLabelExpressions",
                                         "nodeSelectorTerms", "required", "phase", "x")), inner, max_size=3),
                    max_leaves=12)


@deterministic(200)
@given(kind=st.sampled_from(("PersistentVolumeClaim", "PersistentVolume", "StorageClass")),
       field=st.sampled_from(("spec", "status", "allowedTopologies", "volumeBindingMode")), value=JSON)
def test_a_hostile_volume_object_is_an_error_naming_it_or_read_never_a_traceback(kind: str, field: str,
                                                                                 value: object) -> None:
    """Whatever a claim's, volume's or class's fields hold, the snapshot either refuses the item (an error naming
    its kind and name) or reads it, and a pod whose claim names it is planned — never an exception."""
    hostile: dict[str, Any] = {"apiVersion": "v1", "kind": kind,
                               "metadata": {"name": "data-db-0" if kind == "PersistentVolumeClaim" else "gp3",
                                            "namespace": "default"},
                               field: value}
    if kind == "PersistentVolume":
        hostile["metadata"]["name"] = "pv-db-0"
    items = [node("d0"), with_claim(pod("db-0", "d0", "db"), "data-db-0"), pvc("data-db-0", volume="pv-db-0"),
             pv("pv-db-0", "us-east-1a"), storage_class("gp3"), hostile]
    snapshot = read_snapshot(json.dumps({"kind": "List", "items": items}).encode(), "s.json")

    errors = snapshot.errors
    if errors:
        assert [(e.index, e.message.split(":")[0]) for e in errors] == [
            (5, f"{kind} {'default/' if kind == 'PersistentVolumeClaim' else ''}{hostile['metadata']['name']}")]
    else:
        fleet_of(snapshot)
