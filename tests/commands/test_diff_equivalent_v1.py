"""`diff --equivalent BASE HEAD` between two revisions of v1 NodePools reads each side as Karpenter v1.14.1 does:
a label only v1.14.1 sets (`karpenter.k8s.aws/instance-capability-flex`, `instance-cpu-manufacturer`) spelling the
same set of types as an `instance-family` list is equivalent; narrowing through one is not, and the counter-example
names the offering and the label's value on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.commands.equivalent import equivalent_command
from karpenter_policy.commands.flags import DiffFlags

FLEX = "karpenter.k8s.aws/instance-capability-flex"
CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"
NODE_CLASS = """apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
"""
APP = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {app: a}
  template:
    metadata:
      labels: {app: a}
    spec:
      nodeSelector:
        team: a
      containers:
        - name: c
          image: nginx
          resources:
            requests: {cpu: 500m, memory: 512Mi}
"""


def _node_pool(requirements: str) -> str:
    return f"""apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: team-a
spec:
  template:
    metadata:
      labels:
        team: a
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: [on-demand]
{requirements}"""


def _requirement(key: str, operator: str, values: list[str]) -> str:
    quoted = ", ".join(f'"{v}"' for v in values)
    return f"        - key: {key}\n          operator: {operator}\n          values: [{quoted}]\n"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _equivalent(root: Path, base: str, head: str, catalog: Catalog) -> CommandOutput:
    for side, text in (("base", base), ("head", head)):
        (root / side / "policies").mkdir(parents=True)
        (root / side / "policies" / "nodeclass.yaml").write_text(NODE_CLASS)
        (root / side / "policies" / "pool.yaml").write_text(text)
    (root / "apps").mkdir()
    (root / "apps" / "app.yaml").write_text(APP)
    flags = DiffFlags(
        base=str(root / "base"),
        head=str(root / "head"),
        paths=("policies",),
        workload_paths=(str(root / "apps"),),
        output="json",
        equivalent=True,
    )
    return equivalent_command(flags, catalog)


def test_the_flex_label_for_the_list_of_flex_families_is_equivalent(tmp_path: Path, catalog: Catalog) -> None:
    families = sorted({it.family for it in catalog.instance_types if it.v1_labels.get(FLEX) == "true"})
    assert families  # the catalog has flex types
    base = _node_pool(_requirement("karpenter.k8s.aws/instance-family", "In", families))
    head = _node_pool(_requirement(FLEX, "In", ["true"]))

    result = _equivalent(tmp_path, base, head, catalog)

    assert result.exit_code == 0, result.stdout
    assert json.loads(result.stdout)["equivalent"] is True


def test_narrowing_through_the_cpu_manufacturer_label_is_a_difference_naming_it(
    tmp_path: Path, catalog: Catalog
) -> None:
    base = _node_pool(_requirement("karpenter.k8s.aws/instance-family", "In", ["m5", "m5a"]))
    head = base + _requirement(CPU_MANUFACTURER, "In", ["amd"])

    result = _equivalent(tmp_path, base, head, catalog)

    assert result.exit_code == 1, result.stdout
    (changed,) = json.loads(result.stdout)["changed"]
    assert changed["admitted_by"] == str(tmp_path / "base") and changed["proven"] is True
    instance_type = changed["node"].split()[0]
    found = catalog.get(instance_type)
    assert found is not None and found.family == "m5"
    named = f"{CPU_MANUFACTURER}={found.v1_labels[CPU_MANUFACTURER]}"
    assert changed["message"].endswith(f"head does not ({instance_type}: {named}, v1.14.1's labels its NodePools name)")


def test_a_min_values_the_types_cannot_meet_leaves_the_workload_nowhere(tmp_path: Path, catalog: Catalog) -> None:
    """Under Karpenter's default Strict minValues policy a NodePool whose types carry two families cannot meet
    `minValues: 3` and launches nothing: the workload loses every node."""
    base = _node_pool(_requirement("karpenter.k8s.aws/instance-family", "In", ["m5", "m5a"]))
    head = base + "          minValues: 3\n"

    result = _equivalent(tmp_path, base, head, catalog)

    assert result.exit_code == 1, result.stdout
    (changed,) = json.loads(result.stdout)["changed"]
    assert changed["admitted_by"] == str(tmp_path / "base") and changed["message"].endswith("head does not")
