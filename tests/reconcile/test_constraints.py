"""New versions of the constraint sets are taken without a restart; a version that cannot be read (a hand edit
that breaks a hash, a truncated file) or holds what compile would never write (a requirement without a key, taints
that are not a list, with the hashes fixed) is refused with a log line — and a Warning Event on the ConfigMap —
while the last good version stays in force."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from api.tampering import tamper_directory, tamper_wire

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.constraints import ConfigMapSource, DirectorySource

from .conftest import MakeHarness
from .support import POLICIES, compile_policies, configmap_manifest, create_all, inflate, label, replicas

TEAM_ML = {"team": "ml"}


def policies_with_team_label(tmp_path: Path) -> Path:
    """examples/workloads/policies with `team: ml` among the default provisioner's labels."""
    edited = tmp_path / "policies-edited"
    shutil.copytree(POLICIES, edited)
    default = yaml.safe_load((edited / "default.yaml").read_text())
    default["spec"]["labels"] = dict(TEAM_ML)
    (edited / "default.yaml").write_text(yaml.safe_dump(default))
    return edited


def ml_pods(count: int) -> list[dict[str, Any]]:
    return replicas("trainer", 0, count, nodeSelector=dict(TEAM_ML))


def test_a_recompiled_directory_takes_effect_without_a_restart(make_harness: MakeHarness, tmp_path: Path) -> None:
    build = compile_policies(POLICIES, tmp_path / "build")
    h = make_harness(source=DirectorySource(build))
    create_all(h.cluster, objects.POD, ml_pods(2))
    before = h.batch()
    assert before.launched == []
    assert "label team does not have known values" in before.unschedulable["default/trainer-0"]

    compile_policies(policies_with_team_label(tmp_path), build)  # `compile -o build/` again, in place
    after = h.batch()
    assert str(build) in [r.loaded for r in h.results[1:]]
    (launched,) = after.launched
    assert launched.provisioner == "default" and label(h.node(launched.node), "team") == "ml"
    assert h.unbound() == []
    assert any(m.startswith("loaded 4 constraint set(s) from ") for m in h.messages()[1:])


def test_loaded_is_logged_for_a_new_version_only(make_harness: MakeHarness, tmp_path: Path) -> None:
    """`compile -o build/` again on unchanged policies rewrites every file (new inodes, new times): the same
    version, read again, is not 'loaded' again; a changed policy is."""
    build = compile_policies(POLICIES, tmp_path / "build")
    h = make_harness(source=DirectorySource(build))
    h.step()
    first = h.controller.loaded
    assert first is not None

    compile_policies(POLICIES, build)  # the same policies, compiled again in place
    h.step()
    h.step()

    loaded = [m for m in h.messages() if m.startswith("loaded 4 constraint set(s) from ")]
    assert len(loaded) == 1, loaded
    assert h.controller.loaded is first, "the version in force is kept: nothing is planned again"
    assert not any(r.loaded for r in h.results[1:])

    compile_policies(policies_with_team_label(tmp_path), build)
    h.step()
    assert len([m for m in h.messages() if m.startswith("loaded 4 constraint set(s) from ")]) == 2
    assert h.controller.loaded is not None and h.controller.loaded.hash != first.hash


def test_a_corrupted_directory_is_refused_and_the_last_good_sets_stay(
    make_harness: MakeHarness, tmp_path: Path
) -> None:
    build = compile_policies(POLICIES, tmp_path / "build")
    h = make_harness(source=DirectorySource(build))
    h.step()
    good = h.controller.loaded
    assert good is not None
    path = build / "constraintsets" / "default.json"
    document = json.loads(path.read_text())
    document["limits"]["cpu"] = "100000"  # a hand edit nobody reviewed: the hash no longer matches
    path.write_text(json.dumps(document))

    create_all(h.cluster, objects.POD, inflate(0, 3))
    result = h.batch()
    refusals = [r.refused for r in h.results if r.refused]
    assert len(refusals) == 1, "refused once, not at every pass"
    assert "default.json" in refusals[0] and "does not match" in refusals[0]
    assert f"the last good version ({good.origin}, {good.hash}) stays in force" in refusals[0]
    assert h.controller.loaded is good
    assert len(result.launched) == 1 and h.unbound() == [], "the last good sets keep provisioning"
    refused_line = "\tERROR\tcontroller.constraints\trefused constraint sets: "
    assert len([line for line in h.log_lines() if refused_line in line]) == 1


def _configmap_harness(make_harness: MakeHarness, manifest: dict[str, Any]) -> tuple[Any, ConfigMapSource]:
    cluster = MemoryCluster()
    cluster.create(objects.CONFIG_MAP, manifest)
    meta = manifest["metadata"]
    source = ConfigMapSource(cluster, meta["namespace"], meta["name"])
    return make_harness(source=source, cluster=cluster), source


def _configmap_in_force(make_harness: MakeHarness, manifest: dict[str, Any]) -> tuple[Any, ConfigMapSource, Any, Any]:
    """A controller on the ConfigMap `manifest` after its first pass: the harness, the source, the version in force
    and the ConfigMap as the cluster holds it."""
    h, source = _configmap_harness(make_harness, manifest)
    h.step()
    good = h.controller.loaded
    assert good is not None
    current = h.cluster.get(objects.CONFIG_MAP, source.name, source.namespace)
    assert current is not None
    return h, source, good, current


def test_a_configmap_edit_takes_effect_without_a_restart(
    make_harness: MakeHarness, configmap: dict[str, Any], tmp_path: Path
) -> None:
    h, source = _configmap_harness(make_harness, configmap)
    create_all(h.cluster, objects.POD, ml_pods(1))
    assert h.batch().launched == []

    edited = configmap_manifest(compile_policies(policies_with_team_label(tmp_path), tmp_path / "edited"))
    current = h.cluster.get(objects.CONFIG_MAP, source.name, source.namespace)
    assert current is not None
    current["data"] = edited["data"]  # what Argo CD / Flux apply after the merge
    updated = h.cluster.update(objects.CONFIG_MAP, current)
    after = h.batch()
    assert f"{source.description}@{objects.resource_version(updated)}" in [r.loaded for r in h.results]
    assert [n.provisioner for n in after.launched] == ["default"] and h.unbound() == []


def test_a_corrupted_configmap_is_refused_with_an_event_and_the_last_good_sets_stay(
    make_harness: MakeHarness, configmap: dict[str, Any]
) -> None:
    h, source, good, current = _configmap_in_force(make_harness, configmap)
    tampered = copy.deepcopy(current)
    data = json.loads(tampered["data"]["default.json"])
    data["limits"] = {"cpu": "100000"}
    tampered["data"]["default.json"] = json.dumps(data)
    h.cluster.update(objects.CONFIG_MAP, tampered)

    create_all(h.cluster, objects.POD, inflate(0, 2))
    result = h.batch()
    assert h.controller.loaded is good
    (event,) = h.events("ConstraintSetRefused")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["kind"] == "ConfigMap" and event["involvedObject"]["name"] == source.name
    assert "default.json" in event["message"] and "does not match" in event["message"]
    assert "stays in force" in event["message"]
    assert len(result.launched) == 1 and h.unbound() == [], "the last good sets keep provisioning"

    h.cluster.update(objects.CONFIG_MAP, {**current, "metadata": {**current["metadata"], "resourceVersion": ""}})
    restored = h.step()
    assert restored.loaded is not None and h.controller.loaded is not None
    assert h.controller.loaded.hash == good.hash


def test_a_plan_made_ahead_is_not_used_once_the_constraint_sets_changed(
    make_harness: MakeHarness, tmp_path: Path
) -> None:
    build = compile_policies(POLICIES, tmp_path / "build")
    h = make_harness(source=DirectorySource(build), batch_idle=1.0)
    create_all(h.cluster, objects.POD, ml_pods(1))
    h.step()
    h.clock.advance(0.25)
    h.step()  # planned ahead with the sets in force: no provisioner defines `team`
    compile_policies(policies_with_team_label(tmp_path), build)  # merged meanwhile
    h.clock.advance(0.75)
    closed = h.step()
    assert closed.scheduled and [n.provisioner for n in closed.launched] == ["default"]
    used = h.controller.metrics.registry.get_sample_value("karpenter_policy_plans_ahead_total", {"used": "false"})
    assert used == 1.0


def test_a_set_whose_hash_is_right_but_whose_requirement_has_no_key_is_refused(
    make_harness: MakeHarness, compiled: Path, tmp_path: Path
) -> None:
    build = tamper_directory(compiled, "default", copy_to=tmp_path / "build")
    h = make_harness(source=DirectorySource(build))
    h.step()
    good = h.controller.loaded
    assert good is not None
    tamper_directory(build, "default", lambda d: d["requirements"].__setitem__(0, {"operator": "In"}))

    create_all(h.cluster, objects.POD, inflate(0, 3))
    result = h.batch()
    assert h.controller.loaded is good
    assert len(result.launched) == 1 and h.unbound() == [], "the last good sets keep provisioning"
    refused = [line for line in h.log_lines() if "\tERROR\tcontroller.constraints\trefused constraint sets: " in line]
    assert len(refused) == 1, "refused once, in one line, not at every pass"
    assert f"{build / 'constraintsets' / 'default.json'}: requirements[0]: missing required field 'key'" in refused[0]


def test_a_configmap_whose_taints_are_not_a_list_is_refused_with_an_event(
    make_harness: MakeHarness, configmap: dict[str, Any], compiled: Path
) -> None:
    h, source, good, current = _configmap_in_force(make_harness, configmap)
    tampered = copy.deepcopy(current)
    tampered["data"] = tamper_wire(current["data"], compiled, "default", lambda d: d.__setitem__("taints", "x"))
    h.cluster.update(objects.CONFIG_MAP, tampered)

    create_all(h.cluster, objects.POD, inflate(0, 2))
    result = h.batch()
    assert h.controller.loaded is good
    assert len(result.launched) == 1 and h.unbound() == []
    (event,) = h.events("ConstraintSetRefused")
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == source.name
    assert f"{source.description}: default.json: taints must be a list, not string \"x\"" in event["message"]
    assert "\n" not in event["message"]
