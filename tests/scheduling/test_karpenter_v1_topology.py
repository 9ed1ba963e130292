"""Karpenter v1.14.1's topology spread fields, replayed against our scheduler on v1 rules (`TopologyRules.V1_14`).

The reference is `pkg/controllers/provisioning/scheduling/topology_test.go` (kubernetes-sigs/karpenter v1.14.1): the
`Context("MatchLabelKeys")`, `Context("NodeTaintsPolicy")` and `Context("NodeAffinityPolicy")` blocks of
`Describe("Topology")`. Each case names its Go `It` and the line it starts on, and asserts what the Go case asserts
(`ExpectSkew(...).To(ConsistOf(...))` with the constraint's own selector, before `matchLabelKeys` joins it). The world
around the scheduler is `cluster.py`, as for the v0.31 suites; the Go `nodePool` is the suites' default template.

Each case also runs on v0.31's rules, where the three fields do not exist: the skew it gives there is ours (v0.31
ignores the fields; every existing node's labels are domains), written beside the case so that the difference v1
makes is visible — and so that a v0.31 run cannot start reading them by accident.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from karpenter_policy.model import labels as wk
from karpenter_policy.model.taints import NO_SCHEDULE, Taint
from karpenter_policy.scheduling import NodeClaimTemplate, Pod, TopologyRules

from .cluster import HOSTNAME, LABELS, Cluster, cluster, make_pod, make_pods, provisioner, requirement, spread

GO_FILE = "kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/scheduling/topology_test.go"
SPREAD_LABEL = "fake-label"
TAINT_KEY = "taint-key"
MATCHED_LABEL = "test-label"
AFFINITY_LABEL = "selector"


def nodepool(name: str = "default", *terms: dict[str, Any], **options: Any) -> NodeClaimTemplate:
    """`test.NodePool`: the suites' default template, its nodes labelled as a NodePool's."""
    return provisioner(name, *terms, owner_label=wk.NODEPOOL, **options)


def with_policies(constraint: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A spread constraint with v1 fields (matchLabelKeys, nodeTaintsPolicy, nodeAffinityPolicy) added."""
    return {**constraint, **fields}


@dataclass(frozen=True)
class Case:
    """One Go `It`: its world (templates, static nodes), the pods it provisions in one `ExpectProvisioned`, the key
    it measures skew on, the Go assertion (v1) and what v0.31's rules give on the same input."""

    name: str
    line: int
    templates: Callable[[], list[NodeClaimTemplate]]
    pods: Callable[[], list[Pod]]
    key: str
    v1: list[int]
    v0_31: list[int] | None
    nodes: Sequence[tuple[dict[str, str], tuple[Taint, ...]]] = field(default=())


TAINT = Taint("taintname", NO_SCHEDULE, "taintvalue")
ONE_CPU_NODES = ({SPREAD_LABEL: "foo"}, {SPREAD_LABEL: "bar"})


def _match_label_keys_pods() -> list[Pod]:
    constraint = with_policies(spread(HOSTNAME), matchLabelKeys=[MATCHED_LABEL])
    return [
        *make_pods(2, labels={**LABELS, MATCHED_LABEL: "value-a"}, spread_constraints=[constraint]),
        *make_pods(2, labels={**LABELS, MATCHED_LABEL: "value-b"}, spread_constraints=[constraint]),
    ]


def _taint_pods(policy: str | None, count: int = 5, cpu: str | None = "1", **options: Any) -> list[Pod]:
    constraint = spread(SPREAD_LABEL)
    if policy is not None:
        constraint = with_policies(constraint, nodeTaintsPolicy=policy)
    return make_pods(count, cpu=cpu, labels=LABELS, spread_constraints=[constraint], **options)


def _affinity_pods(policy: str | None) -> list[Pod]:
    constraint = spread(SPREAD_LABEL)
    if policy is not None:
        constraint = with_policies(constraint, nodeAffinityPolicy=policy)
    return make_pods(
        5, cpu="1", labels=LABELS, node_selector={AFFINITY_LABEL: "value"}, spread_constraints=[constraint]
    )


def _discovered_templates() -> list[NodeClaimTemplate]:
    """"... when discovered from the nodepool": the default NodePool offers `foo`, a tainted one `bar`."""
    tainted = Taint(TAINT_KEY, NO_SCHEDULE, "taint-value")
    return [
        nodepool(
            "default",
            requirement(wk.CAPACITY_TYPE, "In", "spot", "on-demand"),
            requirement(SPREAD_LABEL, "In", "foo"),
        ),
        nodepool(
            "tainted",
            requirement(wk.CAPACITY_TYPE, "Exists"),
            requirement(SPREAD_LABEL, "In", "bar"),
            taints=[tainted],
        ),
    ]


def _exclusive_templates() -> list[NodeClaimTemplate]:
    return [
        nodepool(
            f"nodepool-{i}",
            requirement(wk.CAPACITY_TYPE, "Exists"),
            requirement(SPREAD_LABEL, "In", *domains),
            taints=[Taint(TAINT_KEY, NO_SCHEDULE, f"nodepool-{i}")],
        )
        for i, domains in enumerate((("foo", "bar"), ("foo", "baz")))
    ]


def _exclusive_pods() -> list[Pod]:
    constraint = with_policies(spread(SPREAD_LABEL), nodeTaintsPolicy="Honor")
    pods: list[Pod] = []
    for i in range(2):
        toleration = {"key": TAINT_KEY, "effect": NO_SCHEDULE, "value": f"nodepool-{i}"}
        pods += make_pods((i + 1) * 2, labels=LABELS, spread_constraints=[constraint], tolerations=[toleration])
    return pods


CASES = [
    Case(
        "MatchLabelKeys / should support matchLabelKeys",
        1139,
        lambda: [nodepool()],
        _match_label_keys_pods,
        HOSTNAME,
        [2, 2],
        [1, 1, 1, 1],
    ),
    Case(
        "MatchLabelKeys / should ignore unknown labels specified in matchLabelKeys",
        1168,
        lambda: [nodepool()],
        lambda: make_pods(
            4,
            labels=LABELS,
            spread_constraints=[with_policies(spread(HOSTNAME), matchLabelKeys=[MATCHED_LABEL])],
        ),
        HOSTNAME,
        [1, 1, 1, 1],
        [1, 1, 1, 1],
    ),
    Case(
        "NodeTaintsPolicy / should balance pods across a label (NodeTaintsPolicy=ignore)",
        1196,
        lambda: [nodepool(labels={SPREAD_LABEL: "baz"})],
        lambda: _taint_pods("Ignore"),
        SPREAD_LABEL,
        [1],
        [1],
        nodes=[(labels, (TAINT,)) for labels in ONE_CPU_NODES],
    ),
    Case(
        "NodeTaintsPolicy / should balance pods across a label (NodeTaintsPolicy=honor)",
        1267,
        lambda: [nodepool(labels={SPREAD_LABEL: "baz"})],
        lambda: _taint_pods("Honor"),
        SPREAD_LABEL,
        [5],
        [1],
        nodes=[(labels, (TAINT,)) for labels in ONE_CPU_NODES],
    ),
    Case(
        "NodeTaintsPolicy / should balance pods across a label when discovered from the nodepool "
        "(NodeTaintsPolicy=ignore)",
        1336,
        _discovered_templates,
        lambda: _taint_pods("Ignore", count=2, cpu=None),
        SPREAD_LABEL,
        [1],
        [1],
    ),
    Case(
        "NodeTaintsPolicy / should balance pods across a label when discovered from the nodepool "
        "(NodeTaintsPolicy=honor)",
        1392,
        _discovered_templates,
        lambda: _taint_pods("Honor", count=2, cpu=None),
        SPREAD_LABEL,
        [2],
        [1],
    ),
    Case(
        "NodeTaintsPolicy / should balance pods across a label when mutually exclusive NodePools (by taints) share "
        "domains (NodeTaintsPolicy=honor)",
        1448,
        _exclusive_templates,
        _exclusive_pods,
        SPREAD_LABEL,
        [1, 2, 3],
        None,  # v0.31: one group for both deployments; which pods stay pending depends on the queue
    ),
    Case(
        "NodeAffinityPolicy / should balance pods across a label (NodeAffinityPolicy=ignore)",
        1529,
        lambda: [nodepool(labels={SPREAD_LABEL: "baz", AFFINITY_LABEL: "value"})],
        lambda: _affinity_pods("Ignore"),
        SPREAD_LABEL,
        [1],
        [1],
        nodes=[({**labels, AFFINITY_LABEL: "mismatch"}, ()) for labels in ONE_CPU_NODES],
    ),
    Case(
        "NodeAffinityPolicy / should balance pods across a label (NodeAffinityPolicy=honor)",
        1596,
        lambda: [nodepool(labels={SPREAD_LABEL: "baz", AFFINITY_LABEL: "value"})],
        lambda: _affinity_pods("Honor"),
        SPREAD_LABEL,
        [5],
        [1],
        nodes=[({**labels, AFFINITY_LABEL: "mismatch"}, ()) for labels in ONE_CPU_NODES],
    ),
]


def _world(case: Case, strategy: str, rules: TopologyRules) -> Cluster:
    world = cluster(strategy, *case.templates(), topology=rules)
    for labels, taints in case.nodes:
        world.add_node(labels, allocatable={"cpu": "100m"}, taints=taints)
    world.provision()  # the Go case's empty `ExpectProvisioned`: the static nodes are known
    return world


@pytest.mark.parametrize("case", CASES, ids=[f"L{c.line}" for c in CASES])
def test_v1_topology_case(case: Case, strategy: str) -> None:
    """topology_test.go (v1.14.1), the `It` at `case.line`: the skew Karpenter v1.14.1 asserts."""
    world = _world(case, strategy, TopologyRules.V1_14)
    world.provision(*case.pods())
    assert world.skew(case.key) == case.v1, f"{GO_FILE}:{case.line} {case.name}"


@pytest.mark.parametrize("case", [c for c in CASES if c.v0_31 is not None], ids=lambda c: f"L{c.line}")
def test_the_same_case_on_v0_31_rules_ignores_the_v1_fields(case: Case, strategy: str) -> None:
    """A Provisioner run (v0.31 rules) on the same input: matchLabelKeys and the node inclusion policies are not read,
    so the skew is v0.31's."""
    assert case.v0_31 is not None
    world = _world(case, strategy, TopologyRules.V0_31)
    world.provision(*case.pods())
    assert world.skew(case.key) == case.v0_31


# --- defaults, and running pods on tainted nodes (no Go case of their own) -------------------------------------------


def test_unset_policies_take_v1_defaults_affinity_honored_taints_ignored(strategy: str) -> None:
    """nodeAffinityPolicy defaults to Honor (`NewTopologyGroup`): the L1596 world with the field unset gives L1596's
    skew; nodeTaintsPolicy defaults to Ignore: the L1196 world with it unset gives L1196's."""
    affinity = next(c for c in CASES if c.line == 1596)
    world = _world(affinity, strategy, TopologyRules.V1_14)
    world.provision(*_affinity_pods(None))
    assert world.skew(SPREAD_LABEL) == [5]
    taints = next(c for c in CASES if c.line == 1196)
    world = _world(taints, strategy, TopologyRules.V1_14)
    world.provision(*_taint_pods(None))
    assert world.skew(SPREAD_LABEL) == [1]


def test_honor_does_not_count_pods_running_on_nodes_whose_taints_the_pod_does_not_tolerate(strategy: str) -> None:
    """Two selected pods already run on a tainted node in domain foo (`countDomains` with the node filter). With
    nodeTaintsPolicy Honor they do not count: the two new pods spread one to foo, one to bar. With Ignore they count
    (foo 2, bar 0): both new pods go to bar."""
    for policy, expected in (("Honor", {"foo": 1, "bar": 1}), ("Ignore", {"bar": 2})):
        world = cluster(
            strategy, nodepool("default", requirement(SPREAD_LABEL, "In", "foo", "bar")), topology=TopologyRules.V1_14
        )
        tainted = world.add_node({SPREAD_LABEL: "foo"}, allocatable={"cpu": "10"}, taints=[TAINT])
        for pod in make_pods(2, cpu="100m", labels=LABELS, tolerations=[{"key": "taintname", "operator": "Exists"}]):
            world.bind(pod, tainted)
        constraint = with_policies(spread(SPREAD_LABEL), nodeTaintsPolicy=policy)
        new = make_pods(2, cpu="100m", labels=LABELS, spread_constraints=[constraint])
        world.provision(*new)
        placed: dict[str, int] = {}
        for pod in new:
            domain = world.scheduled(pod).labels[SPREAD_LABEL]
            placed[domain] = placed.get(domain, 0) + 1
        assert placed == expected, policy


def test_a_pod_is_built_with_its_v1_spread_fields() -> None:
    """The model keeps what was written (no defaults: each API's reader applies its own)."""
    pod = make_pod(
        labels=LABELS,
        spread_constraints=[
            with_policies(
                spread(HOSTNAME), matchLabelKeys=["app"], nodeTaintsPolicy="Honor", nodeAffinityPolicy="Ignore"
            ),
            spread(wk.ZONE),
        ],
    )
    first, second = pod.shape.topology.spread
    assert (first.match_label_keys, first.node_taints_policy, first.node_affinity_policy) == (
        ("app",),
        "Honor",
        "Ignore",
    )
    assert (second.match_label_keys, second.node_taints_policy, second.node_affinity_policy) == ((), None, None)
