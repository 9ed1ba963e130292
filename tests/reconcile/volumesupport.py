"""What the tests of a pod's volumes in the controller share: the v1 example's NodePools alone, compiled, and the
role the controller gets when StorageClasses are left out of it (a chart from before they were read)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from karpenter_policy.testing import compile_policies

ROOT = Path(__file__).resolve().parents[2]
NODEPOOLS = ROOT / "examples" / "v1" / "controller" / "policies" / "nodepools.yaml"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"

#: Everything the controller calls in these tests, but the StorageClasses.
WITHOUT_CLASSES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods", "pods/binding", "pods/eviction", "nodes", "namespaces", "events",
                                      "configmaps", "persistentvolumeclaims", "persistentvolumes"], "verbs": ["*"]},
    # the scene's kubelets act with the same token: they join the nodes (a NodePool's pods wait for that)
    {"apiGroups": [""], "resources": ["nodes/status", "pods/status"], "verbs": ["*"]},
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["*"]},
    {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": ["*"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": ["*"]},
    {"apiGroups": ["karpenter.sh", "karpenter.k8s.aws", "coordination.k8s.io"], "resources": ["*"], "verbs": ["*"]},
]
CLASSES: dict[str, Any] = {"apiGroups": ["storage.k8s.io"], "resources": ["storageclasses"], "verbs": ["list", "watch"]}


def example_nodepools(policies: Path, build: Path) -> Path:
    """The example's NodePools alone (no Provisioner beside them), compiled into `build`: what v1.14.1 alone
    provisions for."""
    shutil.copy(NODEPOOLS, policies / "nodepools.yaml")
    return compile_policies(policies, build)
