"""The rules `check` proves of each Provisioner against the instance-type catalog (with the solver).

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, WARNING, Rule

REQUIREMENTS_CONFLICT = Rule(
    id="requirements-conflict",
    severity=ERROR,
    summary="Requirements, labels and Karpenter defaults that no instance type satisfies together.",
    description=(
        "A Provisioner's or NodePool's requirements, labels and Karpenter's defaults contradict each other: no "
        "instance type can satisfy them together. The finding is placed at the first line of the smallest "
        "conflicting set, the other lines are related locations. Karpenter would never launch a node for it."
    ),
    karpenter=(
        "core pkg/scheduling/requirements.go: Requirements.Compatible; aws pkg/apis/v1alpha5/provisioner.go: "
        "Provisioner.SetDefaults"
    ),
)


NO_INSTANCE_TYPE = Rule(
    id="no-instance-type",
    severity=ERROR,
    summary="A requirement that no instance type of the catalog satisfies.",
    description=(
        "The requirements are consistent with each other, but no instance type of the catalog (its region, zones "
        "and capacity types) satisfies them."
    ),
    karpenter="core pkg/controllers/provisioning/scheduling/nodeclaim.go: filterInstanceTypesByRequirements",
)


UNKNOWN_INSTANCE_TYPE = Rule(
    id="unknown-instance-type",
    severity=ERROR,
    summary="An instance type, family, size or zone that the catalog's region does not have.",
    description=(
        "An instance type, family, size or zone that does not exist in the catalog's region, with the nearest name "
        "suggested. An error when an In requirement names nothing that exists, a warning otherwise. A type newer "
        "than the embedded catalog shows up here: refresh the catalog (`catalog refresh`) or silence the finding."
    ),
    karpenter="aws pkg/providers/instancetype/instancetype.go: Provider.List",
    severity_varies=(
        "an error when an In requirement names nothing that exists, a warning otherwise (a NotIn, a "
        "previous-generation type, other values that exist)"
    ),
)


ZONE_OUTSIDE_REGION = Rule(
    id="zone-outside-region",
    severity=ERROR,
    summary="A zone of another region than the catalog's (--region).",
    description=(
        "A topology.kubernetes.io/zone value that is a zone of another region of the catalog (us-west-2a while "
        "checking us-east-1): the policies are probably meant for that region, given with --region. An error when "
        "no value of the requirement is a zone of the checked region, a warning otherwise."
    ),
    karpenter="aws pkg/providers/instancetype/instancetype.go: Provider.getInstanceTypeZones",
    severity_varies="an error when no value of the requirement is a zone of the checked region, a warning otherwise",
)


UNKNOWN_LABEL_VALUE = Rule(
    id="unknown-label-value",
    severity=WARNING,
    summary="A value of a well-known label that no instance type or offering of the catalog carries.",
    description=(
        "A value of a well-known key with a known domain (capacity type, arch, os, region, instance category, "
        "generation, hypervisor, GPU or accelerator name and manufacturer) that no instance type or offering of the"
        " catalog's region carries (capacity-type ondemand, arch amd), with the nearest valid value. A warning even"
        " when the requirement's other values still work; when none does, the no-instance-type error says so."
    ),
)


PREVIOUS_GENERATION = Rule(
    id="previous-generation",
    severity=WARNING,
    summary="A requirement names a previous-generation instance type or family (Karpenter v0.31 launches it).",
    description=(
        "An instance-type or instance-family requirement names a previous-generation type (p2, p3, g3, f1, dl1, "
        "...): one Karpenter's current instance-type table no longer lists but Karpenter v0.31 launches and AWS "
        "still sells (the us-east-1 price table prices it). The provisioner is proven with it (its facts from "
        "Karpenter v0.31's table, its zones inferred). A warning; --allow-previous-generation acknowledges it."
    ),
    karpenter="aws pkg/providers/instancetype/instancetype.go: Provider.List",
)


DEAD_VALUE = Rule(
    id="dead-value",
    severity=WARNING,
    summary="Values of an In requirement that no instance type can have under the other requirements and defaults.",
    description=(
        "Values of an In requirement on a catalog label (instance family, type, size, category, generation, ...) "
        "that exist in the catalog, yet no instance type the provisioner or NodePool admits has them: another "
        "requirement or one of Karpenter's defaults (kubernetes.io/arch In [amd64] when arch is not required) rules "
        "them out. The provisioner or NodePool still launches the other values: a warning naming the dead values and "
        "what excludes them."
    ),
    karpenter=(
        "core pkg/controllers/provisioning/scheduling/nodeclaim.go: filterInstanceTypesByRequirements; aws "
        "pkg/apis/v1alpha5/provisioner.go: Provisioner.SetDefaults"
    ),
)


SOLVER_TIMEOUT = Rule(
    id="solver-timeout",
    severity=WARNING,
    summary="The solver could not decide within its time limit; nothing was proven.",
    description=(
        "The solver could not decide the Provisioner or NodePool within --timeout-ms: nothing was proven about it. "
        "A warning."
    ),
)


LIMITS = Rule(
    id="limits",
    severity=WARNING,
    summary=(
        "A provisioner's or NodePool's limits are below its smallest instance type: it can never launch a node."
    ),
    description=(
        "A provisioner's or NodePool's limits are below its smallest instance type: it can never launch a node. "
        "A warning."
    ),
    karpenter="core pkg/apis/v1alpha5/limits.go: Limits.ExceededBy",
)


RULES = (
    REQUIREMENTS_CONFLICT,
    NO_INSTANCE_TYPE,
    UNKNOWN_INSTANCE_TYPE,
    ZONE_OUTSIDE_REGION,
    UNKNOWN_LABEL_VALUE,
    PREVIOUS_GENERATION,
    DEAD_VALUE,
    SOLVER_TIMEOUT,
    LIMITS,
)
