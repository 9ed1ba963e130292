"""The policies the Karpenter-parity tests of metrics and Events run on: the example policies with `default` made
on-demand with consolidation (batch keeps its spot nodes, its taint and its ttlSecondsAfterEmpty of 60 s)."""

from __future__ import annotations

import shutil
from pathlib import Path

from karpenter_policy.testing import compile_policies

ROOT = Path(__file__).resolve().parents[2]
#: The types the fake cloud sells in these tests (batch wants generation 6 and more).
TYPES = ["m5.large", "m5.xlarge", "m5.2xlarge", "m6i.large", "m6i.xlarge"]
#: What a pod needs to go to the batch provisioner.
BATCH_POD = {
    "tolerations": [{"key": "workload", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}],
    "nodeSelector": {"workload": "batch"},
}


def story_policies(target: Path) -> Path:
    """The policies above, compiled by `karpenter-policy compile` into `target`/build."""
    source = target / "policies"
    shutil.copytree(ROOT / "examples" / "workloads" / "policies", source)
    default = source / "default.yaml"
    text = default.read_text().replace("ttlSecondsAfterEmpty: 30", "consolidation:\n    enabled: true")
    default.write_text(text.replace('values: ["spot"]', 'values: ["on-demand"]'))
    return compile_policies(source, target / "build")


__all__ = ["BATCH_POD", "TYPES", "story_policies"]
