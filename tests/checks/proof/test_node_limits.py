"""`spec.limits.nodes` (Karpenter v1): at most that many nodes of a NodePool, running and planned — Karpenter
v1.14.1's `addToNewNodeClaim` (core pkg/controllers/provisioning/scheduling/scheduler.go) refuses a new NodeClaim
once the count is used up, each node counting 1 (`StateNode.Capacity`, pkg/controllers/state/statenode.go); and
`nodes: 0` is a `limits` warning. Through the CLI on examples/v1/limits, and on the scheduling view itself."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.objects import NodePool
from karpenter_policy.model.resources import NODES
from tests.profiles import deterministic

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "v1" / "limits"


def check(policies: Path, apps: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "check", str(policies), "--workloads", str(apps), "-q"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )


def test_the_nodes_limit_leaves_the_third_one_per_node_replica_unplaced_and_nodes_0_is_a_warning() -> None:
    done = check(Path("examples/v1/limits/policies"), Path("examples/v1/limits/apps"))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "examples/v1/limits/apps/spread.yaml:11:3: error: Deployment/spread: 1 of its 3 replicas cannot be placed: "
        "no NodePool can launch a node for it: [workload-unschedulable]",
        "    NodePool/frozen: pool In [capped] not in [frozen]",
        "    NodePool/capped: its limits.nodes 2 is used up (2 nodes running or planned)",
        "examples/v1/limits/policies/nodepools.yaml:48:12: warning: NodePool/frozen: limits nodes: 0: Karpenter "
        "never launches a node for it (node limits are exhausted from the start) [limits]",
    ]


@pytest.mark.parametrize(("limit", "placed"), [("3", True), ("2", False)])
def test_raising_the_limit_places_every_replica(tmp_path: Path, limit: str, placed: bool) -> None:
    example = tmp_path / "limits"
    shutil.copytree(EXAMPLE, example)
    pools = example / "policies" / "nodepools.yaml"
    pools.write_text(pools.read_text().replace("nodes: 2", f"nodes: {limit}"))
    done = check(example / "policies", example / "apps")
    assert ("Deployment/spread: 1 of its 3 replicas cannot be placed" in done.stdout) is not placed


def test_a_nodepool_without_a_nodes_limit_has_none_in_its_view() -> None:
    document = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"limits": {"cpu": "10"}, "template": {"spec": {"requirements": []}}},
    }
    view = NodePool.from_document(document).provisioner()
    assert NODES not in view.limits and view.limits["cpu"] == 10


@deterministic(200)
@given(st.one_of(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=10**6).map(str)))
def test_the_view_keeps_limits_nodes_as_a_count(value: int | str) -> None:
    """`limits.nodes` is a quantity (an integer or its string); the view's limits hold it as the count."""
    document = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "p"},
        "spec": {"limits": {"nodes": value, "memory": "1Ti"}, "template": {"spec": {"requirements": []}}},
    }
    pool = NodePool.from_document(document)
    assert pool.node_limit == int(value)
    assert pool.provisioner().limits[NODES] == int(value)
