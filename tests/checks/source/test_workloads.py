"""policy.workloads: which manifests are workloads, where their pod template is, what cannot be read."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.source.workloads import (
    WorkloadError,
    read_documents,
    read_workloads,
    workload_from_data,
)

ROOT = Path(__file__).resolve().parents[3]
APPS = ROOT / "examples" / "workloads" / "apps"

ALL_KINDS = dedent(
    """\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: shop}
    spec:
      template:
        spec:
          containers: [{name: web, resources: {requests: {cpu: 500m}}}]
    ---
    apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: db}
    spec:
      template:
        spec: {containers: [{name: db}]}
    ---
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: agent}
    spec:
      template:
        spec: {containers: [{name: agent}]}
    ---
    apiVersion: apps/v1
    kind: ReplicaSet
    metadata: {name: rs}
    spec:
      template:
        spec: {containers: [{name: rs}]}
    ---
    apiVersion: batch/v1
    kind: Job
    metadata: {name: job}
    spec:
      template:
        spec: {containers: [{name: job}]}
    ---
    apiVersion: batch/v1
    kind: CronJob
    metadata: {name: cron}
    spec:
      schedule: "* * * * *"
      jobTemplate:
        spec:
          template:
            spec: {containers: [{name: cron}]}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: pod}
    spec: {containers: [{name: pod}]}
    ---
    apiVersion: v1
    kind: Service
    metadata: {name: web}
    spec: {ports: [{port: 80}]}
    ---
    apiVersion: karpenter.sh/v1alpha5
    kind: Provisioner
    metadata: {name: default}
    spec: {}
    ---
    apiVersion: example.com/v1
    kind: Job
    metadata: {name: not-a-batch-job}
    spec: {template: {spec: {}}}
    """
)


def test_every_workload_kind_is_read_with_its_template_position() -> None:
    found = read_documents(parse("apps.yaml", ALL_KINDS))
    assert [(w.kind, w.name, w.line) for w in found.workloads] == [
        ("Deployment", "web", 5),
        ("StatefulSet", "db", 13),
        ("DaemonSet", "agent", 20),
        ("ReplicaSet", "rs", 27),
        ("Job", "job", 34),
        ("CronJob", "cron", 44),  # the innermost template
        ("Pod", "pod", 50),  # a Pod: its spec
    ]
    assert found.findings == []
    assert [w.ref for w in found.daemon_sets] == ["DaemonSet/agent"]
    assert len(found.pods) == 6
    web = found.workloads[0]
    assert web.namespace == "shop" and web.template_path == ("spec", "template") and web.column == 3
    assert web.spec_path == ("spec", "template", "spec")
    assert web.shape.scheduling.resource_requests == {"cpu": pytest.approx(0.5)}
    assert found.kinds["Deployment"] == 1 and "Service" not in found.kinds


def test_a_bare_pod_template_is_named_after_its_file() -> None:
    text = "apiVersion: v1\nkind: Pod\nspec:\n  nodeSelector: {karpenter.sh/capacity-type: spot}\n"
    [workload] = read_documents(parse("templates/karpenter-executor-pod-template.yaml", text)).workloads
    assert workload.ref == "Pod/karpenter-executor-pod-template"
    assert workload.bare_template and (workload.line, workload.column) == (3, 1)
    no_api_version = "kind: Pod\nspec: {}\n"
    assert read_documents(parse("t.yaml", no_api_version)).workloads[0].name == "t"


def test_a_pod_bound_to_a_node_is_not_provisioned_for() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeName: ip-10-0-0-1, containers: []}\n"
    assert read_documents(parse("p.yaml", text)).workloads == []


def test_pod_template_labels_are_kept() -> None:
    data = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"metadata": {"labels": {"spark-role": "driver"}}, "spec": {}}},
    }
    workload = workload_from_data(data, "d.yaml")
    assert workload is not None and workload.labels == {"spark-role": "driver"}


def test_a_malformed_spec_is_an_invalid_workload_finding_at_the_field() -> None:
    text = dedent(
        """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: broken}
        spec:
          template:
            spec:
              containers:
                - name: app
                  resources:
                    requests:
                      cpu: lots
        """
    )
    found = read_documents(parse("broken.yaml", text))
    [finding] = found.findings
    assert (finding.rule, finding.severity, finding.line, finding.column) == ("invalid-workload", "error", 11, 20)
    assert finding.object_ref == "Deployment/broken"
    assert "cpu" in finding.message and "quantity" in finding.message
    assert found.workloads == []


def test_workload_error_paths_start_at_the_document() -> None:
    data = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"tolerations": "all"}}
    with pytest.raises(WorkloadError) as raised:
        workload_from_data(data)
    assert raised.value.path == ("spec", "tolerations")


def test_read_workloads_reports_missing_paths_and_parse_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("kind: Pod\nspec: [unclosed\n")
    (tmp_path / "ok.yaml").write_text("kind: Pod\nspec: {}\n")
    found = read_workloads([str(tmp_path), str(tmp_path / "missing")])
    assert found.could_not_run
    assert sorted(f.rule for f in found.findings) == ["parse-error", "parse-error"]
    assert [w.name for w in found.workloads] == ["ok"]
    assert len(found.files) == 2


def test_the_example_apps_are_all_read() -> None:
    found = read_workloads([str(APPS)])
    assert found.findings == [] and not found.could_not_run
    assert {w.kind for w in found.workloads} == {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob", "Pod"}
    spark = [w for w in found.workloads if w.bare_template]
    assert sorted(w.name for w in spark) == ["spark-driver-pod-template", "spark-executor-pod-template"]
