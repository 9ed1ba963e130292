"""The `workload-unschedulable` message read at a glance (#27): one provisioner per line, the most relevant first;
Karpenter's internal wording put in the user's terms (its sentence kept); did-you-mean for the values of a custom
label; the toleration or nodeSelector that makes a provisioner take the pod, offered only when it does; the
`multi-arch` warning; and the outputs that carry multi-line messages (text, Markdown, GitHub)."""

from __future__ import annotations

from pathlib import Path

from karpenter_policy.checks.findings import Finding, Report
from karpenter_policy.checks.reporters import render_github, render_text
from karpenter_policy.commands.costcomment import markdown_text
from karpenter_policy.model.taints import Taint
from karpenter_policy.scheduling.plan import one_line
from karpenter_policy.scheduling.reasons import toleration_text
from tests.checks.proof.test_placement import deployment, findings, provisioner, requirements, run

GPU = provisioner(
    "gpu",
    "labels: {accelerator: nvidia}\ntaints: [{key: nvidia.com/gpu, value: 'true', effect: NoSchedule}]\n"
    + requirements("karpenter.k8s.aws/instance-family In g5"),
    weight=10,
)
GENERAL = provisioner("general", requirements("karpenter.k8s.aws/instance-category In c,m"))
GPU_POD = "containers:\n  - name: c\n    resources: {limits: {nvidia.com/gpu: 1}}\n"


def unschedulable(report: Report) -> dict[str, str]:
    return {f.object_ref: f.message for f in findings(report, "workload-unschedulable")}


def test_one_reason_per_line_and_the_fixable_provisioner_first(tmp_path: Path) -> None:
    report, _, [placement] = run(tmp_path, [GENERAL, GPU], [deployment("cuda", GPU_POD)])
    message = unschedulable(report)["Deployment/cuda"]
    assert message.split("\n") == [
        "no provisioner can launch a node for it:",
        "  provisioner gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated",
        '    fix: add tolerations: [{key: nvidia.com/gpu, operator: Equal, value: "true", effect: NoSchedule}] to the '
        "pod spec (and nodeSelector: {accelerator: nvidia} to keep it on these nodes); this provisioner then takes it",
        "  provisioner general: no instance type has 1 GPU under karpenter.k8s.aws/instance-category In [c, m]",
    ]
    assert placement.leading_reason() == "provisioner gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated"


def test_the_toleration_offered_is_one_that_works(tmp_path: Path) -> None:
    """With the suggested toleration added, the pod is placed on that provisioner."""
    toleration = "tolerations: [{key: nvidia.com/gpu, operator: Equal, value: 'true', effect: NoSchedule}]\n"
    report, _, [placement] = run(tmp_path, [GENERAL, GPU], [deployment("cuda", toleration + GPU_POD)])
    assert placement.provisioner == "gpu" and not unschedulable(report)


def test_no_fix_when_the_toleration_would_not_be_enough(tmp_path: Path) -> None:
    """gpu tolerated would still have no type for 500 vCPU: no toleration is offered."""
    pod = "containers:\n  - name: c\n    resources: {requests: {cpu: '500'}, limits: {nvidia.com/gpu: 1}}\n"
    report, _, _ = run(tmp_path, [GENERAL, GPU], [deployment("huge", pod)])
    message = unschedulable(report)["Deployment/huge"]
    assert "provisioner gpu: taint nvidia.com/gpu=true:NoSchedule not tolerated" in message
    assert "fix:" not in message


def test_did_you_mean_for_a_custom_label_value_with_the_node_selector_that_fits(tmp_path: Path) -> None:
    gpu = provisioner("gpu", "labels: {workload-type: gpu}\n" + requirements("karpenter.k8s.aws/instance-family In g5"))
    report, _, [placement] = run(tmp_path, [gpu], [deployment("trainer", "nodeSelector: {workload-type: gpus}\n"
                                                                         + GPU_POD)])
    message = unschedulable(report)["Deployment/trainer"]
    assert message.split("\n")[1:] == [
        "  provisioner gpu: workload-type In [gpus] not in [gpu] (did you mean workload-type: gpu?)",
        "    fix: set nodeSelector: {workload-type: gpu} in the pod spec; this provisioner then takes it",
    ]
    assert placement.reasons["gpu"].karpenter == "workload-type In [gpus] not in [gpu]"


def test_no_value_hint_for_a_well_known_label_or_a_value_far_from_any(tmp_path: Path) -> None:
    amd = provisioner("amd", "labels: {team: data}\n" + requirements("kubernetes.io/arch In amd64"))
    workloads = [
        deployment("arm", "nodeSelector: {kubernetes.io/arch: arm64}\ncontainers: []"),
        deployment("ml", "nodeSelector: {team: machine-learning}\ncontainers: []"),
    ]
    report, _, _ = run(tmp_path, [amd], workloads)
    messages = unschedulable(report)
    assert messages["Deployment/arm"].endswith("provisioner amd: kubernetes.io/arch In [arm64] not in [amd64]")
    assert messages["Deployment/ml"].endswith("provisioner amd: team In [machine-learning] not in [data]")
    assert "did you mean" not in messages["Deployment/arm"] + messages["Deployment/ml"]


def test_an_undefined_label_in_plain_words_with_karpenters_sentence(tmp_path: Path) -> None:
    report, _, [placement] = run(tmp_path, [GENERAL], [deployment("ml", "nodeSelector: {team: ml}\ncontainers: []")])
    assert unschedulable(report)["Deployment/ml"].split("\n")[1] == (
        '  provisioner general: the pod requires label team, which its nodes never have (Karpenter: "label team does '
        'not have known values")'
    )
    assert placement.reasons["general"].karpenter == "label team does not have known values"
    assert placement.reasons["general"].fix is None
    assert placement.to_json()["reasons"] == {
        "general": {
            "kind": "requirements",
            "message": placement.reasons["general"].message,
            "karpenter": "label team does not have known values",
        }
    }


def test_the_provisioner_the_pod_targets_leads(tmp_path: Path) -> None:
    """The pod tolerates batch's taint and selects its label: batch's reason (no type has room) comes first, before
    general's (its nodes lack the label), whatever their order."""
    batch = provisioner(
        "batch",
        "labels: {workload: batch}\ntaints: [{key: workload, value: batch, effect: NoSchedule}]\n"
        + requirements("karpenter.k8s.aws/instance-size In large"),
    )
    pod = (
        "nodeSelector: {workload: batch}\ntolerations: [{key: workload, operator: Exists}]\n"
        "containers:\n  - name: c\n    resources: {requests: {cpu: '6'}}\n"
    )
    report, _, _ = run(tmp_path, [GENERAL, batch], [deployment("job", pod)])
    assert unschedulable(report)["Deployment/job"].split("\n")[1].startswith("  provisioner batch: no instance type")


def test_toleration_text_is_yaml_that_reads_back_as_strings() -> None:
    import yaml

    for taint in (Taint("nvidia.com/gpu", "NoSchedule", "true"), Taint("dedicated", "NoExecute", "1.5"),
                  Taint("spot", "NoSchedule")):
        (toleration,) = yaml.safe_load(f"[{toleration_text(taint)}]")
        assert toleration["key"] == taint.key and toleration["effect"] == taint.effect
        assert toleration.get("value", "") == taint.value and isinstance(toleration.get("value", ""), str)


def test_multi_line_messages_in_each_output() -> None:
    message = "no provisioner can launch a node for it:\n  provisioner a: x\n    fix: y\n  provisioner b: z"
    report = Report()
    report.findings.append(Finding("workload-unschedulable", "error", message, "a.yaml", 3, 1, "Pod/p"))
    text = render_text(report, "checked", quiet=True)
    assert text == (
        "a.yaml:3:1: error: Pod/p: no provisioner can launch a node for it: [workload-unschedulable]\n"
        "    provisioner a: x\n      fix: y\n    provisioner b: z\n"
    )
    assert "%0A  provisioner a: x%0A" in render_github(report, quiet=True)
    assert markdown_text(message) == (
        "no provisioner can launch a node for it:<br>provisioner a: x<br>fix: y<br>provisioner b: z"
    )
    assert one_line(message) == "no provisioner can launch a node for it: provisioner a: x; fix: y; provisioner b: z"


def test_multi_arch_is_warned_only_without_an_architecture(tmp_path: Path) -> None:
    mixed = provisioner("mixed", requirements("kubernetes.io/arch In amd64,arm64",
                                              "karpenter.k8s.aws/instance-family In m7g,m7i"))
    amd = provisioner("amd", requirements("kubernetes.io/arch In amd64"))
    workloads = [
        deployment("any", "containers: []"),
        deployment("pinned", "nodeSelector: {kubernetes.io/arch: arm64}\ncontainers: []"),
        deployment(
            "prefers",
            "affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: "
            "{matchExpressions: [{key: kubernetes.io/arch, operator: In, values: [arm64]}]}}]}}\ncontainers: []",
        ),
    ]
    report, _, _ = run(tmp_path, [mixed], workloads)
    (warning,) = findings(report, "multi-arch")
    assert warning.object_ref == "Deployment/any" and warning.severity == "warning"
    assert "amd64 (m7i." in warning.message and "arm64 (m7g." in warning.message
    (tmp_path / "amd").mkdir()
    report, _, _ = run(tmp_path / "amd", [amd], workloads[:1])
    assert findings(report, "multi-arch") == []
