"""`check --workloads` (and `plan`, which schedules on the same templates) with an EC2NodeClass that has a
`placementGroupSelector` (issue #26). Offline no cloud says the group's strategy or partition count, so the class
offers the partitions 1 … 7 of `karpenter.k8s.aws/placement-group-partition` — EC2's most per zone
(`api.v1.launchsettings.offline_placement_offerings`). Without them a spread over the key found no domain and the
example's correct policy was reported unschedulable; a partition above 7 is one no partition group can have."""

from __future__ import annotations

from pathlib import Path

from karpenter_policy.model import labels as wk
from tests.workloadcheck import check_workloads, line_of

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "v1" / "placement-group"
POLICIES = (EXAMPLE / "policies" / "nodepool.yaml").read_text()
SPREAD = (EXAMPLE / "apps" / "workloads.yaml").read_text()


def _pinned(partition: str) -> str:
    """A pod requiring partition `partition` of the class's group."""
    return (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: pinned}\nspec:\n"
        "  nodeSelector: {" + wk.PLACEMENT_GROUP_PARTITION + ': "' + partition + '"}\n'
        "  containers: [{name: c, image: busybox, resources: {requests: {cpu: '1'}}}]\n"
    )


def _errors(report: dict[str, object]) -> list[dict[str, object]]:
    findings = report["findings"]
    assert isinstance(findings, list)
    return [f for f in findings if f["severity"] == "error"]


def test_the_example_spread_over_partitions_is_schedulable(tmp_path: Path) -> None:
    """examples/v1/placement-group: three datanodes, maxSkew 1 over the partition key — schedulable (it was the
    error "unsatisfiable topology constraint" before the class offered partitions offline)."""
    code, report = check_workloads(tmp_path, POLICIES, SPREAD)
    assert code == 0, _errors(report)
    (workload,) = report["workloads"]
    assert workload["schedulable"], workload


def test_a_pod_pinned_to_a_partition_a_group_may_have_is_placed_with_a_warning(tmp_path: Path) -> None:
    """Partition 3 exists only if the group is a partition group of 3 or more: placed, and the warning says check
    cannot know it (no silent pass)."""
    code, report = check_workloads(tmp_path, POLICIES, _pinned("3"))
    assert code == 0, _errors(report)
    (warning,) = [f for f in report["findings"] if f["rule"] == "placement-group-partition"]
    assert warning["severity"] == "warning"
    assert warning["line"] == line_of(tmp_path, "nodeSelector")
    assert "partition 3 " in warning["message"] and "at least 3 partitions" in warning["message"]


def test_no_partition_warning_without_a_placement_group(tmp_path: Path) -> None:
    """A class without a `placementGroupSelector`: no partition warning."""
    policies = POLICIES.replace("  placementGroupSelector:\n    name: hdfs\n", "")
    assert "placementGroupSelector:" not in policies
    _, report = check_workloads(tmp_path, policies, _pinned("3"))
    assert not [f for f in report["findings"] if f["rule"] == "placement-group-partition"]


def test_a_pod_pinned_to_partition_8_is_an_error_at_its_line(tmp_path: Path) -> None:
    """No partition group has an 8th partition in a zone: the pod can land nowhere, said at the pod's line."""
    code, report = check_workloads(tmp_path, POLICIES, _pinned("8"))
    assert code == 1
    (error,) = _errors(report)
    assert error["rule"] == "workload-unschedulable"
    assert error["line"] == line_of(tmp_path, "spec:")  # the pod template: where workload-unschedulable points
    assert "1, 2, 3, 4, 5, 6, 7 only" in str(error["message"]), error
    assert not [f for f in report["findings"] if f["rule"] == "placement-group-partition"]


def test_a_spread_over_the_partitions_is_placed_with_a_warning_the_strategy_is_the_clouds(tmp_path: Path) -> None:
    """The example's spread over the partition key (DoNotSchedule): placed over partitions 1 … 7, and warned at its
    topologyKey that check cannot know the group's strategy — v1.14.1 reads it from DescribePlacementGroups
    (placement_group_resolver.go); a cluster or spread group offers no partition and the pods stay pending there,
    a partition group of N spreads over N. Before: placed without a word."""
    code, report = check_workloads(tmp_path, POLICIES, SPREAD)
    assert code == 0, _errors(report)
    (warning,) = [f for f in report["findings"] if f["rule"] == "placement-group-partition"]
    assert warning["severity"] == "warning"
    assert warning["line"] == line_of(tmp_path, "- topologyKey: karpenter.k8s.aws/placement-group-partition")
    assert "topology spread on karpenter.k8s.aws/placement-group-partition" in warning["message"]
    assert "a cluster or spread group none" in warning["message"]


def test_a_preferred_spread_over_the_partitions_is_not_warned(tmp_path: Path) -> None:
    """ScheduleAnyway: Karpenter relaxes it away where no partition is offered, the pods land all the same."""
    relaxed = SPREAD.replace("whenUnsatisfiable: DoNotSchedule", "whenUnsatisfiable: ScheduleAnyway")
    code, report = check_workloads(tmp_path, POLICIES, relaxed)
    assert code == 0, _errors(report)
    assert not [f for f in report["findings"] if f["rule"] == "placement-group-partition"]
