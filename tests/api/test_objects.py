"""Typed objects built from validated documents carry what the solver and reconciler need."""

from __future__ import annotations

from decimal import Decimal

from karpenter_policy.api.objects import AWSNodeTemplate, Provisioner
from karpenter_policy.checks.source.files import load_file
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import Requirement
from karpenter_policy.model.taints import Taint


def _doc(file: str, index: int = 0) -> dict[str, object]:
    data = load_file(file)[index].data
    assert isinstance(data, dict)
    return data


def test_provisioner_is_defaulted_and_labels_become_requirements() -> None:
    batch = Provisioner.from_document(_doc("policies/spot-batch.yaml"))
    assert batch.name == "spot-batch" and batch.weight == 50
    assert batch.requirements[wk.CAPACITY_TYPE] == Requirement.new(wk.CAPACITY_TYPE, "In", ["spot"])
    assert batch.requirements[wk.OS] == Requirement.new(wk.OS, "In", ["linux"])  # defaulted
    assert wk.INSTANCE_CATEGORY not in batch.requirements  # family given: no category default
    assert batch.requirements["workload"] == Requirement.new("workload", "In", ["batch"])  # from labels
    assert batch.taints == (Taint("workload", "NoSchedule", "batch"),)
    assert batch.limits == {"cpu": Decimal(2000)}
    assert batch.ttl_seconds_after_empty == 30 and not batch.consolidation_enabled
    assert batch.provider_ref is not None and batch.provider_ref.name == "default"


def test_provisioner_version_annotation_and_undefaulted_form() -> None:
    default = Provisioner.from_document(_doc("policies/default.yaml"), defaulted=False)
    assert default.version == "2026.11.1"
    assert wk.OS not in default.requirements
    assert default.consolidation_enabled and default.limits["memory"] == Decimal(4000 * 2**30)


def test_node_template() -> None:
    template = AWSNodeTemplate.from_document(_doc("policies/nodetemplates.yaml", 1))
    assert template.name == "gpu" and template.ami_family == "AL2"
    assert template.subnet_selector == {"karpenter.sh/discovery": "platform-prod"}
    assert template.block_device_mappings[0]["ebs"]["volumeSize"] == "300Gi"
