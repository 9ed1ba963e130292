"""Odd and hostile inputs through the real CLI: each is a finding at its file and line (or a one-line exit-2
message naming the file), never a hang, a traceback or an `internal error` that loses the run's other findings.

Quantities beyond what Kubernetes holds (±(2^63-1)) are a `quantity-out-of-range` warning and are computed
capped; quantities Kubernetes cannot read at all are errors.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clirun import run_cli as run

ROOT = Path(__file__).resolve().parents[3]
POLICIES = ROOT / "policies"
TIMEOUT = 120  # generous: a regression hangs for ever, a pass takes seconds


def findings(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return found


def at(found: list[dict[str, Any]], rule: str, file: Path | str, line: int) -> dict[str, Any]:
    """The one finding of `rule` at `file:line`."""
    matches = [f for f in found if f["rule"] == rule and f["file"].endswith(str(file)) and f["line"] == line]
    assert len(matches) == 1, (rule, str(file), line, found)
    return matches[0]


PROVISIONER = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: {name}
spec:
  limits:
    resources:
      cpu: {cpu}
      memory: {memory}
  kubeletConfiguration:
    kubeReserved: {{memory: {reserved}}}
    evictionHard: {{memory.available: {eviction}}}
  providerRef:
    name: default
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {{name: default}}
spec:
  subnetSelector: {{karpenter.sh/discovery: demo}}
  securityGroupSelector: {{karpenter.sh/discovery: demo}}
"""
#: Another file of the same run with an error of its own: it must still be reported.
RESTRICTED = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: other
spec:
  labels:
    kubernetes.io/custom: x
  providerRef:
    name: default
"""


def provisioner(
    name: str = "huge",
    cpu: str = "'1e99999999'",
    memory: str = "'1e99999999'",
    reserved: str = "'1e99999999'",
    eviction: str = "'1e99999999'",
) -> str:
    return PROVISIONER.format(name=name, cpu=cpu, memory=memory, reserved=reserved, eviction=eviction)


# --- 1. quantities are bounded as Kubernetes bounds them ----------------------------------------------------


def test_check_bounds_huge_quantities_and_keeps_every_finding(tmp_path: Path) -> None:
    """`memory: "1e99999999"` used to spin for ever in int(Decimal): now a warning at each field, and the
    provisioner is still proven (the limits read as 2^63-1 exclude nothing)."""
    (tmp_path / "huge.yaml").write_text(provisioner())
    (tmp_path / "other.yaml").write_text(RESTRICTED)
    result = run("check", str(tmp_path), "--output", "json")
    found = findings(result)
    for line in (8, 9, 11, 12):
        finding = at(found, "quantity-out-of-range", "huge.yaml", line)
        assert finding["severity"] == "warning" and "9223372036854775807" in finding["message"]
    at(found, "restricted-label", "other.yaml", 7)
    assert result.returncode == 1
    proven = {p["object"]: p["verdict"] for p in json.loads(result.stdout)["provisioners"]}
    assert proven["Provisioner/huge"] == "sat"


@pytest.mark.parametrize(
    ("field", "line", "message"),
    [
        ({"memory": ".inf"}, 9, "not a finite number"),
        ({"memory": "'1e9999999999999'"}, 9, "32-bit"),
        ({"cpu": "'1e2147483648'"}, 8, "32-bit"),
        ({"reserved": "'1e9999999999'"}, 11, "32-bit"),
    ],
)
def test_quantities_kubernetes_cannot_read_are_errors(
    tmp_path: Path, field: dict[str, str], line: int, message: str
) -> None:
    """`.inf` (OverflowError) and exponents beyond int32 (MemoryError, decimal.Overflow) used to end the run
    with an internal error: now an invalid-spec error at the field, the other file's error kept."""
    values = {"cpu": "1", "memory": "1Gi", "reserved": "100Mi", "eviction": "100Mi", **field}
    (tmp_path / "bad.yaml").write_text(provisioner(**values))
    (tmp_path / "other.yaml").write_text(RESTRICTED)
    result = run("check", str(tmp_path), "--output", "json")
    found = findings(result)
    assert message in at(found, "invalid-spec", "bad.yaml", line)["message"]
    at(found, "restricted-label", "other.yaml", 7)
    assert result.returncode == 1


@pytest.mark.slow
def test_compile_writes_capped_limits(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "huge.yaml").write_text(provisioner())
    result = run("compile", str(tmp_path / "policies"), "-o", str(tmp_path / "out"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "quantity-out-of-range" in result.stdout
    constraint_set = json.loads((tmp_path / "out" / "constraintsets" / "huge.json").read_text())
    assert constraint_set["limits"] == {"cpu": "9223372036854775807", "memory": "9223372036854775807"}


def test_diff_compares_huge_limits(tmp_path: Path) -> None:
    """diff used to end with `internal error: Overflow` on a huge eviction threshold."""
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "p.yaml").write_text(provisioner(cpu="100", memory="100Gi", reserved="1Gi", eviction="1Gi"))
    (tmp_path / "head").mkdir()
    (tmp_path / "head" / "p.yaml").write_text(provisioner())
    result = run("diff", str(tmp_path / "base"), str(tmp_path / "head"), "--output", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert json.loads(result.stdout)


def test_webhook_checker_bounds_huge_quantities() -> None:
    """The webhook's Checker (what /validate/provisioners runs) answers with a warning, in a child process
    that would otherwise spin for ever."""
    script = """
import json
from karpenter_policy.catalog import load_catalog
from karpenter_policy.webhook.checks import Checker
obj = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "huge"},
       "spec": {"providerRef": {"name": "default"}, "limits": {"resources": {"memory": "1e99999999"}}}}
result = Checker(load_catalog()).check(obj)
print(json.dumps({"allowed": result.allowed, "warnings": list(result.warnings)}))
"""
    child = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert child.returncode == 0, child.stderr
    answer = json.loads(child.stdout)
    assert answer["allowed"] is True
    assert any("quantity-out-of-range" in w and "9223372036854775807" in w for w in answer["warnings"])


# --- 13. odd inputs that used to end in an internal error ---------------------------------------------------


def _deployment(name: str, pod_spec: str, api_version: str = "apps/v1") -> str:
    return (
        f"apiVersion: {api_version}\nkind: Deployment\nmetadata: {{name: {name}}}\n"
        f"spec:\n  template:\n    spec:\n{pod_spec}"
    )


def _requests(resources: str) -> str:
    return f"      containers:\n      - name: app\n        resources:\n          requests: {{{resources}}}\n"


WORKLOADS = {
    "operator.yaml": _deployment(
        "operator",
        "      affinity:\n        nodeAffinity:\n          preferredDuringSchedulingIgnoredDuringExecution:\n"
        "          - weight: 1\n            preference:\n"
        "              matchExpressions: [{key: team, operator: [], values: [a]}]\n",
    ),
    "api-list.yaml": _deployment("api-list", "      containers: []\n", api_version="[]"),
    "api-map.yaml": _deployment("api-map", "      containers: []\n", api_version="{a: 1}"),
    "long.yaml": _deployment("long", _requests("memory: '" + "9" * 4400 + "'")),
    "gpu.yaml": _deployment("gpu", _requests("nvidia.com/gpu: .inf")),
    "fine.yaml": _deployment("fine", _requests("cpu: 100000")),
}


def test_odd_workloads_are_findings_and_the_others_are_kept(tmp_path: Path) -> None:
    for name, text in WORKLOADS.items():
        (tmp_path / name).write_text(text)
    result = run("check", str(POLICIES), "--workloads", str(tmp_path), "--output", "json")
    found = findings(result)
    assert "operator [] is not one of" in at(found, "invalid-workload", "operator.yaml", 12)["message"]
    assert "apiVersion must be a string" in at(found, "invalid-workload", "api-list.yaml", 1)["message"]
    assert "apiVersion must be a string" in at(found, "invalid-workload", "api-map.yaml", 1)["message"]
    assert "not a finite number" in at(found, "invalid-workload", "gpu.yaml", 10)["message"]
    assert at(found, "quantity-out-of-range", "long.yaml", 10)["severity"] == "warning"
    assert "8Ei memory" in at(found, "workload-unschedulable", "long.yaml", 5)["message"]
    assert "100000 vCPU" in at(found, "workload-unschedulable", "fine.yaml", 5)["message"]
    assert result.returncode == 1


def test_pin_passes_over_a_workload_with_an_odd_api_version(tmp_path: Path) -> None:
    (tmp_path / "api-list.yaml").write_text(WORKLOADS["api-list.yaml"])
    result = run("pin", str(tmp_path), "--policies", str(ROOT / "examples" / "pinning" / "policies"), "--no-prove")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "internal error" not in result.stderr


@pytest.mark.parametrize(
    "spec", ["containers: true", "containers: [{name: []}]"], ids=["containers-not-a-list", "name-not-a-string"]
)
def test_pin_reads_odd_containers(tmp_path: Path, spec: str) -> None:
    """Found by the fuzzer: the Spark rules' container-name check iterated and hashed whatever it was given."""
    (tmp_path / "pod.yaml").write_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  {spec}\n")
    result = run("pin", str(tmp_path), "--policies", str(ROOT / "examples" / "pinning" / "policies"), "--no-prove")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "internal error" not in result.stderr


def test_kind_list_with_items_from_a_merge_key(tmp_path: Path) -> None:
    """`<<: {items: [...]}` in a kind: List used to raise StopIteration (internal error)."""
    (tmp_path / "list.yaml").write_text(
        "apiVersion: v1\nkind: List\n<<:\n  items:\n  - apiVersion: karpenter.sh/v1alpha5\n"
        "    kind: Provisioner\n    metadata: {name: a}\n"
        "    spec:\n      providerRef: {name: a}\n      labels: {kubernetes.io/x: y}\n"
    )
    (tmp_path / "other.yaml").write_text(RESTRICTED)
    result = run("validate", str(tmp_path), "--output", "json")
    found = findings(result)
    at(found, "restricted-label", "list.yaml", 10)
    at(found, "restricted-label", "other.yaml", 7)
    assert result.returncode == 1


@pytest.mark.parametrize("command", ["validate", "check", "compile"])
def test_deeply_nested_values_file_cannot_run(tmp_path: Path, command: str) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("a: " + "[" * 3000 + "]" * 3000 + "\n")
    extra = ["-o", str(tmp_path / "out")] if command == "compile" else []
    result = run(command, str(POLICIES), "--values", str(values), *extra)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"{values}:1:" in result.stderr
    # Our bound, or PyYAML's own (6.0.3+ refuses such nesting itself): either way one line, no traceback.
    assert "nests deeper than 500 levels" in result.stderr or "exceeded maximum nesting depth" in result.stderr


def test_values_file_bomb_cannot_run(tmp_path: Path) -> None:
    """A billion laughs in --values (47 s and 3 GB with yaml.safe_load) is refused by the loader's node budget."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    values = tmp_path / "values.yaml"
    values.write_text("\n".join(lines) + "\n")
    result = run("validate", str(POLICIES), "--values", str(values))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert str(values) in result.stderr and "200000 nodes" in result.stderr


@pytest.mark.parametrize(
    ("content", "reason"),
    [("[" * 100_000 + "]" * 100_000, "nests too deeply"), ('{"format": ' + "9" * 5000 + "}", "too many digits")],
)
def test_odd_catalog_file_cannot_run(tmp_path: Path, content: str, reason: str) -> None:
    catalog = tmp_path / "catalog.json"
    catalog.write_text(content)
    result = run("check", str(POLICIES), "--catalog", str(catalog))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "internal error" not in result.stderr
    assert str(catalog) in result.stderr and reason in result.stderr


BOUNDED = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: bounded
spec:
  requirements:
    - key: karpenter.k8s.aws/instance-cpu
      operator: Gt
      values: ["{gt}"]
    - key: karpenter.k8s.aws/instance-memory
      operator: Lt
      values: ["{lt}"]
  providerRef:
    name: default
"""


@pytest.mark.parametrize("command", ["validate", "check", "compile"])
def test_gt_lt_beyond_int64_are_findings_at_their_line(tmp_path: Path, command: str) -> None:
    """A bound of 5,000 digits used to end the run with `internal error: ValueError: Exceeds the limit (4300
    digits)`; one past int64 was a bare "integer" error. Both are now findings at the value's line that say
    Karpenter reads a bound as a 64-bit integer, without printing the 5,000 digits; the other file's error
    is kept."""
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "bounded.yaml").write_text(BOUNDED.format(gt="9" * 5000, lt=str(2**63)))
    (tmp_path / "p" / "other.yaml").write_text(RESTRICTED)
    out = ["-o", str(tmp_path / "out")] if command == "compile" else []
    result = run(command, str(tmp_path / "p"), *out, "--output", "json")
    found = findings(result)
    assert result.returncode == 1, result.stdout + result.stderr
    huge = [f for f in found if f["rule"] == "invalid-requirement" and f["line"] == 9]
    assert any("64-bit integer" in f["message"] and "(5000 characters)" in f["message"] for f in huge), huge
    assert all("9" * 100 not in f["message"] for f in found)
    past = at(found, "invalid-requirement", "bounded.yaml", 12)
    assert "from 0 to 9223372036854775807" in past["message"] and "64-bit" in past["message"]
    at(found, "restricted-label", "other.yaml", 7)


def test_gt_lt_at_int64_max_are_admitted(tmp_path: Path) -> None:
    (tmp_path / "bounded.yaml").write_text(BOUNDED.format(gt="0", lt=str(2**63 - 1)))
    found = findings(run("validate", str(tmp_path), "--output", "json"))
    assert not [f for f in found if f["rule"] == "invalid-requirement"], found


SECRET = "password: hunter2-do-not-print\n"


@pytest.mark.parametrize("command", ["validate", "check", "compile"])
def test_a_link_out_of_the_repository_is_refused_and_never_printed(tmp_path: Path, command: str) -> None:
    """`policies/evil.yaml -> /elsewhere/secret.yaml` used to be read and its lines printed in the findings: now
    a finding at the link that names the repository, nothing of the content, and the run cannot pass."""
    (tmp_path / "secret.yaml").write_text(SECRET + "kind: [\n")
    repo = tmp_path / "repo"
    (repo / "policies").mkdir(parents=True)
    (repo / "policies" / "other.yaml").write_text(RESTRICTED)
    (repo / "policies" / "evil.yaml").symlink_to(tmp_path / "secret.yaml")
    (repo / "policies" / "evil2.yaml").symlink_to(Path("..") / ".." / "secret.yaml")
    out = ["-o", str(tmp_path / "out")] if command == "compile" else []
    result = run(command, "policies", *out, "--output", "json", cwd=repo)
    assert "hunter2" not in result.stdout + result.stderr
    assert result.returncode == 2, result.stdout + result.stderr
    if command != "compile":  # compile reports on stderr and writes nothing from a tree it could not read
        found = findings(result)
        for name in ("evil.yaml", "evil2.yaml"):
            (refused,) = [f for f in found if f["file"] == f"policies/{name}"]
            assert refused["message"].startswith(
                f"not read: a symbolic link to a file outside the repository {repo / 'policies'}"
            ), refused
        at(found, "restricted-label", "other.yaml", 7)
    assert not (tmp_path / "out").exists()


def test_in_git_a_link_may_lead_anywhere_in_the_work_tree(tmp_path: Path) -> None:
    """The repository is the git work tree of the link: `policies/base.yaml -> ../shared/base.yaml` is read."""
    repo = tmp_path / "repo"
    (repo / "shared").mkdir(parents=True)
    (repo / "policies").mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / "shared" / "base.yaml").write_text(RESTRICTED)
    (repo / "policies" / "base.yaml").symlink_to(Path("..") / "shared" / "base.yaml")
    found = findings(run("validate", "policies", "--output", "json", cwd=repo))
    at(found, "restricted-label", "policies/base.yaml", 7)
