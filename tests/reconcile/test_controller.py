"""The controller on an in-memory cluster and the in-memory cloud: batching, what it launches, the Nodes it
registers, binding, existing capacity, DaemonSets, limits, unschedulable pods, launches in flight, capacity
errors. Constraint sets are those `compile` writes for examples/workloads/policies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.errors import CloudError
from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.constraints import DirectorySource
from karpenter_policy.reconcile.state.cluster import ClusterState
from karpenter_policy.reconcile.state.feed import FeedHealth, StateFeed, WatchFeed
from karpenter_policy.scheduling.plan import one_line

from .conftest import CLUSTER, MakeHarness, fake_cloud
from .support import (
    ROOT,
    FakeClock,
    Harness,
    compile_policies,
    container,
    cpu_of,
    create_all,
    daemon_set,
    inflate,
    label,
    millicores,
    pod,
    replicas,
    run_cli,
)

DEFAULT_HASH_KEY = "karpenter-policy/constraint-set-hash"


def test_a_batch_waits_for_the_idle_time_then_launches_one_node_for_the_burst(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0, batch_max=10.0)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    first = h.step()
    assert not first.scheduled and h.controller.batcher.due() == h.clock.now + 1.0  # 1 s of quiet to close
    h.clock.advance(0.6)
    create_all(h.cluster, objects.POD, inflate(3, 2))  # more pods arrive: the window is extended
    h.step()
    h.clock.advance(0.6)
    assert not h.step().scheduled, "0.6 s after the last pod: still waiting"
    h.clock.advance(0.5)
    result = h.step()
    assert result.scheduled and result.pending == 5
    assert len(result.launched) == 1 and len(result.launched[0].pods) == 5
    assert h.unbound() == []


def test_a_steady_trickle_is_cut_at_the_maximum_batch_time(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0, batch_max=3.0)
    for i in range(10):  # a pod every 0.5 s never leaves 1 s of quiet
        create_all(h.cluster, objects.POD, inflate(i, 1))
        result = h.step()
        if result.scheduled:
            break
        h.clock.advance(0.5)
    assert result.scheduled, "the batch closes 3 s after it opened"
    assert result.batch is not None and result.batch.seconds == 3.0


def test_inflate_scaled_0_5_10_on_the_spot_default_provisioner(make_harness: MakeHarness) -> None:
    h = make_harness()
    assert not h.step().scheduled and h.nodes() == []  # replicas: 0
    create_all(h.cluster, objects.POD, inflate(0, 5))
    first = h.batch()
    create_all(h.cluster, objects.POD, inflate(5, 5))
    second = h.batch()

    assert h.unbound() == []
    nodes = h.nodes()
    assert 1 <= len(nodes) <= 3, "few nodes for ten 1-vCPU pods"
    for node in nodes:
        assert label(node, "karpenter.sh/provisioner-name") == "default"
        assert label(node, "karpenter.sh/capacity-type") == "spot"
        assert label(node, "karpenter.k8s.aws/instance-category") in ("c", "m", "r")
    assert sum(cpu_of(n) for n in nodes) <= 16, "no node much larger than the pods need"
    assert [p.node for p in first.launched] and all(len(r.pods) for r in second.launched)
    launched = [n for r in (first, second) for n in r.launched]
    assert len({n.instance_id for n in launched}) == len(launched) == len(nodes)
    messages = h.messages()
    assert "found 5 provisionable pod(s)" in messages
    assert "computed new node(s) to fit pod(s)" in messages
    node = launched[0]
    assert (
        f"launched instance {node.instance_id}, type {node.instance_type}, zone {node.zone}, capacity spot"
        in messages
    )
    assert f"Bound 5 pod(s) to node {node.node}" in messages


def test_the_node_carries_labels_taints_finalizer_and_the_shape_of_its_type(make_harness: MakeHarness) -> None:
    h = make_harness()
    create_all(h.cluster, objects.POD, replicas(
        "nightly", 0, 2, containers=[container("2", "4Gi")],
        tolerations=[{"key": "workload", "value": "batch", "effect": "NoSchedule"}],
        nodeSelector={"workload": "batch"},
    ))
    result = h.batch()
    (launched,) = result.launched
    assert launched.provisioner == "batch"
    # The node as registered, before the kubelet joined: read it from the cluster.
    node = h.node(launched.node)
    labels = objects.labels(node)
    instance_type = launched.instance_type
    family, size = instance_type.split(".")
    assert {
        "karpenter.sh/provisioner-name": "batch",
        "node.kubernetes.io/instance-type": instance_type,
        "topology.kubernetes.io/zone": launched.zone,
        "topology.kubernetes.io/region": "us-east-1",
        "karpenter.sh/capacity-type": "spot",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": launched.node,
        "karpenter.k8s.aws/instance-family": family,
        "karpenter.k8s.aws/instance-size": size,
        "workload": "batch",  # the provisioner's label
    }.items() <= labels.items()
    assert int(labels["karpenter.k8s.aws/instance-generation"]) > 5
    instance_labels = ("instance-cpu", "instance-memory", "instance-pods", "instance-hypervisor")
    assert {f"karpenter.k8s.aws/{key}" for key in instance_labels} <= set(labels)
    assert node["spec"]["taints"] == [{"key": "workload", "value": "batch", "effect": "NoSchedule"}]
    assert objects.finalizers(node) == ["karpenter.sh/termination"]
    assert node["spec"]["providerID"] == f"aws:///{launched.zone}/{launched.instance_id}"
    assert h.controller.loaded is not None
    batch_set = next(s for s in h.controller.loaded.sets if s.name == "batch")
    assert objects.annotations(node)[DEFAULT_HASH_KEY] == batch_set.hash  # what drift will compare
    capacity, allocatable = node["status"]["capacity"], node["status"]["allocatable"]
    assert int(capacity["cpu"]) == int(labels["karpenter.k8s.aws/instance-cpu"])
    assert capacity["pods"] == labels["karpenter.k8s.aws/instance-pods"]
    assert 0 < millicores(allocatable["cpu"]) < 1000 * int(capacity["cpu"]), "less the kubelet's reservations"
    # The kubelet joins: Ready, then the controller labels it initialized.
    h.step()
    assert label(h.node(launched.node), "karpenter.sh/initialized") == "true"


def test_startup_taints_are_registered_and_ignored_while_the_node_starts(
    make_harness: MakeHarness, tmp_path: Path
) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    default = yaml.safe_load((ROOT / "examples/workloads/policies/default.yaml").read_text())
    cilium = {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
    default["spec"]["startupTaints"] = [cilium]
    (policies / "default.yaml").write_text(yaml.safe_dump(default))
    shutil.copy(ROOT / "examples/workloads/policies/nodetemplates.yaml", policies)  # its providerRef's template
    h = make_harness(source=DirectorySource(compile_policies(policies, tmp_path / "build")))
    create_all(h.cluster, objects.POD, inflate(0, 2))
    h.kubelet.ready_after = 60.0  # the node stays NotReady, its startup taint on, for a while
    first = h.batch()
    (launched,) = first.launched
    node = h.node(launched.node)
    assert node["spec"]["taints"] == [cilium]
    # Two more pods fit the starting node: they go there, though it still has its startup taint.
    create_all(h.cluster, objects.POD, inflate(2, 1))
    second = h.batch()
    assert second.launched == [] and second.bound == {launched.node: ("default/inflate-2",)}


def test_pods_go_to_existing_capacity_first_and_nodes_not_ours_are_never_changed(make_harness: MakeHarness) -> None:
    h = make_harness()
    group_node = {
        "metadata": {
            "name": "ip-192-168-0-10.ec2.internal",
            "labels": {
                "eks.amazonaws.com/nodegroup": "eks-karpenter-demo-ng",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m5.large",
                "topology.kubernetes.io/zone": "us-east-1a",
            },
        },
        "spec": {"providerID": "aws:///us-east-1a/i-0managed"},
        "status": {
            "allocatable": {"cpu": "1930m", "memory": "7220Mi", "pods": "29", "ephemeral-storage": "18Gi"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    created = h.cluster.create(objects.NODE, group_node)
    create_all(h.cluster, objects.POD, inflate(0, 3))  # 1 vCPU each: one fits on the managed node
    result = h.batch()
    assert result.bound.get(group_node["metadata"]["name"]) == ("default/inflate-0",)
    assert len(result.launched) == 1 and len(result.launched[0].pods) == 2
    after = h.node(group_node["metadata"]["name"])
    assert objects.resource_version(after) == objects.resource_version(created), "the managed node is not written"


def test_daemonset_pods_are_counted_on_every_new_node(make_harness: MakeHarness) -> None:
    h = make_harness()
    agent = daemon_set("node-agent", "monitoring", "2500m", "256Mi", tolerations=[{"operator": "Exists"}])
    h.cluster.create(objects.DAEMON_SET, agent)
    create_all(h.cluster, objects.POD, inflate(0, 2))
    result = h.batch()
    (launched,) = result.launched
    node = h.node(launched.node)
    # 4 vCPU (3,920m allocatable) would hold the pods alone; with the agent's 2,500m it takes 8.
    assert millicores(node["status"]["allocatable"]["cpu"]) >= 2000 + 2500, "room for the 2 pods and the agent"
    assert 'launching node with 2 pod(s) requesting {"cpu":"4500m",' in "\n".join(h.messages())


def test_limits_are_respected_and_the_pods_beyond_them_say_why(make_harness: MakeHarness) -> None:
    h = make_harness()
    selector = {"karpenter.sh/provisioner-name": "default"}  # no other provisioner may take them
    create_all(h.cluster, objects.POD, replicas("inflate", 0, 1100, containers=[container("1")], nodeSelector=selector))
    result = h.batch()
    assert {label(n, "karpenter.sh/provisioner-name") for n in h.nodes()} == {"default"}
    assert sum(cpu_of(n) for n in h.nodes()) <= 1000, "`limits: cpu: 1000`"
    pending = h.unbound()
    assert 100 <= len(pending) < 1100 and len(result.unschedulable) == len(pending)
    message = next(iter(result.unschedulable.values()))
    assert "provisioner default:" in message and "cpu: 1000" in message


def test_pods_beyond_a_provisioners_limits_go_to_the_next_one_that_takes_them(make_harness: MakeHarness) -> None:
    h = make_harness()
    create_all(h.cluster, objects.POD, inflate(0, 1100))  # `default` (weight 10) holds 1,000 vCPU
    h.batch()
    assert h.unbound() == []
    by_provisioner: dict[str, float] = {}
    for node in h.nodes():
        name = label(node, "karpenter.sh/provisioner-name") or ""
        by_provisioner[name] = by_provisioner.get(name, 0) + cpu_of(node)
    assert by_provisioner["default"] <= 1000 < sum(by_provisioner.values())
    assert set(by_provisioner) == {"default", "kspark"}  # kspark's label does not keep pods without a selector out


def test_an_unschedulable_pod_gets_the_event_check_gives(make_harness: MakeHarness) -> None:
    h = make_harness()
    path = ROOT / "examples/workloads/negative/gpu-without-toleration.yaml"
    h.cluster.create(objects.POD, yaml.safe_load(path.read_text()))
    result = h.batch()
    assert result.launched == []
    checked = run_cli("check", "examples/workloads/policies", "--workloads", str(path), "--output", "json")
    report = json.loads(checked.stdout)
    (finding,) = [f for f in report["findings"] if f["rule"] == "workload-unschedulable"]
    (event,) = h.events("FailedScheduling")
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == "cuda-smoke-test"
    assert event["message"] == finding["message"] == result.unschedulable["ml/cuda-smoke-test"]
    # the Event holds one reason per line, the most relevant first (#27); the log line says it on one line
    assert event["message"].split("\n")[:3] == [
        "no provisioner can launch a node for it:",
        "  provisioner gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated",
        '    fix: add tolerations: [{key: nvidia.com/gpu, operator: Equal, value: "true", effect: NoSchedule}] to the '
        "pod spec (and nodeSelector: {accelerator: nvidia} to keep it on these nodes); this provisioner then takes it",
    ]
    logged = f"could not schedule pod, {one_line(finding['message'])}"
    assert logged in h.messages() and "\n" not in logged
    assert logged.startswith("could not schedule pod, no provisioner can launch a node for it: provisioner gpu: taint")
    # A retry later reports the same reason once: the Event is bumped, not duplicated, and not logged again.
    h.clock.advance(30)
    h.step()
    assert len(h.events("FailedScheduling")) == 1
    assert h.messages().count(logged) == 1


class PausableFeed:
    """An informer cache that can stop catching up (`paused`): it stops following the cluster after a moment."""

    def __init__(self, feed: StateFeed) -> None:
        self.feed = feed
        self.state = feed.state
        self.paused = False

    def sync(self) -> None:
        if not self.paused:  # nothing moves in a cache that is stuck
            self.feed.sync()

    def health(self) -> FeedHealth:
        return self.feed.health()


def test_a_second_batch_never_launches_again_for_pods_planned_onto_a_node_in_flight(
    make_harness: MakeHarness,
) -> None:
    cluster = MemoryCluster()
    feed = PausableFeed(WatchFeed(cluster, ClusterState()))
    h = make_harness(cluster=cluster, feed=lambda _: feed)
    create_all(h.cluster, objects.POD, inflate(0, 5))
    first = h.batch()
    assert len(first.launched) == 1
    feed.paused = True  # the state keeps showing the 5 pods pending, and no node
    assert len(h.controller.state.pending()) == 5
    h.clock.advance(30)  # a retry would be due, and the state still shows the 5 pods pending
    again = h.step()
    assert again.pending == 0 and again.launched == []
    assert len(h.cloud.requests) == 1, "one launch request, ever"


def test_insufficient_capacity_on_the_cheapest_offering_falls_back_in_the_same_pass(
    make_harness: MakeHarness, clock: FakeClock
) -> None:
    cloud = fake_cloud(clock, ["m5.large", "m5.xlarge", "c5.large", "c5.xlarge", "r5.large"])
    h = make_harness(cloud=cloud)
    create_all(h.cluster, objects.POD, inflate(0, 1))
    cheapest = ("c5.large", "us-east-1a", "spot")
    cloud.fail_capacity(*cheapest)
    result = h.batch()
    assert len(result.plans) == 1, "one plan: the provider tried the next offering itself"
    (launched,) = result.launched
    assert (launched.instance_type, launched.zone) != cheapest[:2]
    assert cloud.attempts[0] == next(o for o in cloud.requests[0].options if (o.instance_type, o.zone) == cheapest[:2])
    assert h.unbound() == []
    assert any("fell back to the next offering after insufficient capacity" in m for m in h.messages())
    exposition = h.controller.metrics.exposition().decode()
    assert 'karpenter_policy_insufficient_capacity_total{capacity_type="spot",provisioner="default"} 1.0' in exposition


def test_a_claim_whose_every_offering_lacks_capacity_is_planned_again_in_the_same_pass(
    make_harness: MakeHarness, clock: FakeClock
) -> None:
    cloud = fake_cloud(clock, ["c5.large", "m5.large", "c5.xlarge", "m5.xlarge", "c5.2xlarge"])
    h = make_harness(cloud=cloud)
    create_all(h.cluster, objects.POD, inflate(0, 1))
    for name in ("c5.large", "m5.large"):  # no capacity for the types the first plan picks, in any zone
        for zone in {o.zone for o in load_catalog().get(name).offerings}:  # type: ignore[union-attr]
            cloud.fail_capacity(name, zone, "spot")
    result = h.batch()
    assert len(result.plans) == 2, "planned, refused, planned again"
    assert {o.instance_type for o in cloud.requests[0].options} == {"c5.large", "m5.large"}
    (launched,) = result.launched
    assert launched.instance_type not in ("c5.large", "m5.large")
    assert h.unbound() == []
    assert any(m.startswith("could not launch node, ") and "insufficient capacity" in m for m in h.messages())
    exposition = h.controller.metrics.exposition().decode()
    errors = 'karpenter_policy_launch_errors_total{provisioner="default",reason="insufficient_capacity"} 1.0'
    assert errors in exposition


def test_a_cloud_error_leaves_the_pods_pending_and_they_are_retried(make_harness: MakeHarness) -> None:
    h = make_harness(retry_interval=10.0)
    h.cloud.fail_next("create", CloudError("fake://cloud", "connection refused", "CreateFleet"))  # type: ignore[attr-defined]
    create_all(h.cluster, objects.POD, inflate(0, 2))
    failed = h.batch()
    assert failed.launched == [] and failed.errors and len(h.unbound()) == 2
    assert failed.due == h.clock.now + 10.0
    retried = h.batch()
    assert len(retried.launched) == 1 and h.unbound() == []


def test_a_restarted_controller_registers_the_instance_it_launched_instead_of_launching_again(
    make_harness: MakeHarness,
) -> None:
    h = make_harness()
    create_all(h.cluster, objects.POD, inflate(0, 3))
    first = h.batch()
    (launched,) = first.launched
    # The controller stopped after CreateFleet, before the Node was written: the Node is gone, the instance not.
    h.cluster.patch(objects.NODE, launched.node, {"metadata": {"finalizers": None}})
    h.cluster.delete(objects.NODE, launched.node)
    for p in h.pods():
        h.cluster.delete(objects.POD, objects.name(p))
    create_all(h.cluster, objects.POD, inflate(0, 3))
    restarted = make_harness(cloud=h.cloud, cluster=h.cluster)
    result = restarted.batch()
    assert result.launched == [] and len(h.cloud.requests) == 1  # type: ignore[attr-defined]
    # The pods wait for the adopted node's kubelet to join (it was not launched for them), then go there.
    assert result.held == {launched.node: ("default/inflate-0", "default/inflate-1", "default/inflate-2")}
    restarted.batch()
    assert restarted.unbound() == [] and restarted.node(launched.node)
    assert len(h.cloud.requests) == 1  # type: ignore[attr-defined]
    registered = f"registered node {launched.node} for instance {launched.instance_id}"
    assert any(m.startswith(registered) for m in h.messages())


def test_an_adopted_instance_is_a_machine_registered_not_a_node_created(make_harness: MakeHarness) -> None:
    """`karpenter_nodes_created` counts the nodes this controller launched; an instance launched before a restart
    and adopted (its Node registered now) is counted as a machine registered only."""
    h = make_harness()
    create_all(h.cluster, objects.POD, inflate(0, 3))
    (launched,) = h.batch().launched
    assert h.controller.metrics.registry.get_sample_value(
        "karpenter_nodes_created", {"nodepool": "", "provisioner": "default"}) == 1
    h.cluster.patch(objects.NODE, launched.node, {"metadata": {"finalizers": None}})
    h.cluster.delete(objects.NODE, launched.node)  # stopped after CreateFleet, before the Node was written
    restarted = make_harness(cloud=h.cloud, cluster=h.cluster)
    restarted.step()
    assert restarted.node(launched.node), "adopted"
    registry = restarted.controller.metrics.registry
    assert registry.get_sample_value("karpenter_machines_registered", {"provisioner": "default"}) == 1
    assert not registry.get_sample_value("karpenter_nodes_created", {"nodepool": "", "provisioner": "default"})
    assert not registry.get_sample_value("karpenter_machines_launched", {"provisioner": "default"})


def test_the_client_token_is_the_same_for_the_same_pods(make_harness: MakeHarness) -> None:
    h = make_harness()
    create_all(h.cluster, objects.POD, inflate(0, 2))
    h.batch()
    (request,) = h.cloud.requests  # type: ignore[attr-defined]
    assert request.client_token.startswith("default-") and request.cluster_name == CLUSTER
    assert request.constraint_set_hash == next(s.hash for s in h.controller.loaded.sets if s.name == "default")  # type: ignore[union-attr]



def plans_ahead(h: Harness, used: str) -> float:
    value = h.controller.metrics.registry.get_sample_value("karpenter_policy_plans_ahead_total", {"used": used})
    return value or 0.0


def test_the_batch_is_planned_ahead_while_quiet_and_the_plan_used_when_nothing_changed(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(batch_idle=1.0)
    # three 1-vCPU pods: one c6a.xlarge (four go cheaper on a c6a.xlarge and a c6a.large than on one c6a.2xlarge)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    first = h.step()
    assert first.due == h.clock.now + 0.25, "the next pass plans ahead once the burst has been quiet a moment"
    h.clock.advance(0.25)
    ahead = h.step()
    assert not ahead.scheduled and h.cloud.requests == []  # planned, nothing launched  # type: ignore[attr-defined]
    h.clock.advance(0.75)
    closed = h.step()
    assert closed.scheduled and len(closed.launched) == 1 and h.unbound() == []
    assert (plans_ahead(h, "true"), plans_ahead(h, "false")) == (1.0, 0.0)


def test_a_pod_arriving_after_the_plan_ahead_is_in_the_batch(make_harness: MakeHarness) -> None:
    h = make_harness(batch_idle=1.0)
    create_all(h.cluster, objects.POD, inflate(0, 4))
    h.step()
    h.clock.advance(0.25)
    h.step()  # planned ahead for 4 pods
    h.clock.advance(0.5)
    create_all(h.cluster, objects.POD, inflate(4, 4))  # 4 more: the plan ahead is stale
    h.step()
    closed = h.batch()
    assert closed.pending == 8 and h.unbound() == []
    assert sum(len(n.pods) for n in closed.launched) == 8
    assert plans_ahead(h, "true") + plans_ahead(h, "false") >= 1


def unschedulable(obj: dict[str, object]) -> dict[str, object]:
    """The pod as kube-scheduler leaves it when no node fits: PodScheduled=False, reason Unschedulable."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/3 nodes fit"}
    return {**obj, "status": {"phase": "Pending", "conditions": [condition]}}


def test_with_kube_scheduler_only_pods_it_marked_unschedulable_are_provisioned_for(make_harness: MakeHarness) -> None:
    h = make_harness(unschedulable_only=True, bind_existing=False)
    marked = [unschedulable(p) for p in inflate(0, 2)]
    fresh = inflate(2, 1)  # kube-scheduler has not looked at it yet: an existing node may well take it
    create_all(h.cluster, objects.POD, [*marked, *fresh])
    result = h.batch()
    assert result.pending == 2 and sum(len(n.pods) for n in result.launched) == 2
    assert h.unbound() == ["inflate-2"]


def test_with_kube_scheduler_pods_planned_onto_existing_nodes_are_nominated_not_bound(
    make_harness: MakeHarness,
) -> None:
    h = make_harness(unschedulable_only=True, bind_existing=False)
    h.cluster.create(objects.NODE, {
        "metadata": {"name": "static-1", "labels": {"kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}},
        "status": {"allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    })
    create_all(h.cluster, objects.POD, [unschedulable(p) for p in inflate(0, 2)])  # e.g. a node just freed room
    result = h.batch()
    assert result.launched == [] and result.nominated == {"static-1": ("default/inflate-0", "default/inflate-1")}
    assert sorted(h.unbound()) == ["inflate-0", "inflate-1"], "kube-scheduler binds them"
    events = h.events("Nominated")
    assert sorted(e["involvedObject"]["name"] for e in events) == ["inflate-0", "inflate-1"]
    assert {e["message"] for e in events} == {"Pod should schedule on: node/static-1"}  # Karpenter's message


def test_a_node_the_kubelet_registered_first_gets_the_controllers_labels_and_finalizer(
    make_harness: MakeHarness,
) -> None:
    h = make_harness()
    # The in-memory cloud names its first instance ip-10-0-0-2: its kubelet was quicker than the controller.
    joined = {"metadata": {"name": "ip-10-0-0-2.ec2.internal", "labels": {"kubernetes.io/hostname": "ip-10-0-0-2"}}}
    h.cluster.create(objects.NODE, joined)
    create_all(h.cluster, objects.POD, inflate(0, 2))
    result = h.batch()
    (launched,) = result.launched
    assert launched.node == "ip-10-0-0-2.ec2.internal" and not result.errors
    node = h.node(launched.node)
    assert label(node, "karpenter.sh/provisioner-name") == "default"
    assert label(node, "node.kubernetes.io/instance-type") == launched.instance_type
    assert objects.finalizers(node) == ["karpenter.sh/termination"]
    assert DEFAULT_HASH_KEY in objects.annotations(node)
    assert h.unbound() == []


def test_a_pod_whose_spec_cannot_be_read_is_reported_once_and_the_others_are_provisioned(
    make_harness: MakeHarness,
) -> None:
    h = make_harness()
    bad = pod("broken", containers=[{"name": "app", "resources": {"requests": {"cpu": "lots"}}}])
    create_all(h.cluster, objects.POD, [bad, *inflate(0, 1)])
    result = h.batch()
    assert len(result.launched) == 1 and h.unbound() == ["broken"]
    (event,) = h.events("FailedScheduling")
    assert event["involvedObject"]["name"] == "broken" and event["message"].startswith("cannot read the pod spec: ")
    assert "spec.containers.0.resources.requests.cpu" in event["message"]
    h.clock.advance(30)
    h.step()
    h.step()
    assert len([m for m in h.messages() if m.startswith("could not schedule pod, cannot read")]) == 1
