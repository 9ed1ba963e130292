"""The hash controllers on the NodePool and its EC2NodeClass (`reconcile/claims/hashes.py`), as Karpenter v1.14.1's
(core pkg/controllers/nodepool/hash/controller.go, aws pkg/controllers/nodeclass/hash/controller.go): the object's
hash and version annotations, and after a hash-version bump every NodeClaim of it re-stamped — the current version,
and the current hash unless the claim is drifted — so an upgrade does not drift the fleet. Ported Its name core's
pkg/controllers/nodepool/hash/suite_test.go and aws's pkg/controllers/nodeclass/hash/suite_test.go at v1.14.1 with
their lines; then the controller itself: its claims stamped at launch, re-stamped over HTTP after `kubectl annotate`
makes the NodePool's and the class's versions stale."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml
from kube.conftest import Kubectl

from karpenter_policy.api.v1.statichash import (
    EC2NODECLASS_HASH,
    EC2NODECLASS_HASH_VERSION,
    EC2NODECLASS_HASH_VERSION_KEY,
    NODEPOOL_HASH,
    NODEPOOL_HASH_VERSION,
    NODEPOOL_HASH_VERSION_KEY,
)
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.kube.objects import EC2_NODE_CLASS, NODE_CLAIM, NODE_POOL, Obj
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims.nodepoolstatus import RegistrationHealth
from karpenter_policy.reconcile.claims.readiness import Verdict
from karpenter_policy.reconcile.metrics import Metrics
from karpenter_policy.testing import Scene, compile_policies

from .support import WEB_POD, Closing

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller" / "policies"
CURRENT = {NODEPOOL_HASH: "np-now", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION,
           EC2NODECLASS_HASH: "class-now", EC2NODECLASS_HASH_VERSION_KEY: EC2NODECLASS_HASH_VERSION}


def _documents() -> dict[str, Obj]:
    return {f"{d['kind']}/{d['metadata']['name']}": d
            for d in yaml.safe_load_all((EXAMPLE / "nodepools.yaml").read_text())}


def _cluster(nodepool: dict[str, str] | None = None, node_class: dict[str, str] | None = None) -> MemoryCluster:
    """The example's NodePool `default` and its EC2NodeClass, annotated as given."""
    cluster = MemoryCluster()
    documents = _documents()
    for kind, document, stamped in ((NODE_POOL, documents["NodePool/default"], nodepool),
                                    (EC2_NODE_CLASS, documents["EC2NodeClass/default"], node_class)):
        if stamped is not None:
            document["metadata"]["annotations"] = dict(stamped)
        cluster.create(kind, document)
    return cluster


def _claim(cluster: MemoryCluster, name: str, annotations: dict[str, str], *, drifted: bool = False) -> None:
    """A NodeClaim of the NodePool `default` and its class (test.NodeClaim with the suite's labels and annotations);
    `drifted`: `StatusConditions().SetTrue(Drifted)`."""
    claim: dict[str, Any] = {
        "metadata": {"name": name, "labels": {wk.NODEPOOL: "default"}, "annotations": dict(annotations)},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                 "requirements": [], "resources": {}},
    }
    created = cluster.create(NODE_CLAIM, claim)
    if drifted:
        created["status"] = {"conditions": [{"type": "Drifted", "status": "True", "reason": "Drifted", "message": "",
                                             "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        cluster.update(NODE_CLAIM, created, subresource="status")


def _reconcile(cluster: MemoryCluster) -> None:
    """The hash controllers' Reconcile (ExpectObjectReconciled): the NodePool observed as the controller does."""
    RegistrationHealth(cluster, lambda: dt.datetime.now(dt.UTC), lambda **values: dict(values), Metrics(),
                       lambda _: Verdict("True", "Ready"), hashes=lambda _: dict(CURRENT)).observe("default")


def _annotations(cluster: MemoryCluster, kind: objects.Kind, name: str) -> dict[str, str]:
    return objects.annotations(cluster.get(kind, name) or {})


# --- core pkg/controllers/nodepool/hash/suite_test.go --------------------------------------------------------------


def test_a_stale_nodepool_hash_version_is_brought_current() -> None:
    """suite_test.go:149 "should update nodepool hash version when the nodepool hash version is out of sync with the
    controller hash version"."""
    cluster = _cluster(nodepool={NODEPOOL_HASH: "abceduefed", NODEPOOL_HASH_VERSION_KEY: "test"})
    _reconcile(cluster)
    found = _annotations(cluster, NODE_POOL, "default")
    assert (found[NODEPOOL_HASH], found[NODEPOOL_HASH_VERSION_KEY]) == ("np-now", NODEPOOL_HASH_VERSION)


def test_a_nodepool_hash_version_bump_restamps_every_claim_of_the_pool() -> None:
    """suite_test.go:163 "should update nodepool hash versions on all nodeclaims when the hash versions don't match
    the controller hash version"."""
    cluster = _cluster(nodepool={NODEPOOL_HASH: "abceduefed", NODEPOOL_HASH_VERSION_KEY: "test"})
    for name in ("one", "two"):
        _claim(cluster, name, {NODEPOOL_HASH: "123456", NODEPOOL_HASH_VERSION_KEY: "test"})
    _reconcile(cluster)
    for name in ("one", "two"):
        found = _annotations(cluster, NODE_CLAIM, name)
        assert (found[NODEPOOL_HASH], found[NODEPOOL_HASH_VERSION_KEY]) == ("np-now", NODEPOOL_HASH_VERSION), name


def test_claims_at_the_current_version_are_left_when_the_nodepools_version_is_stale() -> None:
    """suite_test.go:200 "should not update nodepool hash on all nodeclaims when the hash versions match the
    controller hash version": the NodePool brought current, the claim's hash kept."""
    cluster = _cluster(nodepool={NODEPOOL_HASH: "abceduefed", NODEPOOL_HASH_VERSION_KEY: "test-version"})
    _claim(cluster, "one", {NODEPOOL_HASH: "1234564654", NODEPOOL_HASH_VERSION_KEY: NODEPOOL_HASH_VERSION})
    _reconcile(cluster)
    nodepool = _annotations(cluster, NODE_POOL, "default")
    assert (nodepool[NODEPOOL_HASH], nodepool[NODEPOOL_HASH_VERSION_KEY]) == ("np-now", NODEPOOL_HASH_VERSION)
    claim = _annotations(cluster, NODE_CLAIM, "one")
    assert (claim[NODEPOOL_HASH], claim[NODEPOOL_HASH_VERSION_KEY]) == ("1234564654", NODEPOOL_HASH_VERSION)


def test_a_drifted_claim_gets_the_version_and_keeps_its_hash() -> None:
    """suite_test.go:228 "should not update nodepool hash on the nodeclaim if it's drifted"."""
    cluster = _cluster(nodepool={NODEPOOL_HASH: "abceduefed", NODEPOOL_HASH_VERSION_KEY: "test"})
    _claim(cluster, "one", {NODEPOOL_HASH: "123456", NODEPOOL_HASH_VERSION_KEY: "test"}, drifted=True)
    _reconcile(cluster)
    claim = _annotations(cluster, NODE_CLAIM, "one")
    assert (claim[NODEPOOL_HASH], claim[NODEPOOL_HASH_VERSION_KEY]) == ("123456", NODEPOOL_HASH_VERSION)


def test_a_claim_of_another_nodepool_is_not_restamped() -> None:
    """controller.go `ListManaged(..., ForNodePool(np.Name))`: only the NodePool's own claims."""
    cluster = _cluster(nodepool={NODEPOOL_HASH: "abceduefed", NODEPOOL_HASH_VERSION_KEY: "test"})
    _claim(cluster, "one", {NODEPOOL_HASH: "123456", NODEPOOL_HASH_VERSION_KEY: "test"})
    cluster.patch(NODE_CLAIM, "one", {"metadata": {"labels": {wk.NODEPOOL: "batch"}}})
    _reconcile(cluster)
    assert _annotations(cluster, NODE_CLAIM, "one")[NODEPOOL_HASH_VERSION_KEY] == "test"


# --- aws pkg/controllers/nodeclass/hash/suite_test.go -------------------------------------------------------------


def test_a_stale_node_class_hash_version_is_brought_current() -> None:
    """suite_test.go:193 "should update ec2nodeclass-hash-version annotation when the ec2nodeclass-hash-version on
    the NodeClass does not match with the controller hash version"."""
    cluster = _cluster(node_class={EC2NODECLASS_HASH: "abceduefed", EC2NODECLASS_HASH_VERSION_KEY: "test"})
    _reconcile(cluster)
    found = _annotations(cluster, EC2_NODE_CLASS, "default")
    assert (found[EC2NODECLASS_HASH], found[EC2NODECLASS_HASH_VERSION_KEY]) == ("class-now", EC2NODECLASS_HASH_VERSION)


def test_a_node_class_hash_version_bump_restamps_every_claim_of_the_class() -> None:
    """suite_test.go:208 "should update ec2nodeclass-hash-versions on all NodeClaims when the
    ec2nodeclass-hash-version does not match with the controller hash version"."""
    cluster = _cluster(node_class={EC2NODECLASS_HASH: "abceduefed", EC2NODECLASS_HASH_VERSION_KEY: "test"})
    for name in ("one", "two"):
        _claim(cluster, name, {EC2NODECLASS_HASH: "123456", EC2NODECLASS_HASH_VERSION_KEY: "test"})
    _reconcile(cluster)
    for name in ("one", "two"):
        found = _annotations(cluster, NODE_CLAIM, name)
        assert (found[EC2NODECLASS_HASH], found[EC2NODECLASS_HASH_VERSION_KEY]) == (
            "class-now", EC2NODECLASS_HASH_VERSION), name


def test_claims_at_the_current_class_version_are_left_when_the_classs_version_is_stale() -> None:
    """suite_test.go:260 "should not update ec2nodeclass-hash on all NodeClaims when the ec2nodeclass-hash-version
    matches the controller hash version"."""
    cluster = _cluster(node_class={EC2NODECLASS_HASH: "abceduefed", EC2NODECLASS_HASH_VERSION_KEY: "test-version"})
    _claim(cluster, "one", {EC2NODECLASS_HASH: "1234564654", EC2NODECLASS_HASH_VERSION_KEY: EC2NODECLASS_HASH_VERSION})
    _reconcile(cluster)
    node_class = _annotations(cluster, EC2_NODE_CLASS, "default")
    assert (node_class[EC2NODECLASS_HASH], node_class[EC2NODECLASS_HASH_VERSION_KEY]) == (
        "class-now", EC2NODECLASS_HASH_VERSION)
    claim = _annotations(cluster, NODE_CLAIM, "one")
    assert (claim[EC2NODECLASS_HASH], claim[EC2NODECLASS_HASH_VERSION_KEY]) == ("1234564654", EC2NODECLASS_HASH_VERSION)


def test_a_drifted_claim_keeps_its_class_hash() -> None:
    """suite_test.go:296 "should not update ec2nodeclass-hash on the NodeClaim if it's drifted and the
    ec2nodeclass-hash-version does not match the controller hash version"."""
    cluster = _cluster(node_class={EC2NODECLASS_HASH: "abceduefed", EC2NODECLASS_HASH_VERSION_KEY: "test"})
    _claim(cluster, "one", {EC2NODECLASS_HASH: "123456", EC2NODECLASS_HASH_VERSION_KEY: "test"}, drifted=True)
    _reconcile(cluster)
    claim = _annotations(cluster, NODE_CLAIM, "one")
    assert (claim[EC2NODECLASS_HASH], claim[EC2NODECLASS_HASH_VERSION_KEY]) == ("123456", EC2NODECLASS_HASH_VERSION)


def test_a_claim_of_another_class_is_not_restamped() -> None:
    """controller.go `nodeclaimutils.ForNodeClass(nodeClass)`: only the claims whose nodeClassRef names the class."""
    cluster = _cluster(node_class={EC2NODECLASS_HASH: "abceduefed", EC2NODECLASS_HASH_VERSION_KEY: "test"})
    _claim(cluster, "one", {EC2NODECLASS_HASH: "123456", EC2NODECLASS_HASH_VERSION_KEY: "test"})
    cluster.patch(NODE_CLAIM, "one", {"spec": {"nodeClassRef": {"name": "other"}}})
    _reconcile(cluster)
    assert _annotations(cluster, NODE_CLAIM, "one")[EC2NODECLASS_HASH_VERSION_KEY] == "test"


# --- the controller over HTTP ------------------------------------------------------------------------------------


def _kubectl_annotations(kubectl: Kubectl, resource: str) -> dict[str, str]:
    return objects.annotations(json.loads(kubectl("get", resource, "-o", "json").stdout))


def test_an_upgrade_that_bumps_the_hash_versions_restamps_the_controllers_claims_over_http(
    kubectl: Kubectl, tmp_path: Path, closing: Closing,
) -> None:
    """The controller stamps its NodeClaim at launch with the hashes its Node carries, and the NodePool and class
    with theirs. `kubectl annotate` then makes every version stale, as a Karpenter whose hash computation changed
    finds them, and the claim's hashes foreign: the NodePool's event wakes the controller, which re-stamps the claim
    (the current versions and hashes: it is not drifted) and brings the NodePool and class current — and the claim
    is never drifted by the upgrade."""
    compiled = compile_policies(EXAMPLE, tmp_path / "build")
    kubectl("apply", "--validate=false", "-f", str(EXAMPLE / "nodepools.yaml"))
    scene = closing(Scene(compiled, cluster=kubectl.cluster))  # type: ignore[arg-type]
    controller = scene.controller()
    kubectl("apply", "-f", "-", stdin=json.dumps(WEB_POD))
    scene.run(controller, 120, until=lambda: not scene.unbound())
    (claim,) = scene.nodeclaims()
    (node,) = scene.nodes().values()
    stamped = {key: value for key, value in objects.annotations(node).items() if key in CURRENT}
    assert len(stamped) == 4
    assert {k: v for k, v in _kubectl_annotations(kubectl, f"nodeclaim/{claim}").items() if k in CURRENT} == stamped
    assert _kubectl_annotations(kubectl, "nodepool/default")[NODEPOOL_HASH] == stamped[NODEPOOL_HASH]
    assert _kubectl_annotations(kubectl, "ec2nodeclass/default")[EC2NODECLASS_HASH] == stamped[EC2NODECLASS_HASH]

    kubectl("annotate", "--overwrite", f"nodeclaim/{claim}", f"{NODEPOOL_HASH}=from-v2",
            f"{NODEPOOL_HASH_VERSION_KEY}=v2", f"{EC2NODECLASS_HASH}=from-v4", f"{EC2NODECLASS_HASH_VERSION_KEY}=v4")
    kubectl("annotate", "--overwrite", "ec2nodeclass/default", f"{EC2NODECLASS_HASH}=from-v4",
            f"{EC2NODECLASS_HASH_VERSION_KEY}=v4")
    kubectl("annotate", "--overwrite", "nodepool/default", f"{NODEPOOL_HASH}=from-v2",
            f"{NODEPOOL_HASH_VERSION_KEY}=v2")
    scene.run(controller, 30, until=lambda: _kubectl_annotations(kubectl, "nodepool/default")[
        NODEPOOL_HASH_VERSION_KEY] == NODEPOOL_HASH_VERSION)
    restamped = {k: v for k, v in _kubectl_annotations(kubectl, f"nodeclaim/{claim}").items() if k in CURRENT}
    assert restamped == stamped
    assert _kubectl_annotations(kubectl, "nodepool/default")[NODEPOOL_HASH] == stamped[NODEPOOL_HASH]
    class_annotations = _kubectl_annotations(kubectl, "ec2nodeclass/default")
    assert (class_annotations[EC2NODECLASS_HASH], class_annotations[EC2NODECLASS_HASH_VERSION_KEY]) == (
        stamped[EC2NODECLASS_HASH], EC2NODECLASS_HASH_VERSION)
    scene.run(controller, 120)
    conditions = (scene.nodeclaims()[claim].get("status") or {}).get("conditions") or []
    assert [c for c in conditions if c["type"] == "Drifted"] == []
