"""`compile`: constraint sets, determinism, atomic writes, the ConfigMap, `-o -` streaming, exit codes. The command
line runs in this process (`run`), and in a child process (`cli`) where the process is the point: a real stdout
and stderr, another process's bytes, the working directory and environment it starts in."""

from __future__ import annotations

import contextlib
import hashlib
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
from click.testing import CliRunner

from karpenter_policy.api.constraintset import (
    ConstraintSet,
    ConstraintSetError,
    ConstraintSetIndex,
    read_wire_data,
    resolve_instance_types,
)
from karpenter_policy.catalog import load_catalog
from karpenter_policy.cli import main
from karpenter_policy.commands.compile.compiler import (
    CompileOptions,
    OutputError,
    compile_command,
    compile_paths,
    write_output,
)
from karpenter_policy.commands.flags import CompileFlags
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirements

ROOT = Path(__file__).resolve().parents[3]
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
    """`karpenter-policy compile ARGS` in a child process from `cwd`: for what only a process shows — stdout and
    stderr as the file descriptors a pipe reads (`-o -` holds only YAML, an error's stderr is one line and no
    traceback), the same bytes from another process (hash seed) and working directory, the environment."""
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "compile", *args],
        cwd=cwd, capture_output=True, text=True, timeout=180, env=env,
    )


def run(*args: str, cwd: Path = ROOT, command: str = "compile") -> subprocess.CompletedProcess[str]:
    """`karpenter-policy compile ARGS` (or `command`) from `cwd` in this process (click's CliRunner): the command
    line's own parsing, exit status, stdout and stderr, without a process's start (0.76 s of CPU each, most of it
    imports and the catalog). An exception that escaped the command is raised here: a process would have printed
    it as a traceback."""
    with contextlib.chdir(cwd):
        done = CliRunner().invoke(main, [command, *args])
    if done.exception is not None and not isinstance(done.exception, SystemExit):
        raise done.exception
    return subprocess.CompletedProcess([command, *args], done.exit_code, done.stdout, done.stderr)


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
    paths = ("policies",) if Path.cwd() == ROOT else (str(POLICIES),)
    result = compile_command(CompileFlags(paths=paths, out=str(out)))
    assert result.exit_code == 0, result.stdout + result.stderr
    return out


# --- constraint sets ----------------------------------------------------------------------------------------


def test_output_layout(compiled: Path) -> None:
    files = tree(compiled)
    assert sorted(files) == [
        ".karpenter-policy-output",
        "constraintsets/arm64.json", "constraintsets/default.json", "constraintsets/gpu.json",
        "constraintsets/index.json", "constraintsets/spot-batch.json",
        "kustomization.yaml",
        "manifests/awsnodetemplate-default.yaml", "manifests/awsnodetemplate-gpu.yaml",
        "manifests/configmap-karpenter-policy-constraints.yaml",
        "manifests/provisioner-arm64.yaml", "manifests/provisioner-default.yaml", "manifests/provisioner-gpu.yaml",
        "manifests/provisioner-spot-batch.yaml",
    ]
    # the record of what compile owns there: every other file, with its SHA-256
    owned = json.loads(files[".karpenter-policy-output"])["files"]
    assert owned == {name: "sha256:" + hashlib.sha256(content).hexdigest()
                     for name, content in files.items() if name != ".karpenter-policy-output"}


def test_the_kustomization_lists_the_manifests(compiled: Path, tmp_path: Path) -> None:
    """DIR/kustomization.yaml: every manifest, nothing else; rewritten as the policies change, so that a Flux
    kustomization listing DIR never needs editing."""
    kustomization = yaml.safe_load((compiled / "kustomization.yaml").read_text(encoding="utf-8"))
    assert (kustomization["apiVersion"], kustomization["kind"]) == ("kustomize.config.k8s.io/v1beta1",
                                                                     "Kustomization")
    assert kustomization["resources"] == sorted(f"manifests/{p.name}" for p in (compiled / "manifests").iterdir())
    assert set(kustomization) == {"apiVersion", "kind", "resources"}
    assert (compiled / "kustomization.yaml").read_text().startswith("# Written by `karpenter-policy compile`")

    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    assert compile_command(CompileFlags(paths=(str(policies),), out=str(out))).exit_code == 0
    extra = (policies / "gpu.yaml").read_text().replace("name: gpu\n", "name: gpu-extra\n", 1)
    (policies / "gpu-extra.yaml").write_text(extra)
    (policies / "arm64.yaml").unlink()
    assert compile_command(CompileFlags(paths=(str(policies),), out=str(out))).exit_code == 0
    resources = yaml.safe_load((out / "kustomization.yaml").read_text())["resources"]
    assert "manifests/provisioner-gpu-extra.yaml" in resources and "manifests/provisioner-arm64.yaml" not in resources
    assert resources == sorted(f"manifests/{p.name}" for p in (out / "manifests").iterdir())


def test_kustomize_builds_the_output(compiled: Path, kubectl: str) -> None:
    built = subprocess.run([kubectl, "kustomize", str(compiled)], capture_output=True, text=True, timeout=120,
                           check=False)
    assert built.returncode == 0, built.stderr
    objects = [o for o in yaml.safe_load_all(built.stdout) if o]
    expected = [yaml.safe_load(p.read_text()) for p in sorted((compiled / "manifests").iterdir())]
    key = lambda o: (o["kind"], o["metadata"]["name"])  # noqa: E731
    assert sorted(objects, key=key) == sorted(expected, key=key)


@pytest.mark.slow
def test_a_kustomization_of_the_users_in_the_output_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """Before compile wrote DIR/kustomization.yaml, users could keep their own there: never overwritten."""
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    assert compile_command(CompileFlags(paths=(str(policies),), out=str(out))).exit_code == 0
    record = out / ".karpenter-policy-output"  # the record of an earlier version, which did not write it…
    data = json.loads(record.read_text())
    data["files"] = {k: v for k, v in data["files"].items() if k != "kustomization.yaml"} if isinstance(
        data["files"], dict) else [f for f in data["files"] if f != "kustomization.yaml"]
    record.write_text(json.dumps(data))
    (out / "kustomization.yaml").write_text("resources: [manifests/provisioner-default.yaml]\n")  # …the user's
    before = tree(tmp_path)

    result = run(str(policies), "-o", str(out))

    assert result.returncode == 2, result.stderr
    assert f"{out}/kustomization.yaml exists and was not written by compile, which now writes it" in result.stderr
    assert "move yours next to the output directory" in result.stderr
    assert tree(tmp_path) == before


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
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    described = git("describe", "--always")
    dirty = "-dirty" if git("status", "--porcelain", "--", "policies") else ""  # the policies, not the rest
    assert load_set(compiled, "arm64").version == (described + dirty if described else "unversioned")
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
        ConstraintSet.from_json({**raw, "schemaVersion": 1})
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


@pytest.mark.slow
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
    assert one == two and len(one) == 14
    for content in one.values():
        assert b"\r\n" not in content and str(tmp_path).encode() not in content
    third = cli(str(policies), "-o", "-", cwd=here)  # the directory, streamed
    fourth = cli(str(policies), "-o", "-", cwd=there)
    assert third.stdout == fourth.stdout and third.stdout


def test_git_repository_sources_are_relative_to_the_repository(tmp_path: Path) -> None:
    one = compile_command(CompileFlags(paths=(str(POLICIES),), out=str(tmp_path / "a")))
    os.chdir(POLICIES)
    try:
        two = compile_command(CompileFlags(paths=(".",), out=str(tmp_path / "b")))
    finally:
        os.chdir(ROOT)
    assert one.exit_code == two.exit_code == 0
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert json.loads((tmp_path / "a" / "constraintsets" / "gpu.json").read_text())["sources"] == [
        "policies/gpu.yaml", "policies/nodetemplates.yaml"]


# --- atomicity ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_error_leaves_existing_output_untouched_and_creates_nothing(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    assert compile_command(CompileFlags(paths=(str(policies),), out=str(out))).exit_code == 0
    before, listing = tree(out), sorted(os.listdir(tmp_path))
    (policies / "broken.yaml").write_text(BROKEN)
    result = run(str(policies), "-o", str(out))
    assert result.returncode == 1 and "invalid-requirement" in result.stdout
    assert tree(out) == before and sorted(os.listdir(tmp_path)) == listing
    fresh = tmp_path / "new" / "build"
    assert run(str(policies), "-o", str(fresh)).returncode == 1
    assert not (tmp_path / "new").exists()


@pytest.mark.slow
def test_warnings_with_fail_on_warn_write_nothing(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "p.yaml").write_text(WARNING_ONLY)
    assert run(str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--fail-on-warn").returncode == 1
    assert not (tmp_path / "out").exists()
    result = run(str(tmp_path / "in"), "-o", str(tmp_path / "out"))
    assert result.returncode == 0 and "unresolved-reference" in result.stdout
    assert (tmp_path / "out" / "constraintsets" / "orphan.json").exists()


@pytest.mark.parametrize("ttl", [0, 720, 3599])
@pytest.mark.slow
def test_an_expiry_under_an_hour_is_a_warning_and_the_set_keeps_it(tmp_path: Path, ttl: int) -> None:
    policies = copy_policies(tmp_path / "policies")
    default = policies / "default.yaml"
    default.write_text(default.read_text().replace("ttlSecondsUntilExpired: 2592000", f"ttlSecondsUntilExpired: {ttl}"))
    line = next(n for n, text in enumerate(default.read_text().splitlines(), 1) if "ttlSecondsUntilExpired" in text)
    result = run(str(policies), "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    (warning,) = [text for text in result.stdout.splitlines() if text.endswith("[ttl-churn]")]
    assert warning.startswith(f"{default}:{line}:27: warning: Provisioner/default: ttlSecondsUntilExpired {ttl}: ")
    assert "without end" in warning
    assert load_set(tmp_path / "out", "default").ttl_seconds_until_expired == ttl
    assert run(str(policies), "-o", str(tmp_path / "strict"), "--fail-on-warn").returncode == 1
    assert run(str(policies), "-o", str(tmp_path / "quiet"), "--fail-on-warn", "--disable", "ttl-churn").returncode == 0


def test_replacing_an_earlier_output_removes_stale_files(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    assert compile_command(CompileFlags(paths=(str(policies),), out=str(out))).exit_code == 0
    (policies / "gpu.yaml").unlink()
    assert compile_command(CompileFlags(paths=(str(policies),), out=str(out))).exit_code == 0
    assert not (out / "constraintsets" / "gpu.json").exists()
    assert not (out / "manifests" / "provisioner-gpu.yaml").exists()
    assert sorted(os.listdir(tmp_path)) == ["build", "policies"]  # no temporary directories left


def test_failure_while_staging_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "build"
    write_output({"constraintsets/index.json": b"old\n", "manifests/a.yaml": b"a: 1\n"}, str(out))
    before = tree(out)
    real_fsync = os.fsync
    calls: list[int] = []

    def full_disk(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 2:  # the second new file
            raise OSError(28, "No space left on device")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OutputError, match="No space left on device; nothing was changed"):
        write_output({"constraintsets/index.json": b"new\n", "manifests/a.yaml": b"a: 2\n", "manifests/b.yaml": b""},
                     str(out))
    assert tree(out) == before  # and no temporary file left behind


def test_failure_while_renaming_says_what_was_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "build"
    old = {"constraintsets/index.json": b"old\n", "manifests/a.yaml": b"a: 1\n"}
    new = {"constraintsets/index.json": b"new\n", "manifests/a.yaml": b"a: 2\n"}
    write_output(old, str(out))
    real_replace = os.replace
    calls: list[str] = []

    def flaky(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 3:  # the ownership record, manifests/a.yaml, then the index
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", flaky)
    with pytest.raises(OutputError) as raised:
        write_output(new, str(out))
    assert "replaced: manifests/a.yaml; not replaced: constraintsets/index.json" in str(raised.value)
    files = tree(out)
    assert files["manifests/a.yaml"] == b"a: 2\n" and files["constraintsets/index.json"] == b"old\n"  # each whole
    monkeypatch.setattr(os, "replace", real_replace)
    changes = write_output(new, str(out))  # the next run finishes the job
    assert changes.replaced == ["constraintsets/index.json"] and changes.unchanged == ["manifests/a.yaml"]
    assert {k: v for k, v in tree(out).items() if not k.startswith(".")} == new


REFUSED_OUTPUTS = {  # setup → what the message says
    "foreign": "is not empty and holds no karpenter-policy output",
    "file": "exists and is not a directory",
    "inside": "is inside the input path",
    "is-input": "is the input path",
    "contains-input": "contains the input path",  # `compile repo/policies -o repo` used to delete the repository
    "inside-via-link": "is inside the input path",
    "contains-input-via-link": "contains the input path",
}


@pytest.mark.parametrize("setup", sorted(REFUSED_OUTPUTS))
def test_refuses_output_directories_it_must_not_replace(tmp_path: Path, setup: str) -> None:
    policies = copy_policies(tmp_path / "repo" / "policies")
    source, out = policies, tmp_path / "out"
    (tmp_path / "link").symlink_to(tmp_path / "repo")  # the same directories by another path
    if setup == "foreign":
        out.mkdir()
        (out / "precious.txt").write_text("keep me")
    elif setup == "file":
        out.write_text("a file")
    elif setup == "inside":
        out = policies / "build"
    elif setup == "is-input":
        out = policies
    elif setup == "contains-input":
        out = tmp_path / "repo"
    elif setup == "inside-via-link":
        out = tmp_path / "link" / "policies" / "build"
    else:
        source, out = tmp_path / "link" / "policies", tmp_path / "repo"
    before = tree(tmp_path)
    result = run(str(source), "-o", str(out))
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert f"karpenter-policy compile: {out}" in result.stderr or "the output directory" in result.stderr
    assert REFUSED_OUTPUTS[setup] in result.stderr, result.stderr
    assert tree(tmp_path) == before


@pytest.mark.slow
def test_files_compile_did_not_write_are_left_alone(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "deploy"
    first = run(str(policies), "-o", str(out))
    assert first.returncode == 0, first.stderr
    # what a user adds next to the output: kept, whatever compile does next
    (out / "README.md").write_text("generated: see the policies\n")
    (out / ".git").mkdir()
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "manifests" / "extra.yaml").write_text("kind: Namespace\n")
    (out / "manifests" / "provisioner-gpu.yaml").write_text("edited by hand\n")
    (policies / "gpu.yaml").unlink()
    second = run(str(policies), "-o", str(out))
    assert second.returncode == 0, second.stderr
    assert (out / "README.md").read_text() == "generated: see the policies\n"
    assert (out / ".git" / "HEAD").exists() and (out / "manifests" / "extra.yaml").exists()
    assert not (out / "manifests" / "provisioner-gpu.yaml").exists()
    assert not (out / "constraintsets" / "gpu.json").exists()
    # and it says what it removed, including a file edited since compile wrote it
    assert "removed (no longer produced): constraintsets/gpu.json, manifests/provisioner-gpu.yaml" in second.stderr
    assert "although edited since compile wrote them: manifests/provisioner-gpu.yaml" in second.stderr
    owned = json.loads((out / ".karpenter-policy-output").read_text())["files"]
    assert "README.md" not in owned and "manifests/extra.yaml" not in owned
    assert "manifests/provisioner-default.yaml" in owned
    third = run(str(policies), "-o", str(out))  # nothing changed: nothing rewritten
    assert "11 files: 0 added, 0 replaced, 11 unchanged" in third.stderr


@pytest.mark.parametrize("index", ["real", "any content"])
def test_an_index_without_a_record_does_not_make_the_files_next_to_it_compiles(tmp_path: Path, index: str) -> None:
    """A directory with constraintsets/index.json and no ownership record (an earlier version's output, or a
    directory of the user's that has such a file) is refused: compile used to take every constraintsets/*.json and
    manifests/*.yaml there for its own and deleted the ones it no longer produced — the user's files among them."""
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    if index == "real":
        assert run(str(policies), "-o", str(out)).returncode == 0
        (out / ".karpenter-policy-output").unlink()
    else:
        (out / "constraintsets").mkdir(parents=True)
        (out / "constraintsets" / "index.json").write_text("notes, not an index\n")
        (out / "manifests").mkdir()
    (out / "manifests" / "my-hand-written-configmap.yaml").write_text("kind: ConfigMap\n")
    (out / "constraintsets" / "my-notes.json").write_text('{"mine": true}\n')
    before = tree(tmp_path)
    result = cli(str(policies), "-o", str(out))  # what the process writes: one line, no traceback
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert f"{out} has constraintsets/index.json but no .karpenter-policy-output" in result.stderr
    assert tree(tmp_path) == before  # nothing deleted, nothing written


@pytest.mark.parametrize("obstacle", ["user-file", "linked-directory"])
def test_never_overwrites_what_it_does_not_own(tmp_path: Path, obstacle: str) -> None:
    policies = copy_policies(tmp_path / "policies")
    out = tmp_path / "build"
    out.mkdir()
    (out / ".karpenter-policy-output").write_text('{"files": {}}')  # an output that owns nothing yet
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if obstacle == "user-file":
        (out / "manifests").mkdir()
        (out / "manifests" / "provisioner-gpu.yaml").write_text("mine\n")
    else:  # writing through it would put files outside the output directory
        (out / "manifests").symlink_to(elsewhere)
    before = tree(tmp_path)
    result = run(str(policies), "-o", str(out))
    assert result.returncode == 2, result.stderr
    assert ("was not written by compile" if obstacle == "user-file" else "is a symbolic link") in result.stderr
    assert tree(tmp_path) == before


# --- names that would collide in the output ------------------------------------------------------------------


@pytest.mark.slow
def test_a_provisioner_named_index_is_refused(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    (policies / "index.yaml").write_text((policies / "gpu.yaml").read_text().replace("name: gpu", "name: index", 1))
    out = tmp_path / "build"
    result = run(str(policies), "-o", str(out), "--output", "json")
    assert result.returncode == 1, result.stderr
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "reserved-name"]
    line = (policies / "index.yaml").read_text().splitlines().index("  name: index") + 1
    assert finding["file"].endswith("index.yaml") and finding["line"] == line
    assert finding["object"] == "Provisioner/index"
    assert not out.exists()
    streamed = run(str(policies), "-o", "-")
    assert streamed.returncode == 1 and streamed.stdout == "" and "[reserved-name]" in streamed.stderr


def test_two_sources_of_one_ec2nodeclass_are_refused(tmp_path: Path) -> None:
    """v1: a provisioner whose kubelet differs from its template's other users gets EC2NodeClass <template>-<name>,
    which must not be the name of another node class."""
    template = ("apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {{name: {name}}}\nspec:\n"
                "  subnetSelector: {{a: b}}\n  securityGroupSelector: {{a: b}}\n")
    provisioner = ("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {{name: {name}}}\nspec:\n"
                   "  providerRef: {{name: {ref}}}\n  kubeletConfiguration: {{maxPods: {pods}}}\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "p.yaml").write_text("---\n".join([
        template.format(name="a"), template.format(name="a-b"),
        provisioner.format(name="b", ref="a", pods=10), provisioner.format(name="c", ref="a", pods=20),
    ]))
    result = run(str(tmp_path / "in"), "-o", "-", "--api", "v1", "--node-role", "KarpenterNodeRole")
    assert result.returncode == 1 and result.stdout == ""
    assert "becomes EC2NodeClass 'a-b', and so does" in result.stderr and "[v1-conversion]" in result.stderr


# --- git: versions without running anything the tree holds -----------------------------------------------------


def plant_repository_shaped_folder(folder: Path, marker: Path) -> None:
    """Files anyone can commit that make `folder` look like a git repository to git's discovery, with a config
    that runs a command (creating `marker`) on an index refresh and on a lazy fetch."""
    (folder / "objects").mkdir(parents=True)
    (folder / "objects" / "keep").write_text("")
    (folder / "refs" / "heads").mkdir(parents=True)
    (folder / "refs" / "heads" / "main").write_text("1111111111111111111111111111111111111111\n")
    (folder / "HEAD").write_text("ref: refs/heads/main\n")
    (folder / "config").write_text(
        "[core]\n\trepositoryformatversion = 1\n\tbare = false\n\tworktree = ..\n"
        f"\tfsmonitor = \"touch {marker}; false\"\n"
        "[extensions]\n\tpartialClone = origin\n"
        f"[remote \"origin\"]\n\turl = {folder}\n\tpromisor = true\n\tuploadpack = \"touch {marker}; false\"\n"
    )


def git_repo(path: Path) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "policies"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "tag", "-a", "-m", "release", "v1.2.0"]):
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)


@pytest.mark.parametrize("in_a_repository", [False, True], ids=["plain-tree", "git-checkout"])
@pytest.mark.slow
def test_a_repository_shaped_folder_in_the_tree_runs_nothing(tmp_path: Path, in_a_repository: bool) -> None:
    repo = tmp_path / "repo"
    policies = copy_policies(repo / "policies")
    marker = tmp_path / "pwned"
    plant_repository_shaped_folder(policies / "team-a", marker)
    shutil.move(policies / "gpu.yaml", policies / "team-a" / "gpu.yaml")  # a policy inside the planted folder
    if in_a_repository:
        git_repo(repo)
    streamed = run(str(policies), "-o", "-")
    written = run("policies", "-o", str(tmp_path / "out"), cwd=repo)
    assert streamed.returncode == written.returncode == 0, streamed.stderr + written.stderr
    assert not marker.exists(), "compile ran a command from a folder of the policy tree"
    gpu = load_set(tmp_path / "out", "gpu")
    # the version is the repository's (the tag just made), the planted folder's is never read
    assert gpu.version == ("v1.2.0" if in_a_repository else "unversioned")
    assert ("policies/team-a/gpu.yaml" if in_a_repository else "team-a/gpu.yaml") in gpu.sources


@pytest.mark.parametrize(
    ("change", "suffix"),
    [
        ("nothing", ""),
        ("a file outside the policies", ""),
        ("a policy edited", "-dirty"),
        ("a policy added", "-dirty"),
        ("a policy deleted", "-dirty"),
        ("a policy deleted and excluded", ""),
        ("the policies checked out in CRLF", ""),
    ],
)
def test_the_version_is_dirty_when_the_policies_read_are_not_heads(tmp_path: Path, change: str, suffix: str) -> None:
    """`-dirty` is decided on the policies compile reads, without `git describe --dirty` (whose index refresh runs
    the filters the tree's attributes select): a policy edited, added or gone makes the version dirty; a README,
    an excluded file or line endings (a CRLF checkout of LF blobs) do not."""
    repo = tmp_path / "repo"
    policies = copy_policies(repo / "policies")
    (repo / "README.md").write_text("policies\n")
    git_repo(repo)
    args = ["policies", "-o", "-"]
    if change == "a file outside the policies":
        (repo / "README.md").write_text("edited\n")
    elif change == "a policy edited":
        (policies / "gpu.yaml").write_text((policies / "gpu.yaml").read_text() + "# edited\n")
    elif change == "a policy added":
        (policies / "team.yaml").write_text(WARNING_ONLY)
    elif change.startswith("a policy deleted"):
        (policies / "spot-batch.yaml").unlink()
        args += ["--exclude", "spot-batch.yaml"] if change.endswith("excluded") else []
    elif change == "the policies checked out in CRLF":
        for file in policies.iterdir():
            file.write_bytes(file.read_bytes().replace(b"\n", b"\r\n"))
    result = run(*args, cwd=repo)
    assert result.returncode == 0, result.stderr
    configmap = next(d for d in yaml.safe_load_all(result.stdout) if d and d.get("kind") == "ConfigMap")
    assert json.loads(configmap["data"]["gpu.json"])["version"] == f"v1.2.0{suffix}"


@pytest.mark.slow
def test_policy_version_sets_the_version_without_git(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    copy_policies(repo / "policies")
    git_repo(repo)
    result = run("policies", "-o", str(tmp_path / "out"), "--policy-version", "2026.12.0-rc1", cwd=repo)
    assert result.returncode == 0, result.stderr
    versions = {n: load_set(tmp_path / "out", n).version for n in ("arm64", "default", "gpu")}
    assert versions == {"arm64": "2026.12.0-rc1", "default": "2026.11.1", "gpu": "2026.12.0-rc1"}  # annotation wins
    bad = run("policies", "-o", "-", "--policy-version", "", cwd=repo)
    assert bad.returncode == 2 and "--policy-version" in bad.stderr


# --- the ConfigMap ------------------------------------------------------------------------------------------


def test_configmap_carries_every_set_and_the_index(compiled: Path) -> None:
    cm = yaml.safe_load((compiled / "manifests" / "configmap-karpenter-policy-constraints.yaml").read_text())
    assert (cm["apiVersion"], cm["kind"]) == ("v1", "ConfigMap")
    assert cm["metadata"]["namespace"] == "karpenter-policy"
    assert sorted(cm["data"]) == ["arm64.json", "default.json", "gpu.json", "index.json", "spot-batch.json"]
    index, sets = read_wire_data(cm["data"])
    assert index == ConstraintSetIndex.from_json(json.loads((compiled / "constraintsets" / "index.json").read_text()))
    for constraint_set in sets:  # the files' sets, without the audit listing of offerings
        on_disk = load_set(compiled, constraint_set.name)
        assert constraint_set.hash == on_disk.hash and constraint_set.admitted == on_disk.admitted
        assert constraint_set.provider == on_disk.provider and not constraint_set.instance_types
        assert "instanceTypes" not in cm["data"][f"{constraint_set.name}.json"]
    tampered = {**cm["data"], "gpu.json": cm["data"]["gpu.json"].replace('"weight":80', '"weight":81')}
    with pytest.raises(ConstraintSetError, match="gpu.json"):
        read_wire_data(tampered)


@pytest.mark.slow
def test_five_hundred_broad_provisioners_fit_one_configmap(tmp_path: Path) -> None:
    policy = (POLICIES / "default.yaml").read_text()
    for i in range(500):
        provider = f"provider:\n    subnetSelector: {{team: t{i}}}\n    securityGroupSelector: {{a: b}}"
        text = policy.replace("providerRef:\n    name: default", provider).replace("name: default", f"name: wide-{i}")
        (tmp_path / f"p{i}.yaml").write_text(text)
    result = compile_paths([str(tmp_path)], CompileOptions(catalog=CATALOG))
    # 500 distinct node templates on purpose: inline, so each is also the deprecation warning, and nothing else
    warnings = [f.rule for f in result.report.findings if f.severity == "warning"]
    assert result.report.errors == 0 and warnings == ["deprecated-provider"] * 500, [
        f.message for f in result.report.findings if f.rule != "deprecated-provider"
    ][:3]
    (cm,) = [o for o in result.objects if o["kind"] == "ConfigMap"]
    size = sum(len(k) + len(v.encode()) for k, v in cm["data"].items())
    assert size < 1024 * 1024
    index, sets = read_wire_data(cm["data"])
    assert len(sets) == 500 and all(len(s.admitted) > 300 for s in sets)


@pytest.mark.slow
def test_configmap_name_and_namespace_are_configurable(tmp_path: Path) -> None:
    result = run("-o", "-", "--configmap-namespace", "platform", "--configmap-name", "karpenter.constraints")
    assert result.returncode == 0, result.stderr
    (cm,) = [d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "ConfigMap"]
    assert cm["metadata"]["name"] == "karpenter.constraints" and cm["metadata"]["namespace"] == "platform"
    bad = run("-o", "-", "--configmap-namespace", "Not_A_Namespace")
    assert bad.returncode == 2 and bad.stdout == "" and "--configmap-namespace" in bad.stderr


@pytest.mark.slow
def test_configmap_too_large_is_an_error(tmp_path: Path) -> None:
    policy = (POLICIES / "default.yaml").read_text()
    for i in range(8):  # node templates with 150 KB of tags each: no compact form holds that
        tags = {f"team-{i}-cost-centre-{j:05d}": f"value-{j:05d}-of-a-long-tag-list" for j in range(2500)}
        (tmp_path / f"p{i}.yaml").write_text(policy.replace(
            "providerRef:\n    name: default", "provider:\n    subnetSelector: {a: b}\n"
            "    securityGroupSelector: {a: b}\n    tags: " + json.dumps(tags)
        ).replace("name: default", f"name: wide-{i}"))
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


@pytest.mark.slow
def test_stream_on_error_is_empty(tmp_path: Path) -> None:
    policies = copy_policies(tmp_path / "policies")
    (policies / "broken.yaml").write_text(BROKEN)
    for fmt in ("text", "json"):  # the text report through a real stdout and stderr, the JSON one in-process
        result = (cli if fmt == "text" else run)(str(policies), "-o", "-", "--output", fmt)
        assert result.returncode == 1 and result.stdout == ""
        assert "invalid-requirement" in result.stderr
    missing = run(str(tmp_path / "nope"), "-o", "-")
    assert missing.returncode == 2 and missing.stdout == ""
    bad_catalog = run("-o", "-", "--catalog", str(tmp_path / "nope.json"))
    assert bad_catalog.returncode == 2 and bad_catalog.stdout == "" and "catalog" in bad_catalog.stderr


@pytest.mark.slow
def test_stream_v1_with_flux_escape() -> None:
    result = run("examples/templates/policies", "--values", "examples/templates/values/prod.yaml", "-o", "-",
                 "--api", "v1", "--flux-escape")
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert [(d["apiVersion"], d["kind"]) for d in documents] == [
        ("v1", "ConfigMap"), ("karpenter.k8s.aws/v1", "EC2NodeClass"), ("karpenter.sh/v1", "NodePool")]
    node_class = documents[1]
    assert "$${CLUSTER_NAME:-platform-prod}" in node_class["spec"]["userData"]
    assert "annotations" not in node_class["metadata"]
    default = run("examples/templates/policies", "--values", "examples/templates/values/prod.yaml", "-o", "-")
    for document in yaml.safe_load_all(default.stdout):
        flagged = document["metadata"].get("annotations", {}).get("kustomize.toolkit.fluxcd.io/substitute")
        assert flagged == ("disabled" if "${" in json.dumps(document) else None)


@pytest.mark.slow
def test_v1_needs_a_role_or_instance_profile(tmp_path: Path) -> None:
    result = run("-o", "-", "--api", "v1")
    assert result.returncode == 1 and result.stdout == "" and "v1-conversion" in result.stderr
    assert "policies/nodetemplates.yaml:" in result.stderr and "AWSNodeTemplate/default:" in result.stderr
    ok = run("-o", str(tmp_path / "v1"), "--api", "v1", "--node-role", "KarpenterNodeRole-prod")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    kinds = sorted(p.name.split("-")[0] for p in (tmp_path / "v1" / "manifests").iterdir())
    assert kinds == ["configmap", "ec2nodeclass", "ec2nodeclass", "nodepool", "nodepool", "nodepool", "nodepool"]
    both = run("-o", "-", "--api", "v1", "--node-role", "r", "--default-instance-profile", "p")
    assert both.returncode == 2 and both.stdout == ""


# --- what reaches the cluster (#27) -------------------------------------------------------------------------

PLACEHOLDER_TEMPLATE = """\
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: "${CLUSTER_NAME}"}
  securityGroupSelector: {karpenter.sh/discovery: prod}
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: default}
"""


def test_a_placeholder_is_an_error_under_compile_and_a_warning_under_check(tmp_path: Path) -> None:
    """`${CLUSTER_NAME}` left in a selector matches no subnet: what compile writes is applied, so nothing is
    written; `check` (what a reviewer reads) keeps it a warning. The report says `checked`, not `compiled`, and
    stderr why nothing was written."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "p.yaml").write_text(PLACEHOLDER_TEMPLATE)
    result = run(str(tmp_path / "in"), "-o", str(tmp_path / "out"))
    assert result.returncode == 1, result.stdout + result.stderr
    (line,) = [text for text in result.stdout.splitlines() if text.endswith("[placeholder]")]
    assert ":5:" in line and ": error: AWSNodeTemplate/default: " in line
    assert "(an error in compile: its output is applied)" in line
    assert result.stdout.splitlines()[-1].startswith("checked 2 objects")
    assert "compiled" not in result.stdout
    assert "karpenter-policy compile: nothing written: 1 error" in result.stderr
    assert not (tmp_path / "out").exists()
    streamed = run(str(tmp_path / "in"), "-o", "-")
    assert streamed.returncode == 1 and streamed.stdout == ""
    assert streamed.stderr.endswith("nothing written: 1 error\n")
    as_json = cli(str(tmp_path / "in"), "-o", "-", "--output", "json")  # stderr is the JSON report alone
    assert as_json.returncode == 1 and json.loads(as_json.stderr)["summary"]["errors"] == 1
    checked = run(str(tmp_path / "in"), command="check")
    assert checked.returncode == 0 and "warning: AWSNodeTemplate/default: " in checked.stdout
    marked = PLACEHOLDER_TEMPLATE.replace(
        "metadata: {name: default}\nspec:\n  subnet",
        "metadata: {name: default, annotations: {kustomize.toolkit.fluxcd.io/substitute: enabled}}\nspec:\n  subnet",
    )
    (tmp_path / "in" / "p.yaml").write_text(marked)  # Flux fills it in: no finding at all
    assert run(str(tmp_path / "in"), "-o", str(tmp_path / "out")).returncode == 0


def test_strict_is_fail_on_warn(tmp_path: Path) -> None:
    """`--strict` (the shipped CI example's flag) fails on warnings as `--fail-on-warn` does, and says so."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "p.yaml").write_text(WARNING_ONLY)
    result = run(str(tmp_path / "in"), "-o", str(tmp_path / "out"), "--strict")
    assert result.returncode == 1 and not (tmp_path / "out").exists()
    assert "nothing written: 1 warning (--strict)" in result.stderr
    assert run(str(tmp_path / "in"), "-o", str(tmp_path / "out")).returncode == 0
