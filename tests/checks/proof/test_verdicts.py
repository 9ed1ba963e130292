"""`check --workloads` gives the plan's verdict, through the real CLI: a workload is schedulable when the plan of
every replica places them all, and the same JSON never says otherwise in its `capacity` section (issue #19). Each
case of the issue: pod affinity to another workload's pods, anti-affinity and spread that leave replicas pending,
limits shared by the replicas, the order that lets pod affinity follow its target."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent
from typing import Any

from karpenter_policy.catalog import load_catalog
from tests.workloadcheck import check_workloads, line_of

PROVIDER = (
    "  provider:\n"
    "    subnetSelector: {karpenter.sh/discovery: t}\n"
    "    securityGroupSelector: {karpenter.sh/discovery: t}\n"
)


def provisioner(body: str, name: str = "default") -> str:
    spec = dedent(body).strip("\n")
    indented = "\n".join(f"  {line}" for line in spec.splitlines())
    head = f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n"
    return f"{head}{indented}\n{PROVIDER}"


def check(tmp_path: Path, policies: str, apps: str) -> dict[str, Any]:
    """`karpenter-policy check POLICIES --workloads APPS --output json`, its JSON (checked to agree with itself)."""
    _, report = check_workloads(tmp_path, policies, dedent(apps))
    assert_consistent(report)
    return report


def assert_consistent(report: dict[str, Any]) -> None:
    """The verdicts and the capacity plan agree: a workload is unschedulable exactly when the plan leaves some of
    its replicas pending (as many as it says), and each such workload has its `workload-unschedulable` error."""
    unscheduled = report["capacity"]["unscheduled"]
    errors = {f["object"] for f in report["findings"] if f["rule"] == "workload-unschedulable"}
    for workload in report["workloads"]:
        name = workload["object"]
        assert workload["schedulable"] == (name not in unscheduled), workload
        assert workload.get("unscheduled", 0) == unscheduled.get(name, 0), workload
        assert (name in errors) == (not workload["schedulable"]), workload


def verdicts(report: dict[str, Any]) -> dict[str, bool]:
    return {w["object"]: w["schedulable"] for w in report["workloads"]}


def errors(report: dict[str, Any]) -> dict[str, str]:
    return {f["object"]: f["message"] for f in report["findings"] if f["rule"] == "workload-unschedulable"}


def nodes_of(report: dict[str, Any], workload: str) -> list[dict[str, Any]]:
    return [n for n in report["capacity"]["nodes"] if workload in n["workloads"]]


def deployment(name: str, replicas: int, pod: str, labels: str = "") -> str:
    """A Deployment of `replicas` pods with the pod spec `pod` (YAML, dedented) and `app: name` (and `labels`)."""
    spec = "\n".join(f"      {line}" for line in pod.strip("\n").splitlines())
    return (
        f"apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n"
        f"  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n"
        f"    metadata: {{labels: {{app: {name}{', ' + labels if labels else ''}}}}}\n    spec:\n{spec}\n"
    )


RESOURCES = """
containers:
  - name: app
    resources: {requests: {cpu: "1", memory: 1Gi}}
"""


def test_pod_affinity_to_another_workloads_pod_is_schedulable_next_to_it(tmp_path: Path) -> None:
    """`with-affinity` (required podAffinity to `security: s2` on the hostname) beside `target` (`security: s2`):
    alone it would be unsatisfiable, in the plan both share one node — and the verdict says so."""
    apps = """
        apiVersion: v1
        kind: Pod
        metadata: {name: target, labels: {security: s2}}
        spec:
          containers: [{name: app, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
        ---
        apiVersion: v1
        kind: Pod
        metadata: {name: with-affinity}
        spec:
          affinity:
            podAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                - labelSelector: {matchLabels: {security: s2}}
                  topologyKey: kubernetes.io/hostname
          containers: [{name: app, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
    """
    report = check(tmp_path, provisioner(""), apps)
    assert verdicts(report) == {"Pod/target": True, "Pod/with-affinity": True}
    assert errors(report) == {}
    [node] = nodes_of(report, "Pod/with-affinity")
    assert node["workloads"] == {"Pod/target": 1, "Pod/with-affinity": 1}
    with_affinity = next(w for w in report["workloads"] if w["object"] == "Pod/with-affinity")
    assert with_affinity["provisioner"] == "default" and node["instance_type"] in with_affinity["instance_types"]


def test_zone_anti_affinity_leaves_the_replica_no_zone_takes_unschedulable(tmp_path: Path) -> None:
    """4 replicas that keep off each other's zone, 3 zones: 3 placed (one per zone, over the controller's passes),
    the 4th is a `workload-unschedulable` error naming why."""
    policies = provisioner("""
        requirements:
          - key: topology.kubernetes.io/zone
            operator: In
            values: [us-east-1a, us-east-1b, us-east-1c]
    """)
    pod = (
        dedent(
            """
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              - labelSelector: {matchLabels: {app: zk}}
                topologyKey: topology.kubernetes.io/zone
        """
        )
        + RESOURCES
    )
    report = check(tmp_path, policies, deployment("zk", 4, pod))
    assert verdicts(report) == {"Deployment/zk": False}
    message = errors(report)["Deployment/zk"]
    assert message.startswith("1 of its 4 replicas cannot be placed: no provisioner can launch a node for it:\n")
    assert "provisioner default: unsatisfiable pod anti-affinity constraint on topology.kubernetes.io/zone" in message
    assert sorted(n["zone"] for n in nodes_of(report, "Deployment/zk")) == ["us-east-1a", "us-east-1b", "us-east-1c"]


def test_min_domains_beyond_the_zones_of_the_provisioner_places_one_replica(tmp_path: Path) -> None:
    """`minDomains: 3` with a single-zone provisioner: the global minimum stays 0, so only 1 of 3 replicas fits."""
    policies = provisioner("""
        requirements:
          - key: topology.kubernetes.io/zone
            operator: In
            values: [us-east-1a]
    """)
    pod = (
        dedent(
            """
        topologySpreadConstraints:
          - maxSkew: 1
            minDomains: 3
            topologyKey: topology.kubernetes.io/zone
            whenUnsatisfiable: DoNotSchedule
            labelSelector: {matchLabels: {app: web}}
        """
        )
        + RESOURCES
    )
    report = check(tmp_path, policies, deployment("web", 3, pod))
    assert verdicts(report) == {"Deployment/web": False}
    message = errors(report)["Deployment/web"]
    assert message.startswith("2 of its 3 replicas cannot be placed: ")
    assert "unsatisfiable topology spread constraint on topology.kubernetes.io/zone" in message
    assert report["capacity"]["unscheduled"] == {"Deployment/web": 2}


def test_the_replica_beyond_the_limits_is_unschedulable(tmp_path: Path) -> None:
    """`limits.cpu: 8`, c5.xlarge only (4 vCPU), one replica per node: two nodes use the limit, the third replica
    fits nowhere."""
    policies = provisioner("""
        requirements:
          - key: node.kubernetes.io/instance-type
            operator: In
            values: [c5.xlarge]
        limits:
          resources:
            cpu: 8
    """)
    pod = (
        dedent(
            """
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              - labelSelector: {matchLabels: {app: api}}
                topologyKey: kubernetes.io/hostname
        """
        )
        + RESOURCES
    )
    report = check(tmp_path, policies, deployment("api", 3, pod))
    assert verdicts(report) == {"Deployment/api": False}
    message = errors(report)["Deployment/api"]
    assert message == (
        "1 of its 3 replicas cannot be placed: no provisioner can launch a node for it:\n"
        "  provisioner default: the nodes planned before use up its limits.resources (cpu: 8)"
    )
    assert [n["instance_type"] for n in nodes_of(report, "Deployment/api")] == ["c5.xlarge", "c5.xlarge"]


def test_pod_affinity_on_the_architecture_follows_its_arm64_target(tmp_path: Path) -> None:
    """A workload with pod affinity on kubernetes.io/arch to (and like) an arm64-pinned pod lands on arm64, as
    Karpenter's queue has it: the target is placed before the pods that follow it."""
    policies = provisioner("""
        requirements:
          - key: kubernetes.io/arch
            operator: In
            values: [amd64, arm64]
    """)
    follower = dedent("""
        affinity:
          podAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              - labelSelector: {matchLabels: {tier: graviton}}
                topologyKey: kubernetes.io/arch
        containers:
          - name: app
            resources: {requests: {cpu: "2", memory: 2Gi}}
    """)
    target = dedent("""
        nodeSelector: {kubernetes.io/arch: arm64}
        containers:
          - name: app
            resources: {requests: {cpu: 500m, memory: 512Mi}}
    """)
    apps = (
        deployment("follower", 3, follower, "tier: graviton")
        + "---\n"
        + deployment("target", 1, target, "tier: graviton")
    )
    report = check(tmp_path, policies, apps)
    assert verdicts(report) == {"Deployment/follower": True, "Deployment/target": True}
    types = {t.name: t for t in load_catalog().instance_types}
    arches = {a for n in nodes_of(report, "Deployment/follower") for a in types[n["instance_type"]].architectures}
    assert arches == {"arm64"}


def test_anti_affinity_on_a_key_no_node_has_is_unschedulable_with_a_hint_at_the_key(tmp_path: Path) -> None:
    """`topologyKey: topology.kubernetes.io/hostname` (a typo): Karpenter v0.31 finds no domain for the term
    (`TopologyGroup.nextDomainAntiAffinity` over no domains is empty, `Topology.AddRequirements` fails) and leaves
    the pods pending — the plan's error says so, and a warning at the key names the key meant. A preferred term on
    a key without domains (`zone`) is only dropped: a warning, no error."""
    pod = (
        dedent(
            """
        affinity:
          podAntiAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              - labelSelector: {matchLabels: {app: web}}
                topologyKey: topology.kubernetes.io/hostname
        """
        )
        + RESOURCES
    )
    preferring = (
        dedent(
            """
        affinity:
          podAntiAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
              - weight: 10
                podAffinityTerm:
                  labelSelector: {matchLabels: {app: api}}
                  topologyKey: zone
        """
        )
        + RESOURCES
    )
    report = check(tmp_path, provisioner(""), deployment("web", 2, pod) + "---\n" + deployment("api", 2, preferring))
    assert verdicts(report) == {"Deployment/web": False, "Deployment/api": True}
    assert errors(report)["Deployment/web"].startswith(
        "none of its 2 replicas can be placed: no provisioner can launch a node for it:\n  provisioner default: "
        "unsatisfiable pod anti-affinity constraint on topology.kubernetes.io/hostname"
    )
    warnings = [f for f in report["findings"] if f["rule"] == "unknown-topology-key"]
    assert [(f["object"], f["line"], f["severity"]) for f in warnings] == [
        ("Deployment/web", line_of(tmp_path, "topologyKey: topology.kubernetes.io/hostname"), "warning"),
        ("Deployment/api", line_of(tmp_path, "topologyKey: zone"), "warning"),
    ]
    assert warnings[0]["message"] == (
        "pod anti-affinity on topology.kubernetes.io/hostname: no node the provisioners launch has this label, so "
        "Karpenter v0.31 leaves the pods pending: it finds no domain for them; did you mean kubernetes.io/hostname?"
    )
    assert warnings[1]["message"].endswith(
        "drops it, as a preference it cannot meet; did you mean topology.kubernetes.io/zone?"
    )


def test_pod_level_resources_decide_what_fits(tmp_path: Path) -> None:
    """A pod-level `spec.resources` request (Kubernetes 1.32+) is what the pod asks of a node, not its containers'
    sum: 3 vCPU at pod level fits no m5.large (2 vCPU) however little the container asks; 1500m does."""
    policies = provisioner(
        """
        requirements:
          - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        """
    )
    pod = """
    resources: {{requests: {{cpu: "{cpu}"}}}}
    containers:
      - name: app
        resources: {{requests: {{cpu: 250m, memory: 256Mi}}}}
    """
    big, fits = (deployment(name, 1, dedent(pod.format(cpu=cpu))) for name, cpu in (("big", "3"), ("fits", "1500m")))
    apps = f"{big}---\n{fits}"
    report = check(tmp_path, policies, apps)
    assert verdicts(report) == {"Deployment/big": False, "Deployment/fits": True}
    assert "3 vCPU" in errors(report)["Deployment/big"]


def test_a_request_beyond_every_quantity_names_the_request_in_the_verdict(tmp_path: Path) -> None:
    """A pod-level request too large for a Kubernetes quantity (`1e99999999`, 4,000 digits) is read as the
    quantity's bound and the verdict still says why, provisioner by provisioner: no instance type has that many vCPU.
    Never an empty list of reasons under `no provisioner can launch a node for it:`."""
    policies = provisioner("requirements: []")
    for run, cpu in enumerate(("1e99999999", "9" * 4000)):
        apps = deployment("huge", 1, f'resources: {{requests: {{cpu: "{cpu}"}}}}\ncontainers: [{{name: app}}]\n')
        (tmp_path / str(run)).mkdir()
        report = check(tmp_path / str(run), policies, apps)
        message = errors(report)["Deployment/huge"]
        head, *reasons = message.split("\n")
        assert head.endswith("no provisioner can launch a node for it:")
        assert reasons == ["  provisioner default: no instance type in us-east-1 has 9223372036854775.807 vCPU"]
