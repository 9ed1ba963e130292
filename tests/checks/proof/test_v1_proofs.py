"""Karpenter v1 NodePools through `check`'s proofs and the workload placement (issue #25, item 3): each NodePool is
proven through its scheduling view (`api.v1.objects`), every finding at the NodePool's own file:line; `minValues`
is proven against the catalog; the EC2NodeClass its nodeClassRef names gives the node OS and kubelet; workloads
land on NodePools (selecting `karpenter.sh/nodepool`) and on Provisioners side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.proof.placement import schedule_workloads
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.checks.repository import check_paths
from karpenter_policy.checks.source.workloads import read_workloads

NODE_CLASS = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}]},
}


def nodepool(name: str, *requirements: dict[str, Any], node_class: str = "default", **spec: Any) -> dict[str, Any]:
    template_spec = {"requirements": list(requirements),
                     "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": node_class}}
    template = {"spec": template_spec, **({"metadata": spec.pop("template_metadata")} if "template_metadata" in spec
                                          else {})}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": template, **spec}}


def requirement(key: str, operator: str, *values: str, min_values: int | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        found["values"] = list(values)
    if min_values is not None:
        found["minValues"] = min_values
    return found


def write(tmp_path: Path, *documents: dict[str, Any], name: str = "policies.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False), encoding="utf-8")
    return path


def rules_at(findings: list[Finding]) -> list[tuple[str, int]]:
    return sorted((f.rule, f.line) for f in findings if f.severity in ("error", "warning"))


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def test_a_conflict_of_a_nodepool_is_at_its_own_requirement_lines(tmp_path: Path) -> None:
    path = write(tmp_path, NODE_CLASS, nodepool(
        "arm", requirement("kubernetes.io/arch", "In", "arm64"),
        requirement("karpenter.k8s.aws/instance-family", "In", "c5"),
    ))
    report, checked = check_paths([str(path)])
    conflicts = [f for f in report.findings if f.rule == "requirements-conflict"]
    assert len(conflicts) == 1 and conflicts[0].object_ref == "NodePool/arm"
    assert conflicts[0].line == line_of(path, "key: kubernetes.io/arch")
    assert [r.line for r in conflicts[0].related] == [line_of(path, "key: karpenter.k8s.aws/instance-family")]
    assert [(c.object_ref, c.verdict) for c in checked] == [("NodePool/arm", Verdict.UNSAT)]


def test_v1_adds_no_default_requirements(tmp_path: Path) -> None:
    """v0.31 would add on-demand, amd64, linux, c/m/r and generation > 2 to a Provisioner without requirements;
    a v1 NodePool without requirements admits every type: arm64, spot, t-family, first generation."""
    path = write(tmp_path, NODE_CLASS, nodepool("any"))
    report, checked = check_paths([str(path)])
    assert not [f for f in report.findings if f.severity == "error"]
    (pool,) = checked
    assert {"a1.large", "t4g.nano", "m5.large"} <= set(pool.instance_types)
    assert set(pool.capacity_types) == {"on-demand", "spot"}


def test_min_values_is_proven_against_the_catalog_at_the_requirement(tmp_path: Path) -> None:
    path = write(tmp_path, NODE_CLASS, nodepool(
        "flexible",
        requirement("karpenter.k8s.aws/instance-category", "In", "c", "m", "r", min_values=3),
        requirement("karpenter.k8s.aws/instance-family", "In", "c5", "m5", "r5", "c6i"),
        requirement("node.kubernetes.io/instance-type", "Exists", min_values=20),
    ))
    report, _ = check_paths([str(path)])
    assert not [f for f in report.findings if f.rule == "min-values"]  # 3 categories, ≥ 20 types

    path = write(tmp_path, NODE_CLASS, nodepool(
        "rigid",
        requirement("karpenter.k8s.aws/instance-category", "In", "c", "m", "r", min_values=3),
        requirement("karpenter.k8s.aws/instance-family", "In", "c5", "m5"),
        requirement("topology.kubernetes.io/zone", "In", "us-east-1a", "us-east-1b", min_values=2),
        requirement("node.kubernetes.io/instance-type", "In", "m5.large", "m5.xlarge", "c5.large", min_values=3),
    ))
    report, _ = check_paths([str(path)])
    found = [f for f in report.findings if f.rule == "min-values"]
    assert [(f.severity, f.line) for f in found] == [("error", line_of(path, "minValues: 3"))]
    assert "only 2 (c, m)" in found[0].message and "Strict" in found[0].message


def test_min_values_on_a_label_no_instance_type_carries_is_never_met(tmp_path: Path) -> None:
    """Karpenter counts an instance type's own values (`it.Requirements.Get(key)`: Exists, no values, for a key the
    type lacks), so minValues on a custom label can never be met."""
    path = write(tmp_path, NODE_CLASS, nodepool("team", requirement("team", "In", "data", min_values=1)))
    report, _ = check_paths([str(path)])
    (found,) = [f for f in report.findings if f.rule == "min-values"]
    assert "no instance type carries the label team" in found.message


def test_gte_and_lte_prove_as_their_integer_equivalents(tmp_path: Path) -> None:
    inclusive = write(tmp_path, NODE_CLASS, nodepool(
        "inclusive", requirement("karpenter.k8s.aws/instance-cpu", "Gte", "4"),
        requirement("karpenter.k8s.aws/instance-cpu", "Lte", "8"),
    ), name="inclusive.yaml")
    strict = write(tmp_path, NODE_CLASS, nodepool(
        "strict", requirement("karpenter.k8s.aws/instance-cpu", "Gt", "3"),
        requirement("karpenter.k8s.aws/instance-cpu", "Lt", "9"),
    ), name="strict.yaml")
    (a,) = check_paths([str(inclusive)])[1]
    (b,) = check_paths([str(strict)])[1]
    assert a.instance_types == b.instance_types and a.instance_types
    assert "c5.xlarge" in a.instance_types and "c5.2xlarge" in a.instance_types and "c5.large" not in a.instance_types


@given(bound=st.integers(min_value=2, max_value=9))
@deterministic(6)
def test_gte_names_itself_as_written_in_a_finding(tmp_path_factory: Any, bound: int) -> None:
    tmp_path = tmp_path_factory.mktemp("gte")
    path = write(tmp_path, NODE_CLASS, nodepool(
        "gen", requirement("karpenter.k8s.aws/instance-generation", "Gte", str(bound)),
        requirement("karpenter.k8s.aws/instance-generation", "Lte", str(bound - 1)),
    ))
    report, _ = check_paths([str(path)])
    messages = [f.message for f in report.findings if f.rule in ("requirements-conflict", "no-instance-type")]
    # the catalog's generations are 1 to 9: the two bounds conflict, each named as written
    assert messages and f"Gte {bound}" in messages[0] and f"Lte {bound - 1}" in messages[0], messages


def test_reserved_is_a_v1_capacity_type_the_catalog_has_no_offering_of(tmp_path: Path) -> None:
    path = write(tmp_path, NODE_CLASS, nodepool("odcr", requirement("karpenter.sh/capacity-type", "In", "reserved")))
    report, _ = check_paths([str(path)])
    assert not [f for f in report.findings if f.rule == "unknown-label-value"]
    (found,) = [f for f in report.findings if f.rule == "no-instance-type"]
    assert "capacityReservationSelectorTerms" in found.message


def test_the_node_class_gives_the_os(tmp_path: Path) -> None:
    windows = {**NODE_CLASS, "metadata": {"name": "windows"},
               "spec": {**NODE_CLASS["spec"], "amiSelectorTerms": [{"alias": "windows2022@latest"}]}}
    path = write(tmp_path, NODE_CLASS, windows,
                 nodepool("win", requirement("kubernetes.io/os", "In", "windows"), node_class="windows"),
                 nodepool("lin", requirement("kubernetes.io/os", "In", "windows")))
    report, checked = check_paths([str(path)])
    verdicts = {c.name: c.verdict for c in checked}
    assert verdicts == {"win": Verdict.SAT, "lin": Verdict.UNSAT}
    (found,) = [f for f in report.findings if f.rule == "no-instance-type"]
    assert found.object_ref == "NodePool/lin" and "runs windows" in found.message


def test_limits_of_a_nodepool_are_at_its_limits(tmp_path: Path) -> None:
    path = write(tmp_path, NODE_CLASS, nodepool("tiny", requirement("karpenter.k8s.aws/instance-family", "In", "m5"),
                                                limits={"cpu": "1"}))
    report, _ = check_paths([str(path)])
    (found,) = [f for f in report.findings if f.rule == "limits"]
    assert found.line == line_of(path, "cpu: '1'") and found.message.startswith("limits cpu: 1 ")
    assert "the NodePool can launch" in found.message


def test_a_v1alpha5_provisioner_and_a_nodepool_of_one_name_are_both_proven(tmp_path: Path) -> None:
    provisioner = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "default"},
                   "spec": {}}
    path = write(tmp_path, provisioner, NODE_CLASS, nodepool("default"))
    report, checked = check_paths([str(path)])
    assert sorted(c.object_ref for c in checked) == ["NodePool/default", "Provisioner/default"]
    by_ref = {c.object_ref: c for c in checked}
    # v0.31's defaults (on-demand, amd64, c/m/r, generation > 2) for the Provisioner only
    assert set(by_ref["Provisioner/default"].capacity_types) == {"on-demand"}
    assert set(by_ref["NodePool/default"].capacity_types) == {"on-demand", "spot"}


def _deployment(name: str, selector: dict[str, str] | None = None, cpu: str = "1") -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "app", "image": "pause",
                                                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if selector:
        pod_spec["nodeSelector"] = selector
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}}


def test_workloads_land_on_nodepools_by_their_label_and_never_by_provisioner_name(tmp_path: Path) -> None:
    provisioner = {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Provisioner", "metadata": {"name": "old"},
                   "spec": {"weight": 5}}
    policies = write(tmp_path, provisioner, NODE_CLASS, nodepool("general", weight=1), nodepool("batch", weight=1))
    apps = write(tmp_path,
                 _deployment("to-batch", {"karpenter.sh/nodepool": "batch"}),
                 _deployment("to-old", {"karpenter.sh/provisioner-name": "old"}),
                 _deployment("to-general-by-old-label", {"karpenter.sh/provisioner-name": "general"}),
                 _deployment("anywhere"), name="apps.yaml")
    _, checked = check_paths([str(policies)])
    workloads = read_workloads([str(apps)]).workloads
    placed = {p.ref: p.provisioner for p in schedule_workloads(checked, workloads)}
    assert placed == {
        "Deployment/to-batch": "NodePool/batch",
        "Deployment/to-old": "old",
        # v1 nodes never carry karpenter.sh/provisioner-name (aws/karpenter-provider-aws#5645)
        "Deployment/to-general-by-old-label": None,
        "Deployment/anywhere": "old",  # the highest weight
    }


def test_a_nodepool_refused_for_its_budgets_alone_is_still_proven(tmp_path: Path) -> None:
    """One run shows every mistake: a budget error (the API server refuses the NodePool) leaves scheduling
    untouched, so the requirements are proven too — an error in the template is not (its view would be wrong)."""
    broken_budget = nodepool("budget", requirement("kubernetes.io/arch", "In", "arm64"),
                             requirement("karpenter.k8s.aws/instance-family", "In", "c5"),
                             disruption={"consolidateAfter": "0s",
                                         "budgets": [{"nodes": "1", "schedule": "@daily"}]})
    broken_template = nodepool("template", requirement("kubernetes.io/arch", "In", "arm64"),
                               requirement("karpenter.k8s.aws/instance-family", "In", "c5"),
                               template_metadata={"labels": {"karpenter.sh/nodepool": "x"}})
    path = write(tmp_path, NODE_CLASS, broken_budget, broken_template)
    report, checked = check_paths([str(path)])
    rules = {(f.object_ref, f.rule) for f in report.findings if f.severity == "error"}
    assert ("NodePool/budget", "cel-rule") in rules and ("NodePool/budget", "requirements-conflict") in rules
    assert ("NodePool/template", "requirements-conflict") not in rules
    assert [c.object_ref for c in checked] == ["NodePool/budget"]


def test_the_repository_keeps_the_valid_v1_objects_by_name(tmp_path: Path) -> None:
    from karpenter_policy.checks.repository import load_repository

    path = write(tmp_path, NODE_CLASS, nodepool("general"), nodepool("broken", template_metadata={
        "labels": {"karpenter.sh/nodepool": "x"}}))
    repository = load_repository([str(path)])
    assert set(repository.nodepools) == {"general"} and set(repository.node_classes) == {"default"}
    assert not repository.checked  # nothing proven without prove=True
