"""What a rule reports about one object: a rule id, a path into the object, a message.

The api layer has no notion of files or lines; the policy layer maps `path` to a file position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from karpenter_policy.api.rules import ERROR as ERROR
from karpenter_policy.api.rules import WARNING as WARNING
from karpenter_policy.api.rules import (
    budgets,
    default_severity,
    migrate,
    output,
    pinning,
    proof,
    reading,
    v1,
    webhook,
    workloads,
)

Path = tuple[str | int, ...]

# Stable rule ids (the `rule` of each finding in every output format; docs/rules/<id>.md): never rename, only add.
# Each is declared, with its severity and texts, in its family's module of api/rules/; the checks import the
# id from here.
PARSE_ERROR = reading.PARSE_ERROR.id
SCHEMA = reading.SCHEMA.id
INVALID_REQUIREMENT = webhook.INVALID_REQUIREMENT.id
RESTRICTED_LABEL = webhook.RESTRICTED_LABEL.id
INVALID_SPEC = webhook.INVALID_SPEC.id
DEPRECATED_LABEL = webhook.DEPRECATED_LABEL.id
DEPRECATED_PROVIDER = webhook.DEPRECATED_PROVIDER.id
DUPLICATE_NAME = webhook.DUPLICATE_NAME.id
UNRESOLVED_REFERENCE = webhook.UNRESOLVED_REFERENCE.id
TEMPLATE_ERROR = reading.TEMPLATE_ERROR.id
V1_CONVERSION = output.V1_CONVERSION.id
CONFIGMAP_TOO_LARGE = output.CONFIGMAP_TOO_LARGE.id
REQUIREMENTS_CONFLICT = proof.REQUIREMENTS_CONFLICT.id
NO_INSTANCE_TYPE = proof.NO_INSTANCE_TYPE.id
UNKNOWN_INSTANCE_TYPE = proof.UNKNOWN_INSTANCE_TYPE.id
SOLVER_TIMEOUT = proof.SOLVER_TIMEOUT.id
WORKLOAD_UNSCHEDULABLE = workloads.WORKLOAD_UNSCHEDULABLE.id
INVALID_WORKLOAD = workloads.INVALID_WORKLOAD.id
OVERLAP = workloads.OVERLAP.id
SHADOWED = workloads.SHADOWED.id
LIMITS = proof.LIMITS.id
PINNING_VIOLATION = pinning.PINNING_VIOLATION.id
PINNING_CONFLICT = pinning.PINNING_CONFLICT.id
RESERVED_NAME = output.RESERVED_NAME.id
QUANTITY_OUT_OF_RANGE = webhook.QUANTITY_OUT_OF_RANGE.id
UNKNOWN_LABEL_KEY = webhook.UNKNOWN_LABEL_KEY.id
UNKNOWN_LABEL_VALUE = proof.UNKNOWN_LABEL_VALUE.id
AWS_ID_SHAPE = webhook.AWS_ID_SHAPE.id
UNKNOWN_TOPOLOGY_KEY = workloads.UNKNOWN_TOPOLOGY_KEY.id
PREVIOUS_GENERATION = proof.PREVIOUS_GENERATION.id
DEAD_VALUE = proof.DEAD_VALUE.id
PLACEHOLDER = webhook.PLACEHOLDER.id
INVALID_USER_DATA = webhook.INVALID_USER_DATA.id
ZONE_OUTSIDE_REGION = proof.ZONE_OUTSIDE_REGION.id
TTL_CHURN = webhook.TTL_CHURN.id
VOLUME_ZONES_CONFLICT = workloads.VOLUME_ZONES_CONFLICT.id
INVALID_REPLICAS = workloads.INVALID_REPLICAS.id
PLACEMENT_TEST_FAILED = workloads.PLACEMENT_TEST_FAILED.id
CEL_RULE = v1.CEL_RULE.id
RUNTIME_VALIDATION = v1.RUNTIME_VALIDATION.id
MIN_VALUES = v1.MIN_VALUES.id
DURATION_OVERFLOW = v1.DURATION_OVERFLOW.id
STATIC_NODEPOOL = v1.STATIC_NODEPOOL.id
FOREIGN_NODE_CLASS = v1.FOREIGN_NODE_CLASS.id
MULTI_ARCH = workloads.MULTI_ARCH.id
PLACEMENT_GROUP_PARTITION = workloads.PLACEMENT_GROUP_PARTITION.id
BUDGET_UNREADABLE = budgets.BUDGET_UNREADABLE.id
BUDGET_BLOCKS_DRIFT = budgets.BUDGET_BLOCKS_DRIFT.id
BUDGET_WINDOW_TOO_SHORT = budgets.BUDGET_WINDOW_TOO_SHORT.id
BUDGET_REASON_UNBOUNDED = budgets.BUDGET_REASON_UNBOUNDED.id
BUDGET_OVERLAP = budgets.BUDGET_OVERLAP.id
MIGRATION_NOT_EQUIVALENT = migrate.MIGRATION_NOT_EQUIVALENT.id
MIGRATION_BUDGET = migrate.MIGRATION_BUDGET.id
MIGRATION_EMPTINESS = migrate.MIGRATION_EMPTINESS.id
MIGRATION_EXPIRY = migrate.MIGRATION_EXPIRY.id
MIGRATION_DRIFT = migrate.MIGRATION_DRIFT.id
MIGRATION_KUBELET = migrate.MIGRATION_KUBELET.id
MIGRATION_AMI = migrate.MIGRATION_AMI.id
MIGRATION_INLINE_PROVIDER = migrate.MIGRATION_INLINE_PROVIDER.id
MIGRATION_NOT_WRITTEN = migrate.MIGRATION_NOT_WRITTEN.id
MIGRATION_WORKLOAD_MOVED = migrate.MIGRATION_WORKLOAD_MOVED.id


@dataclass(frozen=True, slots=True)
class Violation:
    """One problem with one object.

    `path` locates the offending node inside the object (`("spec", "requirements", 2, "operator")`);
    `at_key` says the mapping key itself is at fault (an unknown field, a restricted label name), not its value;
    `in_text` is where in the node's multi-line text the problem is (1-based line and column: a TOML error in
    userData), None for the node as a whole. `severity` left empty is the rule's declared severity (`api/rules`);
    a check gives another only for a rule whose declaration says when it varies.
    """

    rule: str
    path: Path
    message: str
    severity: str = ""
    at_key: bool = False
    related: tuple[Path, ...] = field(default=())
    in_text: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if not self.severity:
            object.__setattr__(self, "severity", default_severity(self.rule))


def render_path(path: Path) -> str:
    """`spec.requirements[2].operator` — the kubectl-style name of a field."""
    out = ""
    for part in path:
        if isinstance(part, int) or "." in part or "/" in part:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out
