"""`plan` at fleet size: a snapshot of N nodes (default 5,000) and 10 pods each (50,000), three provisioners, one
of them relabelled in HEAD (half the fleet drifts statically) and another narrowed to two zones (requirement drift
of a third of its nodes), PDBs over every deployment, three DaemonSets. Prints the time of each phase and of the
whole command on one core (the process pins itself to one), and what the plan found. With `--v1`, the same fleet
on Karpenter v1 NodePools (each node with its NodeClaim; HEAD's budgets the default 10 %, drift side by side).
With `--volumes`, every node's first pod has a PersistentVolumeClaim bound to an EBS PersistentVolume in the node's
zone (and a StorageClass): the pods a wave moves keep to their volumes' zones (docs/plan.md, "The pods' volumes").
With `--consolidate`, every node is initialized and BASE = HEAD: what consolidation would do now (the controller's
decisions, `simulate/consolidation.py`; with `--v1`, NodePools' commands side by side), within
`--consolidation-timeout` (default 600s here) — its moves, waves and saving are the answer.

    PYTHONPATH=. .venv/bin/python benchmarks/plan.py [--nodes 5000] [--pods-per-node 10] [--repeat 1] [--v1] [--volumes]
        [--consolidate [--consolidation-timeout 600s]]

Goal (issue #26): 5,000 nodes / 50,000 pods in ≤ 30 s on one core. Figures: benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import resource
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import pinned_cpu  # noqa: E402
from karpenter_policy.catalog import load_catalog  # noqa: E402
from karpenter_policy.commands.plan.command import plan_command  # noqa: E402
from karpenter_policy.commands.plan.options import PlanOptions  # noqa: E402
from karpenter_policy.simulate.consolidation import consolidate_now  # noqa: E402

WORK = Path(__file__).resolve().parent / ".work" / "plan"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
POOLS = (("general", "m5", ("m5.xlarge", "m5.2xlarge")), ("compute", "c5", ("c5.xlarge", "c5.2xlarge")),
         ("memory", "r5", ("r5.xlarge", "r5.2xlarge")))
TEMPLATE = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: {name}
spec:
  labels: {{team: {team}}}
  requirements:
    - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}}
    - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [{family}]}}
    - {{key: topology.kubernetes.io/zone, operator: In, values: [{zones}]}}
  ttlSecondsUntilExpired: 7776000
  providerRef: {{name: default}}
---
"""
NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
spec:
  template:
    metadata:
      labels: {{team: {team}}}
    spec:
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand, spot]}}
        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [{family}]}}
        - {{key: topology.kubernetes.io/zone, operator: In, values: [{zones}]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      expireAfter: 2160h
---
"""
NODE_CLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-prod
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  amiSelectorTerms: [{alias: al2023@latest}]
"""
#: What Karpenter v1.14.1 writes on a NodeClaim it launches.
CLAIM_HASHES = {"karpenter.sh/nodepool-hash": "1", "karpenter.sh/nodepool-hash-version": "v3",
                "karpenter.k8s.aws/ec2nodeclass-hash": "2", "karpenter.k8s.aws/ec2nodeclass-hash-version": "v5"}
NODE_TEMPLATE = """\
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector: {karpenter.sh/discovery: prod}
  securityGroupSelector: {karpenter.sh/discovery: prod}
"""


def policies(directory: Path, head: bool, v1: bool = False) -> str:
    directory.mkdir(parents=True, exist_ok=True)
    text = ""
    for name, family, _ in POOLS:
        team = "platform" if head and name == "general" else "web"
        zones = ", ".join(ZONES[:2] if head and name == "compute" else ZONES)
        text += (NODEPOOL if v1 else TEMPLATE).format(name=name, family=family, team=team, zones=zones)
    (directory / "policies.yaml").write_text(text + (NODE_CLASS if v1 else NODE_TEMPLATE))
    return str(directory)


def _volume(claim: str, zone: str) -> list[dict[str, Any]]:
    """A bound claim and its EBS PersistentVolume in `zone`."""
    return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {
                "name": claim, "namespace": "default", "annotations": {"pv.kubernetes.io/bind-completed": "yes"}},
             "spec": {"volumeName": f"pv-{claim}", "storageClassName": "gp3"}, "status": {"phase": "Bound"}},
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{claim}"},
             "spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                 {"key": "topology.ebs.csi.aws.com/zone", "operator": "In", "values": [zone]}]}]}}}}]


def snapshot(nodes: int, per_node: int, v1: bool = False, volumes: bool = False,
             initialized: bool = False) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    if volumes:
        items.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"},
                      "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"})
    apps = max(1, nodes * per_node // 250)
    for n in range(nodes):
        pool, family, types = POOLS[n % len(POOLS)]
        name = f"ip-10-{n // 250}-{n % 250}"
        labels = {"karpenter.sh/nodepool" if v1 else "karpenter.sh/provisioner-name": pool,
                  "node.kubernetes.io/instance-type": types[n % 2], "topology.kubernetes.io/zone": ZONES[(n // 3) % 3],
                  "karpenter.sh/capacity-type": "on-demand", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                  "karpenter.k8s.aws/instance-family": family, "team": "web",
                  **({"karpenter.sh/initialized": "true"} if initialized else {})}
        items.append({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "creationTimestamp": "2026-11-01T00:00:00Z",
            "annotations": {} if v1 else {"karpenter.sh/provisioner-hash": "1"},
            "labels": {**labels, "kubernetes.io/hostname": name}},
            "spec": {"providerID": f"aws:///{ZONES[(n // 3) % 3]}/i-{n:017x}"}, "status": {}})
        if v1:
            items.append({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {
                "name": f"{pool}-{n:05d}", "creationTimestamp": "2026-11-01T00:00:00Z", "labels": labels,
                "annotations": CLAIM_HASHES},
                "spec": {"expireAfter": "2160h", "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                                   "name": "default"}},
                "status": {"nodeName": name, "providerID": f"aws:///{ZONES[(n // 3) % 3]}/i-{n:017x}",
                           "conditions": [{"type": "Initialized", "status": "True"}]}})
        mix = random.Random(n).sample(range(apps), min(per_node, apps))  # no two nodes alike: a plan per node
        for p in range(per_node):
            app = f"app-{mix[p % len(mix)]}"
            claimed = volumes and p == 0
            if claimed:
                items += _volume(f"data-{n}", ZONES[(n // 3) % 3])
            items.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"{app}-5d9c7b-{n}-{p}", "namespace": "default", "uid": f"{n}-{p}",
                "labels": {"app": app, "pod-template-hash": "5d9c7b"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-5d9c7b",
                                     "controller": True, "uid": app}]},
                "spec": {"nodeName": name, "containers": [{"name": "main", "image": "app:1", "env": [
                    {"name": "A", "value": "x" * 40}], "resources": {"requests": {
                        "cpu": f"{100 + 50 * (int(app[4:]) % 8)}m", "memory": "512Mi"}}}],
                    **({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-{n}"}}]}
                       if claimed else {})},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    for a in range(apps):
        items.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                      "metadata": {"name": f"app-{a}", "namespace": "default"},
                      "spec": {"maxUnavailable": "10%", "selector": {"matchLabels": {"app": f"app-{a}"}}}})
    for d in ("kube-proxy", "aws-node", "node-exporter"):
        items.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": d, "namespace": "kube-system"},
                      "spec": {"template": {"metadata": {"labels": {"app": d}}, "spec": {
                          "tolerations": [{"operator": "Exists"}],
                          "containers": [{"name": d, "image": "d:1", "resources": {"requests": {"cpu": "50m"}}}]}}}})
    return {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {"resourceVersion": ""}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods-per-node", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--v1", action="store_true", help="the fleet on Karpenter v1 NodePools")
    parser.add_argument("--volumes", action="store_true", help="every node's first pod with a zonal volume")
    parser.add_argument("--consolidate", action="store_true", help="BASE = HEAD, every node initialized")
    parser.add_argument("--consolidation-timeout", default="600s")
    args = parser.parse_args()
    os.sched_setaffinity(0, {pinned_cpu()})
    WORK.mkdir(parents=True, exist_ok=True)
    kind = "v1-" if args.v1 else ""
    volumes = "-vol" if args.volumes else ""
    initialized = "-init" if args.consolidate else ""
    file = WORK / f"snapshot-{kind}v3-{args.nodes}x{args.pods_per_node}{volumes}{initialized}.json"
    if not file.exists():
        file.write_text(json.dumps(snapshot(args.nodes, args.pods_per_node, args.v1, args.volumes, args.consolidate)))
    head = policies(WORK / f"{kind}head", head=True, v1=args.v1)
    base = head if args.consolidate else policies(WORK / f"{kind}base", head=False, v1=args.v1)
    catalog = load_catalog()
    options = PlanOptions(snapshot=(str(file),), start="2026-11-30T09:00:00Z", output="json", base=base, head=head,
                          allow_stranded=True, consolidation_timeout=args.consolidation_timeout)
    consolidate = consolidate_now if args.consolidate else None
    print(f"plan{' (v1 NodePools)' if args.v1 else ''}{', volumes' if args.volumes else ''}: {args.nodes:,} nodes, "
          f"{args.nodes * args.pods_per_node:,} pods, snapshot "
          f"{file.stat().st_size / 1024**2:.0f} MiB, one core (cpu {pinned_cpu()}), load {os.getloadavg()[0]:.1f}")
    for _ in range(args.repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        result = plan_command(options, catalog, now=dt.datetime(2026, 11, 30, tzinfo=dt.UTC), consolidate=consolidate)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        document = json.loads(result.stdout)
        drifted = sum(1 for n in document["nodes"] if n["drifted"])
        print(f"  {wall:6.1f} s wall, {cpu:6.1f} s CPU: exit {result.exit_code}, {drifted:,} nodes drift, "
              f"{len(document['waves']):,} waves, {len(document['blocked'])} blocked, {len(document['pending'])} "
              f"pending, ${document['cost']['before_monthly']:,.0f} → peak ${document['cost']['peak_monthly']:,.0f}"
              f" → ${document['cost']['after_monthly']:,.0f} a month")
        if "consolidation" in document:
            found = document["consolidation"]
            moves = found["moves"]
            waves = len({m["wave"] for m in moves if "wave" in m})
            print(f"  consolidation: {len(moves)} moves ({sum(len(m['removed']) for m in moves)} nodes removed, "
                  f"{waves} waves), saves ${found['saved_monthly']:,.2f} a month, {found['evicted_pods']} pods "
                  f"evicted; notes: {found['notes']}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"  peak RSS {peak:,.0f} MiB; goal: ≤ 30 s on one core")


if __name__ == "__main__":
    main()
