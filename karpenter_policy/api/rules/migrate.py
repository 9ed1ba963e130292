"""The rules of `migrate` (v1alpha5 Provisioner + AWSNodeTemplate → v1 NodePool + EC2NodeClass): behaviour of
Karpenter v0.31 that no v1 field carries over, each with its mitigation, and the proof that a NodePool admits what
its Provisioner did. What the converter cannot write at all is `v1-conversion` (`output.py`).

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, WARNING, Rule

MIGRATION_NOT_EQUIVALENT = Rule(
    id="migration-not-equivalent",
    severity=ERROR,
    summary="A migrated NodePool does not admit exactly what its Provisioner admitted.",
    description=(
        "migrate proves, with Z3 against the instance-type catalog, that each NodePool admits exactly the "
        "instance type × zone × capacity-type offerings (with the custom label values), labels and taints that "
        "its Provisioner admitted. When it does not — or the solver gives up — the finding names an offering one "
        "admits and the other does not, and the Provisioner is left as it was. It cannot be silenced."
    ),
    silenceable=False,
)

MIGRATION_BUDGET = Rule(
    id="migration-budget",
    severity=WARNING,
    summary="Karpenter v0.31 disrupted one node at a time; a v1 NodePool without budgets disrupts 10 % at once.",
    description=(
        "Karpenter v0.31 deprovisioned one node at a time. A v1 NodePool without spec.disruption.budgets gets "
        "the default budget nodes: 10%, so a large pool is disrupted many nodes at once. migrate writes "
        "budgets: [{nodes: \"1\"}] (or what --budget says) to keep v0.31's pace."
    ),
    karpenter="core-v1 pkg/apis/v1/nodepool.go: Disruption",
)

MIGRATION_EMPTINESS = Rule(
    id="migration-emptiness",
    severity=WARNING,
    summary="ttlSecondsAfterEmpty becomes consolidationPolicy WhenEmpty with consolidateAfter.",
    description=(
        "v1 has no emptiness TTL: ttlSecondsAfterEmpty becomes consolidationPolicy: WhenEmpty with "
        "consolidateAfter set to the TTL. Empty nodes are then removed by the disruption controller, within the "
        "NodePool's budgets, and a node counts as empty once its last non-daemon pod is gone for consolidateAfter."
    ),
    karpenter="core-v1 pkg/controllers/nodeclaim/disruption/consolidation.go: Reconcile",
)

MIGRATION_EXPIRY = Rule(
    id="migration-expiry",
    severity=WARNING,
    summary="ttlSecondsUntilExpired becomes expireAfter, which is forceful in v1.",
    description=(
        "v1's expireAfter deletes an expired node at once: it no longer waits for disruption budgets or for "
        "replacement capacity, and pods blocked by a PodDisruptionBudget wait at most terminationGracePeriod "
        "when one is set. Set spec.template.spec.terminationGracePeriod to bound the drain, or expireAfter: Never "
        "and let drift replace nodes within the budgets."
    ),
    karpenter="core-v1 pkg/controllers/nodeclaim/expiration/controller.go: Reconcile",
)

MIGRATION_DRIFT = Rule(
    id="migration-drift",
    severity=WARNING,
    summary="Drift is always on in v1: nodes that no longer match their NodePool or EC2NodeClass are replaced.",
    description=(
        "Karpenter v0.31 replaced drifted nodes only with featureGates.driftEnabled (off by default). v1 always "
        "does: a new AMI behind an @latest alias, an edited requirement or EC2NodeClass replaces nodes, within "
        "the NodePool's budgets. To keep v0.31's behaviour add a budget {nodes: \"0\", reasons: [Drifted]}; to "
        "control when AMIs change, pin the alias to a version (al2023@v20240807)."
    ),
    karpenter="core-v1 pkg/controllers/nodeclaim/disruption/drift.go: isDrifted",
)

MIGRATION_KUBELET = Rule(
    id="migration-kubelet",
    severity=WARNING,
    summary="kubeletConfiguration moved from the Provisioner to the EC2NodeClass.",
    description=(
        "v1 keeps kubelet settings in the EC2NodeClass (spec.kubelet). Provisioners that share an "
        "AWSNodeTemplate with different kubelet settings get an EC2NodeClass each (<template>-<provisioner>): "
        "edit them together from now on."
    ),
    karpenter="aws-v1 pkg/apis/v1/ec2nodeclass.go: KubeletConfiguration",
)

MIGRATION_AMI = Rule(
    id="migration-ami",
    severity=WARNING,
    summary="amiFamily without amiSelector becomes an amiSelectorTerms alias at @latest.",
    description=(
        "v0.31 launched the latest EKS-optimised AMI of the amiFamily; v1 says so with amiSelectorTerms "
        "[{alias: <family>@latest}]. With drift always on, every new AMI then replaces every node (within the "
        "budgets): pin a version (al2@v20240807) to choose when. Ubuntu has no alias in v1: name its AMIs with "
        "an amiSelector (they boot with the AL2 bootstrap) or move to AL2023 or Bottlerocket."
    ),
    karpenter="aws-v1 pkg/apis/v1/ec2nodeclass.go: AMISelectorTerm",
)

MIGRATION_INLINE_PROVIDER = Rule(
    id="migration-inline-provider",
    severity=WARNING,
    summary="An inline spec.provider becomes an EC2NodeClass of its own, named after the Provisioner.",
    description=(
        "v1 has no inline node template: a Provisioner's spec.provider becomes an EC2NodeClass named after the "
        "Provisioner, written before its NodePool in the same file, and referenced by nodeClassRef."
    ),
)

MIGRATION_NOT_WRITTEN = Rule(
    id="migration-not-written",
    severity=ERROR,
    summary="A Karpenter v1alpha5 object that migrate cannot rewrite where it is.",
    description=(
        "migrate rewrites YAML files; a Jinja2 template (*.yaml.j2) or a kind: List is not rewritten. Migrate "
        "the rendered output, or convert the template by hand with migrate's output as a guide."
    ),
)

MIGRATION_WORKLOAD_MOVED = Rule(
    id="migration-workload-moved",
    severity=ERROR,
    summary="A workload would land on another pool, or on none, after migration.",
    description=(
        "With --workloads, migrate checks every workload again on the migrated files, as check --workloads "
        "places it: the pool that launches a node for it and every pool that could take it must be what they were "
        "on the Provisioners (a NodePool keeps its Provisioner's name). A selector left on "
        "karpenter.sh/provisioner-name, a Provisioner that was not migrated, or a weight or limit that now decides "
        "otherwise shows here, naming both sides. So does a change of its landing set (every offering it may land "
        "on, with the node's labels and taints), with a node one side admits and the other not. It cannot be "
        "silenced."
    ),
    karpenter="core-v1 pkg/apis/v1/labels.go: NodePoolLabelKey",
    silenceable=False,
)

RULES = (
    MIGRATION_NOT_EQUIVALENT,
    MIGRATION_BUDGET,
    MIGRATION_EMPTINESS,
    MIGRATION_EXPIRY,
    MIGRATION_DRIFT,
    MIGRATION_KUBELET,
    MIGRATION_AMI,
    MIGRATION_INLINE_PROVIDER,
    MIGRATION_NOT_WRITTEN,
    MIGRATION_WORKLOAD_MOVED,
)
