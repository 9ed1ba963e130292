"""The controller on Karpenter v1 NodePools' constraint sets, beside a v0.31 Provisioner (examples/v1/controller):
what it launches for a NodePool is a Karpenter v1 node — `karpenter.sh/nodepool` and `karpenter.k8s.aws/ec2nodeclass`,
never `karpenter.sh/provisioner-name`; the template's labels, taints and startup taints —, pods selecting either kind
land on that kind, NodePool weight orders both kinds, `spec.limits.nodes` caps the launches, minValues holds under
the controller's `--min-values-policy`, and a NodePool whose EC2NodeClass the launcher cannot boot is left out with the
reason. Each through `karpenter_policy.testing`'s Scene (the in-memory cluster and cloud, virtual time)."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from karpenter_policy.api.constraintset import ConstraintSetError, content_hash, read_compiled
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.kube import objects
from karpenter_policy.model import labels as wk
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "controller"
BATCH_TOLERATION = {"key": "example.com/batch", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(EXAMPLE / "policies", tmp_path_factory.mktemp("v1ctl") / "build")


def _settle(scene: Scene, **options: object) -> None:
    controller = scene.controller(**options)
    scene.run(controller, 120, until=lambda: not scene.unbound())
    scene.run(controller, 60)  # the kubelets' stand-in initializes the nodes


def _node_of(scene: Scene, pod: str) -> dict[str, object]:
    bound = next(p for p in scene.pods() if objects.name(p) == pod)
    node = scene.node(bound["spec"]["nodeName"])
    assert node is not None
    return node


def test_a_nodepools_nodes_carry_v1_labels_its_template_and_never_the_provisioner_label(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("report", cpu="2", nodeSelector={wk.NODEPOOL: "batch"}, tolerations=[BATCH_TOLERATION])
    scene.add_pod("legacy", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "default"})
    _settle(scene)
    assert scene.unbound() == []
    batch = _node_of(scene, "report")
    labels = objects.labels(batch)
    assert labels[wk.NODEPOOL] == "batch"
    assert labels["karpenter.k8s.aws/ec2nodeclass"] == "default"
    assert labels["workload"] == "batch"
    assert wk.PROVISIONER_NAME not in labels
    assert labels[wk.INITIALIZED] == "true"  # its startup taint is gone once the kubelets' stand-in removed it
    taints = {(t["key"], t["effect"]) for t in batch["spec"].get("taints", [])}
    assert ("example.com/batch", "NoSchedule") in taints
    family = labels[wk.INSTANCE_FAMILY]
    assert family in {"c6a", "c6i", "c7a", "c7i", "m6a", "m6i"}
    legacy = objects.labels(_node_of(scene, "legacy"))
    assert legacy[wk.PROVISIONER_NAME] == "default" and wk.NODEPOOL not in legacy
    tags = {i.tags.get(wk.NODEPOOL): i.tags.get(wk.PROVISIONER_NAME) for i in scene.instances()}
    assert tags == {"batch": None, None: "default"}  # the instance tags say the same


def test_startup_taints_are_registered_and_ignored_while_the_node_starts(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("report", cpu="2", nodeSelector={wk.NODEPOOL: "batch"}, tolerations=[BATCH_TOLERATION])
    controller = scene.controller()
    scene.run(controller, 30, until=lambda: not scene.unbound())
    node = _node_of(scene, "report")
    startup = json.loads(objects.annotations(node)["karpenter-policy/startup-taints"])
    assert startup == [{"effect": "NoSchedule", "key": "example.com/agent-not-ready"}]


def test_nodepool_weight_orders_both_kinds_and_a_pod_selecting_neither_kind_by_name_goes_to_the_heaviest(
    compiled: Path,
) -> None:
    scene = Scene(compiled)
    scene.add_pod("tolerant", cpu="1", tolerations=[BATCH_TOLERATION])  # every pool can take it: batch weighs 10
    _settle(scene)
    assert objects.labels(_node_of(scene, "tolerant")).get(wk.NODEPOOL) == "batch"


def test_pods_on_the_nodepool_default_and_the_provisioner_default_stay_apart(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("web", cpu="500m", nodeSelector={"team": "web"})
    scene.add_pod("legacy", cpu="500m", nodeSelector={wk.PROVISIONER_NAME: "default"})
    _settle(scene)
    web, legacy = _node_of(scene, "web"), _node_of(scene, "legacy")
    assert objects.name(web) != objects.name(legacy)
    assert objects.labels(web)[wk.NODEPOOL] == "default" and objects.labels(legacy)[wk.PROVISIONER_NAME] == "default"


def test_limits_nodes_caps_the_nodepools_launches(compiled: Path) -> None:
    scene = Scene(compiled)
    # each pod needs a node of its own (required anti-affinity on the hostname): batch may have 2
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": wk.HOSTNAME}
            ]
        }
    }
    for i in range(3):
        scene.add_pod(
            f"spread-{i}", cpu="1", labels={"app": "spread"}, nodeSelector={wk.NODEPOOL: "batch"},
            tolerations=[BATCH_TOLERATION], affinity=anti,
        )  # fmt: skip
    controller = scene.controller()
    scene.run(controller, 120)
    batch_nodes = [n for n in scene.nodes().values() if objects.labels(n).get(wk.NODEPOOL) == "batch"]
    assert len(batch_nodes) == 2
    assert len(scene.unbound()) == 1
    failed = scene.events("FailedScheduling")
    assert any("its limits.nodes 2 is used up" in str(e.get("message")) for e in failed), failed


@pytest.mark.parametrize(("policy", "lands"), [("Strict", False), ("BestEffort", True)])
def test_min_values_hold_under_the_controllers_policy(compiled: Path, policy: str, lands: bool) -> None:
    scene = Scene(compiled)
    scene.add_pod(
        "pinned", cpu="1", tolerations=[BATCH_TOLERATION],
        nodeSelector={wk.NODEPOOL: "batch", wk.INSTANCE_FAMILY: "c6a"},
    )  # fmt: skip
    controller = scene.controller(min_values_policy=policy)
    scene.run(controller, 60)
    assert (scene.unbound() == []) is lands
    if not lands:
        messages = [str(e.get("message")) for e in scene.events("FailedScheduling")]
        assert any("minValues requirement is not met" in m for m in messages), messages


def _with_alias(tmp_path: Path, alias: str, *, also: tuple[str, str] = ("", "")) -> Path:
    """examples/v1/controller compiled with its EC2NodeClass's alias changed to `alias` (and `also` replaced)."""
    policies = tmp_path / "policies"
    shutil.copytree(EXAMPLE / "policies", policies)
    manifest = policies / "nodepools.yaml"
    text = manifest.read_text().replace("alias: al2@latest", f"alias: {alias}")
    manifest.write_text(text.replace(*also) if also[0] else text)
    return compile_policies(policies, tmp_path / "build")


def test_a_nodepool_whose_ec2nodeclass_selects_reservations_the_cloud_lacks_launches_without_them(
    tmp_path: Path,
) -> None:
    """capacityReservationSelectorTerms that select no reservation (the in-memory cloud keeps none): as v1.14.1 with
    none resolved, no reserved offering — the NodePool launches its other capacity types (until this session it
    was left out: the controller launched into no reservation)."""
    one_term = "  subnetSelectorTerms:\n    - tags:\n        karpenter.sh/discovery: demo\n"
    reserved = "  capacityReservationSelectorTerms:\n    - id: cr-0123456789abcdef0\n" + one_term
    scene = Scene(_with_alias(tmp_path, "al2@latest", also=(one_term, reserved)))
    scene.add_pod("report", cpu="2", nodeSelector={wk.NODEPOOL: "batch"}, tolerations=[BATCH_TOLERATION])
    controller = scene.controller()
    scene.run(controller, 60)
    assert scene.unbound() == []
    (node,) = scene.nodes().values()
    assert objects.labels(node)[wk.NODEPOOL] == "batch"
    assert objects.labels(node)[wk.CAPACITY_TYPE] != wk.CAPACITY_RESERVED


def test_an_al2023_nodepool_waits_for_the_service_cidr_then_launches(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Karpenter v1.14.1 holds an AL2023 EC2NodeClass not ready until its cluster CIDR resolves
    # (aws pkg/controllers/nodeclass/validation.go:116-130; launchtemplate/suite_test.go:2111 "should fail to
    # create launch templates if cluster CIDR is unresolved"): its NodePools launch nothing meanwhile
    scene = Scene(_with_alias(tmp_path, "al2023@latest"))
    assert isinstance(scene.cloud, FakeCloudProvider)
    scene.cloud.not_ready["AL2023"] = "the cluster's service CIDR is unknown"
    scene.add_pod("report", cpu="2", nodeSelector={wk.NODEPOOL: "batch"}, tolerations=[BATCH_TOLERATION])
    scene.add_pod("legacy", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "default"})
    controller = scene.controller()
    with caplog.at_level(logging.ERROR):
        scene.run(controller, 60)
    assert scene.unbound() == ["default/report"]
    left_out = [r.getMessage() for r in caplog.records if "NodePool/batch left out" in r.getMessage()]
    assert left_out == [
        "constraint set NodePool/batch left out: its node template default cannot launch now: the cluster's "
        "service CIDR is unknown"
    ]  # once, not every pass

    del scene.cloud.not_ready["AL2023"]
    scene.run(controller, 120, until=lambda: not scene.unbound())
    assert scene.unbound() == []
    assert objects.labels(_node_of(scene, "report"))[wk.NODEPOOL] == "batch"


def _tampered(compiled: Path, target: Path, change: object) -> Path:
    """A copy of the compiled sets whose NodePool set `batch` was changed by `change` and hashed again (index too),
    as a hand edit that also fixed the hashes."""
    shutil.copytree(compiled, target)
    folder = target / "constraintsets"
    path = folder / "nodepool.batch.json"
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    content = {k: v for k, v in data.items() if k not in ("hash", "instanceTypes")}
    data["hash"] = content_hash(content)
    path.write_text(json.dumps(data))
    index = json.loads((folder / "index.json").read_text())
    for entry in index["sets"]:
        if entry["key"] == "nodepool.batch.json":
            entry["hash"] = data["hash"]
    index["hash"] = content_hash({k: v for k, v in index.items() if k != "hash"})
    (folder / "index.json").write_text(json.dumps(index))
    return target


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda d: d["nodePool"]["disruption"].update(budgets=[{"nodes": "ten"}]), "nodePool.disruption.budgets[0]"),
        (lambda d: d["requirements"].append({"key": "kubernetes.io/hostname", "operator": "In", "values": ["a"]}),
         "requirements"),
        (lambda d: d["nodePool"].update(expireAfter="forever"), "nodePool.expireAfter"),
        (lambda d: d["nodePool"].pop("minValues"), "nodePool must be a mapping"),
        (lambda d: d["provider"].update(source="providerRef"), "provider.source must be nodeClassRef"),
    ],
)
def test_a_nodepool_set_a_hand_edit_broke_is_refused_naming_the_field(
    compiled: Path, tmp_path: Path, change: object, named: str
) -> None:
    tampered = _tampered(compiled, tmp_path / "build", change)
    with pytest.raises(ConstraintSetError) as refused:
        read_compiled(tampered)
    assert "nodepool.batch.json" in str(refused.value) and named in str(refused.value)


def test_compiled_sets_of_both_kinds_are_read_each_under_its_pool_key(compiled: Path) -> None:
    _, sets = read_compiled(compiled)
    assert sorted(s.pool for s in sets) == ["NodePool/batch", "NodePool/default", "default"]


def test_node_counters_name_the_nodepool_under_its_label(compiled: Path) -> None:
    scene = Scene(compiled)
    scene.add_pod("report", cpu="2", nodeSelector={wk.NODEPOOL: "batch"}, tolerations=[BATCH_TOLERATION])
    scene.add_pod("legacy", cpu="1", nodeSelector={wk.PROVISIONER_NAME: "default"})
    controller = scene.controller()
    scene.run(controller, 60, until=lambda: not scene.unbound())
    scene.run(controller, 30)  # the kubelets join: the NodePool's claim turns Registered
    (claim,) = scene.nodeclaims().values()
    zone = objects.labels(claim)[wk.ZONE]
    assert Scene.metric(controller, "karpenter_nodes_created_total", nodepool="batch", zone=zone) == 1
    assert not Scene.metric(controller, "karpenter_nodes_created", nodepool="batch", provisioner="")
    assert Scene.metric(controller, "karpenter_nodes_created", nodepool="", provisioner="default") == 1


@pytest.mark.parametrize("relaxed", [True, False])
def test_an_ec2nodeclass_context_is_launched_with_unless_min_values_were_relaxed(tmp_path: Path, relaxed: bool) -> None:
    """v1.14.1 passes the class's `context` to CreateFleet unless the claim's minValues were relaxed (aws
    pkg/providers/instance/instance.go:379; cloudprovider suite_test.go:332, :342): the controller's launch request
    carries the class's `context` (no longer a NodePool left out) and the claim's `min_values_relaxed`, which the AWS
    adapter reads (tests/cloud/test_aws_fleet_context.py). A pod pinned to one family under BestEffort relaxes the
    NodePool's `instance-family` minValues 3; one pinned to none keeps it."""
    one_term = "  subnetSelectorTerms:\n"
    scene = Scene(_with_alias(tmp_path, "al2@latest", also=(one_term, "  context: context-1234\n" + one_term)))
    assert isinstance(scene.cloud, FakeCloudProvider)
    selector = {wk.NODEPOOL: "batch"} | ({wk.INSTANCE_FAMILY: "c6a"} if relaxed else {})
    scene.add_pod("report", cpu="1", nodeSelector=selector, tolerations=[BATCH_TOLERATION])
    scene.run(scene.controller(min_values_policy="BestEffort"), 120, until=lambda: not scene.unbound())
    assert scene.unbound() == []
    (launched,) = scene.cloud.requests
    assert (launched.provider or {}).get("context") == "context-1234"
    assert launched.min_values_relaxed is relaxed
