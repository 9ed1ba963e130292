"""What the output calls pools (`model.pools.pools_noun`, `pool_ref`; docs/v1.md, "Words"): a v0.31 repository's
reports speak of provisioners as before, a v1 repository's of NodePools — Karpenter v1.14.1's own words for a pod
no NodePool takes are `incompatible with nodepool "default", …` (core pkg/controllers/provisioning/scheduling/
scheduler.go) — and a repository holding both of pools."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.model.pools import pool_key, pool_ref, pools_noun
from karpenter_policy.scheduling.plan import refusals_message
from karpenter_policy.scheduling.reasons import Refusal

ROOT = Path(__file__).resolve().parents[2]

_HUGE = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: huge
spec:
  replicas: 1
  selector:
    matchLabels: {app: huge}
  template:
    metadata:
      labels: {app: huge}
    spec:
      containers:
        - name: app
          image: busybox
          resources:
            requests: {cpu: "1000"}
"""


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )


_NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)


@given(st.lists(st.tuples(_NAMES, st.booleans()), max_size=6))
def test_the_noun_follows_the_kinds_of_the_pools(pools: list[tuple[str, bool]]) -> None:
    keys = [pool_key(name, nodepool) for name, nodepool in pools]
    kinds = {nodepool for _, nodepool in pools}
    word = pools_noun(keys)
    expected = "NodePool" if kinds == {True} else "pool" if kinds == {True, False} else "provisioner"
    assert word == (expected if len(keys) == 1 else f"{expected}s")
    assert pools_noun(keys, 1) == expected and pools_noun(keys, 2) == f"{expected}s"
    for name, nodepool in pools:
        assert pool_ref(pool_key(name, nodepool)) == (f"NodePool/{name}" if nodepool else f"provisioner {name}")


def test_the_refusals_of_nodepools_name_nodepools_as_the_controllers_events_do() -> None:
    """The one message the controller's FailedScheduling Event, simulate's and plan's pending pods and check's
    finding share (`refusals_message`): NodePools' refusals under `no NodePool can …`, a Provisioner's as before."""
    taint = Refusal("taint", "taint dedicated=gpu:NoSchedule not tolerated")
    v1 = refusals_message({"NodePool/gpu": taint})
    assert v1 == "no NodePool can launch a node for it:\n  NodePool/gpu: taint dedicated=gpu:NoSchedule not tolerated"
    v031 = refusals_message({"gpu": taint})
    assert v031 == (
        "no provisioner can launch a node for it:\n  provisioner gpu: taint dedicated=gpu:NoSchedule not tolerated"
    )
    mixed = refusals_message({"gpu": taint, "NodePool/gpu": taint})
    assert mixed.splitlines()[0] == "no pool can launch a node for it:"
    # no template at all: the repository's pools name the noun
    assert refusals_message({}, (), "none admits a type", ["NodePool/a"]) == (
        "no NodePool can launch a node for it: none admits a type"
    )
    assert refusals_message({}, (), "none admits a type") == (
        "no provisioner can launch a node for it: none admits a type"
    )


def test_a_v1_repository_speaks_of_nodepools() -> None:
    done = cli("check", "examples/v1/topology/policies", "--workloads", "examples/v1/topology/apps")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(
        "Deployment/web: 2 of its 4 replicas cannot be placed: no NodePool can launch a node for it: "
        "[workload-unschedulable]"
    )
    assert lines[1].startswith("    NodePool/general: unsatisfiable topology spread constraint")
    assert lines[2] == "    NodePool/gpu: taint dedicated=gpu:NoSchedule not tolerated"
    assert lines[3].endswith("to the pod spec; this NodePool then takes it")
    assert "provisioner" not in done.stdout
    header = next(line for line in lines if line.endswith("$/month"))
    assert header.split()[:3] == ["nodepool", "instance", "type"]
    markdown = cli("check", "examples/v1/topology/policies", "--workloads", "examples/v1/topology/apps",
                   "--output", "markdown").stdout
    assert "| nodepool | instance type |" in markdown
    assert "2 of 2 NodePools can launch nodes" in markdown


def test_diff_and_plan_of_a_v1_repository_speak_of_nodepools() -> None:
    diff = cli("diff", "examples/plan/v1/base", "examples/plan/v1/head", "--workloads", "examples/v1/topology/apps",
               "--output", "markdown")
    assert "**NodePools: 2 changed, 1 removed;" in diff.stdout, diff.stdout + diff.stderr
    assert "| NodePool | Change | HEAD admits, BASE did not | BASE admitted, HEAD does not |" in diff.stdout
    text = cli("diff", "examples/plan/v1/base", "examples/plan/v1/head")
    assert text.stdout.splitlines()[-1].startswith("NodePools: 2 changed, 1 removed;"), text.stdout + text.stderr
    plan = cli("plan", "examples/plan/v1/base", "examples/plan/v1/head", "--snapshot", "examples/plan/v1/snapshot.json",
               "--start", "2026-11-30T09:00:00Z")
    assert (
        "(default/Deployment/legacy-agent, on ip-10-1-1-16): no NodePool can launch a node for it: NodePool/default: "
        "karpenter.sh/nodepool In [legacy] not in [default]; NodePool/batch: taint batch:NoSchedule not tolerated"
    ) in plan.stdout, plan.stdout + plan.stderr


def test_a_repository_of_both_kinds_speaks_of_pools(tmp_path: Path) -> None:
    (tmp_path / "huge.yaml").write_text(_HUGE)
    done = cli("check", "examples/v1/mixed/policies", "--workloads", str(tmp_path / "huge.yaml"), "-q")
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("Deployment/huge: no pool can launch a node for it: [workload-unschedulable]")
    assert sorted(lines[1:]) == [
        "    NodePool/batch: taint example.com/batch:NoSchedule not tolerated",
        "    NodePool/default: no instance type in us-east-1 has 1000 vCPU",
        "    provisioner default: no instance type in us-east-1 has 1000 vCPU",
    ]
    placed = cli("check", "examples/v1/mixed/policies", "--workloads", "examples/v1/mixed/apps").stdout
    header = next(line for line in placed.splitlines() if line.endswith("$/month"))
    assert header.split()[:3] == ["pool", "instance", "type"]
    markdown = cli("check", "examples/v1/mixed/policies", "--workloads", "examples/v1/mixed/apps",
                   "--output", "markdown").stdout
    assert "3 of 3 pools can launch nodes" in markdown and "| pool | instance type |" in markdown


def test_a_v031_repository_keeps_its_words() -> None:
    """The words of v0.31, as before NodePools had their own: provisioners, `provisioner gpu: …`, a `provisioner`
    column."""
    done = cli("check", "examples/workloads/policies", "--workloads",
               "examples/workloads/negative/gpu-without-toleration.yaml")
    lines = done.stdout.splitlines()
    error = lines.index(next(line for line in lines if "gpu-without-toleration.yaml" in line and "error" in line))
    assert lines[error].endswith("no provisioner can launch a node for it: [workload-unschedulable]")
    assert lines[error + 1].startswith("    provisioner gpu: taint ")
    assert "this provisioner then takes it" in done.stdout
    assert "NodePool" not in done.stdout and "no pool" not in done.stdout
    placed = cli("check", "examples/workloads/policies", "--workloads", "examples/workloads/apps").stdout
    header = next(line for line in placed.splitlines() if line.endswith("$/month"))
    assert header.split()[:3] == ["provisioner", "instance", "type"]
    assert "NodePool" not in placed


def test_a_shadowed_nodepool_is_called_a_nodepool(tmp_path: Path) -> None:
    """The `shadowed` scenario's Provisioners migrated to NodePools: the warning names NodePools on both sides."""
    scenario = "examples/workloads/scenarios/shadowed"
    migrated = cli("migrate", f"{scenario}/provisioners.yaml", "--to", "v1", "-o", str(tmp_path / "v1"),
                   "--node-role", "KarpenterNodeRole")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    done = cli("check", str(tmp_path / "v1"), "--workloads", f"{scenario}/apps.yaml")
    (warning,) = [line for line in done.stdout.splitlines() if line.endswith("[shadowed]")]
    assert "NodePool/compute: no workload reaches this NodePool (weight 10): every workload it could" in warning
    assert "goes to a higher-weight NodePool: NodePool/spot-all (weight 50) takes 2 [shadowed]" in warning
