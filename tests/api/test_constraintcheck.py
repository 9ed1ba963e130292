"""A constraint set is checked completely when it is read back (`read_compiled`, `read_wire_data`): a set whose
hashes were fixed after a hand edit is still refused when its content is something compile would never have
written — the same JSON Schema and Karpenter rules as compile, and the index's cross-checks — with one line that
names the file, the field and why. Every set compile writes is read back."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.api.constraintset import ConstraintSetError, read_compiled
from karpenter_policy.checks.selection import Selection
from karpenter_policy.commands.compile.compiler import compile_command
from karpenter_policy.commands.flags import CompileFlags

from .tampering import Edit, tamper_directory

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "workloads" / "policies"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled") / "build"
    result = compile_command(CompileFlags(paths=(str(EXAMPLES),), out=str(out)))
    assert result.exit_code == 0, result
    return out


def setting(field: str, value: Any) -> Edit:
    return lambda document: document.__setitem__(field, value)


def first_requirement(value: Any) -> Edit:
    return lambda document: document["requirements"].__setitem__(0, value)


def entry(name: str, change: Callable[[dict[str, Any]], None]) -> Edit:
    def edit(index: dict[str, Any]) -> None:
        change(next(e for e in index["sets"] if e["name"] == name))

    return edit


def duplicate(name: str) -> Edit:
    return lambda index: index["sets"].append(dict(next(e for e in index["sets"] if e["name"] == name)))


def consolidated(document: dict[str, Any]) -> None:
    document["consolidation"] = {"enabled": True}  # the set keeps its ttlSecondsAfterEmpty


# (set to edit, edit of the set, edit of the index, file the line names, what it says)
CASES: dict[str, tuple[str, Edit | None, Edit | None, str, str]] = {
    "requirement without a key": (
        "default", first_requirement({"operator": "In"}), None, "default.json",
        "requirements[0]: missing required field 'key'",
    ),
    "Gt with a word": (
        "default", first_requirement({"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": ["x"]}),
        None, "default.json", "requirements[0].values: key karpenter.k8s.aws/instance-cpu with operator Gt must have",
    ),
    "unknown operator": (
        "default", first_requirement({"key": "kubernetes.io/arch", "operator": "Equals", "values": ["amd64"]}),
        None, "default.json", "requirements[0].operator: key kubernetes.io/arch has an unsupported operator",
    ),
    "weight Infinity": ("default", setting("weight", float("inf")), None, "default.json", "weight Infinity is out of"),
    "weight NaN": ("default", setting("weight", float("nan")), None, "default.json", "weight must be an integer"),
    "weight -5": ("default", setting("weight", -5), None, "default.json", "weight -5 is out of range"),
    "weight 10^400": ("default", setting("weight", 10**400), None, "default.json", "weight 10000"),
    "weight true": ("default", setting("weight", True), None, "default.json", "weight must be an integer"),
    "weight not the index's": (
        "default", setting("weight", 50), None, "default.json", "weight 50 is not the index's 10",
    ),
    "taints a string": (
        "default", setting("taints", "x"), None, "default.json", 'taints must be a list, not string "x"',
    ),
    "taint without effect": (
        "default", setting("startupTaints", [{"key": "a"}]), None, "default.json",
        "startupTaints[0]: missing required field 'effect'",
    ),
    "provider a string": ("default", setting("provider", "x"), None, "default.json", "provider must be a mapping"),
    "provider null": (
        "default", setting("provider", None), None, "default.json", "provider: exactly one of provider or providerRef",
    ),
    "provider source unknown": (
        "default", setting("provider", {"source": "s3", "name": None, "spec": {}}), None, "default.json",
        "provider.source must be providerRef or inline",
    ),
    "inline provider of another shape": (
        "default", setting("provider", {"source": "inline", "name": None, "spec": {"subnetSelector": "x"}}), None,
        "default.json", "provider.spec.subnetSelector must be a mapping",
    ),
    "name with U+202E": (
        "default", setting("name", "def\u202eault"), None, "default.json", "name: name 'def\\u202eault'",
    ),
    "name not the index's": (
        "default", setting("name", "standard"), None, "default.json",
        "name \"standard\" is not the index's \"default\"",
    ),
    "label value with U+202E": (
        "gpu", setting("labels", {"accelerator": "nvidia\u202e"}), None, "gpu.json",
        "labels.accelerator: label accelerator has an invalid value",
    ),
    "restricted label": (
        "gpu", setting("labels", {"kubernetes.io/hostname": "a"}), None, "gpu.json", "labels[kubernetes.io/hostname]",
    ),
    "region with U+202E": ("default", setting("region", "us-east-1\u202e"), None, "default.json", "region"),
    "negative TTL": (
        "default", setting("ttlSecondsUntilExpired", -1), None, "default.json",
        "ttlSecondsUntilExpired: ttlSecondsUntilExpired cannot be negative",
    ),
    "TTL beyond int64": (
        "default", setting("ttlSecondsUntilExpired", 2**63), None, "default.json", "ttlSecondsUntilExpired 92233",
    ),
    "TTL with consolidation": (
        "default", consolidated, None, "default.json",
        "ttlSecondsAfterEmpty: ttlSecondsAfterEmpty and consolidation.enabled are mutually exclusive",
    ),
    "consolidation a string": (
        "default", setting("consolidation", "yes"), None, "default.json", "consolidation must be a mapping",
    ),
    "limits not quantities": (
        "default", setting("limits", {"cpu": "lots"}), None, "default.json",
        'limits.cpu: "lots" is not a Kubernetes quantity',
    ),
    "kubelet of another shape": (
        "default", setting("kubelet", {"maxPods": "many"}), None, "default.json", "kubelet.maxPods must be an integer",
    ),
    "admitted twice": (
        "gpu", lambda d: d["admitted"].append(d["admitted"][0]), None, "gpu.json",
        "admitted lists an instance type twice",
    ),
    "unknown field": ("default", setting("extra", 1), None, "default.json", 'unknown field "extra"'),
    "listing of another shape": (
        "gpu", lambda d: d["instanceTypes"][0].__setitem__("vcpu", -1), None, "gpu.json", "instanceTypes[0].vcpu",
    ),
    "index names a set twice": ("default", None, duplicate("default"), "index.json", "default is listed twice"),
    "index key elsewhere": (
        "default", None, entry("default", lambda e: e.__setitem__("key", "../../etc/passwd")), "index.json",
        "sets[1].key \"../../etc/passwd\" is not 'default.json'",
    ),
    "index name with U+202E": (
        "default", None, entry("default", lambda e: e.__setitem__("name", "def\u202eault")), "index.json",
        "sets[1].name \"def\\u202eault\" is not a Provisioner name",
    ),
    "index weight Infinity": (
        "default", None, entry("default", lambda e: e.__setitem__("weight", float("inf"))), "index.json",
        "sets[1].weight must be an integer of 0 to 100, not Infinity",
    ),
    "index entry of another shape": ("default", None, lambda i: i["sets"].append("x"), "index.json", "sets[4] must be"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_set_compile_would_never_write_is_refused_with_one_line(case: str, compiled: Path, tmp_path: Path) -> None:
    name, edit, edit_index, file, expected = CASES[case]
    build = tamper_directory(compiled, name, edit, edit_index, copy_to=tmp_path / "build")
    with pytest.raises(ConstraintSetError) as refused:
        read_compiled(build)
    message = str(refused.value)
    assert message.startswith(f"{build / 'constraintsets' / file}: "), message
    assert expected in message
    assert "\n" not in message and len(message) < 400


def test_json_nested_too_deeply_is_refused(compiled: Path, tmp_path: Path) -> None:
    build = tamper_directory(compiled, "default", copy_to=tmp_path / "build")
    path = build / "constraintsets" / "default.json"
    path.write_text(path.read_text().replace('"kubelet": null', '"kubelet": ' + "[" * 100_000 + "]" * 100_000))
    with pytest.raises(ConstraintSetError, match=r"default\.json: not JSON: nested too deeply$"):
        read_compiled(build)


def test_an_untouched_set_with_its_hashes_rewritten_is_read(compiled: Path, tmp_path: Path) -> None:
    """The helper itself changes nothing but the hashes: without an edit, what it writes is read."""
    build = tamper_directory(compiled, "default", copy_to=tmp_path / "build")
    index, sets = read_compiled(build)
    assert [s.name for s in sets] == ["batch", "default", "gpu", "kspark"]


@pytest.mark.parametrize(
    "policies",
    ["policies", "examples/positive", "examples/workloads/policies", "examples/pinning/policies"],
)
def test_every_set_compile_writes_is_read_back(policies: str, tmp_path: Path) -> None:
    # the getting-started seed keeps `${CLUSTER_NAME}` for envsubst: a placeholder error under compile (#27)
    unrendered = Selection(exclude=("seed-000-default-spot.yaml",))
    result = compile_command(CompileFlags(paths=(str(ROOT / policies),), out=str(tmp_path / "build")), unrendered)
    assert result.exit_code == 0, result
    index, sets = read_compiled(tmp_path / "build")
    assert [s.name for s in sets] == [e.name for e in index.entries] and sets
    on_disk = {p.stem: json.loads(p.read_text()) for p in (tmp_path / "build" / "constraintsets").glob("*.json")}
    assert all(s.hash == on_disk[s.name]["hash"] for s in sets)
