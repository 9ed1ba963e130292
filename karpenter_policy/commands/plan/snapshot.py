"""Reading a cluster snapshot: what `kubectl get nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json`
prints.

That is a `v1` `List` whose items carry their `apiVersion` and `kind`; one object (`kubectl get node x -o json`) is
read as a list of one. Several files may be given (their objects are merged; a later file's object of the same
kind, namespace and name replaces an earlier one's, and a warning says so), `-` for standard input.

Nothing in a snapshot is trusted: every file is bounded in size (:data:`MAX_BYTES`) and must be JSON; every item
must be an object with well-formed metadata (`kube.shape.check_object`, the check the informers make) and, for
the kinds the plan reads, the fields it reads of the right type (a node's labels, `spec.providerID`, its
`status.capacity`, `allocatable` (quantities) and conditions, a pod's spec and node name, a
PodDisruptionBudget's `minAvailable`/`maxUnavailable`, a DaemonSet's pod template, a NodeClaim's node name,
providerID, `expireAfter` and `terminationGracePeriod`; of a PersistentVolumeClaim, PersistentVolume and StorageClass
what the controller's reading reads, `model.volumes`). Two Nodes, or two NodeClaims, with one providerID are an
error too (the plan pairs them by it, `pairing`), a NodePool's Node without one a warning. Anything else is a
:class:`Problem` naming the file and the item's index — never a traceback, and never read as "no objects": the
plan refuses to run on a snapshot with an error (`command`). Items of other kinds (Services, Events, …) are left
out with a warning. The snapshot is read into memory only; nothing of it is written anywhere.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration
from karpenter_policy.commands.plan.pairing import pairing_problems
from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import Malformed
from karpenter_policy.kube.objects import Obj
from karpenter_policy.kube.shape import check_object
from karpenter_policy.model.pods import PodSpecError
from karpenter_policy.model.resources import parse_quantity
from karpenter_policy.model.selectors import SelectorError, parse_selector
from karpenter_policy.model.volumes import READERS

__all__ = [
    "KUBECTL_GET",
    "MAX_BYTES",
    "READ_KINDS",
    "STDIN",
    "VOLUME_KINDS",
    "Problem",
    "Seen",
    "Snapshot",
    "checked_snapshot",
    "read_bytes",
    "read_objects",
    "read_snapshot",
    "read_snapshots",
]

#: The largest snapshot file read (bytes): kubectl prints a few hundred MiB for 5,000 nodes and 50,000 pods.
MAX_BYTES = 1024**3
#: The file name that stands for standard input.
STDIN = "-"
NODE, POD, PDB, DAEMON_SET, NODE_CLAIM, MACHINE, EC2_NODE_CLASS = (
    "Node", "Pod", "PodDisruptionBudget", "DaemonSet", "NodeClaim", "Machine", "EC2NodeClass"
)
PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME, STORAGE_CLASS = "PersistentVolumeClaim", "PersistentVolume", "StorageClass"
#: The kinds of a pod's volumes (what `kubectl get pvc,pv,storageclass` lists), in that order.
VOLUME_KINDS = (PERSISTENT_VOLUME_CLAIM, PERSISTENT_VOLUME, STORAGE_CLASS)
#: The kinds a plan reads.
READ_KINDS = (NODE, POD, PDB, DAEMON_SET, NODE_CLAIM, MACHINE, EC2_NODE_CLASS, *VOLUME_KINDS)
#: The command that takes a snapshot with every kind the plan reads.
KUBECTL_GET = "kubectl get nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json"
_INT_OR_PERCENT = re.compile(r"^(0|[1-9][0-9]{0,8})%?$")
_SNIPPET = 80


@dataclass(frozen=True, slots=True)
class Problem:
    """Something in a snapshot the plan cannot use: `file`, the item's `index` in its list (None: the file itself),
    `severity` (error: the plan does not run; warning: the item is left out) and `message`."""

    file: str
    index: int | None
    severity: str
    message: str
    #: the item's kind, namespace and name as the message may spell them (for `--redact`; None: no item)
    subject: tuple[str, str, str] | None = None

    def __str__(self) -> str:
        where = self.file if self.index is None else f"{self.file}: item {self.index}"
        return f"{where}: {self.severity}: {self.message}"

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "index": self.index, "severity": self.severity, "message": self.message}


@dataclass(slots=True)
class Snapshot:
    """The objects of one or more snapshot files by kind (each a list in file order), and what was wrong."""

    nodes: list[Obj] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    pdbs: list[Obj] = field(default_factory=list)
    daemon_sets: list[Obj] = field(default_factory=list)
    node_claims: list[Obj] = field(default_factory=list)
    #: the cluster's EC2NodeClasses (karpenter.k8s.aws/v1), for the AMIs their status resolved
    node_classes: list[Obj] = field(default_factory=list)
    #: PersistentVolumeClaims, PersistentVolumes and StorageClasses (the zones of the pods' volumes)
    persistent_volume_claims: list[Obj] = field(default_factory=list)
    persistent_volumes: list[Obj] = field(default_factory=list)
    storage_classes: list[Obj] = field(default_factory=list)
    #: the volume kinds were listed from the cluster (`--kubeconfig`): a kind without objects has none, not unread
    volumes_listed: bool = False
    problems: list[Problem] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    def of_kind(self, kind: str) -> list[Obj]:
        lists = {NODE: self.nodes, POD: self.pods, PDB: self.pdbs, DAEMON_SET: self.daemon_sets,
                 NODE_CLAIM: self.node_claims, MACHINE: self.node_claims, EC2_NODE_CLASS: self.node_classes,
                 PERSISTENT_VOLUME_CLAIM: self.persistent_volume_claims, PERSISTENT_VOLUME: self.persistent_volumes,
                 STORAGE_CLASS: self.storage_classes}
        return lists[kind]


def _quote(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


def _is_time(value: Any) -> bool:
    """An RFC 3339 time with its zone (`2026-12-01T05:00:00Z`), as Kubernetes writes one."""
    try:
        return isinstance(value, str) and objects.parse_time(value).tzinfo is not None
    except ValueError:
        return False


def _node_problem(item: Obj) -> str | None:
    meta = objects.metadata(item)
    if meta.get("creationTimestamp") is not None:
        try:
            objects.parse_time(meta["creationTimestamp"])
        except ValueError:
            return f"metadata.creationTimestamp is not a time: {_quote(meta['creationTimestamp'])}"
    spec = item.get("spec")
    if spec is not None and not isinstance(spec, dict):
        return f"spec is not an object: {_quote(spec)}"
    if isinstance(spec, dict) and spec.get("providerID") is not None and not isinstance(spec["providerID"], str):
        return f"spec.providerID is not a string: {_quote(spec['providerID'])}"  # what pairs it with its NodeClaim
    status = item.get("status")
    if status is None:
        return None
    if not isinstance(status, dict):
        return f"status is not an object: {_quote(status)}"
    for name in ("capacity", "allocatable"):  # what the plan takes as the node's room
        listed = status.get(name)
        if listed is None:
            continue
        if not isinstance(listed, dict):
            return f"status.{name} is not a map of quantities: {_quote(listed)}"
        for resource, value in listed.items():
            try:
                amount = parse_quantity(value)
            except ValueError:
                return f"status.{name}[{resource}] is not a quantity: {_quote(value)}"
            if amount < 0:  # the API server refuses it (ValidateResourceQuantityValue): no kubelet wrote this
                return f"status.{name}[{resource}] must be greater than or equal to 0: {_quote(value)}"
    conditions = status.get("conditions")
    if conditions is not None and not (isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions)):
        return f"status.conditions is not a list of objects: {_quote(conditions)}"
    return None


def _pod_problem(item: Obj) -> str | None:
    spec = item.get("spec")
    if not isinstance(spec, dict):
        return f"spec is not an object: {_quote(spec)}"
    node_name = spec.get("nodeName")
    if node_name is not None and not isinstance(node_name, str):
        return f"spec.nodeName is not a string: {_quote(node_name)}"
    status = item.get("status")
    if status is not None and not isinstance(status, dict):
        return f"status is not an object: {_quote(status)}"
    if isinstance(status, dict):
        if status.get("phase") is not None and not isinstance(status["phase"], str):
            return f"status.phase is not a string: {_quote(status['phase'])}"
        conditions = status.get("conditions")
        if conditions is not None and not (
            isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions)
        ):
            return f"status.conditions is not a list of objects: {_quote(conditions)}"
    references = objects.metadata(item).get("ownerReferences")
    if references is not None and not isinstance(references, list):
        return f"metadata.ownerReferences is not a list: {_quote(references)}"
    for reference in references or []:
        if not isinstance(reference, dict) or not isinstance(reference.get("kind", ""), str) or not isinstance(
            reference.get("name", ""), str
        ):
            return f"metadata.ownerReferences holds {_quote(reference)}"
    return None


def _int_or_percent(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0 <= value < 10**9
    return isinstance(value, str) and _INT_OR_PERCENT.match(value) is not None


def _pdb_problem(item: Obj) -> str | None:
    spec = item.get("spec")
    if not isinstance(spec, dict):
        return f"spec is not an object: {_quote(spec)}"
    for name in ("minAvailable", "maxUnavailable"):
        if spec.get(name) is not None and not _int_or_percent(spec[name]):
            return f"spec.{name} is neither a count nor a percentage: {_quote(spec[name])}"
        if isinstance(spec.get(name), str) and spec[name].endswith("%") and int(spec[name][:-1]) > 100:
            # the API server's words (policy validation: IsNotMoreThan100Percent)
            return f"spec.{name} must not be greater than 100%: {_quote(spec[name])}"
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        # ValidatePodDisruptionBudgetSpec: which one the disruption controller would read is not for the plan to guess
        return "spec: minAvailable and maxUnavailable cannot be both set"
    selector = spec.get("selector")
    if selector is not None:
        try:
            parse_selector(selector)
        except SelectorError as error:
            return f"spec.selector is not a label selector ({error}): {_quote(selector)}"
    status = item.get("status")
    if status is not None and not isinstance(status, dict):
        return f"status is not an object: {_quote(status)}"
    expected = (status or {}).get("expectedPods")
    if expected is not None and (isinstance(expected, bool) or not isinstance(expected, int) or expected < 0):
        return f"status.expectedPods is not a count: {_quote(expected)}"
    return None


def _daemon_set_problem(item: Obj) -> str | None:
    template = (item.get("spec") or {}).get("template") if isinstance(item.get("spec"), dict) else None
    if not isinstance(template, dict) or not isinstance(template.get("spec"), dict):
        return "spec.template.spec is not an object"
    labels = (template.get("metadata") or {}).get("labels") if isinstance(template.get("metadata"), dict) else None
    if labels is not None and not _is_str_map(labels):
        return "spec.template.metadata.labels is not a map of strings"
    return None


def _duration_problem(spec: Mapping[str, Any], name: str, never: bool) -> str | None:
    value = spec.get(name)
    if value is None or (never and value == "Never"):
        return None
    if isinstance(value, str):
        try:
            parse_go_duration(value)
            return None
        except GoDurationError:
            pass
    return f"spec.{name} is not a duration{' or Never' if never else ''}: {_quote(value)}"


#: What the plan reads of a NodeClaim's `spec.nodeClassRef` (strings: `api.v1.objects.NodeClassRef`).
_REF_KEYS = ("group", "kind", "name")


def _node_claim_problem(item: Obj) -> str | None:
    """A NodeClaim (karpenter.sh/v1) or Machine (v1alpha5): what the plan reads of it — its creation time, labels
    and annotations (the metadata check), `spec.expireAfter` and `spec.terminationGracePeriod` (Go durations, the
    first or `Never`), `spec.nodeClassRef`'s group, kind and name (an EC2NodeClass's only is read: `fleet`),
    `status.nodeName`, `status.providerID`, `status.imageID` and `status.conditions`."""
    for part in ("spec", "status"):
        if item.get(part) is not None and not isinstance(item[part], dict):
            return f"{part} is not an object: {_quote(item[part])}"
    created = _node_problem({"metadata": objects.metadata(item)})
    if created is not None:
        return created
    spec = item.get("spec") or {}
    for name, never in (("expireAfter", True), ("terminationGracePeriod", False)):
        problem = _duration_problem(spec, name, never)
        if problem is not None:
            return problem
    ref = spec.get("nodeClassRef")
    if ref is not None and not (isinstance(ref, dict) and all(isinstance(ref.get(key, ""), str) for key in _REF_KEYS)):
        return f"spec.nodeClassRef is not a reference: {_quote(ref)}"
    status = item.get("status") or {}
    for name in ("nodeName", "providerID", "imageID"):
        if status.get(name) is not None and not isinstance(status[name], str):
            return f"status.{name} is not a string: {_quote(status[name])}"
    conditions = status.get("conditions")
    if conditions is not None and not (isinstance(conditions, list) and all(isinstance(c, dict) for c in conditions)):
        return f"status.conditions is not a list of objects: {_quote(conditions)}"
    return None


_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})


def _requirement_problem(requirement: Any) -> bool:
    values = requirement.get("values") if isinstance(requirement, dict) else None
    return not (isinstance(requirement, dict) and isinstance(requirement.get("key"), str)
                and requirement.get("operator") in _OPERATORS
                and (values is None or (isinstance(values, list) and all(isinstance(v, str) for v in values))))


def _node_class_problem(item: Obj) -> str | None:
    """An EC2NodeClass: what the plan reads of it — `spec.amiSelectorTerms`, `spec.subnetSelectorTerms` and
    `spec.securityGroupSelectorTerms`, `spec.capacityReservationSelectorTerms` (lists of objects), `status.amis`
    (each an `id` and its `requirements`, node selector requirements), `status.subnets`, `status.securityGroups` and
    `status.capacityReservations` (each an `id`; its `endTime`, when there, a time)."""
    for part in ("spec", "status"):
        if item.get(part) is not None and not isinstance(item[part], dict):
            return f"{part} is not an object: {_quote(item[part])}"
    for key in ("amiSelectorTerms", "subnetSelectorTerms", "securityGroupSelectorTerms",
                "capacityReservationSelectorTerms"):
        terms = (item.get("spec") or {}).get(key)
        if terms is not None and not (isinstance(terms, list) and all(isinstance(t, dict) for t in terms)):
            return f"spec.{key} is not a list of objects: {_quote(terms)}"
    for key in ("subnets", "securityGroups", "capacityReservations"):
        listed = (item.get("status") or {}).get(key)
        if listed is not None and not isinstance(listed, list):
            return f"status.{key} is not a list: {_quote(listed)}"
        for index, entry in enumerate(listed or []):
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) or not entry["id"]:
                return f"status.{key}[{index}] has no id: {_quote(entry)}"
            if key == "capacityReservations" and entry.get("endTime") is not None and not _is_time(entry["endTime"]):
                return f"status.{key}[{index}].endTime is not a time: {_quote(entry['endTime'])}"
    amis = (item.get("status") or {}).get("amis")
    if amis is None:
        return None
    if not isinstance(amis, list):
        return f"status.amis is not a list: {_quote(amis)}"
    for index, ami in enumerate(amis):
        if not isinstance(ami, dict) or not isinstance(ami.get("id"), str) or not ami["id"]:
            return f"status.amis[{index}] has no id: {_quote(ami)}"
        requirements = ami.get("requirements") or []
        if not isinstance(requirements, list) or any(_requirement_problem(r) for r in requirements):
            return f"status.amis[{index}].requirements are not node selector requirements: {_quote(requirements)}"
    return None


def _volume_problem(kind: str) -> Callable[[Obj], str | None]:
    """A PersistentVolumeClaim, PersistentVolume or StorageClass: what the controller's reading reads of it
    (`model.volumes`, one reading) — a claim's `spec.volumeName`, `spec.storageClassName` and `status`, a volume's
    `spec.nodeAffinity.required` terms, a class's `allowedTopologies` —, the field named when it cannot."""
    read = READERS[kind]

    def problem(item: Obj) -> str | None:
        try:
            read(item)
        except PodSpecError as error:
            path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path).lstrip(".")
            return f"{path}: {error.message}" if path and not error.message.startswith(path) else error.message
        return None

    return problem


_CHECKS: Mapping[str, Callable[[Obj], str | None]] = {
    NODE: _node_problem,
    POD: _pod_problem,
    PDB: _pdb_problem,
    DAEMON_SET: _daemon_set_problem,
    NODE_CLAIM: _node_claim_problem,
    MACHINE: _node_claim_problem,
    EC2_NODE_CLASS: _node_class_problem,
    **{kind: _volume_problem(kind) for kind in VOLUME_KINDS},
}


def _items(value: Any, file: str, problems: list[Problem]) -> list[Any] | None:
    """The items of a snapshot's top-level value: a List's items or one object as a list of one."""
    if not isinstance(value, dict):
        problems.append(Problem(file, None, "error", f"not a Kubernetes List or object: {_quote(value)}"))
        return None
    if value.get("kind") == "Status":
        problems.append(Problem(file, None, "error", f"a Status, not a List: {_quote(value.get('message'))}"))
        return None
    if "items" in value or str(value.get("kind") or "").endswith("List"):
        items = value.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            problems.append(Problem(file, None, "error", f"items is not a list: {_quote(items)}"))
            return None
        return items
    return [value]


#: Where each object was read (for the duplicate warning) and its position in its kind's list, by kind and key.
Seen = dict[tuple[str, str, str], tuple[str, int]]


def _add(snapshot: Snapshot, file: str, items: Sequence[Any], seen: Seen) -> None:
    for index, item in enumerate(items):
        try:
            check_object(item, f"{file}: item {index}")
        except Malformed as error:
            snapshot.problems.append(Problem(file, index, "error", _without_where(str(error), file, index),
                                             _subject(item)))
            continue
        kind = item.get("kind")
        if not isinstance(kind, str) or not kind:
            snapshot.problems.append(Problem(file, index, "error", f"{objects.name(item)}: no kind", _subject(item)))
            continue
        if kind not in _CHECKS:
            snapshot.problems.append(Problem(file, index, "warning", f"{kind} {objects.name(item)}: not read by plan",
                                             _subject(item)))
            continue
        problem = _CHECKS[kind](item)
        if problem is not None:
            snapshot.problems.append(Problem(file, index, "error", f"{kind} {_object_name(item)}: {problem}",
                                             _subject(item)))
            continue
        key = (kind, objects.namespace(item) or "", objects.name(item))
        listed = snapshot.of_kind(kind)
        if key in seen:
            where, position = seen[key]
            snapshot.problems.append(Problem(file, index, "warning",
                                             f"{kind} {_object_name(item)} is in {where} too: this one is used",
                                             _subject(item)))
            listed[position] = item
        else:
            listed.append(item)
            position = len(listed) - 1
        seen[key] = (f"{file} (item {index})", position)


def _subject(item: Any) -> tuple[str, str, str] | None:
    """An item's kind, namespace and name, each "" when not a string (None: not an object)."""
    if not isinstance(item, dict):
        return None
    meta = item.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    kind, namespace, name = (v if isinstance(v, str) else "" for v in (item.get("kind"), meta.get("namespace"),
                                                                       meta.get("name")))
    return kind, namespace, name


def _object_name(item: Obj) -> str:
    namespace = objects.namespace(item)
    return f"{namespace}/{objects.name(item)}" if namespace else objects.name(item)


def _without_where(message: str, file: str, index: int) -> str:
    prefix = f"{file}: item {index}: "
    return message[len(prefix):] if message.startswith(prefix) else message


def read_bytes(file: str, stdin: BinaryIO | None = None) -> bytes:
    """A file's content (`-`: standard input), at most :data:`MAX_BYTES`: OSError when it cannot be read,
    ValueError when it is larger — the one bounded read of every file `plan` is given."""
    if file == STDIN:
        stream = stdin if stdin is not None else sys.stdin.buffer
        data = stream.read(MAX_BYTES + 1)
    else:
        with open(file, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"larger than {MAX_BYTES // 1024**2} MiB")
    return data


def read_snapshot(data: bytes, file: str, snapshot: Snapshot | None = None,
                  seen: Seen | None = None) -> Snapshot:
    """Add the objects of one snapshot file's content (`file`: its name in problems) to `snapshot` (a new one when
    None)."""
    snapshot = snapshot if snapshot is not None else Snapshot()
    snapshot.files.append(file)
    try:
        value = json.loads(data)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        message = f"not JSON (`kubectl get … -o json` prints it): {error}"[:300]
        snapshot.problems.append(Problem(file, None, "error", message))
        return snapshot
    items = _items(value, file, snapshot.problems)
    if items is not None:
        _add(snapshot, file, items, seen if seen is not None else {})
    return snapshot


def read_objects(items: Sequence[Any], source: str, snapshot: Snapshot, seen: Seen) -> None:
    """Add objects already read from elsewhere (a cluster's list answer, `source` naming it in problems) to
    `snapshot`, checked exactly as a file's items are."""
    snapshot.files.append(source)
    _add(snapshot, source, items, seen)


def checked_snapshot(snapshot: Snapshot) -> Snapshot:
    """`snapshot`, with an error when it holds no Node (and no error already says why), and what keeps its Nodes
    and NodeClaims from pairing by providerID (`pairing.pairing_problems`: an error for two of one kind with one
    providerID, a warning for a NodePool's or Provisioner's Node without one)."""
    where = ", ".join(snapshot.files) or "(none)"
    if not snapshot.nodes and not snapshot.errors:
        snapshot.problems.append(Problem(where, None, "error",
                                         f"no Node in the snapshot: nothing to plan (take it with `{KUBECTL_GET}`)"))
    for severity, message, subject in pairing_problems(snapshot.nodes, snapshot.node_claims):
        snapshot.problems.append(Problem(where, None, severity, message, subject))
    return snapshot


def read_snapshots(files: Iterable[str], stdin: BinaryIO | None = None) -> Snapshot:
    """Read every snapshot file (`-`: standard input, read once) into one snapshot."""
    snapshot = Snapshot()
    seen: Seen = {}
    read_stdin = False
    for file in files:
        if file == STDIN:
            if read_stdin:
                snapshot.problems.append(Problem(file, None, "error", "standard input is given twice"))
                continue
            read_stdin = True
        try:
            data = read_bytes(file, stdin)
        except (OSError, ValueError) as error:
            snapshot.problems.append(Problem(file, None, "error", f"cannot read: {error}"))
            continue
        read_snapshot(data, file, snapshot, seen)
    return checked_snapshot(snapshot)
