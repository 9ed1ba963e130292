"""Karpenter v1.14.1's `ValidatePersistentVolumeClaims` in `check --workloads` (issue #25): a NodePool ignores a pod
whose claims its validation refuses (kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/provisioner.go
`Validate` :561, pkg/controllers/provisioning/scheduling/volumetopology.go `ValidatePersistentVolumeClaims`); a
Provisioner does not (v0.31.1 only checks that the objects exist). Only the objects among the files are judged — a
claim, volume or class not among them may live in the cluster (the `unresolved-reference` warning, both versions) —
and a claim as written (no `status`) is read as Kubernetes makes it, bound and annotated by its controllers, where a
claim copied from a cluster (with its `status`) is read as it is (docs/v1.md, "PersistentVolumeClaims").

The Go cases ported (file, `It`, line), each as data in `CASES`; where the files cannot tell what the Go test's
cluster holds, the case says what is read instead."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent

import pytest

from karpenter_policy.checks.source.workloads import read_workloads
from tests.workloadcheck import check_workloads

from .test_volume_topology import claim_volume, pod, volume

PROVISIONING = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go"
SCHEDULING = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/suite_test.go"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def pvc(name: str, volume_name: str = "", storage_class: str | None = "wait", *, status: str | None = None,
        deleting: bool = False, bind_completed: bool = False) -> str:  # fmt: skip
    """A claim; `status`: its phase as a cluster shows it (`kubectl get -o yaml`), None: as written."""
    lines = ["apiVersion: v1", "kind: PersistentVolumeClaim", "metadata:", f"  name: {name}"]
    if deleting:
        lines.append("  deletionTimestamp: '2026-11-30T08:00:00Z'")
    if bind_completed:
        lines.append(f"  annotations: {{{BIND_COMPLETED}: 'yes'}}")
    lines.append("spec:")
    lines.append("  accessModes: [ReadWriteOnce]")
    if volume_name:
        lines.append(f"  volumeName: {volume_name}")
    if storage_class is not None:
        lines.append(f"  storageClassName: {storage_class!r}")
    if status is not None:
        lines.append(f"status: {{phase: {status}}}")
    return "\n".join(lines) + "\n"


def storage_class(name: str, binding: str | None) -> str:
    mode = f"volumeBindingMode: {binding}\n" if binding else ""
    return f"apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}}}\nprovisioner: other\n{mode}"


def deleting_volume(name: str) -> str:
    return volume(name, "us-east-1a").replace(f"metadata: {{name: {name}}}",
                                              f"metadata: {{name: {name}, deletionTimestamp: '2026-11-30T08:00:00Z'}}")


WAIT = storage_class("wait", "WaitForFirstConsumer")
EPHEMERAL = ("    - name: tmp-ephemeral\n      ephemeral:\n        volumeClaimTemplate:\n"
             "          spec: {accessModes: [ReadWriteOnce]}\n")


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    documents: tuple[str, ...]
    #: Karpenter v1.14.1's words (the start of `refused_v1`), None: a NodePool takes the pod
    refused: str | None


CASES = [
    Case("should not launch nodes for pod with deleting persistentVolumeClaim", f"{SCHEDULING}:3684",
         (pod("app", claim_volume("tmp")), WAIT, pvc("tmp", deleting=True)),
         "persistentvolumeclaim is being deleted (PersistentVolumeClaim default/tmp)"),
    Case("should not launch nodes for pod with bound persistentVolume that is marked for deletion (ephemeral)",
         f"{SCHEDULING}:3707",
         (pod("app", EPHEMERAL), pvc("app-tmp-ephemeral", "pv-a", None, bind_completed=True), deleting_volume("pv-a")),
         "failed to validate pvc, persistentvolume is being deleted (PersistentVolumeClaim default/app-tmp-ephemeral"),
    Case("should not launch nodes for pod with Lost persistentVolumeClaim", f"{SCHEDULING}:3749",
         (pod("app", claim_volume("tmp")), WAIT, pvc("tmp", status="Lost")),
         "persistentvolumeclaim bound to non-existent persistentvolume"),
    Case("should not launch nodes for pod with unbound volume for volumeBindingMode immediate (a cluster's copy)",
         f"{SCHEDULING}:3662",
         (pod("app", claim_volume("tmp")), storage_class("fast", "Immediate"), pvc("tmp", storage_class="fast",
                                                                                    status="Pending")),
         "failed to validate pvc, pvc with immediate volume binding mode must be bound"),
    Case("...immediate, the class's volumeBindingMode unset (the API server defaults it to Immediate)",
         f"{SCHEDULING}:3662",
         (pod("app", claim_volume("tmp")), storage_class("fast", None), pvc("tmp", storage_class="fast",
                                                                         status="Pending")),
         "failed to validate pvc, pvc with immediate volume binding mode must be bound"),
    Case("...immediate, the claim as written: its provisioner binds it before Karpenter looks", f"{SCHEDULING}:3662",
         (pod("app", claim_volume("tmp")), storage_class("fast", "Immediate"), pvc("tmp", storage_class="fast")),
         None),
    Case("should handle pods with PVCs with defined volumeName: bind-completed missing (a cluster's copy)",
         f"{SCHEDULING}:3772",
         (pod("app", claim_volume("tmp")), WAIT, volume("pv-a", "us-east-1a"), pvc("tmp", "pv-a", status="Bound")),
         f"pvc is considered unbound because it does not contain annotation {BIND_COMPLETED}"),
    Case("should handle pods with PVCs with defined volumeName: bind-completed present", f"{SCHEDULING}:3772",
         (pod("app", claim_volume("tmp")), WAIT, volume("pv-a", "us-east-1a"),
          pvc("tmp", "pv-a", status="Bound", bind_completed=True)),
         None),
    Case("...defined volumeName, as written (the PersistentVolume controller annotates it once bound)",
         f"{SCHEDULING}:3772",
         (pod("app", claim_volume("tmp")), WAIT, volume("pv-a", "us-east-1a"), pvc("tmp", "pv-a")),
         None),
    Case("should not schedule with an empty storage class if the pvc is not bound (a cluster's copy)",
         f"{PROVISIONING}:2024",
         (pod("app", claim_volume("tmp")), pvc("tmp", storage_class="", status="Pending")),
         "unbound pvc must define a storage class (PersistentVolumeClaim default/tmp)"),
    Case("...empty storage class, not bound, as written (the PersistentVolume controller may bind it to a volume "
         "without a class)", f"{PROVISIONING}:2024",
         (pod("app", claim_volume("tmp")), pvc("tmp", storage_class="")),
         None),
    Case("should schedule with an empty storage class if the pvc is bound", f"{PROVISIONING}:2004",
         (pod("app", claim_volume("tmp")), volume("test-volume", "us-east-1a"),
          pvc("tmp", "test-volume", "", status="Bound", bind_completed=True)),
         None),
    Case("should schedule with a missing storage class if the pvc is bound", f"{PROVISIONING}:2034",
         (pod("app", claim_volume("tmp")), volume("test-volume", "us-east-1a"),
          pvc("tmp", "test-volume", "missing-storage-class", status="Bound", bind_completed=True)),
         None),
    Case("should not schedule with a missing storage class if the pvc is not bound: not among the files is not "
         "missing (a warning)", f"{PROVISIONING}:2054",
         (pod("app", claim_volume("tmp")), pvc("tmp", storage_class="missing-storage-class", status="Pending")),
         None),
    Case("should not schedule if invalid pvc: not among the files is not missing (a warning)", f"{PROVISIONING}:1995",
         (pod("app", claim_volume("invalid")),),
         None),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=[c.name[:70] for c in CASES])
def test_karpenters_pvc_validation_cases(tmp_path: Path, case: Case) -> None:
    (tmp_path / "apps.yaml").write_text("---\n".join(case.documents))
    found = read_workloads([str(tmp_path / "apps.yaml")])
    [workload] = found.workloads
    refused = workload.shape.refused_v1
    if case.refused is None:
        assert refused is None, f"{case.source}: {case.name}"
    else:
        assert refused is not None and refused.startswith(case.refused), f"{case.source}: {case.name}: {refused}"
    assert workload.shape.refused is None, "Karpenter v0.31.1's validation only asks that the objects exist"


def test_a_statefulsets_claim_copied_from_a_cluster_lost_is_refused_by_its_ordinal_0_claim(tmp_path: Path) -> None:
    """A StatefulSet's pods are read as ordinal 0's (`resolve_volumes`): its claim `data-db-0` Lost refuses them."""
    stateful_set = dedent("""\
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: db}
        spec:
          replicas: 2
          selector: {matchLabels: {app: db}}
          template:
            metadata: {labels: {app: db}}
            spec:
              containers: [{name: db, resources: {requests: {cpu: "1"}}}]
          volumeClaimTemplates:
            - metadata: {name: data}
              spec: {accessModes: [ReadWriteOnce], storageClassName: wait}
        """)
    (tmp_path / "apps.yaml").write_text("---\n".join((stateful_set, WAIT, pvc("data-db-0", status="Lost"))))
    [db] = read_workloads([str(tmp_path / "apps.yaml")]).workloads
    assert db.shape.refused_v1 is not None
    assert db.shape.refused_v1.startswith("persistentvolumeclaim bound to non-existent persistentvolume")


# --- through the CLI, on each kind of pool ------------------------------------------------------------------------

_NODEPOOL = dedent("""\
    apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {name: new}
    spec:
      template:
        spec:
          requirements:
            - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.large]}
          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
    ---
    apiVersion: karpenter.k8s.aws/v1
    kind: EC2NodeClass
    metadata: {name: default}
    spec:
      role: KarpenterNodeRole-demo
      subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
      amiSelectorTerms: [{alias: al2023@latest}]
    """)
_PROVISIONER = dedent("""\
    apiVersion: karpenter.sh/v1alpha5
    kind: Provisioner
    metadata: {name: old}
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [c6a.large]}
      providerRef: {name: default}
    ---
    apiVersion: karpenter.k8s.aws/v1alpha1
    kind: AWSNodeTemplate
    metadata: {name: default}
    spec:
      subnetSelector: {karpenter.sh/discovery: demo}
      securityGroupSelector: {karpenter.sh/discovery: demo}
    """)
_LOST = "---\n".join((pod("app", claim_volume("tmp")), WAIT, pvc("tmp", status="Lost")))
_IGNORED = "Karpenter ignores the pod and never provisions a node for it: "


def test_a_nodepool_ignores_a_pod_whose_claim_is_lost_in_v1s_words(tmp_path: Path) -> None:
    code, report = check_workloads(tmp_path, _NODEPOOL, _LOST)
    assert code == 1
    [app] = report["workloads"]
    assert app["schedulable"] is False
    assert app["refused"].startswith("persistentvolumeclaim bound to non-existent persistentvolume")
    [finding] = [f for f in report["findings"] if f["rule"] == "workload-unschedulable"]
    assert finding["message"] == _IGNORED + app["refused"]


def test_beside_a_provisioner_the_pod_lands_on_it(tmp_path: Path) -> None:
    """Karpenter v0.31.1 does not validate a claim's phase: the Provisioner takes the pod the NodePool ignores."""
    code, report = check_workloads(tmp_path, _NODEPOOL + "---\n" + _PROVISIONER, _LOST)
    assert code == 0, report["findings"]
    [app] = report["workloads"]
    assert app["schedulable"] is True
    assert app["provisioner"] == "old"
