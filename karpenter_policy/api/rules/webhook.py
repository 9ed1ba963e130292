"""Karpenter's webhook rules (v0.31) and the tool's stricter warnings about the same fields: what `validate`
checks of each object, and across the objects of a run.

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, WARNING, Rule

INVALID_REQUIREMENT = Rule(
    id="invalid-requirement",
    severity=ERROR,
    summary="A requirement breaks Karpenter's rules for operators and values.",
    description=(
        "A requirement breaks Karpenter's webhook rules: an operator other than In, NotIn, Exists, DoesNotExist, "
        "Gt, Lt; In without values; Gt/Lt without exactly one integer >= 0; a key that is not a qualified name; an "
        "invalid label value. Values given to Exists/DoesNotExist are a warning (Karpenter ignores them)."
    ),
    karpenter=(
        "core pkg/apis/v1alpha5/provisioner_validation.go: ProvisionerSpec.validateRequirements, ValidateRequirement"
    ),
    silenceable=False,
    severity_varies="values given to Exists or DoesNotExist are a warning (Karpenter ignores them)",
)


RESTRICTED_LABEL = Rule(
    id="restricted-label",
    severity=ERROR,
    summary="A label or requirement uses a key reserved for Kubernetes or Karpenter.",
    description=(
        "A label or requirement key in a domain Karpenter reserves (kubernetes.io, k8s.io, karpenter.sh, "
        "karpenter.k8s.aws and their subdomains) that is not one of the well-known labels, or "
        "karpenter.sh/provisioner-name anywhere. Karpenter's webhook refuses the Provisioner. A key that looks like"
        ' a well-known one carries Karpenter\'s hint: (typo of "karpenter.k8s.aws/instance-family"?).'
    ),
    karpenter=(
        "core pkg/apis/v1alpha5/labels.go: IsRestrictedLabel; core pkg/apis/v1alpha5/provisioner_validation.go: "
        "ProvisionerSpec.validateLabels"
    ),
    silenceable=False,
)


INVALID_SPEC = Rule(
    id="invalid-spec",
    severity=ERROR,
    summary="The spec breaks one of Karpenter's webhook rules.",
    description=(
        "The spec breaks one of Karpenter's webhook rules: ttlSecondsAfterEmpty with consolidation, negative TTLs, "
        "provider and providerRef both or neither, bad taint effects or duplicate taints, kubelet settings, AWS "
        "provider and AWSNodeTemplate rules (selectors, launch template exclusions, tags, metadata options, AMI "
        "family, block devices), or a quantity Kubernetes cannot read. An aws-ids id Karpenter admits but EC2 never"
        " gives is the aws-id-shape warning instead."
    ),
    karpenter=(
        "core pkg/apis/v1alpha5/provisioner_validation.go: ProvisionerSpec.validate; aws "
        "pkg/apis/v1alpha1/provider_validation.go: AWS.Validate; aws "
        "pkg/apis/v1alpha1/awsnodetemplate_validation.go: AWSNodeTemplateSpec.validate"
    ),
    silenceable=False,
)


DEPRECATED_LABEL = Rule(
    id="deprecated-label",
    severity=WARNING,
    summary="A deprecated (beta) label key that Karpenter rewrites.",
    description=(
        "A beta label key (failure-domain.beta.kubernetes.io/zone, beta.kubernetes.io/arch, ...) that Karpenter "
        "rewrites to its GA name. A warning: it works, but the GA key says what happens."
    ),
    karpenter="core pkg/apis/v1alpha5/labels.go: NormalizedLabels",
)


DEPRECATED_PROVIDER = Rule(
    id="deprecated-provider",
    severity=WARNING,
    summary="A Provisioner's inline spec.provider, deprecated for an AWSNodeTemplate named in providerRef.",
    description=(
        "A Provisioner carries its AWS settings inline in spec.provider. Karpenter deprecated it when it "
        "introduced the AWSNodeTemplate (v0.13, its upgrade guide: \"The use of spec.provider is deprecated\") and "
        "keeps reading it only for v1alpha5; an AWSNodeTemplate (whose spec inlines the provider's fields) is "
        "what the later APIs build on, and only it has amiSelector, userData and detailedMonitoring. A warning: "
        "it works. The message gives the AWSNodeTemplate to write (the provider's fields, named after the "
        "Provisioner) and the providerRef that replaces spec.provider."
    ),
    karpenter=(
        "core pkg/apis/v1alpha5/provisioner.go: ProvisionerSpec; aws pkg/apis/v1alpha1/awsnodetemplate.go: "
        "AWSNodeTemplateSpec"
    ),
)


DUPLICATE_NAME = Rule(
    id="duplicate-name",
    severity=ERROR,
    summary="Two objects of the same kind share a name.",
    description=(
        "Two objects of the same kind have the same name: applying both keeps only the one applied last, "
        "silently."
    ),
)


UNRESOLVED_REFERENCE = Rule(
    id="unresolved-reference",
    severity=WARNING,
    summary=(
        "A providerRef, a runtimeClassName or a pod's volume claim names an object that is not among the checked files."
    ),
    description=(
        "A Provisioner's providerRef names an AWSNodeTemplate (a NodePool's nodeClassRef an EC2NodeClass) that is "
        "not among the files checked, or (check --workloads) a pod's runtimeClassName names a RuntimeClass, or its "
        "volume a PersistentVolumeClaim, PersistentVolume or StorageClass, that is not among the workloads read. A "
        "warning: it may live elsewhere; Karpenter cannot launch nodes for the Provisioner or NodePool until it "
        "exists, the pod's RuntimeClass overhead is not counted (Kubernetes rejects the pod if the cluster has no "
        "such class), and the volume adds no zone to the pod (Karpenter would not schedule the pod until the claim "
        "exists)."
    ),
    karpenter=(
        "aws pkg/cloudprovider/cloudprovider.go: CloudProvider.resolveNodeTemplate; core "
        "pkg/controllers/provisioning/scheduling/volumetopology.go: VolumeTopology.getRequirements"
    ),
)


QUANTITY_OUT_OF_RANGE = Rule(
    id="quantity-out-of-range",
    severity=WARNING,
    summary="A quantity beyond ±(2^63-1), what Kubernetes holds as an integer: read as that bound.",
    description=(
        "A quantity beyond +-(2^63-1), what Kubernetes holds as an integer (memory: 1e99999999): Karpenter admits "
        "it, so a warning; it is read capped at that bound."
    ),
)


UNKNOWN_LABEL_KEY = Rule(
    id="unknown-label-key",
    severity=WARNING,
    summary="A label key close to a well-known key or in the wrong domain: probably a typo.",
    description=(
        "A label key, in a Provisioner's requirements or labels or in a workload's nodeSelector or node affinity, "
        "that is not well-known but close to a well-known key or the name of one in the wrong domain "
        "(karpenter.sh/instance-family for karpenter.k8s.aws/instance-family, topology.kubernetes.io/zona): no node"
        " carries it, so the requirement selects nothing Karpenter knows. A warning with the key meant; a key in a "
        "restricted domain is a restricted-label error carrying the same hint."
    ),
    karpenter="core pkg/scheduling/requirements.go: labelHint",
)


AWS_ID_SHAPE = Rule(
    id="aws-id-shape",
    severity=WARNING,
    summary="An AWS id in a selector that EC2 would not recognise, though Karpenter's webhook admits it.",
    description=(
        "An id in an aws-ids / aws::ids subnet or security group selector that does not have the shape EC2 gives "
        "its ids (subnet-0123abcd, sg-0123abcd: the prefix, a dash, 8 or 17 hexadecimal digits). Karpenter's "
        "webhook only looks for the prefix followed by letters or digits somewhere in the value, so it admits the "
        "Provisioner or AWSNodeTemplate and the selector then finds nothing: a warning."
    ),
    karpenter="aws pkg/apis/v1alpha1/provider_validation.go: AWS.validateSubnets, AWS.validateSecurityGroups",
)


PLACEHOLDER = Rule(
    id="placeholder",
    severity=WARNING,
    summary="A ${VAR} placeholder left in a selector or tag of an object not marked for Flux substitution.",
    description=(
        "A ${VAR}-style placeholder (an example's ${CLUSTER_NAME}) left in a subnet, security group or AMI selector"
        " or in tags: Karpenter would look for resources tagged with the literal text and find none. A warning, "
        "unless the object carries kustomize.toolkit.fluxcd.io/substitute: enabled (Flux post-build substitution "
        "fills it in; compile then leaves those placeholders to Flux)."
    ),
    error_when_compiled=True,
)


INVALID_USER_DATA = Rule(
    id="invalid-user-data",
    severity=ERROR,
    summary="userData its AMI family cannot read: Bottlerocket TOML, AL2/Ubuntu MIME multipart.",
    description=(
        "userData that the AMI family's bootstrap cannot read, which Karpenter v0.31 reports only when it launches "
        "a node: Bottlerocket userData must be TOML (Karpenter merges its settings into it), AL2 or Ubuntu userData"
        " that starts as MIME (MIME-Version: or Content-Type:) must be a multipart MIME document. Reported at the "
        "line of the userData where reading stops."
    ),
    karpenter=(
        "aws pkg/providers/amifamily/bootstrap/bottlerocketsettings.go: BottlerocketConfig.UnmarshalTOML; aws "
        "pkg/providers/amifamily/bootstrap/eksbootstrap.go: EKS.mergeCustomUserData"
    ),
)


TTL_CHURN = Rule(
    id="ttl-churn",
    severity=WARNING,
    summary="A ttlSecondsUntilExpired under an hour: nodes are replaced about as fast as they launch.",
    description=(
        "A Provisioner's ttlSecondsUntilExpired is under 3600 seconds (one hour). Every node is replaced that long "
        "after its launch; a replacement takes minutes (launch, registration, readiness, the drain) and evicts "
        "every pod of the node, so the fleet is replaced about as fast as it is launched, and with a few seconds (0"
        " included) each replacement expires before it is ready and is replaced in turn, without end. Karpenter "
        "admits any value: a warning. Expiry is meant in days (2592000 is 30 days); without it nodes never expire."
    ),
    karpenter="core pkg/apis/v1alpha5/provisioner_validation.go: ProvisionerSpec.validateTTLSecondsUntilExpired",
)


RULES = (
    INVALID_REQUIREMENT,
    RESTRICTED_LABEL,
    INVALID_SPEC,
    DEPRECATED_LABEL,
    DEPRECATED_PROVIDER,
    DUPLICATE_NAME,
    UNRESOLVED_REFERENCE,
    QUANTITY_OUT_OF_RANGE,
    UNKNOWN_LABEL_KEY,
    AWS_ID_SHAPE,
    PLACEHOLDER,
    INVALID_USER_DATA,
    TTL_CHURN,
)
