"""`karpenter-policy diff` on Karpenter v1 NodePools, through the CLI on copies of examples/v1/mixed: each NodePool
compared through the scheduling view `check` proves, with witnesses the solver confirms on both sides; a NodePool
and a Provisioner of one name kept apart; workloads that a NodePool change strands (an error, exit 1) or moves to
dearer nodes (the cost); NodePools added and removed; JSON naming the kind."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MIXED = ROOT / "examples" / "v1" / "mixed"
APPS = "examples/v1/mixed/apps"
FAMILIES = 'values: ["c6a", "c6i", "c7a", "c7i", "m6a", "m6i"]'


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "diff", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture
def sides(tmp_path: Path) -> tuple[Path, Path]:
    base, head = tmp_path / "base", tmp_path / "head"
    shutil.copytree(MIXED, base)
    shutil.copytree(MIXED, head)
    return base, head


def edit_nodepools(head: Path, old: str, new: str) -> None:
    path = head / "policies" / "nodepools.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_a_nodepool_change_is_shown_with_proven_witnesses(sides: tuple[Path, Path]) -> None:
    base, head = sides
    edit_nodepools(head, FAMILIES, FAMILIES.replace('"m6i"]', '"m6i", "r7i"]'))
    edit_nodepools(head, 'cpu: "1000"', 'cpu: "500"')
    done = run(str(base), str(head), "policies")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "NodePool batch (policies/nodepools.yaml:31): changed" in lines
    changes = "\n".join(lines)
    assert "instance types          +11: r7i.12xlarge" in changes
    assert "e.g. r7i.large (us-east-1a, spot, $0.1323/h)" in changes
    assert "(unconfirmed)" not in changes  # the solver confirmed each witness on both sides
    assert "cpu: limit lowered from 1000 to 500" in changes
    # the Provisioner `default` and the NodePool `default` are two objects: neither changed
    assert "Provisioner default" not in changes and "NodePool default" not in changes
    # a Provisioner beside the NodePools: the summary counts pools (docs/v1.md, "Words")
    assert lines[-1] == "pools: 1 changed, 2 unchanged; HEAD: 0 errors, 0 warnings"


def test_the_json_names_the_nodepool_and_its_kind(sides: tuple[Path, Path]) -> None:
    base, head = sides
    edit_nodepools(head, FAMILIES, FAMILIES.replace('"m6i"]', '"m6i", "r7i"]'))
    done = run(str(base), str(head), "policies", "--output", "json")
    result = json.loads(done.stdout)
    changed = [p for p in result["provisioners"] if p["status"] == "changed"]
    assert [(p["name"], p["kind"]) for p in changed] == [("NodePool/batch", "NodePool")]
    added = next(c for c in changed[0]["changes"] if c["dimension"] == "instance types")
    assert "r7i.large" in added["added"]
    kinds = sorted((p["name"], p["kind"]) for p in result["provisioners"])
    assert kinds == [("NodePool/batch", "NodePool"), ("NodePool/default", "NodePool"), ("default", "Provisioner")]


def test_a_nodepool_change_that_strands_a_workload_is_an_error(sides: tuple[Path, Path]) -> None:
    base, head = sides
    edit_nodepools(head, "key: example.com/batch", "key: example.com/batch-only")
    done = run(str(base), str(head), "policies", "--workloads", APPS)
    assert done.returncode == 1
    assert done.stdout.startswith(f"karpenter-policy diff {base} → {head} (policies)\nerror: ")
    assert "Deployment/report" in done.stdout.splitlines()[1]
    assert "[workload-unschedulable]" in done.stdout


def test_a_nodepool_change_that_moves_workloads_to_dearer_nodes_shows_the_cost(sides: tuple[Path, Path]) -> None:
    base, head = sides
    # `report` (3 × 2 cpu / 4Gi on batch) may no longer use the compute-optimised families
    edit_nodepools(head, FAMILIES, 'values: ["m6i", "m6a", "r7i"]')
    edit_nodepools(head, "minValues: 3", "minValues: 2")
    done = run(str(base), str(head), "policies", "--workloads", APPS, "--output", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    cost = json.loads(done.stdout)["cost"]
    assert cost["head"]["cost_per_hour"] > cost["base"]["cost_per_hour"]
    batch = [n for n in cost["head"]["nodes"] if n["provisioner"] == "NodePool/batch"]
    assert batch and all(n["instance_type"].startswith(("m6i", "m6a", "r7i")) for n in batch)


def test_a_nodepool_added_and_one_removed(sides: tuple[Path, Path]) -> None:
    base, head = sides
    edit_nodepools(head, "name: batch\n", "name: nightly\n")
    done = run(str(base), str(head), "policies")
    assert "NodePool batch (policies/nodepools.yaml:31): removed" in done.stdout
    assert "NodePool nightly (policies/nodepools.yaml:31): added" in done.stdout


def test_a_lowered_nodes_limit_is_a_limits_change(sides: tuple[Path, Path]) -> None:
    base, head = sides
    edit_nodepools(head, 'nodes: "50"', 'nodes: "10"')
    done = run(str(base), str(head), "policies")
    assert "NodePool batch (policies/nodepools.yaml:31): changed" in done.stdout
    assert "nodes: limit lowered from 50 to 10" in done.stdout
