"""The keys Karpenter knows about: well-known labels, restricted domains and beta-key normalisation, and the one
definition of each annotation, taint, finalizer, extended resource name and pod phase the package reads or writes.

Facts follow Karpenter v0.31 (core `v1alpha5/labels.go` and the AWS provider's `v1alpha1/labels.go`).
Pure data and predicates: no I/O, nothing else of the package imported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from types import MappingProxyType

from karpenter_policy.model.spelling import edit_distance, nearest_name

# Kubernetes and Karpenter label keys used throughout the package.
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
HOSTNAME = "kubernetes.io/hostname"
WINDOWS_BUILD = "node.kubernetes.io/windows-build"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
PROVISIONER_NAME = "karpenter.sh/provisioner-name"
#: Karpenter v1's label naming a node's NodePool (`NodePoolLabelKey`, core pkg/apis/v1/labels.go at v1.14.1); not
#: in `WELL_KNOWN_LABELS`, which are v0.31's.
NODEPOOL = "karpenter.sh/nodepool"
MANAGED_BY = "karpenter.sh/managed-by"
EMPTINESS_TIMESTAMP = "karpenter.sh/emptiness-timestamp"
INITIALIZED = "karpenter.sh/initialized"
#: Set on a node Karpenter drains (value "karpenter"): load balancers stop sending it traffic before it goes.
EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"

# Annotations Karpenter v0.31 reads on pods and nodes.
#: On a pod ("true"): keeps the pod's node from being chosen for disruption (not from a deletion asked for).
DO_NOT_EVICT = "karpenter.sh/do-not-evict"
#: On a node ("true"): consolidation leaves the node alone.
DO_NOT_CONSOLIDATE = "karpenter.sh/do-not-consolidate"
#: On a node, keeps it from every disruption; on a pod, as `karpenter.sh/do-not-evict` (v0.31 honours both).
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

#: The finalizer Karpenter puts on its nodes and machines: termination drains the node before it goes.
TERMINATION_FINALIZER = "karpenter.sh/termination"

#: The taint Karpenter v1 puts on a node it disrupts (`DisruptedNoScheduleTaint`, NoSchedule; core pkg/apis/v1/taints.go
#: at v1.14.1) where v0.31 cordons it.
TAINT_DISRUPTED = "karpenter.sh/disrupted"
#: The taint a Karpenter v1 node registers with (`UnregisteredNoExecuteTaint`, NoExecute; core pkg/apis/v1/taints.go at
#: v1.14.1, the kubelet's `registerWithTaints`: aws amifamily/resolver.go:293-295) until its NodeClaim registers — no
#: pod lands there before (nodeclaim/lifecycle/registration.go:93-103). v0.31.1 has no such taint.
TAINT_UNREGISTERED = "karpenter.sh/unregistered"
#: The label Karpenter v1 puts on a node once its NodeClaim registered (`NodeRegisteredLabelKey`, apis/v1/labels.go).
REGISTERED = "karpenter.sh/registered"

# Taint keys Kubernetes sets on nodes.
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
TAINT_UNINITIALIZED = "node.cloudprovider.kubernetes.io/uninitialized"

# Extended resource names Karpenter (AWS) counts on nodes and pods.
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
AWS_NEURON = "aws.amazon.com/neuron"
HABANA_GAUDI = "habana.ai/gaudi"
#: Branch network interfaces for pods' security groups (the VPC resource controller's).
POD_ENI = "vpc.amazonaws.com/pod-eni"
#: Elastic Fabric Adapter interfaces (Karpenter v1.14.1's `ResourceEFA`, aws pkg/apis/v1/labels.go:140; not v0.31's):
#: v1.14.1's types offer `EfaInfo.MaximumEfaInterfaces` of them; not modelled here (docs/v1.md).
EFA = "vpc.amazonaws.com/efa"
#: Windows nodes only: the secondary IPv4 addresses the VPC resource controller hands to pods.
PRIVATE_IPV4 = "vpc.amazonaws.com/PrivateIPv4Address"

# Pod phases: a pod in a terminal phase holds no resources and no longer counts anywhere.
POD_SUCCEEDED = "Succeeded"
POD_FAILED = "Failed"
TERMINAL_PHASES: tuple[str, ...] = (POD_SUCCEEDED, POD_FAILED)

AWS = "karpenter.k8s.aws"
INSTANCE_HYPERVISOR = f"{AWS}/instance-hypervisor"
INSTANCE_ENCRYPTION_IN_TRANSIT = f"{AWS}/instance-encryption-in-transit-supported"
INSTANCE_CATEGORY = f"{AWS}/instance-category"
INSTANCE_FAMILY = f"{AWS}/instance-family"
INSTANCE_GENERATION = f"{AWS}/instance-generation"
INSTANCE_SIZE = f"{AWS}/instance-size"
INSTANCE_LOCAL_NVME = f"{AWS}/instance-local-nvme"
INSTANCE_CPU = f"{AWS}/instance-cpu"
INSTANCE_MEMORY = f"{AWS}/instance-memory"
INSTANCE_NETWORK_BANDWIDTH = f"{AWS}/instance-network-bandwidth"
INSTANCE_PODS = f"{AWS}/instance-pods"
INSTANCE_GPU_NAME = f"{AWS}/instance-gpu-name"
INSTANCE_GPU_MANUFACTURER = f"{AWS}/instance-gpu-manufacturer"
INSTANCE_GPU_COUNT = f"{AWS}/instance-gpu-count"
INSTANCE_GPU_MEMORY = f"{AWS}/instance-gpu-memory"
INSTANCE_ACCELERATOR_NAME = f"{AWS}/instance-accelerator-name"
INSTANCE_ACCELERATOR_MANUFACTURER = f"{AWS}/instance-accelerator-manufacturer"
INSTANCE_ACCELERATOR_COUNT = f"{AWS}/instance-accelerator-count"
# Labels Karpenter v1.14.1 (AWS, pkg/apis/v1/labels.go) sets on every node that v0.31 did not know; only v1
# NodePools schedule on them (`V1_INSTANCE_LABELS`).
INSTANCE_CPU_MANUFACTURER = f"{AWS}/instance-cpu-manufacturer"
INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ = f"{AWS}/instance-cpu-sustained-clock-speed-mhz"
INSTANCE_EBS_BANDWIDTH = f"{AWS}/instance-ebs-bandwidth"
INSTANCE_CAPABILITY_FLEX = f"{AWS}/instance-capability-flex"
INSTANCE_TENANCY = f"{AWS}/instance-tenancy"
#: The account's id of a zone (`use1-az6`); v1.14.1 reads it from the EC2NodeClass's subnets.
ZONE_ID = "topology.k8s.aws/zone-id"
#: The placement group a node of an EC2NodeClass with a `placementGroupSelector` launched into, and its partition
#: (v1.14.1's `LabelPlacementGroupID`, `LabelPlacementGroupPartition`).
PLACEMENT_GROUP_ID = f"{AWS}/placement-group-id"
PLACEMENT_GROUP_PARTITION = f"{AWS}/placement-group-partition"
#: The tenancies every v1.14.1 instance type offers (`computeRequirements`: `In [default dedicated]`).
TENANCIES: tuple[str, ...] = ("dedicated", "default")

#: A node launched into a capacity reservation: its id, type (`default`, `capacity-block`) and whether it is
#: interruptible (aws v1.14.1 pkg/apis/v1/labels.go `LabelCapacityReservation*`, well-known in v1.14.1).
CAPACITY_RESERVATION_ID = f"{AWS}/capacity-reservation-id"
CAPACITY_RESERVATION_TYPE = f"{AWS}/capacity-reservation-type"
CAPACITY_RESERVATION_INTERRUPTIBLE = f"{AWS}/capacity-reservation-interruptible"
ARCH_AMD64 = "amd64"
ARCH_ARM64 = "arm64"
CAPACITY_SPOT = "spot"
CAPACITY_ON_DEMAND = "on-demand"
CAPACITY_TYPES = (CAPACITY_ON_DEMAND, CAPACITY_SPOT)
#: Karpenter v1's third capacity type (`CapacityTypeReserved`, core pkg/apis/v1/labels.go at v1.14.1): offerings
#: of the EC2NodeClass's capacity reservations; not a v0.31 value.
CAPACITY_RESERVED = "reserved"

#: Labels in restricted domains that Karpenter nevertheless lets users constrain.
WELL_KNOWN_LABELS: frozenset[str] = frozenset(
    {
        PROVISIONER_NAME,
        ZONE,
        REGION,
        INSTANCE_TYPE,
        ARCH,
        OS,
        CAPACITY_TYPE,
        WINDOWS_BUILD,
        INSTANCE_HYPERVISOR,
        INSTANCE_ENCRYPTION_IN_TRANSIT,
        INSTANCE_CATEGORY,
        INSTANCE_FAMILY,
        INSTANCE_GENERATION,
        INSTANCE_SIZE,
        INSTANCE_LOCAL_NVME,
        INSTANCE_CPU,
        INSTANCE_MEMORY,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_PODS,
        INSTANCE_GPU_NAME,
        INSTANCE_GPU_MANUFACTURER,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_NAME,
        INSTANCE_ACCELERATOR_MANUFACTURER,
        INSTANCE_ACCELERATOR_COUNT,
    }
)

#: The instance-type labels of Karpenter v1.14.1 that v0.31 did not have (aws/karpenter-provider-aws v1.14.1
#: pkg/providers/instancetype/types.go `computeRequirements`), which the catalog can give: a v1 NodePool's types
#: carry them and a pod may select them; a v1alpha5 Provisioner's do not, as in v0.31. `ZONE_ID` is not among
#: them: which id a zone name has differs from one AWS account to the next.
V1_INSTANCE_LABELS: frozenset[str] = frozenset(
    {
        INSTANCE_CPU_MANUFACTURER,
        INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        INSTANCE_EBS_BANDWIDTH,
        INSTANCE_CAPABILITY_FLEX,
        INSTANCE_TENANCY,
    }
)
#: The labels of `V1_INSTANCE_LABELS` a node takes from its launch rather than its instance type, with the values
#: every type offers (a node has one of them): the tenancy (`computeRequirements`: `In [default dedicated]`). Terms
#: on one are met together by some value they all accept, whatever the type.
V1_LAUNCH_LABELS: Mapping[str, tuple[str, ...]] = MappingProxyType({INSTANCE_TENANCY: TENANCIES})
#: The labels of a v1.14.1 node launched into its EC2NodeClass's placement group (`LabelPlacementGroupID`,
#: `LabelPlacementGroupPartition`): well-known in v1.14.1 (aws pkg/apis/v1/labels.go:61-62, `init`), not in v0.31.
V1_PLACEMENT_GROUP_LABELS: frozenset[str] = frozenset({PLACEMENT_GROUP_ID, PLACEMENT_GROUP_PARTITION})
#: The well-known labels a v1 NodePool's scheduling allows a pod to select though its requirements do not name
#: them (Karpenter's `AllowUndefinedWellKnownLabels`): v0.31's, `V1_INSTANCE_LABELS` and the placement-group
#: labels (no instance type carries those: the node of a class with a placement group does).
V1_WELL_KNOWN_LABELS: frozenset[str] = WELL_KNOWN_LABELS | V1_INSTANCE_LABELS | V1_PLACEMENT_GROUP_LABELS

#: Domains owned by the kubelet, Kubernetes or Karpenter (matched as a suffix of the key's prefix).
RESTRICTED_LABEL_DOMAINS: tuple[str, ...] = ("k8s.io", "karpenter.k8s.aws", "karpenter.sh", "kubernetes.io")

#: Sub-domains of the restricted domains that are allowed all the same.
LABEL_DOMAIN_EXCEPTIONS: tuple[str, ...] = ("kops.k8s.io", "node-restriction.kubernetes.io", "node.kubernetes.io")

#: Keys that are restricted whatever their domain, because Karpenter or the kubelet sets them.
RESTRICTED_LABELS: frozenset[str] = frozenset({EMPTINESS_TIMESTAMP, HOSTNAME})

#: Deprecated (beta) keys and the stable key Karpenter reads them as.
DEPRECATED_LABELS: dict[str, str] = {
    "failure-domain.beta.kubernetes.io/zone": ZONE,
    "failure-domain.beta.kubernetes.io/region": REGION,
    "beta.kubernetes.io/arch": ARCH,
    "beta.kubernetes.io/os": OS,
    "beta.kubernetes.io/instance-type": INSTANCE_TYPE,
}

#: The EBS CSI driver's zone key, which is not deprecated.
EBS_CSI_ZONE = "topology.ebs.csi.aws.com/zone"

#: Every key Karpenter on AWS reads as another (`NormalizedLabels`): the deprecated ones, and the EBS CSI driver's
#: zone key, which aws/karpenter-provider-aws adds at start (v0.31.1 `pkg/cloudprovider/cloudprovider.go` `init`,
#: v1.14.1 `pkg/operator/operator.go` `init`).
NORMALIZED_LABELS: dict[str, str] = {**DEPRECATED_LABELS, EBS_CSI_ZONE: ZONE}

#: Labels Karpenter ignores when it schedules.
IGNORED_LABELS: frozenset[str] = frozenset({REGION})

#: Well-known labels whose values are integers (Gt/Lt make sense on them), v1.14.1's among them.
INTEGER_LABELS: frozenset[str] = frozenset(
    {
        INSTANCE_GENERATION,
        INSTANCE_LOCAL_NVME,
        INSTANCE_CPU,
        INSTANCE_MEMORY,
        INSTANCE_NETWORK_BANDWIDTH,
        INSTANCE_PODS,
        INSTANCE_GPU_COUNT,
        INSTANCE_GPU_MEMORY,
        INSTANCE_ACCELERATOR_COUNT,
        INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        INSTANCE_EBS_BANDWIDTH,
    }
)


def normalize_key(key: str) -> str:
    """The stable key Karpenter uses for `key` (beta keys map to their GA names)."""
    return NORMALIZED_LABELS.get(key, key)


def label_domain(key: str) -> str:
    """The DNS prefix of a label key (`""` when the key has none)."""
    prefix, sep, _ = key.partition("/")
    return prefix if sep else ""


def is_restricted_node_label(key: str) -> bool:
    """True when Karpenter will not put this label on a node itself (Karpenter's IsRestrictedNodeLabel)."""
    if key in WELL_KNOWN_LABELS:
        return True
    domain = label_domain(key)
    if any(domain.endswith(exception) for exception in LABEL_DOMAIN_EXCEPTIONS):
        return False
    if any(domain.endswith(restricted) for restricted in RESTRICTED_LABEL_DOMAINS):
        return True
    return key in RESTRICTED_LABELS


@lru_cache(maxsize=4096)
def restricted_label_reason(key: str) -> str | None:
    """Why a user may not set or constrain `key`, or None when it is allowed (Karpenter's IsRestrictedLabel), with
    Karpenter's hint when it looks like a well-known key (`(typo of "topology.kubernetes.io/zone"?)`)."""
    if key in WELL_KNOWN_LABELS:
        return None
    if is_restricted_node_label(key):
        domain = label_domain(key)
        where = f"domain {domain!r} is reserved" if domain else "it is set by the kubelet or Karpenter"
        shown = repr(key) if not key or key != key.strip() or " " in key else key
        return (
            f"label {shown} is restricted: {where}; use a well-known label or a custom label "
            f"outside {', '.join(RESTRICTED_LABEL_DOMAINS)}"
        ) + typo_hint(key)
    return None


#: Keys of Kubernetes and Karpenter that are set on nodes but are not well-known: no key is a typo of them.
_KNOWN_NODE_LABELS: frozenset[str] = frozenset(
    {HOSTNAME, *NORMALIZED_LABELS, EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS}
)
_WELL_KNOWN_SORTED: tuple[str, ...] = tuple(sorted(WELL_KNOWN_LABELS))
_BY_NAME: dict[str, tuple[str, ...]] = {}
for _key in _WELL_KNOWN_SORTED:
    _BY_NAME[_key.rpartition("/")[2]] = (*_BY_NAME.get(_key.rpartition("/")[2], ()), _key)


def _karpenter_hint(key: str) -> str | None:
    """Karpenter's own guess (karpenter-core's labelHint): the well-known key fewer edits away than a fifth of its
    length — whatever the key's domain, as a dot or a slash lost (`topology.kubernetesio/zone`,
    `karpenterprovisioner-name`) leaves none to go by. The nearest such key; None on a tie."""
    distances = sorted(
        (distance, known)
        for known in _WELL_KNOWN_SORTED
        # the distance is at least the difference in length: most keys are ruled out without computing it
        if abs(len(key) - len(known)) < len(known) // 5
        and (distance := edit_distance(key, known, len(known) // 5)) < len(known) // 5
    )
    if not distances or (len(distances) > 1 and distances[0][0] == distances[1][0]):
        return None
    return distances[0][1]


@lru_cache(maxsize=4096)
def _well_known_hint(key: str, bare: bool) -> str | None:
    if key in WELL_KNOWN_LABELS or key in _KNOWN_NODE_LABELS:
        return None
    karpenters = _karpenter_hint(key)
    if karpenters is not None:
        return karpenters
    domain = label_domain(key)
    if not (any(domain.endswith(d) for d in RESTRICTED_LABEL_DOMAINS) or (bare and not domain)):
        return None
    name = key.rpartition("/")[2]
    same_name = _BY_NAME.get(name, ())
    if len(same_name) == 1:  # the right name in the wrong domain: karpenter.sh/instance-family
        return same_name[0]
    near = nearest_name(key, _WELL_KNOWN_SORTED)  # a misspelt key: topology.kubernetes.io/zona
    if near is not None and (bare or edit_distance(key, near) <= 2):
        return near
    near_name = nearest_name(name, sorted(_BY_NAME))  # both: karpenter.sh/instance-famly
    if near_name is not None and edit_distance(name, near_name) <= 2 and len(_BY_NAME[near_name]) == 1:
        return _BY_NAME[near_name][0]
    return None


def label_key_hint(key: str, existing: Iterable[str] = (), *, bare: bool = False) -> str | None:
    """The well-known key (or else one of `existing`, the keys a provisioner defines) that `key` is probably a
    typo of, None when it looks like a label of its own: the same name in the wrong domain, the nearest spelling
    of the whole key (at most two edits), the nearest spelling of its name. Only keys in the Kubernetes and
    Karpenter domains are guessed at — a custom domain's `example.com/zone` is its owner's label — and keys
    without a domain with `bare` (as Karpenter's `labelHint` does for a label no provisioner defines: `zone`)."""
    hint = _well_known_hint(key, bare)
    if hint is not None or key in WELL_KNOWN_LABELS:
        return hint
    others = sorted(k for k in set(existing) if k != key)
    near = nearest_name(key, others) if others else None
    return near if near is not None and edit_distance(key, near) <= 2 else None


def typo_hint(key: str, existing: Iterable[str] = ()) -> str:
    """Karpenter's ` (typo of "KEY"?)` suffix for `key`, or "" when it does not look like a typo."""
    return _typo_hint(key, tuple(sorted(existing)))


@lru_cache(maxsize=4096)  # the scheduler asks it of the same pod and provisioner keys again and again
def _typo_hint(key: str, existing: tuple[str, ...]) -> str:
    hint = label_key_hint(key, existing, bare=True)
    return f' (typo of "{hint}"?)' if hint is not None else ""


# Kubernetes apimachinery's validation of label keys and values (IsQualifiedName, IsValidLabelValue).
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@lru_cache(maxsize=4096)  # policies repeat the same few keys endlessly
def qualified_name_errors(key: str) -> tuple[str, ...]:
    """Problems with `key` as a Kubernetes qualified name (`[prefix/]name`), empty when valid."""
    parts = key.split("/")
    if len(parts) > 2:
        return ("a qualified name must have at most one '/'",)
    errors: list[str] = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > 253 or not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            errors.append("prefix part must be a lowercase DNS subdomain of at most 253 characters")
    else:
        name = parts[0]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 characters")
    elif not _NAME_PART.fullmatch(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character"
        )
    return tuple(errors)


@lru_cache(maxsize=4096)
def label_value_errors(value: str) -> tuple[str, ...]:
    """Problems with `value` as a Kubernetes label value, empty when valid."""
    if len(value) > 63:
        return ("must be no more than 63 characters",)
    if not _LABEL_VALUE.fullmatch(value):
        return (
            "a label value must be empty or consist of alphanumeric characters, '-', '_' or '.', "
            "and must start and end with an alphanumeric character",
        )
    return ()


_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def is_dns1035_label(name: str) -> bool:
    """True for an RFC 1035 label (a letter first; letters, digits, '-'; at most 63 characters): the name
    Karpenter's webhook (knative's ValidateObjectMetadata) accepts for its objects."""
    return len(name) <= 63 and bool(_DNS1035_LABEL.fullmatch(name))


def is_dns1123_subdomain(name: str) -> bool:
    """True when `name` is a valid Kubernetes object name (RFC 1123 subdomain, ≤ 253 characters)."""
    return len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.fullmatch(name))
