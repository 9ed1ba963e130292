"""The rules of what `compile` writes: constraint sets, the index, the ConfigMap, the v1 manifests.

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, Rule

RESERVED_NAME = Rule(
    id="reserved-name",
    severity=ERROR,
    summary="A name that compile cannot use: its constraint set would overwrite the index of the sets.",
    description="compile: a Provisioner named `index` would overwrite the index of the constraint sets: rename it.",
    silenceable=False,
)


CONFIGMAP_TOO_LARGE = Rule(
    id="configmap-too-large",
    severity=ERROR,
    summary="The compiled constraint sets exceed what one ConfigMap can hold (1 MiB).",
    description=(
        "compile: the constraint sets do not fit in one ConfigMap (1 MiB); the finding names the set that weighs most."
    ),
    silenceable=False,
)


V1_CONVERSION = Rule(
    id="v1-conversion",
    severity=ERROR,
    summary="A v1alpha5 setting that has no faithful karpenter.sh/v1 NodePool / EC2NodeClass form.",
    description=(
        "compile --api v1: a v1alpha5 setting that has no faithful karpenter.sh/v1 NodePool or EC2NodeClass "
        "form."
    ),
    severity_varies=(
        "an error where a setting has no v1 form, a warning where it is converted to the nearest one (an Ubuntu "
        "AMI family as AL2, a volume size rounded up to whole Gi, a containerRuntime dropped)"
    ),
)


RULES = (RESERVED_NAME, CONFIGMAP_TOO_LARGE, V1_CONVERSION)
