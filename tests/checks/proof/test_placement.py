"""policy.proof.placement: which provisioner takes each workload (Karpenter's weight order, taints, requirements,
offerings, limits, resources with the DaemonSet overhead, relaxation), the reasons in words, and the overlap,
shadowed and limits findings. The last tests check the bit-mask algebra against a plain per-type filter."""

from __future__ import annotations

import random
from decimal import Decimal
from pathlib import Path
from textwrap import dedent, indent
from typing import Any

import pytest

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.catalog.table import CATALOG_KEYS
from karpenter_policy.checks.findings import Finding, Report
from karpenter_policy.checks.proof.placement import Placement, check_workloads, schedule, schedule_workloads
from karpenter_policy.checks.proof.provisioners import CheckedProvisioner
from karpenter_policy.checks.repository import check_paths
from karpenter_policy.checks.source.workloads import LocatedWorkload, read_workloads, workload_from_data
from karpenter_policy.model import labels as wk
from karpenter_policy.model.allocatable import NodeConfiguration, allocatable, to_units
from karpenter_policy.model.allocatable import capacity as node_capacity
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.model.requirements import Operator, Requirement
from karpenter_policy.model.taints import untolerated

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "workloads"
PROVIDER = (
    "  provider:\n"
    "    subnetSelector: {karpenter.sh/discovery: t}\n"
    "    securityGroupSelector: {karpenter.sh/discovery: t}\n"
)
GI = 2**30


def provisioner(name: str, body: str = "", weight: int | None = None) -> str:
    text = f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n"
    if weight is not None:
        text += f"  weight: {weight}\n"
    return text + indent(dedent(body), "  ") + PROVIDER


def requirements(*terms: str) -> str:
    """`key Op v1,v2` strings as a requirements block."""
    lines = ["requirements:"]
    for term in terms:
        key, operator, *rest = term.split()
        lines += [f"  - key: {key}", f"    operator: {operator}"]
        if rest:
            lines.append(f"    values: [{', '.join(repr(v) for v in rest[0].split(','))}]")
    return "\n".join(lines) + "\n"


def deployment(name: str, pod: str, kind: str = "Deployment") -> str:
    api = "batch/v1" if kind == "Job" else "apps/v1"
    body = indent(dedent(pod), "      ")
    return (
        f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n  template:\n    spec:\n"
        f"{body if body.strip() else '      containers: []'}\n"
    )


def run(
    tmp_path: Path, policies: list[str], workloads: list[str], catalog: Catalog | None = None
) -> tuple[Report, list[CheckedProvisioner], list[Placement]]:
    (tmp_path / "policies").mkdir(exist_ok=True)
    (tmp_path / "apps").mkdir(exist_ok=True)
    (tmp_path / "policies" / "p.yaml").write_text("---\n".join(policies))
    (tmp_path / "apps" / "a.yaml").write_text("---\n".join(workloads))
    report, checked = check_paths([str(tmp_path / "policies")], catalog)
    placements = check_workloads(report, checked, [str(tmp_path / "apps")], catalog).placements
    return report, checked, placements


def findings(report: Report, *rules: str) -> list[Finding]:
    return [f for f in report.sorted_findings() if f.rule in rules]


def reasons(placement: Placement) -> dict[str, str]:
    return {name: r.message for name, r in placement.reasons.items()}


# --- the seeds ----------------------------------------------------------------------------------------------


def test_the_seed_inflate_deployment_lands_on_the_spot_default_provisioner() -> None:
    report, checked = check_paths([str(EXAMPLES / "policies")])
    found = read_workloads([str(EXAMPLES / "apps" / "inflate.yaml")])
    [placement] = schedule_workloads(checked, found.workloads)
    assert placement.provisioner == "default" and placement.ref == "Deployment/inflate"
    assert placement.launch is not None and placement.launch.capacity_type == "spot"
    assert "c5.large" in placement.instance_types
    assert "c7a.medium" not in placement.instance_types  # 940m of allocatable cpu: less than the 1 vCPU asked for
    assert placement.requests == {"cpu": Decimal(1)}
    assert set(placement.reasons) == {"gpu", "batch"}  # tried before default (weights 50, 20), both tainted
    assert placement.reasons["gpu"].kind == "taint"


def test_the_spark_pod_templates_land_on_the_kspark_provisioner() -> None:
    _, checked = check_paths([str(EXAMPLES / "policies")])
    found = read_workloads([str(EXAMPLES / "apps")])
    placements = {p.workload.name: p for p in schedule_workloads(checked, found.workloads)}
    driver, executor = placements["spark-driver-pod-template"], placements["spark-executor-pod-template"]
    assert driver.provisioner == executor.provisioner == "kspark"
    assert driver.launch is not None and driver.launch.capacity_type == "on-demand"
    assert executor.launch is not None and executor.launch.capacity_type == "spot"
    assert driver.launch.zone == "us-east-1a"
    assert reasons(driver)["default"] == (
        'the pod requires label app, which its nodes never have (Karpenter: "label app does not have known values") '
        "and karpenter.sh/capacity-type In [on-demand] not in [spot]"
    )


# --- the reasons, in words ----------------------------------------------------------------------------------


def test_every_reason_of_the_issue_in_its_words(tmp_path: Path) -> None:
    policies = [
        provisioner("default"),
        provisioner(
            "gpu",
            "taints:\n  - {key: nvidia.com/gpu, value: 'true', effect: NoSchedule}\n"
            + requirements(
                "karpenter.k8s.aws/instance-family In g5", "karpenter.k8s.aws/instance-size In 2xlarge,4xlarge"
            ),
        ),
        provisioner("batch", "labels: {workload: batch}\n"),
    ]
    workloads = [
        deployment("arm", "nodeSelector: {kubernetes.io/arch: arm64}\ncontainers: []"),
        deployment("cuda", "containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]"),
        deployment("team", "nodeSelector: {team: ml}\ncontainers: []"),
        deployment(
            "llm",
            "tolerations: [{key: nvidia.com/gpu, operator: Exists}]\n"
            "containers: [{name: c, resources: {requests: {cpu: 96}, limits: {nvidia.com/gpu: 2}}}]",
        ),
        deployment("huge", "containers: [{name: c, resources: {requests: {cpu: 2000}}}]"),
    ]
    report, _, placements = run(tmp_path, policies, workloads)
    by_name = {p.workload.name: p for p in placements}
    assert not any(p.schedulable for p in placements)
    assert reasons(by_name["arm"])["default"] == "kubernetes.io/arch In [arm64] not in [amd64]"
    assert reasons(by_name["cuda"])["gpu"] == "taint nvidia.com/gpu=true:NoSchedule not tolerated"
    assert reasons(by_name["team"])["batch"] == (
        'the pod requires label team, which its nodes never have (Karpenter: "label team does not have known values")'
    )
    assert reasons(by_name["llm"])["gpu"] == (
        "no instance type has 96 vCPU and 2 GPUs under karpenter.k8s.aws/instance-size In [2xlarge, 4xlarge]"
    )
    assert reasons(by_name["huge"])["default"] == "no instance type in us-east-1 has 2000 vCPU"
    assert {r.kind for p in placements for r in p.reasons.values()} >= {"taint", "requirements", "resources"}
    errors = findings(report, "workload-unschedulable")
    assert len(errors) == 5
    arm = next(f for f in errors if f.object_ref == "Deployment/arm")
    assert (arm.file, arm.line, arm.column, arm.severity) == (str(tmp_path / "apps" / "a.yaml"), 6, 3, "error")
    assert arm.message.startswith("no provisioner can launch a node for it:\n  provisioner ")
    assert "provisioner default: kubernetes.io/arch In [arm64] not in [amd64]" in arm.message


def test_a_pod_that_fits_the_capacity_but_not_what_the_kubelet_leaves_says_the_reservations_are_the_cause(
    tmp_path: Path,
) -> None:
    """A kubeReserved memory of 900Gi leaves no type the 1Gi a pod asks, though every type of the family has that
    capacity: the reason names the kubelet's reservations, not a missing instance type."""
    policies = [
        provisioner(
            "reserved",
            "kubeletConfiguration: {kubeReserved: {memory: 900Gi}}\n"
            + requirements(
                "karpenter.k8s.aws/instance-family In m5", "karpenter.k8s.aws/instance-size In large,xlarge"
            ),
        )
    ]
    workloads = [deployment("web", "containers: [{name: c, resources: {requests: {cpu: 1, memory: 1Gi}}}]")]
    _, _, [placement] = run(tmp_path, policies, workloads)
    assert reasons(placement)["reserved"] == (
        "no instance type has 1 vCPU and 1Gi memory under karpenter.k8s.aws/instance-size In [large, xlarge]; 2 types"
        " (m5.large, …) have that capacity, but less allocatable once the kubelet's reservations are taken"
        " (kube-reserved, system-reserved, eviction thresholds: Karpenter's defaults or the kubelet settings')"
    )
    # The same pod asking more than any m5 large or xlarge has: the types are what is missing, no such note.
    workloads = [deployment("big", "containers: [{name: c, resources: {requests: {cpu: 1, memory: 100Gi}}}]")]
    _, _, [placement] = run(tmp_path, policies, workloads)
    assert "kubelet's reservations" not in reasons(placement)["reserved"]


def test_requirements_that_no_type_satisfies_together_are_named(tmp_path: Path) -> None:
    policies = [provisioner("amd", requirements("kubernetes.io/arch In amd64"))]
    workloads = [deployment("graviton", "nodeSelector: {karpenter.k8s.aws/instance-family: c7g}\ncontainers: []")]
    _, _, [placement] = run(tmp_path, policies, workloads)
    assert placement.reasons["amd"].kind == "instance-types"
    assert reasons(placement)["amd"] == (
        "no instance type satisfies kubernetes.io/arch In [amd64] and karpenter.k8s.aws/instance-family In [c7g]"
    )


def test_an_unproven_provisioner_takes_nothing(tmp_path: Path) -> None:
    policies = [
        provisioner("broken", requirements("kubernetes.io/arch In arm64", "karpenter.k8s.aws/instance-family In c5"))
    ]
    report, _, [placement] = run(tmp_path, policies, [deployment("web", "containers: []")])
    assert findings(report, "requirements-conflict")
    assert placement.reasons["broken"].kind == "unavailable"


def test_no_provisioner_at_all(tmp_path: Path) -> None:
    report, _, [placement] = run(tmp_path, [], [deployment("web", "containers: []")])
    assert (
        placement.message()
        == "no provisioner can launch a node for it: no Provisioner among the policies admits an instance type"
    )
    assert findings(report, "workload-unschedulable")


@pytest.mark.parametrize(("kinds", "noun"), [(("NodePool",), "NodePool"), (("NodePool", "Provisioner"), "pool")])
def test_with_only_invalid_pools_the_message_names_their_kind(
    tmp_path: Path, kinds: tuple[str, ...], noun: str,
) -> None:
    """A NodePool that fails validation is not checked: the pod is told that no NodePool (both kinds: no pool)
    takes it, the word of the policies the user wrote, not v0.31's Provisioner."""
    bad = {
        "NodePool": "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec: {weight: 500}\n",
        "Provisioner": "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\n"
                       "spec: {weight: 500}\n",
    }
    report, checked, [placement] = run(tmp_path, [bad[k] for k in kinds], [deployment("web", "containers: []")])
    assert not checked and findings(report, "schema")
    assert placement.message() == (
        f"no {noun} can launch a node for it: no {noun} among the policies admits an instance type")


# --- Karpenter's decision -----------------------------------------------------------------------------------


def test_the_highest_weight_provisioner_that_fits_wins(tmp_path: Path) -> None:
    policies = [
        provisioner("low", "", weight=1),
        provisioner("high", requirements("karpenter.k8s.aws/instance-size In large"), weight=90),
        provisioner("middle", "", weight=50),
    ]
    workloads = [
        deployment("small", "containers: [{name: c, resources: {requests: {cpu: 1}}}]"),
        deployment("big", "containers: [{name: c, resources: {requests: {cpu: 8}}}]"),
    ]
    report, _, [small, big] = run(tmp_path, policies, workloads)
    assert small.provisioner == "high" and small.candidates == ("high", "middle", "low")
    assert all(name.endswith(".large") for name in small.instance_types)
    assert big.provisioner == "middle" and big.reasons["high"].kind == "resources"
    assert set(big.reasons) == {"high"}  # only the provisioners tried before the one that takes it
    [shadowed] = findings(report, "shadowed")
    assert shadowed.object_ref == "Provisioner/low"
    assert "Provisioner/high (weight 90) takes 1" in shadowed.message
    assert "Provisioner/middle (weight 50) takes 1" in shadowed.message
    assert [r.line for r in shadowed.related] == [14, 28]


def test_equal_weights_overlap(tmp_path: Path) -> None:
    policies = [provisioner("a", "", weight=5), provisioner("b", "", weight=5)]
    workloads = [deployment("w1", "containers: []"), deployment("w2", "containers: []")]
    report, _, placements = run(tmp_path, policies, workloads)
    assert [p.provisioner for p in placements] == ["a", "a"]  # ties broken by name here, arbitrary in Karpenter
    assert placements[0].alternatives == ("b",)
    [overlap] = findings(report, "overlap")
    assert overlap.severity == "warning" and overlap.object_ref == "Provisioner/a"
    assert overlap.message.startswith("same weight (5) as Provisioner/b, and both can launch a node for Deployment/w1")
    assert "(and 1 other workload)" in overlap.message
    assert [r.line for r in overlap.related] == [14, 6]
    assert not findings(report, "shadowed")  # b loses on a tie, not to a higher weight


def test_a_preferred_term_steers_to_a_lower_weight_provisioner(tmp_path: Path) -> None:
    """Karpenter treats the heaviest preference as required first: arm64 is preferred, only `graviton` offers
    it, so the pod goes there although `general` weighs more."""
    policies = [
        provisioner("general", "", weight=50),
        provisioner("graviton", requirements("kubernetes.io/arch In arm64"), weight=10),
    ]
    pod = """\
        affinity:
          nodeAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
              - weight: 100
                preference:
                  matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]
        containers: []
        """
    report, _, [placement] = run(tmp_path, policies, [deployment("web", pod)])
    assert placement.provisioner == "graviton" and placement.relaxed == ()
    assert reasons(placement)["general"] == "kubernetes.io/arch In [arm64] not in [amd64]"
    assert not findings(report, "shadowed")


def test_relaxation_reaches_the_second_required_term_then_prefer_no_schedule(tmp_path: Path) -> None:
    policies = [
        provisioner("soft", "taints:\n  - {key: dedicated, value: x, effect: PreferNoSchedule}\n", weight=10),
    ]
    pod = """\
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]
                - matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
        containers: []
        """
    report, _, [placement] = run(tmp_path, policies, [deployment("web", pod)])
    assert placement.provisioner == "soft"
    assert placement.relaxed == ("dropped required nodeSelectorTerms[0]", "tolerated PreferNoSchedule taints")
    assert report.errors == 0


def test_prefer_no_schedule_is_relaxed_only_when_nothing_else_fits(tmp_path: Path) -> None:
    policies = [
        provisioner("soft", "taints:\n  - {key: dedicated, value: x, effect: PreferNoSchedule}\n", weight=50),
        provisioner("plain", "", weight=1),
    ]
    _, _, [placement] = run(tmp_path, policies, [deployment("web", "containers: []")])
    assert placement.provisioner == "plain" and placement.relaxed == ()


def test_zone_and_capacity_type_are_matched_on_offerings(tmp_path: Path) -> None:
    """A type sold as spot only in us-east-1b and on demand only in us-east-1a: a spot pod in us-east-1a has
    no offering although each requirement alone is met."""

    def it(name: str, offerings: list[Offering]) -> InstanceType:
        return InstanceType(name, 4, 16384, ("amd64",), max_enis=3, ipv4_per_eni=10, offerings=tuple(offerings))

    catalog = Catalog(
        "us-east-1",
        (
            it("m5.xlarge", [Offering("us-east-1a", "on-demand", 0.2), Offering("us-east-1b", "spot", 0.07)]),
            it("m6i.xlarge", [Offering("us-east-1b", "on-demand", 0.2)]),
        ),
    )
    policies = [provisioner("any", requirements("karpenter.sh/capacity-type In spot,on-demand"))]
    workloads = [
        deployment(
            "spot-a",
            "nodeSelector: {topology.kubernetes.io/zone: us-east-1a, karpenter.sh/capacity-type: spot}\ncontainers: []",
        ),
        deployment(
            "spot-b", "nodeSelector: {topology.kubernetes.io/zone: us-east-1b, karpenter.sh/capacity-type: spot}"
        ),
    ]
    _, _, [spot_a, spot_b] = run(tmp_path, policies, workloads, catalog)
    assert not spot_a.schedulable and spot_a.reasons["any"].kind == "instance-types"
    assert spot_b.instance_types == ("m5.xlarge",)
    assert spot_b.launch is not None and (spot_b.launch.zone, spot_b.launch.price) == ("us-east-1b", 0.07)


def test_daemonset_overhead_counts_only_where_the_daemonset_runs(tmp_path: Path) -> None:
    policies = [
        provisioner("small", requirements("node.kubernetes.io/instance-type In m5.large"), weight=10),
        provisioner(
            "tainted",
            "taints: [{key: t, effect: NoSchedule}]\n" + requirements("node.kubernetes.io/instance-type In m5.large"),
        ),
    ]
    daemons = [
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  template:\n    spec:\n"
        "      containers: [{name: a, resources: {requests: {cpu: 500m}}}]\n",
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: arm-only}\nspec:\n  template:\n    spec:\n"
        "      nodeSelector: {kubernetes.io/arch: arm64}\n"
        "      containers: [{name: a, resources: {requests: {cpu: 1}}}]\n",
    ]
    pod = "containers: [{name: c, resources: {requests: {cpu: 1500m}}}]"
    tolerating = "tolerations: [{key: t, operator: Exists}]\n" + pod
    _, _, placements = run(tmp_path, policies, [*daemons, deployment("web", pod), deployment("tolerant", tolerating)])
    web, tolerant = placements
    assert not web.schedulable
    assert reasons(web)["small"] == (
        "no instance type has 2 vCPU (of which DaemonSets agent take 0.5 vCPU) under "
        "node.kubernetes.io/instance-type In [m5.large]; 1 type (m5.large) has that capacity, but less allocatable"
        " once the kubelet's reservations are taken (kube-reserved, system-reserved, eviction thresholds: Karpenter's"
        " defaults or the kubelet settings')"
    )
    assert tolerant.provisioner == "tainted"  # the agent does not tolerate the taint: no overhead there
    assert tolerant.overhead == {} and tolerant.daemon_sets == ()


def test_limits_keep_types_out(tmp_path: Path) -> None:
    policies = [
        provisioner("capped", "limits: {resources: {cpu: 4}}\n", weight=10),
        provisioner(
            "none", "limits: {resources: {cpu: 1}}\n" + requirements("karpenter.k8s.aws/instance-family In m5")
        ),
    ]
    workloads = [deployment("web", "containers: [{name: c, resources: {requests: {cpu: 6}}}]")]
    report, _, [placement] = run(tmp_path, policies, workloads)
    assert not placement.schedulable
    assert reasons(placement)["none"] == "every instance type exceeds its limits.resources (cpu: 1)"
    assert reasons(placement)["capped"].startswith("no instance type has 6 vCPU under limits.resources (cpu: 4)")
    [limits] = findings(report, "limits")
    assert limits.object_ref == "Provisioner/none" and limits.severity == "warning" and limits.line == 17
    assert limits.message == (
        "limits.resources cpu: 1 is smaller than the smallest instance type the provisioner can launch "
        "(m5.large: 2 vCPU): Karpenter can never launch a node for it"
    )


def test_limits_warnings_come_without_workloads_too(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        provisioner(
            "gpu",
            "limits: {resources: {nvidia.com/gpu: 0}}\n" + requirements("karpenter.k8s.aws/instance-family In g5"),
        )
    )
    report, _ = check_paths([str(path)])
    [limits] = findings(report, "limits")
    assert "nvidia.com/gpu: 0" in limits.message and "(g5.xlarge: 1 GPU)" in limits.message


def test_the_provisioner_name_label_selects_a_provisioner(tmp_path: Path) -> None:
    policies = [provisioner("a", "", weight=50), provisioner("b", "", weight=1)]
    workloads = [deployment("web", "nodeSelector: {karpenter.sh/provisioner-name: b}\ncontainers: []")]
    _, _, [placement] = run(tmp_path, policies, workloads)
    assert placement.provisioner == "b"
    assert reasons(placement)["a"] == "karpenter.sh/provisioner-name In [b] not in [a]"


def test_identical_templates_are_decided_once_but_placed_each(tmp_path: Path) -> None:
    policies = [provisioner("default")]
    workloads = [deployment(f"w{i}", "containers: [{name: c, resources: {requests: {cpu: 1}}}]") for i in range(3)]
    _, _, placements = run(tmp_path, policies, workloads)
    assert [p.workload.name for p in placements] == ["w0", "w1", "w2"]
    assert len({p.instance_types for p in placements}) == 1


def test_placement_json(tmp_path: Path) -> None:
    _, _, [placement] = run(tmp_path, [provisioner("default")], [deployment("web", "containers: []")])
    data = placement.to_json()
    assert data["object"] == "Deployment/web" and data["provisioner"] == "default" and data["schedulable"]
    assert data["count"] == len(data["instance_types"]) > 0  # type: ignore[arg-type]
    assert "reasons" not in data and data["refused_by"] == {}


# --- the algebra against a plain filter ---------------------------------------------------------------------

_NEGATIVE = (Operator.NOT_IN, Operator.DOES_NOT_EXIST)


def plain_fit(
    checked: CheckedProvisioner, pod: LocatedWorkload, overhead: dict[str, int], catalog: Catalog
) -> set[str]:
    """The types of a provisioner that take the pod as written, type by type, without masks or caches."""
    p = checked.provisioner
    reqs = p.requirements.add(Requirement.new(wk.PROVISIONER_NAME, "In", [p.name]))
    attempt = pod.shape.attempts(False)[0]
    if untolerated(p.taints, attempt.tolerations) or not reqs.admits(attempt.requirements):
        return set()
    merged = reqs.intersection(attempt.requirements)
    zone, capacity = merged.get_or_exists(wk.ZONE), merged.get_or_exists(wk.CAPACITY_TYPE)
    node = NodeConfiguration.of(p.kubelet, None, None)
    limits = {n: to_units(n, v) for n, v in p.limits.items()}
    wanted = {n: to_units(n, v) for n, v in pod.shape.scheduling.resource_requests.items()}
    wanted["pods"] = 1
    for n, v in overhead.items():
        wanted[n] = wanted.get(n, 0) + v
    out = set()
    for name in checked.instance_types:
        it = catalog.get(name)
        assert it is not None
        labels = it.labels()
        keys = [k for k in attempt.requirements if k in CATALOG_KEYS and k not in (wk.OS,)]
        if not all(
            attempt.requirements[k].has(labels[k]) if k in labels else attempt.requirements[k].operator() in _NEGATIVE
            for k in keys
        ):
            continue
        if not any(o.available and zone.has(o.zone) and capacity.has(o.capacity_type) for o in it.offerings):
            continue
        have = node_capacity(it, node)
        if any(have.get(n, 0) > v for n, v in limits.items()):
            continue
        free = allocatable(it, node)
        if all(free.get(n, 0) >= w for n, w in wanted.items()):
            out.add(name)
    return out


def random_pod(rng: random.Random) -> dict[str, Any]:
    selector: dict[str, str] = {}
    choices = {
        "kubernetes.io/arch": ["amd64", "arm64"],
        "karpenter.sh/capacity-type": ["spot", "on-demand"],
        "topology.kubernetes.io/zone": ["us-east-1a", "us-east-1b", "us-east-1e"],
        "karpenter.k8s.aws/instance-family": ["c5", "m5", "g5", "c6a", "r6i", "c7g"],
        "karpenter.k8s.aws/instance-size": ["large", "2xlarge", "4xlarge", "9xlarge"],
        "app": ["kspark", "other"],
        "workload": ["batch"],
        "accelerator": ["nvidia"],
    }
    for key, values in choices.items():
        if rng.random() < 0.25:
            selector[key] = rng.choice(values)
    requests: dict[str, Any] = {"cpu": rng.choice(["100m", "1", "3", "15", "31", "64", "100"])}
    if rng.random() < 0.5:
        requests["memory"] = rng.choice(["512Mi", "4Gi", "30Gi", "120Gi", "1000Gi"])
    limits = {"nvidia.com/gpu": rng.choice([1, 2, 4, 8])} if rng.random() < 0.25 else {}
    tolerations = rng.choice(
        [
            [],
            [{"operator": "Exists"}],
            [{"key": "nvidia.com/gpu", "operator": "Exists"}],
            [{"key": "workload", "value": "batch"}],
        ]
    )
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests, "limits": limits}}]}
    if selector:
        spec["nodeSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    if rng.random() < 0.2:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]}
                            ]
                        }
                    ]
                }
            }
        }
    return spec


@pytest.mark.parametrize("seed", range(4))
def test_the_masks_agree_with_a_plain_filter(seed: int) -> None:
    catalog = load_catalog()
    _, checked = check_paths([str(EXAMPLES / "policies")], catalog)
    daemon = workload_from_data(
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "agent"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "a", "resources": {"requests": {"cpu": "300m", "memory": "300Mi"}}}]
                    }
                }
            },
        }
    )
    assert daemon is not None
    rng = random.Random(seed)
    pods = []
    for i in range(60):
        workload = workload_from_data(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}"}, "spec": random_pod(rng)}
        )
        assert workload is not None
        pods.append(workload)
    result = schedule(checked, [daemon, *pods], catalog)
    ordered = sorted(checked, key=lambda c: (-c.provisioner.weight, c.name))
    overhead: dict[str, dict[str, int]] = {c.name: {} for c in checked}
    for c in checked:  # the agent tolerates nothing: it runs on the untainted provisioners only
        if not c.provisioner.taints:
            overhead[c.name] = {n: to_units(n, v) for n, v in daemon.shape.scheduling.resource_requests.items()}
            overhead[c.name]["pods"] = 1
    schedulable = 0
    for workload, placement, could in zip(pods, result.placements, result.could_take, strict=True):
        if len(workload.shape.attempts(False)) > 1:
            continue  # the relaxed variants are covered elsewhere; here: the pod as written
        fits = {c.name: plain_fit(c, workload, overhead[c.name], catalog) for c in ordered}
        expected = [c.name for c in ordered if fits[c.name]]
        assert list(could) == expected, workload.shape
        assert placement.provisioner == (expected[0] if expected else None)
        if expected:
            schedulable += 1
            assert set(placement.instance_types) == fits[expected[0]]
        else:
            assert set(placement.reasons) == {c.name for c in checked}
            assert all(r.message for r in placement.reasons.values())
    assert schedulable > 0


def test_workloads_are_placed_in_their_order(tmp_path: Path) -> None:
    _, checked = check_paths([str(EXAMPLES / "policies")])
    found = read_workloads([str(EXAMPLES / "apps")])
    placements = schedule_workloads(checked, found.workloads)
    assert [p.workload for p in placements] == [w for w in found.workloads if not w.is_daemon_set]
    assert all(isinstance(p.workload, LocatedWorkload) for p in placements)
