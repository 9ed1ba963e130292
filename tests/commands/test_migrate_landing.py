"""`migrate --workloads`' landing check (`commands/migrate/landing.py`): a workload must keep its pool and the pools
that could take it, and also its landing set — the nodes it may land on (`checks/proof/landingset.py`, what
`diff --equivalent` compares). A NodePool that kept its name and still takes the workload, but in fewer zones, is
caught by the second."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command
from karpenter_policy.commands.migrate.landing import check_landings

POLICY = """apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector:
    karpenter.sh/discovery: demo
  securityGroupSelector:
    karpenter.sh/discovery: demo
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: team-a
spec:
  providerRef:
    name: default
  labels:
    team: a
  requirements:
    - key: topology.kubernetes.io/zone
      operator: In
      values: [us-east-1a, us-east-1b]
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: [m5]
    - key: karpenter.sh/capacity-type
      operator: In
      values: [on-demand]
"""
APP = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  selector:
    matchLabels: {app: a}
  template:
    metadata:
      labels: {app: a}
    spec:
      nodeSelector: {team: a}
      containers: [{name: c, image: nginx, resources: {requests: {cpu: 500m}}}]
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _migrated(tmp_path: Path, catalog: Catalog) -> tuple[Path, Path, str]:
    (tmp_path / "policies").mkdir()
    (tmp_path / "apps").mkdir()
    policy = tmp_path / "policies" / "a.yaml"
    policy.write_text(POLICY)
    (tmp_path / "apps" / "app.yaml").write_text(APP)
    options = MigrateOptions(out=str(tmp_path / "v1"), default_instance_profile="KarpenterNodeInstanceProfile")
    assert migrate_command([str(tmp_path / "policies")], options, catalog).exit_code == 0
    return policy, tmp_path / "apps", (tmp_path / "v1" / "a.yaml").read_text()


def test_the_migrated_pool_keeps_every_node(tmp_path: Path, catalog: Catalog) -> None:
    policy, apps, v1 = _migrated(tmp_path, catalog)

    found = check_landings([str(policy)], [str(apps)], {str(policy): v1}, {"team-a": "NodePool/team-a"}, catalog)

    assert found.findings == [] and found.compared == 1


def test_a_pool_that_keeps_its_name_but_loses_a_zone_moves_the_workload(tmp_path: Path, catalog: Catalog) -> None:
    policy, apps, v1 = _migrated(tmp_path, catalog)
    narrowed = re.sub(r"(?m)^ *- us-east-1b\n", "", v1)
    assert narrowed != v1

    pools = {"team-a": "NodePool/team-a"}
    found = check_landings([str(policy)], [str(apps)], {str(policy): narrowed}, pools, catalog)

    (finding,) = found.findings
    assert finding.rule == "migration-workload-moved" and finding.object_ref == "Deployment/app"
    assert finding.message == (
        "before migration it may land on m5.large on-demand in us-east-1b (labels team=a) (through "
        "Provisioner/team-a); after, it may not"
    )
