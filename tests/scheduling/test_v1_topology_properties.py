"""Properties of the v1 topology spread fields over many generated workloads (`scheduling/topology.py`).

* On v0.31's rules (Provisioners) the fields are not read: a plan with `matchLabelKeys`, `nodeTaintsPolicy` and
  `nodeAffinityPolicy` written is the plan with them removed — v1alpha5 behaviour cannot drift by them.
* On v1.14.1's rules `matchLabelKeys` is the pod's own label joined to the selector (`topology.go`
  `newForTopologies`): a Deployment whose pods carry `rev: X` plans the same with `matchLabelKeys: [rev]` as with
  `rev: X` written into its selector.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.model.taints import NO_SCHEDULE, Taint
from karpenter_policy.scheduling import COST, KARPENTER, Plan, Pod, Scheduler, SchedulerOptions, TopologyRules

from .cluster import Z3, make_pod, provisioner, requirement, spread, zones

PROPERTY = deterministic(100)
TAINT = Taint("dedicated", NO_SCHEDULE, "gpu")
TEMPLATES = [
    provisioner("default", requirement(wk.CAPACITY_TYPE, "In", "spot", "on-demand")),
    provisioner("tainted", zones(Z3), taints=[TAINT]),
]
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": NO_SCHEDULE}
POLICY = st.sampled_from([None, "Honor", "Ignore"])


@st.composite
def deployments(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1–3 Deployments (two may share an app label and differ in revision, as one rollout's old and new pods do):
    replicas, a revision label, one spread constraint (zone, hostname or capacity type) with the v1 fields drawn, maybe
    the tainted pool's toleration and a node selector on capacity type."""
    found = []
    for index in range(draw(st.integers(1, 3))):
        found.append(
            {
                "name": f"d{index}",
                "app": draw(st.sampled_from(["web", "api"])),
                "rev": draw(st.sampled_from(["r1", "r2"])),
                "replicas": draw(st.integers(1, 6)),
                "cpu": draw(st.sampled_from(["100m", "1", "2"])),
                "key": draw(st.sampled_from([wk.ZONE, wk.HOSTNAME, wk.CAPACITY_TYPE])),
                "max_skew": draw(st.integers(1, 2)),
                "match_label_keys": draw(st.booleans()),
                "taints": draw(POLICY),
                "affinity": draw(POLICY),
                "tolerates": draw(st.booleans()),
                "spot_only": draw(st.booleans()),
            }
        )
    return found


def _pods(drawn: list[dict[str, Any]], *, v1_fields: bool, explicit_rev: bool = False) -> list[Pod]:
    pods = []
    for d in drawn:
        labels = {"app": d["app"], "rev": d["rev"]}
        selector = {"app": d["app"], "rev": d["rev"]} if explicit_rev else {"app": d["app"]}
        constraint = spread(d["key"], d["max_skew"], labels=selector)
        if v1_fields:
            if d["match_label_keys"] and not explicit_rev:
                constraint["matchLabelKeys"] = ["rev"]
            if d["taints"] is not None:
                constraint["nodeTaintsPolicy"] = d["taints"]
            if d["affinity"] is not None:
                constraint["nodeAffinityPolicy"] = d["affinity"]
        options: dict[str, Any] = {"spread_constraints": [constraint]}
        if d["tolerates"]:
            options["tolerations"] = [TOLERATION]
        if d["spot_only"]:
            options["node_selector"] = {wk.CAPACITY_TYPE: "spot"}
        for i in range(d["replicas"]):
            pods.append(make_pod(d["cpu"], labels=labels, name=f"{d['name']}-{i}", **options))
    return pods


def _layout(plan: Plan) -> list[Any]:
    claims = [(c.template, sorted(p.key for p in c.pods), str(c.requirements)) for c in plan.claims]
    return [sorted(claims), sorted(plan.failures)]


def _plan(pods: list[Pod], rules: TopologyRules, strategy: str) -> list[Any]:
    return _layout(Scheduler(TEMPLATES, options=SchedulerOptions(strategy, rules)).solve(pods))


@PROPERTY
@given(drawn=deployments(), strategy=st.sampled_from([KARPENTER, COST]))
def test_v0_31_rules_do_not_read_the_v1_fields(drawn: list[dict[str, Any]], strategy: str) -> None:
    with_fields = _plan(_pods(drawn, v1_fields=True), TopologyRules.V0_31, strategy)
    assert with_fields == _plan(_pods(drawn, v1_fields=False), TopologyRules.V0_31, strategy)


@PROPERTY
@given(drawn=deployments(), strategy=st.sampled_from([KARPENTER, COST]))
def test_match_label_keys_is_the_pods_label_joined_to_the_selector(drawn: list[dict[str, Any]], strategy: str) -> None:
    for d in drawn:
        d["match_label_keys"] = True
    joined = _plan(_pods(drawn, v1_fields=True), TopologyRules.V1_14, strategy)
    assert joined == _plan(_pods(drawn, v1_fields=True, explicit_rev=True), TopologyRules.V1_14, strategy)
