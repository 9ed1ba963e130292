"""How fast the controller reacts to what happens in the cluster: this tree next to a baseline tree, measured one
right after the other, on the threaded runner in real time (issue #17 §3).

    .venv/bin/python benchmarks/reaction.py [--nodes 200] [--repeat 5] [--baseline-ref 2947bfc] [--no-baseline]
        [--json]

A fleet of `--nodes` nodes of ours (5 running pods each) on an in-memory cluster, the fake cloud holding their
instances, an interruption queue, and the controller's runner (informers, leader election through a Lease) on
them. Each reaction is timed `--repeat` times, from the moment the cause is written to the moment the effect is
seen in the cluster (polled every 5 ms):

- **interruption → cordon**: a spot interruption warning for a node's instance is put in the queue; until the
  Node is cordoned (goal ≤ 1 s; the warning gives 2 minutes);
- **Node deletion → cordon**: `kubectl delete node` (a deletion request: the termination finalizer holds it);
  until the Node is cordoned (goal ≤ 1 s);
- **node emptied → emptiness timestamp**: the last pod of a node (ttlSecondsAfterEmpty) is deleted; until the
  Node carries `karpenter.sh/emptiness-timestamp` (goal ≤ 1 s);
- **take-over → launch**: 20 pods (7 vCPU each: no node of the fleet has room) become pending while no replica
  leads (the last leader's Lease still held); from the moment this replica takes the Lease to the first
  CreateFleet for them (goal ≤ the batch window's 1 s idle + 1 s).

A cordon is "seen" when the Node is cordoned or already gone (the in-memory cluster evicts pods at once, so a
drain can finish between two looks).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fleet import (  # noqa: E402
    WORK,
    _compat,
    build_fleet,
    compiled_policy,
    export_tree,
    pending_pods,
    run_tree,
    wait_for,
)

GOAL = 1.0
TAKE_OVER_GOAL = 2.0
TTL = "  ttlSecondsAfterEmpty: 30"
LEASE = "karpenter-policy-reconcile"


def spot_warning(instance_id: str) -> str:
    arn = f"arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}"
    return json.dumps({
        "version": "0", "id": f"bench-{instance_id}", "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2", "account": "123456789012",
        "time": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), "region": "us-east-1", "resources": [arn],
        "detail": {"instance-id": instance_id, "instance-action": "terminate"},
    })


def _timed(cause: Any, effect: Any, timeout: float = 30.0) -> float | None:
    start = time.monotonic()
    cause()
    if not wait_for(effect, timeout, 0.005):
        return None
    return time.monotonic() - start


def measure(nodes: int, repeat: int) -> dict[str, Any]:
    from karpenter_policy.cloud.fakequeue import FakeQueue
    from karpenter_policy.kube import objects
    from karpenter_policy.kube.lease import LeaderElector

    node_info = _compat("karpenter_policy.reconcile.state.nodes", "karpenter_policy.reconcile.nodes")
    compiled = compiled_policy(TTL, WORK / "reaction")
    fleet = build_fleet(nodes, 5, "350m", "1Gi", compiled, {})
    queue = FakeQueue(visibility_timeout=5.0, wait_seconds=20.0)
    cluster = fleet.cluster
    # A Lease another replica held a moment ago, which runs out in 3 s: this replica takes over then.
    now = dt.datetime.now(dt.UTC)
    cluster.create(objects.LEASE, {
        "metadata": {"name": LEASE, "namespace": "default"},
        "spec": {"holderIdentity": "old-leader", "leaseDurationSeconds": 3,
                 "acquireTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                 "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    })
    for pod in pending_pods(20, cpu="7", prefix="waiting"):  # no node of the fleet has room: launches
        cluster.create(objects.POD, pod)
    elector = LeaderElector(cluster, "default", LEASE, "bench", lease_duration=3.0, renew_deadline=2.0,
                            retry_period=0.1).start()
    creates_before = len(fleet.cloud.creates)
    fleet.start(elector=elector, queue=queue, resync=10.0)
    result: dict[str, Any] = {"nodes": nodes, "repeat": repeat}
    try:
        wait_for(lambda: elector.is_leader, 30.0, 0.005)
        led = time.monotonic()
        wait_for(lambda: len(fleet.cloud.creates) > creates_before, 30.0, 0.005)
        first = fleet.cloud.creates[creates_before] if len(fleet.cloud.creates) > creates_before else None
        result["take_over_to_create_fleet"] = round(first - led, 3) if first is not None and first >= led else None
        time.sleep(2.0)

        def node(name: str) -> dict[str, Any]:
            return cluster.get(objects.NODE, name) or {}

        def cordoned(name: str) -> bool:
            """Cordoned — or already drained and gone (the in-memory cluster evicts at once: a drain can take
            less time than one look)."""
            found = node(name)
            return not found or bool((found.get("spec") or {}).get("unschedulable"))

        names = list(fleet.nodes)
        interruption, deletion, emptiness = [], [], []
        for i in range(repeat):
            victim = names[3 * i]
            instance = node_info.instance_id(node(victim))
            interruption.append(_timed(lambda i=instance: queue.send(spot_warning(i)), lambda v=victim: cordoned(v)))
            victim = names[3 * i + 1]
            deletion.append(_timed(lambda v=victim: cluster.delete(objects.NODE, v), lambda v=victim: cordoned(v)))
            victim = names[3 * i + 2]
            pods = [p for p in cluster.list(objects.POD).items if p["spec"].get("nodeName") == victim]
            for pod in pods[:-1]:
                cluster.delete(objects.POD, objects.name(pod), objects.namespace(pod))
            time.sleep(0.5)
            last = pods[-1]

            def stamped(v: str = victim) -> bool:
                return "karpenter.sh/emptiness-timestamp" in (node(v).get("metadata") or {}).get("annotations", {})

            emptiness.append(_timed(lambda p=last: cluster.delete(objects.POD, objects.name(p), objects.namespace(p)),
                                    stamped))
        for name, values in (("interruption_to_cordon", interruption), ("deletion_to_cordon", deletion),
                             ("emptied_to_timestamp", emptiness)):
            seen = [v for v in values if v is not None]
            result[name] = {
                "max": round(max(seen), 3) if seen else None,
                "median": round(statistics.median(seen), 3) if seen else None,
                "missed": len(values) - len(seen),
            }
    finally:
        fleet.stop()
        elector.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline-ref", default="2947bfc")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.in_process:
        print(json.dumps(measure(args.nodes, args.repeat)))
        return 0
    script = Path(__file__).resolve()
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if not args.no_baseline:
        trees.append((args.baseline_ref, export_tree(args.baseline_ref)))
    results = {label: run_tree(script, tree, ["--nodes", str(args.nodes), "--repeat", str(args.repeat)], 900)
               for label, tree in trees}
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"reaction.py, {dt.date.today().isoformat()}: {args.nodes} nodes, {args.repeat} repetitions, seconds "
          f"(max / median; missed: no reaction within 30 s)\n")
    for label, row in results.items():
        print(f"{label}:")
        for name in ("interruption_to_cordon", "deletion_to_cordon", "emptied_to_timestamp"):
            value = row[name]
            print(f"  {name:<26} {value['max']} / {value['median']}  (missed {value['missed']})  goal ≤ {GOAL:g}")
        took = row["take_over_to_create_fleet"]
        shown = "missed (nothing launched within 30 s)" if took is None else took
        print(f"  {'take_over_to_create_fleet':<26} {shown}  goal ≤ {TAKE_OVER_GOAL:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
