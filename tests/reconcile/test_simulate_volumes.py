"""`karpenter-policy simulate` reads the claims, PersistentVolumes and StorageClasses among its scenario's files as
`check --workloads` reads them, creates them in its cluster, and the controller applies them as on a cluster
(Karpenter v1.14.1's `ValidatePersistentVolumeClaims` and volume topology): a bound claim's volume zone pins the
node; a claim the file shows `Lost` keeps its pod pending, with v1.14.1's reason."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from karpenter_policy.cli import main

ROOT = Path(__file__).resolve().parents[2]
NODEPOOLS = ROOT / "examples" / "v1" / "controller" / "policies" / "nodepools.yaml"
ROW = re.compile(r"^(ip-\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(spot|on-demand)\s+(\d+)\s+(\d+)%\s+(\d+)%\s+(\S+)$", re.M)

SCENARIO = """\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-db}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0123}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - {key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1d]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: db-data, namespace: default}
spec: {storageClassName: gp3, volumeName: pv-db, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: old-data, namespace: default}
spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
status: {phase: Lost}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: db, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: db, image: postgres, resources: {requests: {cpu: "1", memory: 1Gi}}}]
      volumes: [{name: data, persistentVolumeClaim: {claimName: db-data}}]
---
apiVersion: v1
kind: Pod
metadata: {name: old, namespace: default}
spec:
  containers: [{name: app, image: app, resources: {requests: {cpu: "1"}}}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: old-data}}]
"""


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    policies = tmp_path_factory.mktemp("policies")
    shutil.copy(NODEPOOLS, policies / "nodepools.yaml")
    out = tmp_path_factory.mktemp("simulate") / "build"
    result = CliRunner().invoke(main, ["compile", str(policies), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def test_the_scenarios_volumes_pin_the_zone_and_a_lost_claim_keeps_its_pod_pending(build: Path, tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(SCENARIO)
    result = CliRunner().invoke(main, ["simulate", "--constraints", str(build), "--workloads", str(scenario)])

    assert result.exit_code == 1, result.stderr  # a pod stays pending
    rows = ROW.findall(result.stdout)
    assert [(r[3], int(r[5])) for r in rows] == [("us-east-1d", 1)], result.stdout  # the db's node, in pv-db's zone
    assert "pending: " in result.stdout and "default/old" in result.stdout
    assert "persistentvolumeclaim bound to non-existent persistentvolume (PersistentVolumeClaim default/old-data)" \
        in result.stdout
