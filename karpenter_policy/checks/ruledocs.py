"""What each rule id means, at length: the full descriptions SARIF carries, and where each rule's page is.

The one-line descriptions are `reporters.RULE_DESCRIPTIONS`; each rule also has a page, `docs/rules/<rule>.md`,
with an example, how to fix it and how to silence it. SARIF's `helpUri` points at that page when the project's
address is known: `$KARPENTER_POLICY_DOCS_URL` (the URL of the repository's `docs/` directory as a browser shows
it), else the `Documentation` URL of the installed package's metadata (`[project.urls]` in pyproject.toml).
"""

from __future__ import annotations

import os

DOCS_URL_ENV = "KARPENTER_POLICY_DOCS_URL"
RULE_PAGES = "docs/rules"

FULL_DESCRIPTIONS = {
    "parse-error": (
        "The file cannot be read as Kubernetes YAML: it is not UTF-8 text, is larger than 4 MiB or binary, has a "
        "YAML syntax error (tabs in indentation, an unclosed quote or bracket, a duplicate key, a custom tag), or "
        "its aliases expand beyond 200,000 nodes. Nothing in the file is checked. It cannot be silenced."
    ),
    "schema": (
        "The object does not match the JSON Schema of its kind (the v0.31 CRDs of Provisioner and AWSNodeTemplate, "
        "or the PinningPolicy schema): an unknown field (with the nearest valid name), a wrong type, a missing "
        "required field, a value out of range, or a manifest without apiVersion/kind. Karpenter's API server would "
        "refuse it. It cannot be silenced: the other checks need a well-formed object."
    ),
    "invalid-requirement": (
        "A requirement breaks Karpenter's webhook rules: an operator other than In, NotIn, Exists, DoesNotExist, "
        "Gt, Lt; In without values; Gt/Lt without exactly one integer >= 0; a key that is not a qualified name; an "
        "invalid label value. Values given to Exists/DoesNotExist are a warning (Karpenter ignores them)."
    ),
    "restricted-label": (
        "A label or requirement key in a domain Karpenter reserves (kubernetes.io, k8s.io, karpenter.sh, "
        "karpenter.k8s.aws and their subdomains) that is not one of the well-known labels, or "
        "karpenter.sh/provisioner-name anywhere. Karpenter's webhook refuses the Provisioner. A key that looks like "
        "a well-known one carries Karpenter's hint: (typo of \"karpenter.k8s.aws/instance-family\"?)."
    ),
    "invalid-spec": (
        "The spec breaks one of Karpenter's webhook rules: ttlSecondsAfterEmpty with consolidation, negative TTLs, "
        "provider and providerRef both or neither, bad taint effects or duplicate taints, kubelet settings, AWS "
        "provider and AWSNodeTemplate rules (selectors, launch template exclusions, tags, metadata options, AMI "
        "family, block devices), or a quantity Kubernetes cannot read. An aws-ids id Karpenter admits but EC2 never "
        "gives is the aws-id-shape warning instead."
    ),
    "deprecated-label": (
        "A beta label key (failure-domain.beta.kubernetes.io/zone, beta.kubernetes.io/arch, ...) that Karpenter "
        "rewrites to its GA name. A warning: it works, but the GA key says what happens."
    ),
    "duplicate-name": (
        "Two objects of the same kind have the same name: applying both keeps only the one applied last, "
        "silently."
    ),
    "unresolved-reference": (
        "A Provisioner's providerRef names an AWSNodeTemplate that is not among the files checked, or (check "
        "--workloads) a pod's runtimeClassName names a RuntimeClass, or its volume a PersistentVolumeClaim, "
        "PersistentVolume or StorageClass, that is not among the workloads read. A warning: it may live elsewhere; "
        "Karpenter cannot launch nodes for the Provisioner until it exists, the pod's RuntimeClass overhead is not "
        "counted (Kubernetes rejects the pod if the cluster has no such class), and the volume adds no zone to the "
        "pod (Karpenter would not schedule the pod until the claim exists)."
    ),
    "template-error": (
        "A Jinja2 template (*.yaml.j2) cannot be rendered with the values given: an undefined variable, a syntax "
        "error, or a template that runs too long or builds too much. It cannot be silenced."
    ),
    "requirements-conflict": (
        "The Provisioner's requirements, labels and Karpenter's defaults contradict each other: no instance type "
        "can satisfy them together. The finding is placed at the first line of the smallest conflicting set, the "
        "other lines are related locations. Karpenter would never launch a node for it."
    ),
    "no-instance-type": (
        "The requirements are consistent with each other, but no instance type of the catalog (its region, zones "
        "and capacity types) satisfies them."
    ),
    "unknown-instance-type": (
        "An instance type, family, size or zone that does not exist in the catalog's region, with the nearest name "
        "suggested. An error when an In requirement names nothing that exists, a warning otherwise. A type newer "
        "than the embedded catalog shows up here: refresh the catalog (`catalog refresh`) or silence the finding."
    ),
    "solver-timeout": (
        "The solver could not decide the Provisioner within --timeout-ms: nothing was proven about it. A warning."
    ),
    "v1-conversion": (
        "compile --api v1: a v1alpha5 setting that has no faithful karpenter.sh/v1 NodePool or EC2NodeClass form."
    ),
    "configmap-too-large": (
        "compile: the constraint sets do not fit in one ConfigMap (1 MiB); the finding names the set that weighs "
        "most."
    ),
    "workload-unschedulable": (
        "check --workloads: no provisioner can launch a node for the workload's pods; the message gives the reason "
        "per provisioner (requirements, a taint not tolerated, an unknown label, resources too large, limits). A pod "
        "Karpenter ignores (v0.31 Provisioner.Validate: node affinity with matchFields, a required or preferred term "
        "on a restricted label such as kubernetes.io/hostname, a karpenter.sh/provisioner-name DoesNotExist "
        "requirement) is refused with Karpenter's reason."
    ),
    "invalid-workload": (
        "check --workloads: a workload's pod spec cannot be read (a malformed quantity, operator or toleration)."
    ),
    "overlap": (
        "check --workloads: two provisioners of equal weight both match a workload, so Karpenter's choice between "
        "them is arbitrary. A warning: give them different weights."
    ),
    "shadowed": (
        "check --workloads: every workload the provisioner could launch a node for goes to a provisioner of higher "
        "weight. A warning."
    ),
    "limits": (
        "A provisioner's limits.resources are below its smallest instance type: it can never launch a node. "
        "A warning."
    ),
    "pinning-violation": (
        "check --workloads: a workload lacks a nodeSelector entry or toleration that a PinningPolicy rule requires "
        "(`pin --write` adds them)."
    ),
    "placement-test-failed": (
        "test, or check --workloads with PlacementTest files among the policies: an expectation of a PlacementTest "
        "(provisioner, capacity types, zones, architectures, instance families, unschedulable, maxMonthlyCost) "
        "does not hold for the plan of its workload; reported at the expectation's line (docs/placement-tests.md)."
    ),
    "multi-arch": (
        "check --workloads: a workload whose node selector and affinity do not name kubernetes.io/arch may be "
        "placed on arm64 (Graviton) nodes — Karpenter picks the type at launch among every type that fits, by price "
        "and availability. A warning: its images must be multi-arch, or pin an architecture with a nodeSelector."
    ),
    "pinning-conflict": (
        "Two PinningPolicy rules that match the same workload pin a nodeSelector key to different values."
    ),
    "reserved-name": (
        "compile: a Provisioner named `index` would overwrite the index of the constraint sets: rename it."
    ),
    "quantity-out-of-range": (
        "A quantity beyond +-(2^63-1), what Kubernetes holds as an integer (memory: 1e99999999): Karpenter admits "
        "it, so a warning; it is read capped at that bound."
    ),
    "unknown-label-key": (
        "A label key, in a Provisioner's requirements or labels or in a workload's nodeSelector or node affinity, "
        "that is not well-known but close to a well-known key or the name of one in the wrong domain "
        "(karpenter.sh/instance-family for karpenter.k8s.aws/instance-family, topology.kubernetes.io/zona): no node "
        "carries it, so the requirement selects nothing Karpenter knows. A warning with the key meant; a key in a "
        "restricted domain is a restricted-label error carrying the same hint."
    ),
    "unknown-label-value": (
        "A value of a well-known key with a known domain (capacity type, arch, os, region, instance category, "
        "generation, hypervisor, GPU or accelerator name and manufacturer) that no instance type or offering of the "
        "catalog's region carries (capacity-type ondemand, arch amd), with the nearest valid value. A warning even "
        "when the requirement's other values still work; when none does, the no-instance-type error says so."
    ),
    "aws-id-shape": (
        "An id in an aws-ids / aws::ids subnet or security group selector that does not have the shape EC2 gives "
        "its ids (subnet-0123abcd, sg-0123abcd: the prefix, a dash, 8 or 17 hexadecimal digits). Karpenter's webhook "
        "only looks for the prefix followed by letters or digits somewhere in the value, so it admits the "
        "Provisioner or AWSNodeTemplate and the selector then finds nothing: a warning."
    ),
    "unknown-topology-key": (
        "A topologyKey of a workload's topology spread constraint or pod (anti-)affinity term that no node the "
        "provisioners launch has (neither a label of their instance types, zones and capacity types, nor one of "
        "their labels or In requirements, nor the hostname), with the nearest key they have "
        "(topology.kubernetes.io/hostname: did you mean kubernetes.io/hostname?). Karpenter v0.31 finds no domain "
        "for such a term: a required one leaves the pods pending (the workload-unschedulable error says so), a "
        "preferred one or a ScheduleAnyway spread is dropped. A warning: a key your existing nodes carry is not "
        "known to check."
    ),
    "previous-generation": (
        "An instance-type or instance-family requirement names a previous-generation type (p2, p3, g3, f1, dl1, ...): "
        "one Karpenter's current instance-type table no longer lists but Karpenter v0.31 launches and AWS still "
        "sells (the us-east-1 price table prices it). The provisioner is proven with it (its facts from Karpenter "
        "v0.31's table, its zones inferred). A warning; --allow-previous-generation acknowledges it."
    ),
    "dead-value": (
        "Values of an In requirement on a catalog label (instance family, type, size, category, generation, ...) "
        "that exist in the catalog, yet no instance type the provisioner admits has them: another requirement or "
        "one of Karpenter's defaults (kubernetes.io/arch In [amd64] when arch is not required) rules them out. The "
        "provisioner still launches the other values: a warning naming the dead values and what excludes them."
    ),
    "placeholder": (
        "A ${VAR}-style placeholder (an example's ${CLUSTER_NAME}) left in a subnet, security group or AMI "
        "selector or in tags: Karpenter would look for resources tagged with the literal text and find none. A "
        "warning, unless the object carries kustomize.toolkit.fluxcd.io/substitute: enabled (Flux post-build "
        "substitution fills it in; compile then leaves those placeholders to Flux)."
    ),
    "invalid-user-data": (
        "userData that the AMI family's bootstrap cannot read, which Karpenter v0.31 reports only when it launches "
        "a node: Bottlerocket userData must be TOML (Karpenter merges its settings into it), AL2 or Ubuntu userData "
        "that starts as MIME (MIME-Version: or Content-Type:) must be a multipart MIME document. Reported at the "
        "line of the userData where reading stops."
    ),
    "zone-outside-region": (
        "A topology.kubernetes.io/zone value that is a zone of another region of the catalog (us-west-2a while "
        "checking us-east-1): the policies are probably meant for that region, given with --region. An error when "
        "no value of the requirement is a zone of the checked region, a warning otherwise."
    ),
    "ttl-churn": (
        "A Provisioner's ttlSecondsUntilExpired is under 3600 seconds (one hour). Every node is replaced that long "
        "after its launch; a replacement takes minutes (launch, registration, readiness, the drain) and evicts every "
        "pod of the node, so the fleet is replaced about as fast as it is launched, and with a few seconds (0 "
        "included) each replacement expires before it is ready and is replaced in turn, without end. Karpenter "
        "admits any value: a warning. Expiry is meant in days (2592000 is 30 days); without it nodes never expire."
    ),
    "invalid-replicas": (
        "A workload's number of pods — spec.replicas of a Deployment, StatefulSet, ReplicaSet or "
        "ReplicationController, spec.parallelism of a Job, spec.jobTemplate.spec.parallelism of a CronJob — is not "
        "an integer of 0 to 100,000: a string, a fraction, a boolean or a negative number (the API server refuses "
        "them too), or more pods than karpenter-policy plans or simulates for one workload. The workload is left "
        "out of the plan, the simulation and pin's proof."
    ),
    "volume-zones-conflict": (
        "(check --workloads) Karpenter v0.31 adds each of a pod's volumes' topology to its required node affinity "
        "(volumetopology.go): a bound claim's PersistentVolume nodeAffinity, an unbound claim's StorageClass "
        "allowedTopologies. When these leave no value of a key — claims bound to PersistentVolumes in different "
        "zones — no node can hold the pod: it stays pending. The finding names the volumes; the workload is not "
        "placed or planned further."
    ),
}


def docs_url() -> str | None:
    """The URL of the project's `docs/` directory, if known (see the module docstring)."""
    configured = os.environ.get(DOCS_URL_ENV)
    if configured:
        return configured.rstrip("/")
    from importlib import metadata  # only SARIF output needs it

    try:
        urls: list[str] = metadata.metadata("karpenter-policy").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() == "documentation" and url.strip():
            return url.strip().rstrip("/")
    return None


def help_uri(rule: str, base: str | None) -> str | None:
    """The address of a rule's page under the docs URL `base`."""
    return f"{base}/rules/{rule}.md" if base else None
