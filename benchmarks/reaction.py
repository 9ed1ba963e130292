"""How fast the controller reacts to what happens in the cluster: this tree next to a baseline tree, measured one
right after the other, on the threaded runner in real time (issue #17 §3).

    .venv/bin/python benchmarks/reaction.py [--nodes 200] [--repeat 5] [--transports memory,http]
        [--baseline-ref 2947bfc] [--no-baseline] [--json]

A fleet of `--nodes` nodes of ours (5 running pods each), the fake cloud holding their instances, an interruption
queue, and the controller's runner (informers, leader election through a Lease) on them — the cluster either
in memory (`memory`) or served over HTTP by the test API server in a process of its own (`http`:
tests/kube/emulator.py, the controller talking to it through its Kubernetes adapter, as to a real API server; the
benchmark's own reads and writes go over HTTP too). Each reaction is timed `--repeat` times, from the moment the
cause is written to the moment the effect is seen in the cluster (polled every 5 ms; over HTTP every 20 ms):

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
import contextlib
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPOSITORY  # noqa: E402
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


def _timed(cause: Any, effect: Any, poll: float, timeout: float = 30.0) -> float | None:
    start = time.monotonic()
    cause()
    if not wait_for(effect, timeout, poll):
        return None
    return time.monotonic() - start


@contextlib.contextmanager
def api_server() -> Iterator[str]:
    """This repository's test API server (tests/kube/emulator.py) in a process of its own, whatever tree is
    measured; its URL."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.kube.emulator", "--port", "0", "--no-namespaces"], cwd=REPOSITORY,
        env=environment, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if "serving" not in line:
            raise RuntimeError(f"the test API server did not start: {line!r}")
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        server.terminate()
        server.wait(30)


def serve_over_http(fleet: Any, url: str) -> None:
    """The fleet's objects written to the API server at `url`; from now on the fleet's cluster is that server."""
    from karpenter_policy.kube import objects
    from karpenter_policy.kube.client import KubeCluster

    remote = KubeCluster.from_url(url)
    for kind in (objects.NODE, objects.POD):
        for item in fleet.cluster.list(kind).items:
            meta = {k: v for k, v in item["metadata"].items() if k not in ("resourceVersion", "uid")}
            remote.create(kind, {**item, "metadata": meta})
    fleet.cluster = remote


def measure(nodes: int, repeat: int, url: str | None = None) -> dict[str, Any]:
    from karpenter_policy.fakes.queue import FakeQueue
    from karpenter_policy.kube import objects
    from karpenter_policy.kube.lease import LeaderElector

    node_info = _compat("karpenter_policy.reconcile.state.nodes", "karpenter_policy.reconcile.nodes")
    compiled = compiled_policy(TTL, WORK / "reaction")
    fleet = build_fleet(nodes, 5, "350m", "1Gi", compiled, {})
    if url is not None:
        serve_over_http(fleet, url)
    try:
        queue = FakeQueue(visibility_timeout=5.0, wait_seconds=20.0)  # a long poll, as SQS's
    except TypeError:  # a baseline tree's queue answers at once
        queue = FakeQueue(visibility_timeout=5.0)
    cluster = fleet.cluster
    poll = 0.005 if url is None else 0.02
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
    result: dict[str, Any] = {"nodes": nodes, "repeat": repeat, "transport": "memory" if url is None else "http"}
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
            interruption.append(_timed(lambda i=instance: queue.send(spot_warning(i)),
                                       lambda v=victim: cordoned(v), poll))
            victim = names[3 * i + 1]
            deletion.append(_timed(lambda v=victim: cluster.delete(objects.NODE, v),
                                   lambda v=victim: cordoned(v), poll))
            victim = names[3 * i + 2]
            pods = [p for p in cluster.list(objects.POD).items if p["spec"].get("nodeName") == victim]
            for pod in pods[:-1]:
                cluster.delete(objects.POD, objects.name(pod), objects.namespace(pod))
            time.sleep(0.5)
            last = pods[-1]

            def stamped(v: str = victim) -> bool:
                return "karpenter.sh/emptiness-timestamp" in (node(v).get("metadata") or {}).get("annotations", {})

            emptiness.append(_timed(lambda p=last: cluster.delete(objects.POD, objects.name(p), objects.namespace(p)),
                                    stamped, poll))
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
    parser.add_argument("--transports", default="memory,http", help="memory, http or both (default)")
    parser.add_argument("--http", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline-ref", default="2947bfc")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.in_process:
        if args.http:
            with api_server() as url:
                print(json.dumps(measure(args.nodes, args.repeat, url)))
        else:
            print(json.dumps(measure(args.nodes, args.repeat)))
        return 0
    transports = [t for t in args.transports.split(",") if t]
    if not transports or set(transports) - {"memory", "http"}:
        parser.error("--transports: memory, http or memory,http")
    script = Path(__file__).resolve()
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if not args.no_baseline:
        trees.append((args.baseline_ref, export_tree(args.baseline_ref)))
    results = {
        f"{label}, {transport}": run_tree(
            script, tree, ["--nodes", str(args.nodes), "--repeat", str(args.repeat)]
            + (["--http"] if transport == "http" else []), 900)
        for transport in transports for label, tree in trees
    }
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
