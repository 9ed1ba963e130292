"""`check` and `check --workloads` on v1 NodePools whose EC2NodeClass asks for EFA interfaces or nested
virtualization, and on workloads requesting `vpc.amazonaws.com/efa` (issue #26), through the real CLI: the types are
narrowed as Karpenter v1.14.1's `IsCompatibleWithNodeClass` narrows them (aws pkg/providers/instancetype/
compatibility/compatibility.go), a NodePool none of whose types can launch is an error at its `nodeClassRef`
naming the fields, and a pod requesting EFA is placed on a type with EFA (types.go:472 `efas`) or reported pending
with the reason."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: {name}
spec:
  role: KarpenterNodeRole-test
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags: {{karpenter.sh/discovery: test}}
  securityGroupSelectorTerms:
    - tags: {{karpenter.sh/discovery: test}}
{extra}---
"""

POOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: {node_class}
      requirements:
        - key: karpenter.k8s.aws/instance-family
          operator: In
          values: [{families}]
---
"""

EFA_ONLY = """\
  networkInterfaces:
    - {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}
    - {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}
"""

APP = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
        - name: app
          image: registry.example/app:1
          resources:
            requests: {{cpu: "1", vpc.amazonaws.com/efa: "{efa}"}}
            limits: {{vpc.amazonaws.com/efa: "{efa}"}}
---
"""


def _check(tmp_path: Path, policies: str, apps: str | None = None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "pools.yaml").write_text(policies)
    command = [sys.executable, "-m", "karpenter_policy.cli", "check", str(tmp_path / "policies"), "-q"]
    if apps is not None:
        (tmp_path / "apps").mkdir()
        (tmp_path / "apps" / "apps.yaml").write_text(apps)
        command += ["--workloads", str(tmp_path / "apps")]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_a_nodepool_no_type_of_which_takes_its_class_s_efa_interfaces_is_an_error_at_its_node_class_ref(
    tmp_path: Path,
) -> None:
    """m5 has no EFA: a class with an `efa-only` interface launches none of its types (compatibility.go
    `networkInterfaceCompatibility`); c5n has one EFA interface, so the same class on c5n is fine."""
    policies = (
        CLASS.format(name="efa", extra=EFA_ONLY)
        + POOL.format(name="general", node_class="efa", families='"m5"')
        + POOL.format(name="network", node_class="efa", families='"c5n"')
    )
    done = _check(tmp_path, policies)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if "[no-instance-type]" in line]
    text = (tmp_path / "policies" / "pools.yaml").read_text().splitlines()
    ref_line = next(i for i, line in enumerate(text, 1) if "nodeClassRef" in line)
    assert len(lines) == 1, done.stdout
    assert lines[0].startswith(f"{tmp_path / 'policies' / 'pools.yaml'}:{ref_line}:"), lines[0]
    assert "NodePool/general" in lines[0] and "networkInterfaces (2)" in lines[0], lines[0]
    assert "none of the 9 instance types it admits can launch with the EC2NodeClass's" in lines[0], lines[0]


def test_nested_virtualization_on_types_without_it_is_an_error_naming_the_field(tmp_path: Path) -> None:
    nested = "  cpuOptions:\n    nestedVirtualization: enabled\n"
    done = _check(tmp_path, CLASS.format(name="vm", extra=nested) + POOL.format(name="old", node_class="vm",
                                                                              families='"m5"'))  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "cpuOptions.nestedVirtualization: enabled" in done.stdout and "[no-instance-type]" in done.stdout


def test_a_workload_requesting_efa_is_placed_on_a_type_with_efa_or_pending_with_the_reason(tmp_path: Path) -> None:
    """A NodePool of m5 and p4d: the 1-EFA replica lands (p4d.24xlarge has 4), the 8-EFA one cannot (no type has
    8), and the check says why, naming the resource."""
    policies = CLASS.format(name="default", extra="") + POOL.format(name="mixed", node_class="default",
                                                                     families='"m5", "p4d"')  # fmt: skip
    apps = APP.format(name="mpi", efa="1") + APP.format(name="greedy", efa="8")
    done = _check(tmp_path, policies, apps)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Deployment/mpi" not in done.stdout, done.stdout
    assert "Deployment/greedy" in done.stdout and "8 vpc.amazonaws.com/efa" in done.stdout, done.stdout
