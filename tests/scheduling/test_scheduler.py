"""The scheduler on the embedded us-east-1 catalog: the seed scenarios and each rule a user relies on."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from karpenter_policy.api.objects import Provisioner
from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk
from karpenter_policy.scheduling import (
    COST,
    KARPENTER,
    ExistingNode,
    InstanceTable,
    NodeClaimTemplate,
    Plan,
    Pod,
    Scheduler,
    SchedulerOptions,
    shape_of,
)
from karpenter_policy.scheduling.vectors import CPU_I, MEMORY_I, PODS_I, RESOURCES, fits, to_vector

STRATEGIES = (COST, KARPENTER)


@pytest.fixture(scope="module")
def table() -> InstanceTable:
    catalog = load_catalog()
    return InstanceTable(catalog.instance_types, catalog.region)


def provisioner(name: str, spec: Mapping[str, Any]) -> Provisioner:
    return Provisioner.from_document(
        {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": name}, "spec": dict(spec)}
    )


def template(table: InstanceTable, name: str, **spec: Any) -> NodeClaimTemplate:
    return NodeClaimTemplate.from_provisioner(table, provisioner(name, spec))


def pods(name: str, count: int, labels: Mapping[str, str] | None = None, start: int = 0, **spec: Any) -> list[Pod]:
    shape = shape_of(spec, "default", labels or {"app": name})
    return [Pod(f"{name}-{i}", shape, owner=f"Deployment/{name}", order=start + i) for i in range(count)]


def requests(cpu: str, memory: str | None = None, **extra: str) -> dict[str, Any]:
    wanted = {"cpu": cpu, **({"memory": memory} if memory else {}), **extra}
    return {"containers": [{"name": "app", "resources": {"requests": wanted, "limits": dict(extra)}}]}


def solve(templates: Sequence[NodeClaimTemplate], batch: Sequence[Pod], strategy: str = COST, **kwargs: Any) -> Plan:
    return Scheduler(templates, options=SchedulerOptions(strategy), **kwargs).solve(batch)


def assert_valid(plan: Plan, table: InstanceTable) -> None:
    """Every claim launches a type that holds its pods and satisfies its requirements, in an allowed offering."""
    for claim in plan.claims:
        launch = claim.launch
        assert launch is not None
        assert launch.instance_type in {o.instance_type for o in claim.options}
        assert claim.options == tuple(sorted(claim.options, key=lambda o: o.price)), "options cheapest first"
        assert fits(claim.requests, claim.allocatable), (claim.instance_type, claim.requests, claim.allocatable)
        assert claim.requirements.get_or_exists(wk.ZONE).has(launch.zone)
        assert claim.requirements.get_or_exists(wk.CAPACITY_TYPE).has(launch.capacity_type)
        assert table.mask_of(claim.requirements) >> table.position[launch.instance_type] & 1
        for pod in claim.pods:
            relaxed = plan.relaxed.get(pod.key, ())
            attempt = next(a for a in pod.shape.attempts(False) if a.relaxed == relaxed)
            assert claim.requirements.admits(attempt.requirements, wk.WELL_KNOWN_LABELS)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_seed_inflate_packs_ten_one_cpu_pods_onto_few_cheap_spot_nodes(table: InstanceTable, strategy: str) -> None:
    default = template(
        table,
        "default",
        requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
        limits={"resources": {"cpu": 1000}},
    )
    plan = solve([default], pods("inflate", 10, **requests("1")), strategy)
    assert not plan.failures
    assert plan.scheduled == 10
    assert len(plan.claims) <= 2
    assert {c.launch.capacity_type for c in plan.claims if c.launch} == {"spot"}
    if strategy == COST:  # 7 pods on a c6a.2xlarge and 3 on a c6a.xlarge, not all 10 on a c6a.4xlarge at $0.612/h
        assert plan.cost == pytest.approx(0.306 + 0.153)
    else:
        assert len({c.instance_type for c in plan.claims}) == 1
    assert sum(c.allocatable[CPU_I] for c in plan.claims) < 2 * 10_000, "right-sized: not double what they need"
    assert_valid(plan, table)


SPARK_FAMILIES = {"c5", "c5a", "c5d", "c5ad", "m5", "c6a"}
SPARK_SIZES = {"2xlarge", "4xlarge", "8xlarge", "9xlarge"}


@pytest.fixture(scope="module")
def kspark(table: InstanceTable) -> NodeClaimTemplate:
    return template(
        table,
        "kspark",
        labels={"app": "kspark"},
        limits={"resources": {"cpu": "2k"}},
        requirements=[
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand", "spot"]},
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": sorted(SPARK_FAMILIES)},
            {"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": sorted(SPARK_SIZES)},
            {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]},
        ],
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_seed_emr_spark_drivers_on_demand_executors_spot_on_the_allowed_families(
    table: InstanceTable, kspark: NodeClaimTemplate, strategy: str
) -> None:
    executor = {"nodeSelector": {"karpenter.sh/capacity-type": "spot", "app": "kspark"}, **requests("4", "7884Mi")}
    driver = {"nodeSelector": {"karpenter.sh/capacity-type": "on-demand", "app": "kspark"}, **requests("1", "2Gi")}
    batch = pods("exec", 50, {"spark-role": "executor"}, **executor)
    batch += pods("driver", 2, {"spark-role": "driver"}, start=50, **driver)
    plan = solve([kspark], batch, strategy)
    assert not plan.failures
    for claim in plan.claims:
        launch = claim.launch
        assert launch is not None and launch.zone == "us-east-1a"
        family, size = launch.instance_type.split(".")
        assert family in SPARK_FAMILIES and size in SPARK_SIZES
        roles = {pod.labels["spark-role"] for pod in claim.pods}
        assert roles in ({"executor"}, {"driver"})
        assert launch.capacity_type == ("spot" if roles == {"executor"} else "on-demand")
    assert_valid(plan, table)


def test_a_gpu_pod_lands_on_a_gpu_type_of_the_gpu_provisioner(table: InstanceTable) -> None:
    gpu = template(
        table,
        "gpu",
        weight=50,
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        requirements=[{"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["g", "p"]}],
    )
    default = template(table, "default")
    spec = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}], **requests("4", "16Gi")}
    spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    plan = solve([gpu, default], pods("train", 1, **spec) + pods("web", 3, **requests("500m", "1Gi"), start=1))
    assert not plan.failures
    by_template = {c.template: c for c in plan.claims}
    assert by_template["gpu"].allocatable[RESOURCES.index("nvidia.com/gpu")] >= 1
    assert {p.owner for p in by_template["gpu"].pods} == {"Deployment/train"}, "web pods do not tolerate the taint"
    assert_valid(plan, table)


def test_gpu_pods_take_the_type_cheapest_per_pod_not_one_node_that_holds_them_all(table: InstanceTable) -> None:
    """8 one-GPU pods: 8 × g6.xlarge ($0.80/h each), not the one g6.48xlarge that holds all 8 ($13.35/h)."""
    gpu = template(
        table,
        "gpu",
        taints=[{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
        requirements=[
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g6"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        ],
    )
    spec = {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}], **requests("2", "8Gi")}
    spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
    plan = solve([gpu], pods("inference", 8, **spec))
    assert not plan.failures
    assert {c.instance_type for c in plan.claims} == {"g6.xlarge"}
    assert plan.cost == pytest.approx(8 * 0.8048)
    assert_valid(plan, table)


def test_the_last_pods_do_not_open_a_node_of_their_own_when_one_node_holds_them_all(table: InstanceTable) -> None:
    """5 one-cpu pods: one c6a.2xlarge (7 slots) at $0.306/h rather than a c6a.xlarge (3) and another for the last
    2 at the same price: the claims of the tail are merged after packing."""
    default = template(
        table, "default", requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
    )
    plan = solve([default], pods("inflate", 5, **requests("1")))
    assert not plan.failures
    assert [(c.instance_type, len(c.pods)) for c in plan.claims] == [("c6a.2xlarge", 5)]
    assert_valid(plan, table)


def test_pods_kept_apart_stay_apart_when_the_rest_is_re_split(table: InstanceTable) -> None:
    """Three search pods that keep off each other's node, among 150 small pods: every search pod on a node of its
    own, every pod placed, and no dearer than Karpenter's rule."""
    default = template(
        table, "default", requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}]
    )
    apart = {"labelSelector": {"matchLabels": {"app": "search"}}, "topologyKey": "kubernetes.io/hostname"}
    search = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [apart]}}}
    batch = pods("search", 3, **search, **requests("2", "16Gi"))
    batch += pods("web", 100, start=3, **requests("250m", "512Mi"))
    batch += pods("api", 50, start=103, **requests("300m", "384Mi"))
    ours, theirs = solve([default], batch, COST), solve([default], batch, KARPENTER)
    assert not ours.failures
    assert sorted(sum(1 for p in c.pods if p.owner == "Deployment/search") for c in ours.claims)[-1] == 1
    assert ours.cost <= theirs.cost
    assert_valid(ours, table)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_pod_affinity_on_the_architecture_follows_its_arm64_target(table: InstanceTable, strategy: str) -> None:
    """Followers with pod affinity on kubernetes.io/arch to pods like themselves and an arm64-pinned target: the
    target is placed first (Karpenter's queue: it is larger), so the followers land on arm64 too."""
    both = template(
        table,
        "default",
        requirements=[
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]},
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["c6a", "c6g", "c7a", "c7g"]},
        ],
    )
    term = {"labelSelector": {"matchLabels": {"tier": "graviton"}}, "topologyKey": "kubernetes.io/arch"}
    follow = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}
    batch = pods("follower", 3, {"tier": "graviton"}, **follow, **requests("2", "2Gi"))
    batch += pods(
        "target", 1, {"tier": "graviton"}, start=3, nodeSelector={"kubernetes.io/arch": "arm64"}, **requests("4", "1Gi")
    )
    plan = solve([both], batch, strategy)
    assert not plan.failures
    arches = {c.requirements.get_or_exists("kubernetes.io/arch").describe_values() for c in plan.claims}
    assert arches == {"[arm64]"}, arches
    assert_valid(plan, table)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_limits_stop_new_nodes_and_say_so(table: InstanceTable, strategy: str) -> None:
    small = template(
        table,
        "small",
        limits={"resources": {"cpu": "16"}},
        requirements=[{"key": "karpenter.k8s.aws/instance-size", "operator": "In", "values": ["2xlarge"]}],
    )
    plan = solve([small], pods("batch", 12, **requests("3")), strategy)
    scheduled_cpu = sum(max(table.types[table.position[o.instance_type]].vcpu for o in c.options) for c in plan.claims)
    assert scheduled_cpu <= 16, "at most 16 vCPU of nodes, counting the largest each claim may launch"
    assert plan.failures
    message = next(iter(plan.failures.values())).message()
    assert "provisioner small:" in message and "limits.resources (cpu: 16)" in message


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_existing_capacity_is_used_before_new_nodes(table: InstanceTable, strategy: str) -> None:
    default = template(table, "default")
    allocatable, _ = to_vector(
        {"cpu": __import__("decimal").Decimal(8), "memory": __import__("decimal").Decimal(2**35)}
    )
    allocatable = tuple(110 if i == PODS_I else v for i, v in enumerate(allocatable))
    node = ExistingNode(
        name="ip-10-0-0-1",
        labels={wk.ZONE: "us-east-1a", wk.ARCH: "amd64", wk.OS: "linux", wk.INSTANCE_TYPE: "m5.2xlarge"},
        taints=(),
        allocatable=allocatable,
        requested=tuple(0 for _ in RESOURCES),
    )
    plan = solve([default], pods("web", 6, **requests("1", "1Gi")), strategy, existing=[node])
    assert [p.name for p in plan.existing["ip-10-0-0-1"]] == [f"web-{i}" for i in range(6)]
    assert not plan.claims


def test_weight_decides_which_provisioner_launches(table: InstanceTable) -> None:
    heavy = template(table, "preferred", weight=50, labels={"tier": "preferred"})
    light = template(table, "fallback", weight=1)
    plan = solve([light, heavy], pods("web", 4, **requests("1")))
    assert {c.template for c in plan.claims} == {"preferred"}


def test_a_preference_karpenter_cannot_meet_is_relaxed_and_said(table: InstanceTable) -> None:
    amd64_only = template(
        table, "default", requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]
    )
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 10,
                    "preference": {
                        "matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]
                    },
                }
            ]
        }
    }
    plan = solve([amd64_only], pods("web", 2, affinity=affinity, **requests("1")))
    assert not plan.failures
    assert plan.relaxed == {f"default/web-{i}": ("dropped the preferred term of weight 10",) for i in range(2)}


def test_daemonset_requests_count_on_every_node_they_run_on(table: InstanceTable) -> None:
    only_xlarge = template(
        table,
        "default",
        requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}],
    )
    daemon = Pod(
        "agent-x", shape_of(requests("1", "1Gi"), "kube-system", {"app": "agent"}), owner="DaemonSet/agent", daemon=True
    )
    # m5.xlarge: 4 vCPU, ~3.92 allocatable: three 1-cpu pods fit alone, but not next to a 1-cpu DaemonSet pod
    without = solve([only_xlarge], pods("web", 3, **requests("1")))
    with_daemon = solve([only_xlarge], pods("web", 3, **requests("1")), daemons=[daemon])
    assert len(without.claims) == 1
    assert len(with_daemon.claims) == 2
    for claim in with_daemon.claims:
        assert claim.requests[CPU_I] >= 1000 * (len(claim.pods) + 1)


def test_a_resource_no_instance_type_offers_fits_nowhere(table: InstanceTable) -> None:
    plan = solve([template(table, "default")], pods("fpga", 1, **requests("1", **{"example.com/fpga": "1"})))
    assert "no instance type offers example.com/fpga" in plan.failures["default/fpga-0"].message()


def test_host_ports_keep_pods_apart(table: InstanceTable) -> None:
    spec = requests("100m")
    spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    plan = solve([template(table, "default")], pods("ingress", 3, **spec))
    assert len(plan.claims) == 3 and all(len(c.pods) == 1 for c in plan.claims)


def test_max_pods_from_the_kubelet_configuration_caps_pods_per_node(table: InstanceTable) -> None:
    capped = template(table, "default", kubeletConfiguration={"maxPods": 10})
    plan = solve([capped], pods("tiny", 25, **requests("10m", "16Mi")))
    assert not plan.failures
    assert all(c.requests[PODS_I] <= 10 for c in plan.claims)
    assert len(plan.claims) == 3


def test_zone_spread_balances_pods_across_the_provisioners_zones(table: InstanceTable) -> None:
    three_zones = template(
        table,
        "default",
        requirements=[
            {
                "key": "topology.kubernetes.io/zone",
                "operator": "In",
                "values": ["us-east-1a", "us-east-1b", "us-east-1c"],
            }
        ],
    )
    spread = {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": wk.ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ],
        **requests("1"),
    }
    plan = solve([three_zones], pods("web", 9, **spread))
    zones: dict[str, int] = {}
    for claim in plan.claims:
        zone = claim.launch.zone if claim.launch else ""
        zones[zone] = zones.get(zone, 0) + len(claim.pods)
    assert zones == {"us-east-1a": 3, "us-east-1b": 3, "us-east-1c": 3}


def test_the_cost_strategy_is_no_dearer_than_karpenters_rule_on_a_mixed_batch(table: InstanceTable) -> None:
    default = template(table, "default")
    batch = pods("web", 120, **requests("250m", "512Mi"))
    batch += pods("api", 60, start=120, **requests("1", "2Gi"))
    batch += pods("cache", 30, start=180, **requests("500m", "6Gi"))
    batch += pods("cruncher", 20, start=210, **requests("3", "1Gi"))
    ours, theirs = solve([default], batch, COST), solve([default], batch, KARPENTER)
    assert not ours.failures and not theirs.failures
    assert ours.cost <= theirs.cost
    assert_valid(ours, table)
    assert_valid(theirs, table)


def test_the_same_input_gives_the_same_plan(table: InstanceTable) -> None:
    default = template(table, "default")

    def run() -> list[tuple[str, str, tuple[str, ...]]]:
        batch = pods("web", 40, **requests("250m", "512Mi")) + pods("api", 10, start=40, **requests("2", "4Gi"))
        plan = solve([default], batch)
        return [
            (c.instance_type, c.launch.zone if c.launch else "", tuple(p.name for p in c.pods)) for c in plan.claims
        ]

    assert run() == run()


def test_utilisation_is_reported_against_the_launch_type(table: InstanceTable) -> None:
    plan = solve([template(table, "default")], pods("web", 4, **requests("1", "1Gi")))
    claim = plan.claims[0]
    assert 0 < claim.cpu_utilisation() <= 1 and 0 < claim.memory_utilisation() <= 1
    assert claim.allocatable[MEMORY_I] > 0


def test_ephemeral_storage_is_checked_against_the_node_templates_root_volume(table: InstanceTable) -> None:
    spec = requests("1", **{"ephemeral-storage": "30Gi"})
    spec["containers"][0]["resources"]["limits"] = {}
    default = NodeClaimTemplate.from_provisioner(table, provisioner("default", {}))
    plan = solve([default], pods("scratch", 1, **spec))
    message = plan.failures["default/scratch-0"].message()
    assert "30Gi ephemeral storage" in message, message
    big_root = {
        "amiFamily": "AL2",
        "blockDeviceMappings": [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "100Gi"}}],
    }
    roomy = NodeClaimTemplate.from_provisioner(table, provisioner("default", {}), node_template=big_root)
    assert not solve([roomy], pods("scratch", 1, **spec)).failures


def test_ephemeral_storage_is_the_instance_store_under_raid0(table: InstanceTable) -> None:
    """aws instancetype suite_test.go:845 "should pack pods if the pod's ephemeral-storage exceeds node capacity and
    instance storage is mounted": a 5000Gi request fits no root volume, and under an EC2NodeClass's
    `instanceStorePolicy: RAID0` lands on a type whose instance store holds it (the test's fake types give
    m6idn.32xlarge; the catalog's cheapest such type here)."""
    spec = requests("1", **{"ephemeral-storage": "5000Gi"})
    spec["containers"][0]["resources"]["limits"] = {}
    plain = NodeClaimTemplate.from_provisioner(table, provisioner("default", {}), node_template={"amiFamily": "AL2023"})
    assert "default/scratch-0" in solve([plain], pods("scratch", 1, **spec)).failures
    raid0 = {"amiFamily": "AL2023", "instanceStorePolicy": "RAID0"}
    striped = NodeClaimTemplate.from_provisioner(table, provisioner("default", {}), node_template=raid0)
    plan = solve([striped], pods("scratch", 1, **spec))
    assert not plan.failures
    assert_valid(plan, table)
    (claim,) = plan.claims
    launched = load_catalog().get(claim.instance_type)
    assert launched is not None and launched.local_nvme_gib * 10**9 > 5000 * 2**30
