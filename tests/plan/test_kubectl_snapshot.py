"""A snapshot as the real kubectl prints it: `kubectl get nodes,pods,pdb,daemonsets -A -o json` against the test API
server with its control plane (tests/kube/apiserver/: a Deployment rolled out onto a Karpenter node), given to
`plan` on standard input — a Provisioner's node, and a NodePool's."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.kube.client import KubeCluster
from tests.kube.apiserver.controlplane import ControlPlaneOptions
from tests.kube.conftest import Kubectl, kubectl_binary
from tests.kube.emulator import EmulatorThread
from tests.plan.snapshots import node, policies, provisioner
from tests.plan.v1snapshots import HASHES, nodepool, pool_node, v1_policies

DEPLOYMENT = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "app", "image": "pause",
                                                   "resources": {"requests": {"cpu": "100m"}}}]}}},
}
PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
       "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}


@pytest.fixture()
def cluster(tmp_path: Path) -> Iterator[Kubectl]:
    with EmulatorThread(seed_namespaces=True, control_plane=ControlPlaneOptions(join_after=0.2, resync=0.2)) as server:
        config = server.write_kubeconfig(tmp_path / "kubeconfig")
        client = KubeCluster.from_kubeconfig(str(config))
        try:
            yield Kubectl(kubectl_binary(), config, tmp_path / "cache", server, client)
        finally:
            client.close()


def test_what_kubectl_prints_is_a_snapshot_plan_reads(cluster: Kubectl, tmp_path: Path) -> None:
    karpenter_node = node("ip-10-0-1-10")
    karpenter_node["status"] = {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"}}
    cluster("create", "-f", "-", stdin=yaml.safe_dump_all([karpenter_node, DEPLOYMENT, PDB]))
    cluster("rollout", "status", "deployment/web", "--timeout=30s")
    printed = cluster("get", "nodes,pods,pdb,daemonsets", "-A", "-o", "json").stdout
    base = policies(tmp_path / "base", provisioner())
    head = policies(tmp_path / "head", provisioner(labels="team: platform"))

    result = plan_command(PlanOptions(snapshot=("-",), start="2026-11-30T09:00:00Z", output="json", base=base,
                                      head=head), load_catalog(), stdin=io.BytesIO(printed.encode()))

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [(n["name"], n["drifted"], n["wave"]) for n in document["nodes"]] == [("ip-10-0-1-10", True, 0)]
    assert document["waves"][0]["evicted"] == {"default/Deployment/web": 2}
    assert document["waves"][0]["slowed_by"] == {"default/web": 30.0}  # one at a time: two rounds of 15 s



def test_a_nodepools_node_as_kubectl_prints_it_drifts_by_the_annotations_its_nodeclaim_gave_it(
    cluster: Kubectl, tmp_path: Path
) -> None:
    # no NodeClaim in the snapshot (the test API server serves no CRDs): Karpenter v1 copied its NodeClaim's
    # annotations and labels to the Node at registration, and the plan reads those
    pool_node_ = pool_node("ip-10-0-1-20", annotations=HASHES)
    pool_node_["status"] = {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "29"}}
    cluster("create", "-f", "-", stdin=yaml.safe_dump_all([pool_node_, DEPLOYMENT, PDB]))
    cluster("rollout", "status", "deployment/web", "--timeout=30s")
    printed = cluster("get", "nodes,pods,pdb,daemonsets", "-A", "-o", "json").stdout
    base = v1_policies(tmp_path / "base", nodepool(budgets='[{nodes: "1"}]'))
    head = v1_policies(tmp_path / "head", nodepool(labels="team: platform", budgets='[{nodes: "1"}]'))

    result = plan_command(PlanOptions(snapshot=("-",), start="2026-11-30T09:00:00Z", output="json", base=base,
                                      head=head), load_catalog(), stdin=io.BytesIO(printed.encode()))

    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert [(n["name"], n["nodepool"], n["reasons"], n["wave"]) for n in document["nodes"]] == [
        ("ip-10-0-1-20", "default", ["spec.template.metadata.labels.team changed (nodepool default)"], 0)]
    assert document["waves"][0]["evicted"] == {"default/Deployment/web": 2}
