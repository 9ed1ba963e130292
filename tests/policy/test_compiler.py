"""`compile`: constraint sets, determinism, atomic writes, the ConfigMap, `-o -` streaming, exit codes."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.api.constraintset import (
    ConstraintSet,
    ConstraintSetError,
    ConstraintSetIndex,
    resolve_instance_types,
)
from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.policy.compiler import (
    CompileOptions,
    OutputError,
    compile_command,
    compile_paths,
    write_output,
)

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
CATALOG = load_catalog()

BROKEN = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: broken
spec:
  requirements:
    - key: kubernetes.io/arch
      operator: Within
      values: [amd64]
  providerRef:
    name: default
"""
WARNING_ONLY = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: orphan
spec:
  providerRef:
    name: missing
"""


def cli(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "compile", *args],
        cwd=cwd, capture_output=True, text=True, timeout=180, env=env,
    )


def tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def copy_policies(destination: Path) -> Path:
    shutil.copytree(POLICIES, destination)
    return destination


def load_set(directory: Path, name: str) -> ConstraintSet:
    return ConstraintSet.loads((directory / "constraintsets" / f"{name}.json").read_bytes())


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's policies compiled once (from the repository root, as a user would)."""
    out = tmp_path_factory.mktemp("compiled") / "build"
    result = compile_command(["policies"] if Path.cwd() == ROOT else [str(POLICIES)], str(out))
    assert result.exit_code == 0, result.stdout + result.stderr
    return out


# --- constraint sets ----------------------------------------------------------------------------------------


def test_output_layout(compiled: Path) -> None:
    assert sorted(tree(compiled)) == [
        "constraintsets/arm64.json", "constraintsets/default.json", "constraintsets/gpu.json",
        "constraintsets/index.json", "constraintsets/spot-batch.json",
        "manifests/awsnodetemplate-default.yaml", "manifests/awsnodetemplate-gpu.yaml",
        "manifests/configmap-karpenter-policy-constraints.yaml",
        "manifests/provisioner-arm64.yaml", "manifests/provisioner-default.yaml", "manifests/provisioner-gpu.yaml",
        "manifests/provisioner-spot-batch.yaml",
    ]


def test_constraint_set_content(compiled: Path) -> None:
    arm = load_set(compiled, "arm64")
    assert arm.name == "arm64" and arm.weight == 20 and arm.consolidation_enabled
    assert arm.sources == ("policies/arm64.yaml", "policies/nodetemplates.yaml")
    assert arm.limits == {"cpu": "500"} and arm.labels == {"node.kubernetes.io/arch-class": "graviton"}
    assert arm.provider is not None and arm.provider.source == "providerRef" and arm.provider.name == "default"
    assert arm.provider.spec is not None and arm.provider.spec["amiFamily"] == "AL2"
    assert {"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]} in arm.requirements
    names = [t.name for t in arm.instance_types]
    assert names == sorted(names) and names
    assert all(n.split(".")[0] in ("c7g", "m7g", "r7g") and not n.endswith(".metal") for n in names)
    for it in arm.instance_types:
        catalog_type = CATALOG.get(it.name)
        assert catalog_type is not None and catalog_type.architectures == ("arm64",)
        assert (it.vcpu, it.memory_mib, it.pods, it.gpus) == (
            catalog_type.vcpu, catalog_type.memory_mib, catalog_type.max_pods, 0)
        assert it.capacity_types() == ("on-demand", "spot")

    default = load_set(compiled, "default")
    assert default.version == "2026.11.1"  # the annotation
    assert default.ttl_seconds_until_expired == 2592000 and default.limits == {"cpu": "1000",
                                                                                "memory": "4294967296000"}
    assert all(set(t.zones()) <= {"us-east-1a", "us-east-1b", "us-east-1c"} for t in default.instance_types)
    assert all(int(CATALOG.get(t.name).generation) > 4 for t in default.instance_types)  # type: ignore[union-attr]

    gpu = load_set(compiled, "gpu")
    assert gpu.instance_types and all(t.gpus > 0 and t.pods == 110 for t in gpu.instance_types)  # kubelet maxPods
    assert all(t.capacity_types() == ("on-demand",) for t in gpu.instance_types)
    assert [t.to_api() for t in gpu.taints] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    assert gpu.ttl_seconds_after_empty == 300 and gpu.kubelet == {"maxPods": 110}

    spot = load_set(compiled, "spot-batch")
    assert all(t.capacity_types() == ("spot",) for t in spot.instance_types)
    assert {t.name.split(".")[1] for t in spot.instance_types} <= {"2xlarge", "4xlarge", "8xlarge"}


def test_version_falls_back_to_git_describe_then_unversioned(compiled: Path, tmp_path: Path) -> None:
    described = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                               text=True, check=False).stdout.strip()
    assert load_set(compiled, "arm64").version == (described or "unversioned")
    policies = copy_policies(tmp_path / "policies")  # not a git repository
    result = compile_paths([str(policies)], CompileOptions(catalog=CATALOG))
    versions = {s.name: s.version for s in result.sets}
    assert versions == {"arm64": "unversioned", "default": "2026.11.1", "gpu": "unversioned",
                        "spot-batch": "unversioned"}
    assert {s.name: s.sources for s in result.sets}["gpu"] == ("gpu.yaml", "nodetemplates.yaml")


def test_hash_round_trip_and_tampering(compiled: Path) -> None:
    raw = json.loads((compiled / "constraintsets" / "gpu.json").read_text())
    loaded = ConstraintSet.from_json(raw)
    assert loaded.to_json() == raw and loaded.hash == raw["hash"]
    tampered = {**raw, "weight": 99}
    with pytest.raises(ConstraintSetError, match="does not match"):
        ConstraintSet.from_json(tampered)
    assert ConstraintSet.from_json(tampered, verify=False).weight == 99
    with pytest.raises(ConstraintSetError, match="schemaVersion"):
        ConstraintSet.from_json({**raw, "schemaVersion": 2})
    index = ConstraintSetIndex.from_json(json.loads((compiled / "constraintsets" / "index.json").read_text()))
    assert [(e.name, e.hash, e.key) for e in index.entries] == [
        (n, load_set(compiled, n).hash, f"{n}.json") for n in ("arm64", "default", "gpu", "spot-batch")]
    assert index.catalog["region"] == "us-east-1" and index.catalog["types"] == len(CATALOG)


def test_resolution_follows_karpenter_intersects() -> None:
    def names(*terms: dict[str, Any]) -> set[str]:
        return {t.name for t in resolve_instance_types(Requirements.from_node_selector(terms), CATALOG, "us-east-1")}

    gpu_types = names({"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["0"]})
    assert gpu_types and all(CATALOG.get(n).gpu_count > 0 for n in gpu_types)  # type: ignore[union-attr]
    # a requirement on a label a type lacks: only negative operators admit it
    no_gpu = names({"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "DoesNotExist"})
    assert no_gpu and not no_gpu & gpu_types
    not_t4 = names({"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "NotIn", "values": ["t4"]})
    assert no_gpu < not_t4
    # zone and capacity type restrict offerings, region must match, custom labels are ignored
    one_zone = resolve_instance_types(
        Requirements.from_node_selector([{"key": wk.ZONE, "operator": "In", "values": ["us-east-1a"]},
                                         {"key": "team", "operator": "In", "values": ["a"]}]), CATALOG, "us-east-1")
    assert one_zone and all(t.zones() == ("us-east-1a",) for t in one_zone)
    assert not names({"key": wk.REGION, "operator": "In", "values": ["eu-west-1"]})
    assert not names({"key": wk.ZONE, "operator": "In", "values": ["eu-west-1a"]})


def test_windows_node_templates_resolve_windows_types(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: win}\nspec:\n"
        "  requirements: [{key: kubernetes.io/os, operator: In, values: [windows]}]\n  providerRef: {name: win}\n"
        "---\napiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: win}\nspec:\n"
        "  amiFamily: Windows2022\n  subnetSelector: {a: b}\n  securityGroupSelector: {a: b}\n"
    )
    (win,) = compile_paths([str(tmp_path)], CompileOptions(catalog=CATALOG)).sets
    assert win.instance_types


# --- determinism --------------------------------------------------------------------------------------------


def test_byte_identical_across_working_directories_and_file_order(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "repo" / "policies")
    files = sorted(p.name for p in policies.iterdir())
    here, there = tmp_path / "here", tmp_path / "there" / "deeper"
    here.mkdir()
    there.mkdir(parents=True)
    first = cli(*[os.path.relpath(policies / f, here) for f in files], "-o", str(tmp_path / "out1"), cwd=here)
    assert first.returncode == 0, first.stdout + first.stderr
    shuffled = files[:]
    random.Random(7).shuffle(shuffled)
    assert shuffled != files
    second = cli(*[str(policies / f) for f in shuffled], "-o", "../../out2", cwd=there)
    assert second.returncode == 0, second.stdout + second.stderr
    one, two = tree(tmp_path / "out1"), tree(tmp_path / "out2")
    assert one == two and len(one) == 12
    for content in one.values():
        assert b"\r\n" not in content and str(tmp_path).encode() not in content
    third = cli(str(policies), "-o", "-", cwd=here)  # the directory, streamed
    fourth = cli(str(policies), "-o", "-", cwd=there)
    assert third.stdout == fourth.stdout and third.stdout


def test_git_repository_sources_are_relative_to_the_repository(tmp_path: Path) -> None:
    one = compile_command([str(POLICIES)], str(tmp_path / "a"))
    os.chdir(POLICIES)
    try:
        two = compile_command(["."], str(tmp_path / "b"))
    finally:
        os.chdir(ROOT)
    assert one.exit_code == two.exit_code == 0
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert json.loads((tmp_path / "a" / "constraintsets" / "gpu.json").read_text())["sources"] == [
        "policies/gpu.yaml", "policies/nodetemplates.yaml"]


# --- atomicity ----------------------------------------------------------------------------------------------


def test_error_leaves_existing_output_untouched_and_creates_nothing(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    assert compile_command([str(policies)], str(out)).exit_code == 0
    before, listing = tree(out), sorted(os.listdir(tmp_path))
    (policies / "broken.yaml").write_text(BROKEN)
    result = cli(str(policies), "-o", str(out))
    assert result.returncode == 1 and "invalid-requirement" in result.stdout
    assert tree(out) == before and sorted(os.listdir(tmp_path)) == listing
    fresh = tmp_path / "new" / "build"
    assert cli(str(policies), "-o", str(fresh)).returncode == 1
    assert not (tmp_path / "new").exists()


def test_warnings_with_fail_on_warn_write_nothing(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "p.yaml").write_text(WARNING_ONLY)
    assert cli(str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--fail-on-warn").returncode == 1
    assert not (tmp_path / "out").exists()
    result = cli(str(tmp_path / "in"), "-o", str(tmp_path / "out"))
    assert result.returncode == 0 and "unresolved-reference" in result.stdout
    assert (tmp_path / "out" / "constraintsets" / "orphan.json").exists()


def test_replacing_an_earlier_output_removes_stale_files(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    assert compile_command([str(policies)], str(out)).exit_code == 0
    (policies / "gpu.yaml").unlink()
    assert compile_command([str(policies)], str(out)).exit_code == 0
    assert not (out / "constraintsets" / "gpu.json").exists()
    assert not (out / "manifests" / "provisioner-gpu.yaml").exists()
    assert sorted(os.listdir(tmp_path)) == ["build", "policies"]  # no temporary directories left


def test_failure_while_renaming_keeps_the_old_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "build"
    write_output({"constraintsets/index.json": b"old\n"}, str(out))
    real_rename = os.rename
    calls: list[str] = []

    def flaky(src: str, dst: str) -> None:
        calls.append(src)
        if len(calls) == 2:  # the new tree into place
            raise OSError(28, "No space left on device")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", flaky)
    with pytest.raises(OutputError, match="No space left"):
        write_output({"constraintsets/index.json": b"new\n"}, str(out))
    assert tree(out) == {"constraintsets/index.json": b"old\n"}
    assert os.listdir(tmp_path) == ["build"]


@pytest.mark.parametrize("setup", ["foreign", "file", "inside"])
def test_refuses_output_directories_it_must_not_replace(tmp_path: Path, setup: str) -> None:
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "out"
    if setup == "foreign":
        out.mkdir()
        (out / "precious.txt").write_text("keep me")
    elif setup == "file":
        out.write_text("a file")
    else:
        out = policies / "build"
    before = tree(tmp_path)
    result = cli(str(policies), "-o", str(out))
    assert result.returncode == 2 and result.stdout == "" and "karpenter-policy compile:" in result.stderr
    assert tree(tmp_path) == before


# --- the ConfigMap ------------------------------------------------------------------------------------------


def test_configmap_carries_every_set_and_the_index(compiled: Path) -> None:
    cm = yaml.safe_load((compiled / "manifests" / "configmap-karpenter-policy-constraints.yaml").read_text())
    assert (cm["apiVersion"], cm["kind"]) == ("v1", "ConfigMap")
    assert cm["metadata"]["namespace"] == "karpenter-policy"
    assert sorted(cm["data"]) == ["arm64.json", "default.json", "gpu.json", "index.json", "spot-batch.json"]
    for key, value in cm["data"].items():
        on_disk = json.loads((compiled / "constraintsets" / key).read_text())
        assert json.loads(value) == on_disk
        if key != "index.json":
            assert ConstraintSet.loads(value).hash == on_disk["hash"]
    ConstraintSetIndex.from_json(json.loads(cm["data"]["index.json"]))


def test_configmap_name_and_namespace_are_configurable(tmp_path: Path) -> None:
    result = cli("-o", "-", "--configmap-namespace", "platform", "--configmap-name", "karpenter.constraints")
    assert result.returncode == 0, result.stderr
    (cm,) = [d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "ConfigMap"]
    assert cm["metadata"]["name"] == "karpenter.constraints" and cm["metadata"]["namespace"] == "platform"
    bad = cli("-o", "-", "--configmap-namespace", "Not_A_Namespace")
    assert bad.returncode == 2 and bad.stdout == "" and "--configmap-namespace" in bad.stderr


def test_configmap_too_large_is_an_error(tmp_path: Path) -> None:
    policy = (POLICIES / "default.yaml").read_text()
    for i in range(8):
        (tmp_path / f"p{i}.yaml").write_text(policy.replace("name: default", f"name: wide-{i}").replace(
            "providerRef:\n    name: default", "provider:\n    subnetSelector: {a: b}\n"
            "    securityGroupSelector: {a: b}"))
    result = compile_paths([str(tmp_path)], CompileOptions(catalog=CATALOG))
    (finding,) = [f for f in result.report.findings if f.rule == "configmap-too-large"]
    assert finding.severity == "error" and finding.line == 5 and "ConfigMap" in finding.message
    assert result.files == {}


# --- -o - (Argo CD Config Management Plugin) ----------------------------------------------------------------


def test_stream_is_only_yaml(tmp_path: Path) -> None:
    env = {**os.environ, "ARGOCD_APP_NAME": "karpenter", "ARGOCD_APP_NAMESPACE": "karpenter",
           "ARGOCD_APP_REVISION": "0123456789abcdef", "ARGOCD_APP_SOURCE_PATH": "policies"}
    result = cli("policies", "-o", "-", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("---\n")
    documents = list(yaml.safe_load_all(result.stdout))
    assert [(d["kind"], d["metadata"]["name"]) for d in documents] == [
        ("ConfigMap", "karpenter-policy-constraints"), ("AWSNodeTemplate", "default"), ("AWSNodeTemplate", "gpu"),
        ("Provisioner", "arm64"), ("Provisioner", "default"), ("Provisioner", "gpu"), ("Provisioner", "spot-batch")]
    assert "compiled 6 objects" in result.stderr  # the report goes to stderr


def test_stream_on_error_is_empty(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    (policies / "broken.yaml").write_text(BROKEN)
    for fmt in ("text", "json"):
        result = cli(str(policies), "-o", "-", "--output", fmt)
        assert result.returncode == 1 and result.stdout == ""
        assert "invalid-requirement" in result.stderr
    missing = cli(str(tmp_path / "nope"), "-o", "-")
    assert missing.returncode == 2 and missing.stdout == ""
    bad_catalog = cli("-o", "-", "--catalog", str(tmp_path / "nope.json"))
    assert bad_catalog.returncode == 2 and bad_catalog.stdout == "" and "catalog" in bad_catalog.stderr


def test_stream_v1_with_flux_escape() -> None:
    result = cli("examples/templates/policies", "--values", "examples/templates/values/prod.yaml", "-o", "-",
                 "--api", "v1", "--flux-escape")
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert [(d["apiVersion"], d["kind"]) for d in documents] == [
        ("v1", "ConfigMap"), ("karpenter.k8s.aws/v1", "EC2NodeClass"), ("karpenter.sh/v1", "NodePool")]
    node_class = documents[1]
    assert "$${CLUSTER_NAME:-platform-prod}" in node_class["spec"]["userData"]
    assert "annotations" not in node_class["metadata"]
    default = cli("examples/templates/policies", "--values", "examples/templates/values/prod.yaml", "-o", "-")
    for document in yaml.safe_load_all(default.stdout):
        flagged = document["metadata"].get("annotations", {}).get("kustomize.toolkit.fluxcd.io/substitute")
        assert flagged == ("disabled" if "${" in json.dumps(document) else None)


def test_v1_needs_a_role_or_instance_profile(tmp_path: Path) -> None:
    result = cli("-o", "-", "--api", "v1")
    assert result.returncode == 1 and result.stdout == "" and "v1-conversion" in result.stderr
    assert "policies/nodetemplates.yaml:" in result.stderr and "AWSNodeTemplate/default:" in result.stderr
    ok = cli("-o", str(tmp_path / "v1"), "--api", "v1", "--node-role", "KarpenterNodeRole-prod")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    kinds = sorted(p.name.split("-")[0] for p in (tmp_path / "v1" / "manifests").iterdir())
    assert kinds == ["configmap", "ec2nodeclass", "ec2nodeclass", "nodepool", "nodepool", "nodepool", "nodepool"]
    both = cli("-o", "-", "--api", "v1", "--node-role", "r", "--default-instance-profile", "p")
    assert both.returncode == 2 and both.stdout == ""
