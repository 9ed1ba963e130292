"""RuntimeClasses among the workloads, through the real CLI (`check --workloads --output json`): a pod's
runtimeClassName resolved as Kubernetes' RuntimeClass admission plugin does — `overhead.podFixed` added to its
requests, `scheduling.nodeSelector` and `tolerations` merged — the RuntimeClass counted as read, a missing one a
warning, a pod the plugin rejects an error (issue #19)."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent
from typing import Any

from tests.workloadcheck import check_workloads, line_of

POLICY = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  requirements:
    - key: node.kubernetes.io/instance-type
      operator: In
      values: [c6a.large, c6a.xlarge, c6a.2xlarge]
  providerRef: {name: default}
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector: {karpenter.sh/discovery: t}
  securityGroupSelector: {karpenter.sh/discovery: t}
"""
GVISOR = """\
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
overhead:
  podFixed: {cpu: 500m, memory: 256Mi}
"""


def pod(name: str, runtime_class: str, cpu: str = "1500m", extra: str = "") -> str:
    return (
        dedent(f"""\
        apiVersion: v1
        kind: Pod
        metadata: {{name: {name}}}
        spec:
          runtimeClassName: {runtime_class}
          containers:
            - name: app
              resources: {{requests: {{cpu: {cpu}, memory: 1Gi}}}}
        """)
        + extra
    )


def check(tmp_path: Path, *documents: str) -> tuple[int, dict[str, Any]]:
    return check_workloads(tmp_path, POLICY, "---\n".join(documents))


def workload(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(w for w in report["workloads"] if w["object"] == name)


def test_the_overhead_of_the_runtime_class_adds_to_the_pods_requests(tmp_path: Path) -> None:
    """1.5 vCPU + the class's 500m: 2 vCPU, more than a c6a.large holds (1.93 allocatable): only the larger types."""
    code, report = check(tmp_path, GVISOR, pod("sandboxed", "gvisor"))
    assert code == 0, report["findings"]
    sandboxed = workload(report, "Pod/sandboxed")
    assert sandboxed["requests"] == {"cpu": "2", "memory": "1280Mi"}
    assert sandboxed["instance_types"] == ["c6a.2xlarge", "c6a.xlarge"]
    assert report["summary"]["kinds"]["RuntimeClass"] == 1, "the RuntimeClass is counted as read"
    assert report["summary"]["objects"] == 4, "the Provisioner, its AWSNodeTemplate, the RuntimeClass, the Pod"


def test_a_runtime_class_that_is_not_among_the_files_is_a_warning_at_the_name(tmp_path: Path) -> None:
    code, report = check(tmp_path, pod("kata", "kata-fc"))
    assert code == 0
    [finding] = report["findings"]
    assert (finding["rule"], finding["severity"], finding["object"], finding["line"]) == (
        "unresolved-reference", "warning", "Pod/kata", line_of(tmp_path, "runtimeClassName:"),
    )  # fmt: skip
    assert finding["message"] == (
        "runtimeClassName kata-fc: there is no RuntimeClass kata-fc among the files read; its overhead is not "
        "counted, and Kubernetes rejects the pod if the cluster has none"
    )
    assert workload(report, "Pod/kata")["requests"] == {"cpu": "1500m", "memory": "1Gi"}


def test_the_scheduling_of_the_runtime_class_joins_the_pods(tmp_path: Path) -> None:
    """The class's nodeSelector (a label no provisioner defines) makes the pod unschedulable, as in a cluster."""
    runtime_class = GVISOR + "scheduling:\n  nodeSelector: {sandbox: gvisor}\n"
    code, report = check(tmp_path, runtime_class, pod("sandboxed", "gvisor"))
    assert code == 1
    assert not workload(report, "Pod/sandboxed")["schedulable"]
    [error] = [f for f in report["findings"] if f["severity"] == "error"]
    assert error["rule"] == "workload-unschedulable" and "sandbox" in error["message"]


def test_a_pod_the_admission_plugin_rejects_is_an_error(tmp_path: Path) -> None:
    runtime_class = GVISOR + "scheduling:\n  nodeSelector: {sandbox: gvisor}\n"
    selector = "  nodeSelector: {sandbox: runc}\n"
    code, report = check(tmp_path, runtime_class, pod("sandboxed", "gvisor", extra=selector))
    assert code == 1
    [error] = [f for f in report["findings"] if f["severity"] == "error"]
    line = line_of(tmp_path, "runtimeClassName:")
    assert (error["rule"], error["object"], error["line"]) == ("invalid-workload", "Pod/sandboxed", line)
    assert error["message"] == (
        "Kubernetes rejects the pod (runtimeClassName gvisor): its nodeSelector sandbox=runc conflicts with "
        "sandbox=gvisor of RuntimeClass gvisor (scheduling.nodeSelector)"
    )


def test_a_runtime_class_with_an_unreadable_overhead_is_an_error_at_the_field(tmp_path: Path) -> None:
    broken = GVISOR.replace("cpu: 500m", "cpu: lots")
    code, report = check(tmp_path, broken, pod("sandboxed", "gvisor"))
    assert code == 1
    [error] = [f for f in report["findings"] if f["severity"] == "error"]
    assert (error["rule"], error["object"], error["line"]) == (
        "invalid-workload", "RuntimeClass/gvisor", line_of(tmp_path, "podFixed:"),
    )  # fmt: skip
    assert "lots" in error["message"]


def test_an_overhead_beyond_what_a_quantity_holds_is_a_warning_at_the_field_and_read_capped(tmp_path: Path) -> None:
    """`1e99999999` of cpu costs microseconds, as in a pod's own requests: a quantity-out-of-range warning at the
    RuntimeClass's field, and the pod fits nowhere (it asks for the bound)."""
    huge = GVISOR.replace("cpu: 500m", "cpu: 1e99999999")
    code, report = check(tmp_path, huge, pod("sandboxed", "gvisor"))
    assert code == 1
    [warning] = [f for f in report["findings"] if f["severity"] == "warning"]
    assert (warning["rule"], warning["object"], warning["line"]) == (
        "quantity-out-of-range", "RuntimeClass/gvisor", line_of(tmp_path, "podFixed:"),
    )  # fmt: skip
    assert "'1e99999999' is beyond the largest value" in warning["message"]
    assert not workload(report, "Pod/sandboxed")["schedulable"]
