"""What a rule reports about one object: a rule id, a path into the object, a message.

The api layer has no notion of files or lines; the policy layer maps `path` to a file position.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Path = tuple[str | int, ...]

ERROR = "error"
WARNING = "warning"

# Stable rule ids (the `rule` of each finding in every output format; docs/rules/<id>.md): never rename, only add.
PARSE_ERROR = "parse-error"
SCHEMA = "schema"
INVALID_REQUIREMENT = "invalid-requirement"
RESTRICTED_LABEL = "restricted-label"
INVALID_SPEC = "invalid-spec"
DEPRECATED_LABEL = "deprecated-label"
DUPLICATE_NAME = "duplicate-name"
UNRESOLVED_REFERENCE = "unresolved-reference"
TEMPLATE_ERROR = "template-error"
V1_CONVERSION = "v1-conversion"
CONFIGMAP_TOO_LARGE = "configmap-too-large"
REQUIREMENTS_CONFLICT = "requirements-conflict"
NO_INSTANCE_TYPE = "no-instance-type"
UNKNOWN_INSTANCE_TYPE = "unknown-instance-type"
SOLVER_TIMEOUT = "solver-timeout"
WORKLOAD_UNSCHEDULABLE = "workload-unschedulable"
INVALID_WORKLOAD = "invalid-workload"
OVERLAP = "overlap"
SHADOWED = "shadowed"
LIMITS = "limits"
PINNING_VIOLATION = "pinning-violation"
PINNING_CONFLICT = "pinning-conflict"
RESERVED_NAME = "reserved-name"
#: (warning) a quantity beyond ±(2^63-1), what a Kubernetes quantity holds as an integer: read as that bound.
QUANTITY_OUT_OF_RANGE = "quantity-out-of-range"
#: (warning) a label key close to a well-known key or in the wrong domain (`karpenter.sh/instance-family`).
UNKNOWN_LABEL_KEY = "unknown-label-key"
#: (warning) a value of a well-known key that no instance type or offering can carry (`capacity-type ondemand`).
UNKNOWN_LABEL_VALUE = "unknown-label-value"
#: (warning) an AWS id in a selector that EC2 would not recognise, though Karpenter's webhook admits it.
AWS_ID_SHAPE = "aws-id-shape"
#: (warning) a workload's topology key that no node the provisioners launch has (`topology.kubernetes.io/hostname`).
UNKNOWN_TOPOLOGY_KEY = "unknown-topology-key"
#: (warning) a requirement names a previous-generation instance type or family (Karpenter v0.31 launches it).
PREVIOUS_GENERATION = "previous-generation"
#: (warning) values of an In requirement that no instance type can have under the other requirements and defaults.
DEAD_VALUE = "dead-value"
#: (warning) a `${VAR}` placeholder left in a selector or tag, unless the object is marked for Flux substitution.
PLACEHOLDER = "placeholder"
#: (error) userData its AMI family cannot read: Bottlerocket TOML, AL2/Ubuntu MIME multipart.
INVALID_USER_DATA = "invalid-user-data"
#: a zone of another region than the catalog's (`--region`).
ZONE_OUTSIDE_REGION = "zone-outside-region"
#: (warning) a ttlSecondsUntilExpired under an hour: nodes replaced about as fast as they launch, or without end.
TTL_CHURN = "ttl-churn"
#: (error, check --workloads) a pod's volumes (their PersistentVolumes' zones) leave no zone: no node can hold it.
VOLUME_ZONES_CONFLICT = "volume-zones-conflict"
#: a workload's replicas (a Job's parallelism) that is not an integer of 0 to 100,000.
INVALID_REPLICAS = "invalid-replicas"
#: (error) a PlacementTest expectation the plan of `check --workloads` does not meet (`karpenter-policy test`).
PLACEMENT_TEST_FAILED = "placement-test-failed"
#: (warning, check --workloads) a workload that names no CPU architecture may land on arm64 as well as amd64 nodes.
MULTI_ARCH = "multi-arch"


@dataclass(frozen=True, slots=True)
class Violation:
    """One problem with one object.

    `path` locates the offending node inside the object (`("spec", "requirements", 2, "operator")`);
    `at_key` says the mapping key itself is at fault (an unknown field, a restricted label name), not its value;
    `in_text` is where in the node's multi-line text the problem is (1-based line and column: a TOML error in
    userData), None for the node as a whole.
    """

    rule: str
    path: Path
    message: str
    severity: str = ERROR
    at_key: bool = False
    related: tuple[Path, ...] = field(default=())
    in_text: tuple[int, int] | None = None


def render_path(path: Path) -> str:
    """`spec.requirements[2].operator` — the kubectl-style name of a field."""
    out = ""
    for part in path:
        if isinstance(part, int) or "." in part or "/" in part:
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out
