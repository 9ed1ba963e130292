"""`plan --kubeconfig FILE` against the test API server over real HTTPS with token authentication and RBAC: the
plan it makes is the plan of what the real kubectl prints of the same cluster (one code path after reading); the
ServiceAccount of examples/ci/plan-reader-rbac.yaml may read all it needs; a token whose role lacks `list nodes`
(or `list nodeclaims` where that CRD is served) is refused with exit 2 and the rule it needs — never a plan of 0
nodes; a cluster without Karpenter's CRDs is read without them; its EC2NodeClasses give the AMIs their status
resolved, its PersistentVolumeClaims, PersistentVolumes and StorageClasses the pods' volume zones; an unreachable
server is a refusal too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.kube import objects
from karpenter_policy.kube.backoff import Backoff
from karpenter_policy.kube.client import KubeCluster
from tests.kube.conftest import Kubectl, kubectl_binary
from tests.kube.emulator import EmulatorThread
from tests.plan.snapshots import daemon_set, pdb, pod, pv, pvc, storage_class, with_claim
from tests.plan.v1snapshots import claim, node_class, nodepool, pool_node, v1_policies

ROOT = Path(__file__).resolve().parents[2]
READER_RBAC = ROOT / "examples" / "ci" / "plan-reader-rbac.yaml"
START = "2026-11-30T09:00:00Z"
ALLOCATABLE = {"cpu": "2", "memory": "8Gi", "pods": "29"}
TOKEN_REQUEST = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})


def _cluster(tmp_path: Path, crds: frozenset[objects.Kind]) -> Iterator[Kubectl]:
    with EmulatorThread(seed_namespaces=True, authorize=True, crds=crds) as server:
        config = server.write_kubeconfig(tmp_path / "admin")
        client = KubeCluster.from_kubeconfig(str(config), backoff=Backoff(0.01, 0.05))
        try:
            yield Kubectl(kubectl_binary(), config, tmp_path / "cache", server, client)
        finally:
            client.close()


@pytest.fixture()
def v1_cluster(tmp_path: Path) -> Iterator[Kubectl]:
    """A cluster with Karpenter v1's CRDs, NodeClaims and EC2NodeClasses (no Machines)."""
    yield from _cluster(tmp_path, frozenset({objects.NODE_CLAIM, objects.EC2_NODE_CLASS}))


@pytest.fixture()
def bare_cluster(tmp_path: Path) -> Iterator[Kubectl]:
    """A cluster without any of Karpenter's CRDs."""
    yield from _cluster(tmp_path, frozenset())


def _fleet(cluster: Kubectl, with_claims: bool) -> None:
    """Two nodes of the NodePool `default`, each with a web pod (a PDB lets one go at a time) and a DaemonSet."""
    client = cluster.cluster
    for name in ("ip-10-0-1-1", "ip-10-0-1-2"):
        node = pool_node(name)
        client.create(objects.NODE, node)
        stored = client.get(objects.NODE, name)
        assert stored is not None
        client.update(objects.NODE, {**stored, "status": {"allocatable": ALLOCATABLE}}, "status")
        if with_claims:
            client.create(objects.NODE_CLAIM, claim(name))
        made = pod(f"web-{name}", name, "web")
        client.create(objects.POD, made)
        created = client.get(objects.POD, made["metadata"]["name"], "default")
        assert created is not None
        client.update(objects.POD, {**created, "status": made["status"]}, "status")
    client.create(objects.POD_DISRUPTION_BUDGET, pdb("web", "web", maxUnavailable=1))
    client.create(objects.DAEMON_SET, daemon_set("logs"))


def _policies(tmp_path: Path) -> tuple[str, str]:
    return (v1_policies(tmp_path / "base", nodepool(budgets='[{nodes: "1"}]')),
            v1_policies(tmp_path / "head", nodepool(labels="team: platform", budgets='[{nodes: "1"}]')))


def _plan(tmp_path: Path, **source: Any) -> CommandOutput:
    base, head = _policies(tmp_path)
    return plan_command(PlanOptions(base=base, head=head, start=START, output="json", **source), load_catalog())


def _token_of(cluster: Kubectl, tmp_path: Path, account: str, namespace: str) -> Path:
    """A kubeconfig of the ServiceAccount's token (TokenRequest, as `kubectl create token` asks for it)."""
    answer = cluster("create", "--raw", f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token", "-f", "-",
                     stdin=TOKEN_REQUEST).stdout
    return cluster.server.write_kubeconfig(tmp_path / account, token=json.loads(answer)["status"]["token"])


def _reader_with(cluster: Kubectl, tmp_path: Path, rules: list[dict[str, Any]]) -> Path:
    """A kubeconfig of a ServiceAccount bound to a ClusterRole of `rules`."""
    binding = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "partial"}
    documents = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "partial", "namespace": "default"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "partial"},
         "rules": rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "partial"},
         "roleRef": binding, "subjects": [{"kind": "ServiceAccount", "name": "partial", "namespace": "default"}]},
    ]
    cluster("apply", "-f", "-", stdin=yaml.safe_dump_all(documents))
    return _token_of(cluster, tmp_path, "partial", "default")


def _shipped_rules() -> list[dict[str, Any]]:
    role = next(d for d in yaml.safe_load_all(READER_RBAC.read_text()) if d["kind"] == "ClusterRole")
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def test_the_plan_read_from_the_cluster_is_the_plan_of_what_kubectl_prints(v1_cluster: Kubectl,
                                                                          tmp_path: Path) -> None:
    _fleet(v1_cluster, with_claims=True)
    printed = v1_cluster("get", "nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass", "-A", "-o", "json").stdout
    (tmp_path / "snapshot.json").write_text(printed)

    live = _plan(tmp_path, kubeconfig=str(v1_cluster.kubeconfig))
    from_file = _plan(tmp_path, snapshot=(str(tmp_path / "snapshot.json"),))

    assert live.exit_code == 0, live.stderr
    assert json.loads(live.stdout) == json.loads(from_file.stdout)
    document = json.loads(live.stdout)
    assert [(n["name"], n["nodepool"], n["wave"]) for n in document["nodes"]] == [
        ("ip-10-0-1-1", "default", 0), ("ip-10-0-1-2", "default", 1)]
    assert document["nodes"][0]["reasons"] == ["spec.template.metadata.labels.team changed (nodepool default)"]


def test_the_shipped_read_only_role_reads_all_the_plan_needs(v1_cluster: Kubectl, tmp_path: Path) -> None:
    _fleet(v1_cluster, with_claims=True)
    v1_cluster("apply", "-f", str(READER_RBAC))
    reader = _token_of(v1_cluster, tmp_path, "karpenter-policy-plan", "kube-system")

    as_reader = _plan(tmp_path, kubeconfig=str(reader))
    as_admin = _plan(tmp_path, kubeconfig=str(v1_cluster.kubeconfig))

    assert as_reader.exit_code == 0, as_reader.stderr
    assert json.loads(as_reader.stdout) == json.loads(as_admin.stdout)
    assert all(rule["verbs"] == ["list"] for rule in _shipped_rules())  # read-only: no get, watch or write


@pytest.mark.parametrize(("missing", "rule"), [
    ("nodes", "may not list nodes (apiGroups: [\"\"])"),
    ("pods", "may not list pods (apiGroups: [\"\"]) in every namespace"),
    ("poddisruptionbudgets", "may not list poddisruptionbudgets (apiGroups: [policy]) in every namespace"),
    ("daemonsets", "may not list daemonsets (apiGroups: [apps]) in every namespace"),
    ("persistentvolumeclaims", "may not list persistentvolumeclaims (apiGroups: [\"\"]) in every namespace"),
    ("persistentvolumes", "may not list persistentvolumes (apiGroups: [\"\"])"),
    ("storageclasses", "may not list storageclasses (apiGroups: [storage.k8s.io])"),
    ("nodeclaims", "may not list nodeclaims (apiGroups: [karpenter.sh])"),
    ("ec2nodeclasses", "may not list ec2nodeclasses (apiGroups: [karpenter.k8s.aws])"),
    ("machines", None),  # no Machine CRD in this cluster: its rule is not needed
])
def test_a_role_that_cannot_list_a_kind_is_refused_never_a_plan_of_what_it_could_read(
    v1_cluster: Kubectl, tmp_path: Path, missing: str, rule: str | None
) -> None:
    _fleet(v1_cluster, with_claims=True)
    rules = [{**r, "resources": [x for x in r["resources"] if x != missing]} for r in _shipped_rules()]
    reader = _reader_with(v1_cluster, tmp_path, [r for r in rules if r["resources"]])

    refused = _plan(tmp_path, kubeconfig=str(reader))

    if rule is None:
        assert refused.exit_code == 0, refused.stderr
        return
    assert refused.exit_code == 2 and refused.stdout == ""
    assert f"listing {missing}: forbidden (403): the kubeconfig's user {rule}" in refused.stderr
    assert "examples/ci/plan-reader-rbac.yaml" in refused.stderr
    assert refused.stderr.endswith("the snapshot cannot be trusted: no plan\n")


def test_the_live_read_lists_the_volume_kinds_and_a_pod_keeps_to_its_volumes_zone(v1_cluster: Kubectl,
                                                                                  tmp_path: Path) -> None:
    """The cluster's PersistentVolumeClaims, PersistentVolumes and StorageClasses are listed with the rest: `db-0`
    on `ip-10-0-1-1` (us-east-1a) has its volume in us-east-1b, so its drift command launches its replacement there
    rather than moving it onto `ip-10-0-1-2`'s room in us-east-1a — the same plan as of what kubectl prints with
    `pvc,pv,storageclass`. The old read listed none of them and moved the pod onto the room."""
    _fleet(v1_cluster, with_claims=True)
    client = v1_cluster.cluster
    client.create(objects.STORAGE_CLASS, storage_class("gp3"))
    client.create(objects.PERSISTENT_VOLUME, pv("pv-db-0", "us-east-1b"))
    client.create(objects.PERSISTENT_VOLUME_CLAIM, pvc("data-db-0", volume="pv-db-0"))
    client.create(objects.POD, with_claim(pod("db-0", "ip-10-0-1-1", "db", owner=("StatefulSet", "db")),
                                          "data-db-0"))
    printed = v1_cluster("get", "nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass", "-A", "-o", "json").stdout
    (tmp_path / "snapshot.json").write_text(printed)

    live = _plan(tmp_path, kubeconfig=str(v1_cluster.kubeconfig))
    from_file = _plan(tmp_path, snapshot=(str(tmp_path / "snapshot.json"),))

    assert live.exit_code == 0, live.stderr
    assert json.loads(live.stdout) == json.loads(from_file.stdout)
    waves = json.loads(live.stdout)["waves"]
    first = next(w for w in waves if w["nodes"] == ["ip-10-0-1-1"])
    assert [r["zone"] for r in first["replacements"]] == ["us-east-1b"]


def test_a_cluster_without_karpenters_crds_is_read_without_them(bare_cluster: Kubectl, tmp_path: Path) -> None:
    _fleet(bare_cluster, with_claims=False)
    reader = _reader_with(bare_cluster, tmp_path, _shipped_rules())
    listed = bare_cluster("get", "nodeclaims", "-A", "-o", "json", check=False)

    read = _plan(tmp_path, kubeconfig=str(reader))

    assert listed.returncode != 0 and 'the server doesn\'t have a resource type "nodeclaims"' in listed.stderr
    assert read.exit_code == 0, read.stderr
    assert [n["name"] for n in json.loads(read.stdout)["nodes"]] == ["ip-10-0-1-1", "ip-10-0-1-2"]


def test_an_unknown_token_and_an_unreachable_server_are_refusals(bare_cluster: Kubectl, tmp_path: Path) -> None:
    forged = bare_cluster.server.write_kubeconfig(tmp_path / "forged", token="forged")
    gone = tmp_path / "gone"
    gone.write_text(forged.read_text().replace(bare_cluster.server.url, "https://127.0.0.1:9"))

    unauthorized = _plan(tmp_path, kubeconfig=str(forged))
    unreachable = plan_command(PlanOptions(base=str(tmp_path), head=str(tmp_path), kubeconfig=str(gone)),
                               load_catalog())

    assert unauthorized.exit_code == 2 and unauthorized.stdout == ""
    assert "listing nodes: the API server refused the kubeconfig's credentials (401)" in unauthorized.stderr
    assert unreachable.exit_code == 2 and unreachable.stdout == ""
    assert "listing nodes: failed" in unreachable.stderr


@pytest.mark.parametrize("given", [{}, {"snapshot": ("s.json",), "kubeconfig": "k"}, {"snapshot": ("s.json",),
                                                                                       "context": "prod"}])
def test_the_cluster_is_given_one_way(tmp_path: Path, given: dict[str, Any]) -> None:
    refused = plan_command(PlanOptions(base=str(tmp_path), head=str(tmp_path), **given), load_catalog())

    assert refused.exit_code == 2 and refused.stdout == ""
    assert "--kubeconfig" in refused.stderr


def test_the_clusters_ec2nodeclasses_are_read_for_the_amis_their_status_resolved(tmp_path: Path) -> None:
    with EmulatorThread(seed_namespaces=True, authorize=True,
                        crds=frozenset({objects.NODE_CLAIM, objects.EC2_NODE_CLASS})) as server:
        admin = server.write_kubeconfig(tmp_path / "admin")
        client = KubeCluster.from_kubeconfig(str(admin))
        try:
            client.create(objects.NODE, pool_node("ip-10-0-1-1"))
            made = claim("ip-10-0-1-1")
            client.create(objects.NODE_CLAIM, made)
            stored = client.get(objects.NODE_CLAIM, made["metadata"]["name"])
            assert stored is not None
            client.update(objects.NODE_CLAIM, {**stored, "status": {**made["status"], "imageID": "ami-0old"}},
                          "status")
            node_class_ = stored_form(yaml.safe_load(node_class()))
            client.create(objects.EC2_NODE_CLASS, node_class_)
            stored = client.get(objects.EC2_NODE_CLASS, "default")
            assert stored is not None
            amis = [{"id": "ami-0new", "requirements": [{"key": "kubernetes.io/arch", "operator": "In",
                                                         "values": ["amd64"]}]}]
            client.update(objects.EC2_NODE_CLASS, {**stored, "status": {"amis": amis}}, "status")
        finally:
            client.close()
        base = v1_policies(tmp_path / "base", nodepool())

        read = plan_command(PlanOptions(base=base, head=base, start=START, output="json", kubeconfig=str(admin)),
                            load_catalog())

    assert read.exit_code == 0, read.stderr
    (node,) = json.loads(read.stdout)["nodes"]
    assert node["reasons"] == ["AMIDrift: NodeClaim default-ip-10-0-1-1's status.imageID ami-0old is not ami-0new, "
                               "the AMI EC2NodeClass default's status.amis maps to its instance type in the snapshot"]
