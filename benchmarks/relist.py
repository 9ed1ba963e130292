"""Memory after relists: the pods informer made to relist (410 Gone) a few times on a fleet of N nodes with 20
pods each, this tree next to a baseline tree, one right after the other (issue #23).

    .venv/bin/python benchmarks/relist.py [--nodes 1000] [--rounds 3] [--baseline-ref 0d81096] [--json]

Each round patches one pod and forgets the in-memory API server's history (`compact`, as etcd's compaction)
until the informer's watch meets a 410 and lists again, waits for it to work again and 5 s more, collects
garbage and reads RSS and how many of the cluster state's pod records hold an object other than the informer's
cached one (`twice`: such a pod is held twice, the record's copy and the cache's). Before the fix every unchanged
pod was (a relist cached the list's copies while the records kept theirs); now none is. RSS includes the
in-memory API server's copy of every pod.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fleet import (  # noqa: E402
    BASELINE_TREE,
    WORK,
    build_fleet,
    compiled_policy,
    export_tree,
    rss_mib,
    run_tree,
    wait_for,
    without_editable_install,
)


def measure(nodes: int, rounds: int) -> list[dict[str, Any]]:
    import scale

    from karpenter_policy.kube import objects

    fleet = build_fleet(nodes, scale.PODS_PER_NODE, "350m", "1Gi",
                        compiled_policy(scale.CONSOLIDATION, WORK / "scale"), {"consolidation_validation": 3600.0})
    fleet.start()
    try:
        if not scale._synced(fleet, 900):
            raise SystemExit("the controller did not sync in 900 s")
        informer = fleet.runner.feed.informers[objects.POD]
        state = fleet.controller.state
        pod = fleet.cluster.list(objects.POD).items[0]
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        time.sleep(5)
        gc.collect()
        rows: list[dict[str, Any]] = [{"round": 0, "rss_mib": round(rss_mib(), 1), "lists": informer.stats.lists}]
        for round_ in range(1, rounds + 1):
            lists, patch = informer.stats.lists, 0
            while informer.stats.lists == lists:  # a change the watch has not read yet, its history forgotten: 410
                fleet.cluster.patch(objects.POD, name, {"metadata": {"annotations": {"relist": f"{round_}-{patch}"}}},
                                    namespace=namespace)
                fleet.cluster.compact()
                patch += 1
                time.sleep(0.001)
            def relisted(before: int = lists) -> bool:
                return bool(informer.health().ok and informer.stats.lists > before)

            if not wait_for(relisted, 300, 0.1):
                raise SystemExit("the pods informer did not work again within 300 s of a relist")
            time.sleep(5)
            gc.collect()
            records = state.pods()
            twice = sum(1 for record in records if record.obj is not informer.get_shared(record.name, record.namespace))
            rows.append({"round": round_, "rss_mib": round(rss_mib(), 1), "lists": informer.stats.lists,
                         "pods": len(records), "twice": twice})
        return rows
    finally:
        fleet.stop()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--in-process"]:
        if os.environ.get(BASELINE_TREE):
            without_editable_install()
        parser = argparse.ArgumentParser()
        parser.add_argument("--nodes", type=int, required=True)
        parser.add_argument("--rounds", type=int, required=True)
        args = parser.parse_args(argv[1:])
        print(json.dumps(measure(args.nodes, args.rounds)))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline-ref", default="0d81096")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    script = Path(__file__).resolve()
    found: dict[str, Any] = {}
    for label, tree in (("this tree", None), (args.baseline_ref, export_tree(args.baseline_ref))):
        print(f"[relist] {label}: {args.nodes} nodes, {args.rounds} relists", file=sys.stderr, flush=True)
        found[label] = run_tree(script, tree, ["--nodes", str(args.nodes), "--rounds", str(args.rounds)],
                                timeout=3600)
    if args.json:
        print(json.dumps(found, indent=2))
        return 0
    print(f"{'tree':<10} {'round':>5} {'RSS MiB':>8} {'pods':>7} {'twice':>7}")
    for label, rows in found.items():
        for row in rows:
            print(f"{label:<10} {row['round']:>5} {row['rss_mib']:>8} {row.get('pods', '-'):>7} "
                  f"{row.get('twice', '-'):>7}")
    print("\ntwice: the state's pod records whose object is not the informer's cached one (that pod held twice)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
