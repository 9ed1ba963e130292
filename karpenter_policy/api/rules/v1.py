"""The rules of Karpenter v1 objects (NodePool, NodeClaim, EC2NodeClass at v1.14.1): what the API server's CEL
rules and Karpenter's runtime validation refuse (`api/v1/`), and a duration Karpenter's Go cannot hold (in a v1 object
or a v1alpha5 Provisioner's TTL). None of these can be silenced: Karpenter refuses the object, never makes it Ready,
or cannot read it, whatever a directive says. A NodePool whose nodeClassRef is another provider's class is an error
the tool cannot check further: Karpenter's AWS provider never manages it. And a NodePool Karpenter admits but, by
default, gives no node: a static one (`spec.replicas`), a warning.

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, WARNING, Rule

CEL_RULE = Rule(
    id="cel-rule",
    severity=ERROR,
    summary="A Karpenter v1 object fails one of its CRD's CEL rules (x-kubernetes-validations).",
    description=(
        "Karpenter v1 checks its objects with the CEL rules of its CRDs, evaluated by the Kubernetes API server: an "
        "object that fails one is refused by kubectl apply, Argo CD or Flux. The finding carries the rule's own "
        "message at the field the rule is on. A rule that cannot be evaluated refuses the object as well. It cannot "
        "be silenced."
    ),
    karpenter=(
        "core-v1 pkg/apis/crds/karpenter.sh_nodepools.yaml; core-v1 pkg/apis/crds/karpenter.sh_nodeclaims.yaml; "
        "aws-v1 pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml"
    ),
    silenceable=False,
)


RUNTIME_VALIDATION = Rule(
    id="runtime-validation",
    severity=ERROR,
    summary="A NodePool that the API server admits but Karpenter v1's RuntimeValidate refuses.",
    description=(
        "Karpenter v1's NodePool readiness controller validates what its CRD cannot: template label keys and "
        "values, taints and startup taints, and requirements. A NodePool that fails is stored but marked "
        "ValidationSucceeded=False and never launches a node. It cannot be silenced."
    ),
    karpenter="core-v1 pkg/apis/v1/nodepool_validation.go: RuntimeValidate",
    silenceable=False,
)


MIN_VALUES = Rule(
    id="min-values",
    severity=ERROR,
    summary="A NodePool requirement's minValues that the instance types it admits can never meet.",
    description=(
        "Karpenter v1 launches a node for a NodePool only when the instance types it may launch carry at least "
        "`minValues` distinct values of each key a requirement sets it on (the instance-type names, families, "
        "zones…); under the default Strict minValues policy it launches nothing otherwise. The solver proves the "
        "NodePool's instance types against the catalog and counts the values as Karpenter does (a label no "
        "instance type carries has none). The finding is at the requirement's `minValues`, with the values that "
        "remain. Proven against the catalog: a cluster whose nodes launch from fewer types (subnets in fewer "
        "zones, a smaller region) has fewer still. Under `--min-values-policy BestEffort` (Karpenter's operator "
        "flag) Karpenter launches the nodes with minValues lowered to what remains, so the finding is a warning."
    ),
    karpenter="core-v1 pkg/cloudprovider/types.go: InstanceTypes.SatisfiesMinValues, InstanceTypes.Truncate",
    severity_varies="a warning under --min-values-policy BestEffort (Karpenter lowers minValues and launches)",
)


DURATION_OVERFLOW = Rule(
    id="duration-overflow",
    severity=ERROR,
    summary="A duration the CRD admits but Go's time.Duration cannot hold (over 2562047h47m16.854775807s).",
    description=(
        "Karpenter keeps every duration in Go's time.Duration, an int64 of nanoseconds: at most "
        "2562047h47m16.854775807s, about 292 years. The CRDs' patterns bound the digits of neither. In v1, "
        "consolidateAfter and expireAfter (NillableDuration), terminationGracePeriod and a budget's duration "
        "(metav1.Duration) are decoded with time.ParseDuration, which refuses a longer value: the API server stores "
        "the object, but Karpenter's controller cannot decode it. In v1alpha5, Karpenter v0.31 converts "
        "ttlSecondsUntilExpired (and ttlSecondsAfterEmpty without consolidation) with "
        "time.ParseDuration(\"<n>s\") under lo.Must, which panics beyond 9223372036 seconds. It cannot be silenced."
    ),
    karpenter=(
        "core-v1 pkg/apis/v1/duration.go: NillableDuration.UnmarshalJSON; "
        "core pkg/utils/nodepool/nodepool.go: New"
    ),
    silenceable=False,
)


STATIC_NODEPOOL = Rule(
    id="static-nodepool",
    severity=WARNING,
    summary="A static NodePool (spec.replicas): Karpenter v1.14.1 gives it nodes only with the StaticCapacity "
            "feature gate, alpha and off by default.",
    description=(
        "A NodePool with spec.replicas is static: Karpenter keeps that many nodes of it whatever the pods ask, but "
        "only when its StaticCapacity feature gate is on (alpha in v1.14.1, off by default: FEATURE_GATES or "
        "--feature-gates StaticCapacity=true). With the gate off, the static controllers do not run and the "
        "provisioner leaves every static NodePool out, so the NodePool gets no node at all and no pod is "
        "provisioned to it; disruption never consolidates or empties its nodes. This tool models the default: "
        "`check --workloads`, `plan`, the controller and `simulate` place no pod on a static NodePool, and a pod "
        "that only a static NodePool admits stays pending (`no dynamic nodepools found` when no other NodePool is "
        "there). The finding is at spec.replicas."
    ),
    karpenter=(
        "core-v1 pkg/utils/nodepool/nodepool.go: IsStatic; core-v1 pkg/controllers/provisioning/provisioner.go: "
        "NewScheduler; core-v1 pkg/operator/options/options.go: FeatureGates; "
        "core-v1 pkg/controllers/controllers.go: NewControllers"
    ),
)


FOREIGN_NODE_CLASS = Rule(
    id="foreign-node-class",
    severity=ERROR,
    summary="A NodePool whose nodeClassRef is not karpenter.k8s.aws/EC2NodeClass: Karpenter's AWS provider never "
            "manages it.",
    description=(
        "Karpenter v1.14.1 acts only on the NodePools its cloud provider supports: those whose "
        "spec.template.spec.nodeClassRef has the group and kind of one of the provider's node classes (IsManaged). "
        "The AWS provider supports one, karpenter.k8s.aws/EC2NodeClass: a NodePool that names another class (an "
        "AKSNodeClass of karpenter.azure.com, a misspelt group or kind) is admitted but never provisioned, "
        "disrupted or made Ready — it launches nothing. The tool checks NodePools as the AWS provider runs them, so "
        "it checks nothing more of this one (no proof, no constraint set) and compile refuses. The finding is at "
        "the nodeClassRef's group (or kind). It cannot be silenced: point the NodePool at an EC2NodeClass, or keep "
        "it out of the files the tool checks (--exclude)."
    ),
    karpenter=(
        "core-v1 pkg/utils/nodepool/nodepool.go: IsManaged; "
        "aws-v1 pkg/cloudprovider/cloudprovider.go: CloudProvider.GetSupportedNodeClasses"
    ),
    silenceable=False,
)


RULES = (CEL_RULE, RUNTIME_VALIDATION, MIN_VALUES, DURATION_OVERFLOW, STATIC_NODEPOOL, FOREIGN_NODE_CLASS)
