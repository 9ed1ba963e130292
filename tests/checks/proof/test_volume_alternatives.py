"""Volume topology per kind of pool in `check --workloads` (issue #25): a NodePool reads a pod's volumes as Karpenter
v1.14.1 does — every term of a PersistentVolume's `nodeAffinity.required` and of a StorageClass's
`allowedTopologies` an alternative, their cross product across the pod's volumes with the incompatible branches
pruned, and a local or hostPath volume's `kubernetes.io/hostname` ignored (core
pkg/controllers/provisioning/scheduling/volumetopology.go `GetRequirements`, `getPersistentVolumeRequirements`) —
where a Provisioner keeps v0.31.1's reading: the first term of each, the hostname kept (the same file at v0.31.1:
"Terms are ORed, only use the first term").

Each case is a Go test of v1.14.1 ported (file, `It`, line), with the pool and zone names of this repository's
examples, and says what each kind of pool does with the pod."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import pytest

from karpenter_policy.model.labels import HOSTNAME, ZONE
from tests.workloadcheck import check_workloads

from .test_volume_topology import claim_volume, ephemeral_volume, pod
from .test_volume_validation_v1 import _NODEPOOL, _PROVISIONER

SCHEDULING = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go"
PROVISIONING = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go"
FAMILY = "karpenter.k8s.aws/instance-family"


def term(*expressions: tuple[str, str]) -> str:
    return "{matchExpressions: [" + ", ".join(f"{{key: {k}, operator: In, values: [{v}]}}"
                                              for k, v in expressions) + "]}"  # fmt: skip


def persistent_volume(name: str, *terms: str, source: str = "csi") -> str:
    """A PersistentVolume whose required node affinity has `terms` (ORed); `source`: csi, local or hostPath."""
    sources = {"csi": "csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}", "local": "local: {path: /mnt/disks/a}",
               "hostPath": "hostPath: {path: /mnt/disks/a}"}  # fmt: skip
    return dedent(f"""\
        apiVersion: v1
        kind: PersistentVolume
        metadata: {{name: {name}}}
        spec:
          capacity: {{storage: 10Gi}}
          {sources[source]}
          nodeAffinity: {{required: {{nodeSelectorTerms: [{", ".join(terms)}]}}}}
        """)


def storage_class(name: str, *terms: tuple[tuple[str, str], ...]) -> str:
    """A WaitForFirstConsumer StorageClass whose allowedTopologies are `terms` (ORed)."""
    shown = ", ".join("{matchLabelExpressions: [" + ", ".join(f"{{key: {k}, values: [{v}]}}" for k, v in t) + "]}"
                      for t in terms)  # fmt: skip
    return (f"apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\n"
            f"provisioner: ebs.csi.aws.com\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies: [{shown}]\n")


def claim(name: str, volume_name: str = "", storage_class_name: str = "") -> str:
    spec = [f"volumeName: {volume_name}"] if volume_name else []
    spec += [f"storageClassName: {storage_class_name}"] if storage_class_name else []
    return f"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec: {{{', '.join(spec)}}}\n"


def nodepool(*families: str) -> str:
    """The NodePool of the validation tests, its instance types widened to `families`' large size."""
    return _NODEPOOL.replace("values: [c6a.large]", f"values: [{', '.join(f'{f}.large' for f in families)}]")


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    documents: tuple[str, ...]
    #: the zone a NodePool's node for the pod is in (None: no NodePool takes it)
    nodepool_zone: str | None
    #: whether a Provisioner takes it (v0.31.1's first term, hostname kept)
    provisioner: bool
    families: tuple[str, ...] = ("c6a",)


TWO_ZONES = (term((ZONE, "us-east-1a")), term((ZONE, "us-east-1b")))
HOST = term((HOSTNAME, "ip-10-0-0-1.ec2.internal"))
A_TO_B = (claim_volume("data"), ("us-east-1b",))

CASES = [
    Case("should schedule pods using a PV with multiple zones: the pod's own zone is the second term's",
         f"{SCHEDULING}:3047",
         (pod("app", claim_volume("data"), ("us-east-1b",)), persistent_volume("pv-a", *TWO_ZONES),
          claim("data", "pv-a")),
         "us-east-1b", False),
    Case("should schedule pods using a StorageClass with multiple zones in AllowedTopologies: the pod's own zone is "
         "the second term's", f"{SCHEDULING}:3118",
         (pod("app", claim_volume("data"), ("us-east-1b",)),
          storage_class("multi-zone", ((ZONE, "us-east-1a"),), ((ZONE, "us-east-1b"),)),
          claim("data", storage_class_name="multi-zone")),
         "us-east-1b", False),
    Case("...multiple zones in AllowedTopologies (an ephemeral volume's class)", f"{SCHEDULING}:3118",
         (pod("app", ephemeral_volume("multi-zone"), ("us-east-1b",)),
          storage_class("multi-zone", ((ZONE, "us-east-1a"),), ((ZONE, "us-east-1b"),))),
         "us-east-1b", False),
    Case("should schedule pods when a valid multi-volume topology alternative remains after pruning disjoint "
         "branches (the Go test's exotic label: the instance family; only m6a offered)", f"{SCHEDULING}:3165",
         (pod("app", claim_volume("a") + claim_volume("b").replace("name: data", "name: data-b")),
          storage_class("pruned-a", ((FAMILY, "c6a"),), ((FAMILY, "m6a"),)),
          storage_class("pruned-b", ((ZONE, "us-east-1a"), (FAMILY, "m6a")), ((ZONE, "us-east-1b"), (FAMILY, "c6a"))),
          claim("a", storage_class_name="pruned-a"), claim("b", storage_class_name="pruned-b")),
         "us-east-1a", False, ("m6a",)),
    Case("should ignore hostname affinity scheduling when using local path volumes (local)", f"{PROVISIONING}:2203",
         (pod("app", claim_volume("data")), persistent_volume("pv-local", HOST, source="local"),
          claim("data", "pv-local", "local-path")),
         "any", False),
    Case("should ignore hostname affinity scheduling when using local path volumes (hostPath)",
         f"{PROVISIONING}:2203",
         (pod("app", claim_volume("data")), persistent_volume("pv-local", HOST, source="hostPath"),
          claim("data", "pv-local", "local-path")),
         "any", False),
    Case("should ignore hostname affinity scheduling when using local path volumes (ephemeral volume)",
         f"{PROVISIONING}:2244",
         (pod("app", ephemeral_volume("local-path")), persistent_volume("pv-local", HOST, source="local"),
          claim("app-data", "pv-local", "local-path")),
         "any", False),
    Case("should not ignore hostname affinity when using non-local path volumes", f"{PROVISIONING}:2290",
         (pod("app", claim_volume("data")), persistent_volume("pv-csi", HOST), claim("data", "pv-csi")),
         None, False),
    Case("should preserve unconstrained PV alternatives after ignoring hostname affinity (local)",
         f"{SCHEDULING}:3093",
         (pod("app", claim_volume("data")),
          persistent_volume("pv-local", HOST, term((ZONE, "invalid-zone")), source="local"),
          claim("data", "pv-local")),
         "any", False),
    Case("should schedule to volume zones if volume already bound: one term, both kinds alike", f"{PROVISIONING}:2171",
         (pod("app", claim_volume("data")), persistent_volume("pv-a", term((ZONE, "us-east-1c"))),
          claim("data", "pv-a")),
         "us-east-1c", True),
]  # fmt: skip


def _app(report: dict[str, object]) -> dict[str, object]:
    workloads = report["workloads"]
    assert isinstance(workloads, list)
    [app] = workloads
    assert isinstance(app, dict)
    return app


@pytest.mark.parametrize("case", CASES, ids=[c.name[:70] for c in CASES])
def test_a_nodepool_reads_v1s_alternatives_and_a_provisioner_v031s_first_term(tmp_path: Path, case: Case) -> None:
    apps = "---\n".join(case.documents)
    (tmp_path / "nodepool").mkdir()
    _, report = check_workloads(tmp_path / "nodepool", nodepool(*case.families), apps)
    app = _app(report)
    assert app["schedulable"] is (case.nodepool_zone is not None), f"{case.source}: {case.name}: {app}"
    if case.nodepool_zone not in (None, "any"):
        launch = app["launch"]
        assert isinstance(launch, dict) and launch["zone"] == case.nodepool_zone, f"{case.source}: {case.name}"
    assert not [f for f in report["findings"] if f["rule"] == "volume-zones-conflict"]

    (tmp_path / "provisioner").mkdir()
    _, report = check_workloads(tmp_path / "provisioner", _PROVISIONER.replace("[c6a.large]", "[c6a.large, m6a.large]"),
                                apps)  # fmt: skip
    assert _app(report)["schedulable"] is case.provisioner, f"{case.source}: {case.name} on a Provisioner"
