"""What the controller benchmarks read of a running controller, whichever tree it comes from: this tree's runner
(built by `runner.assemble`: informers in its `feed`, a thread per controller in `workers`) or an earlier one's
(2947bfc's `Runner(controller, cluster)`: informers in its `view`, one loop of passes) — the adapter that lets
`scale.py --server-process --controller-baseline 2947bfc` drive the old controller through what it had, without
touching its tree. Only attributes both trees have are read; what a tree lacks reads as None, never as a figure.

The answer check of a launch-burst row (`launch_answer`) asks the same of either tree: every pod of the burst
bound, and no orphan — every live instance of the cluster in the fake cloud has a Node naming it, every Node of
ours an instance.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from _fleet import CLUSTER, wait_for

#: How long the answer check waits for the instances and the Nodes to agree once the burst is bound (a launch's
#: Node may be registered a moment after its pods are bound, or the reverse).
SETTLE = 30.0


def informers(runner: Any) -> dict[Any, Any]:
    """The runner's informers by kind (this tree: `runner.feed`; 2947bfc: `runner.view`); empty when neither."""
    for holder in ("feed", "view"):
        found = getattr(getattr(runner, holder, None), "informers", None)
        if isinstance(found, dict):
            return found
    return {}


def pod_informer(runner: Any, kind: Any) -> Any:
    """The informer of `kind` (the pods': `objects.POD`) of either tree's runner, or None."""
    return informers(runner).get(kind)


def orphans(cloud: Any, nodes: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Instances of the cluster that no Node names (by `spec.providerID`) and Nodes of ours (a providerID) whose
    instance is not live, each sorted: what a launch left behind. `cloud`: the fake cloud (either tree's
    `FakeCloudProvider.list`), `nodes`: the API server's Nodes."""
    live = {instance.provider_id for instance in cloud.list(CLUSTER)}
    named = {provider for node in nodes if (provider := (node.get("spec") or {}).get("providerID"))}
    return sorted(live - named), sorted(named - live)


def launch_answer(unbound: Callable[[], int], cloud: Any, list_nodes: Callable[[], list[dict[str, Any]]],
                  settle: float = SETTLE) -> str:
    """"ok", or what failed: pods of the burst left unbound, instances without a Node, Nodes without an instance —
    the instances and the Nodes given `settle` seconds to agree (registration follows a launch)."""
    left = unbound()
    found: list[tuple[list[str], list[str]]] = []

    def agree() -> bool:
        found[:] = [orphans(cloud, list_nodes())]
        return not found[0][0] and not found[0][1]

    wait_for(agree, settle, 0.5)
    without_node, without_instance = found[0]
    problems = []
    if left:
        problems.append(f"{left} pods of the burst unbound")
    if without_node:
        problems.append(f"{len(without_node)} instances without a Node (e.g. {without_node[0]})")
    if without_instance:
        problems.append(f"{len(without_instance)} Nodes without an instance (e.g. {without_instance[0]})")
    return "ok" if not problems else "failed: " + "; ".join(problems)
