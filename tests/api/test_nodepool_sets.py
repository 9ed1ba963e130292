"""A Karpenter v1 NodePool's constraint set read back as the webhook, the controller and `simulate` read it: every set
compile writes of the v1 examples is read, in the file and the ConfigMap form; one edited by hand *with its hashes
fixed* is refused with one line naming the field, as Karpenter v1.14.1 would refuse the NodePool it stands for
(`api.constraintcheck.nodepool_set_problems`)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.api.constraintset import ConstraintSetError, read_compiled, read_wire_data
from karpenter_policy.commands.compile.compiler import compile_command
from karpenter_policy.commands.flags import CompileFlags

from .tampering import rehash

ROOT = Path(__file__).resolve().parents[2]
V1_EXAMPLES = ("mixed/policies", "pinning/policies", "positive", "min-values/policies", "topology/policies")


def _compile(policies: Path, out: Path) -> Path:
    result = compile_command(CompileFlags(paths=(str(policies),), out=str(out)))
    assert result.exit_code == 0, result
    return out


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _compile(ROOT / "examples" / "v1" / "mixed" / "policies", tmp_path_factory.mktemp("mixed") / "out")


@pytest.mark.parametrize("example", V1_EXAMPLES)
def test_every_nodepool_set_compile_writes_is_read_back(example: str, tmp_path: Path) -> None:
    out = _compile(ROOT / "examples" / "v1" / example, tmp_path / "out")
    index, sets = read_compiled(out)
    on_disk = {p.name: json.loads(p.read_text()) for p in (out / "constraintsets").glob("*.json")}
    assert [(s.origin, s.name) for s in sets] == [(e.kind, e.name) for e in index.entries]
    assert all(s.hash == on_disk[s.key]["hash"] and s.to_json() == on_disk[s.key] for s in sets)
    assert any(s.origin == "NodePool" for s in sets)
    (configmap,) = (out / "manifests").glob("configmap-*.yaml")
    wire_index, wire_sets = read_wire_data(yaml.safe_load(configmap.read_text())["data"])
    assert wire_index == index and [s.hash for s in wire_sets] == [s.hash for s in sets]


def test_a_mixed_directory_keeps_a_provisioner_and_a_nodepool_of_one_name_apart(mixed: Path) -> None:
    _, sets = read_compiled(mixed)
    assert [(s.origin, s.name, s.key) for s in sets] == [
        ("NodePool", "batch", "nodepool.batch.json"),
        ("Provisioner", "default", "default.json"),
        ("NodePool", "default", "nodepool.default.json"),
    ]
    batch = sets[0]
    assert [str(t) for t in batch.taints] == ["example.com/batch:NoSchedule"]
    assert batch.nodepool is not None and batch.nodepool["minValues"] == {"karpenter.k8s.aws/instance-family": 3}


def _setting(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda document: document.__setitem__(field, value)


def _in_nodepool(field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda document: document["nodePool"].__setitem__(field, value)


def _first_requirement(change: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    return lambda document: document["requirements"][0].update(change)


#: case → (the set edited, the edit, what the one line says after the file's name)
CASES: dict[str, tuple[str, Callable[[dict[str, Any]], None], str]] = {
    "taint effect unknown": (
        "batch", _setting("taints", [{"key": "example.com/batch", "effect": "Sometimes"}]),
        'taints[0].effect: Unsupported value: "Sometimes"',
    ),
    "restricted label": (
        "batch", _setting("labels", {"karpenter.sh/nodepool": "other"}), "labels",
    ),
    "minValues above the values given": (
        "batch", _in_nodepool("minValues", {"karpenter.k8s.aws/instance-family": 9}), "requirements",
    ),
    "minValues not a count": (
        "batch", _in_nodepool("minValues", {"karpenter.k8s.aws/instance-family": "3"}),
        "nodePool.minValues must map label keys to integers",
    ),
    "budget of another shape": (
        "batch", _in_nodepool("disruption", {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s",
                                              "budgets": [{"nodes": "eleven"}]}),
        "nodePool.disruption.budgets[0].nodes",
    ),
    "expireAfter not a duration": ("batch", _in_nodepool("expireAfter", "a month"), "nodePool.expireAfter"),
    "nodePool missing a field": (
        "batch", lambda d: d["nodePool"].pop("expireAfter"),
        "nodePool must be a mapping of disruption, expireAfter, minValues, terminationGracePeriod",
    ),
    "weight beyond Karpenter's": ("batch", _setting("weight", 500), "weight"),
    "requirement operator unknown": (
        "default", _first_requirement({"operator": "Equals"}), "requirements[0].operator",
    ),
    "provider of a Provisioner": (
        "batch", _setting("provider", {"source": "providerRef", "name": "default", "spec": None}),
        "provider.source must be nodeClassRef in a NodePool's set",
    ),
    "EC2NodeClass without a role": (
        "batch", lambda d: d["provider"]["spec"].pop("role"), "provider",
    ),
    # a static NodePool's set (`nodePool.replicas`) is held to the CRD's rules on replicas (karpenter.sh_nodepools.yaml
    # at v1.14.1; nodepool_validation_cel_test.go:786, :818, :798)
    "replicas negative": (
        "default", _in_nodepool("replicas", -1),
        "nodePool.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0",
    ),
    "replicas beside a weight": (
        "default", lambda d: (d["nodePool"].__setitem__("replicas", 3), d.__setitem__("weight", 5)),
        "'weight' is not supported on static NodePools",
    ),
    "replicas beside limits.cpu": (
        "batch", _in_nodepool("replicas", 3), "only 'limits.nodes' is supported on static NodePools",
    ),
    "nodePool with a misspelt replicas": (
        "default", _in_nodepool("replica", 3), "(and, for a static NodePool, replicas)",
    ),
    "v1alpha5 TTL in a NodePool's set": (
        "batch", _setting("ttlSecondsAfterEmpty", 30), 'unknown field "ttlSecondsAfterEmpty"',
    ),
}  # fmt: skip


def _tamper(build: Path, name: str, edit: Callable[[dict[str, Any]], None]) -> None:
    folder = build / "constraintsets"
    path = folder / f"nodepool.{name}.json"
    document = json.loads(path.read_text())
    edit(document)
    digest = rehash(document)
    path.write_text(json.dumps(document))
    index = json.loads((folder / "index.json").read_text())
    for entry in index["sets"]:
        if entry.get("kind") == "NodePool" and entry["name"] == name:
            entry["hash"] = digest
    rehash(index)
    (folder / "index.json").write_text(json.dumps(index))


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_nodepool_set_karpenter_would_refuse_is_refused_with_one_line(
    case: str, mixed: Path, tmp_path: Path
) -> None:
    name, edit, expected = CASES[case]
    build = tmp_path / "build"
    shutil.copytree(mixed, build)
    _tamper(build, name, edit)
    with pytest.raises(ConstraintSetError) as refused:
        read_compiled(build)
    message = str(refused.value)
    assert message.startswith(f"{build / 'constraintsets' / f'nodepool.{name}.json'}: "), message
    assert expected in message, message
    assert "\n" not in message and len(message) < 500


def test_an_index_entry_naming_a_nodepool_set_under_a_provisioners_key_is_refused(mixed: Path, tmp_path: Path) -> None:
    build = tmp_path / "build"
    shutil.copytree(mixed, build)
    index_file = build / "constraintsets" / "index.json"
    index = json.loads(index_file.read_text())
    index["sets"][0]["key"] = "batch.json"
    rehash(index)
    index_file.write_text(json.dumps(index))
    with pytest.raises(ConstraintSetError, match=r"sets\[0\]\.key \"batch\.json\" is not 'nodepool\.batch\.json'"):
        read_compiled(build)
