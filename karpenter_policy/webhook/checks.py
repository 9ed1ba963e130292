"""The CLI's checks on one admitted object, as denial lines and warnings.

`Checker.check` runs, in this order, exactly what `karpenter-policy check` runs on each document of a file:
`checks.validation.policies.check_document` (apiVersion and kind, the JSON Schema, Karpenter's validation rules),
then — for a valid Provisioner — `checks.proof.provisioners.check_provisioner` with the solver of the node OS
`provisioner_os` gives (conflicts, no instance type, unknown names, a solver timeout) and
`checks.proof.limits.limits_findings` (limits below the smallest instance type). Messages are the CLI's, word for word;
where the CLI prefixes file:line:column the webhook prefixes the field path (`spec.requirements[1].values[0]:`),
and both end with the rule id. The CLI's checks across files (`duplicate-name`, `unresolved-reference`) have no
meaning for one object in a cluster (the API server keeps names unique; the template lives in the cluster) and
are not run.

`Checker.check_v1` does the same for a Karpenter v1 NodePool or EC2NodeClass (`checks.validation.v1`: the CRD's
schema and CEL rules as the API server runs them, NodePool's RuntimeValidate), with the old object on an update so
that transition rules run and a refusal the update did not introduce is a warning (the API server's ratcheting).

One `Checker` serves every request thread: the Z3 solvers are not thread-safe, so solving is serialised by a
lock (the GIL serialises the rest anyway); their verdicts are cached (`solvercache`). The result of a whole
check is cached too, keyed by a digest of the object's canonical JSON, so an object seen before — a re-applied
Provisioner, a GitOps sync — costs a hash instead of the schema, the rules and the name suggestions again.
Checking is a pure function of the object (the catalog is fixed), except for a solver timeout, which is never
cached. Of a Provisioner, the key leaves out the values that the API server writes on every update and that no
check reads beyond their JSON type (`cache_view`: `metadata.uid`, `resourceVersion`, `generation`,
`creationTimestamp`, the scalars of `metadata.managedFields`' entries and of `status`): an UPDATE whose object
differs from one seen before only in those (a new resourceVersion, managedFields' times, the status the controller
wrote in between) costs a hash too, and gets the answer a full check of it gives.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from karpenter_policy.api.kinds import PROVISIONER_API_VERSION, PROVISIONER_KIND
from karpenter_policy.api.v1.crds import (
    EC2NODECLASS_API_VERSION,
    EC2NODECLASS_KIND,
    NODEPOOL_API_VERSION,
    NODEPOOL_KIND,
)
from karpenter_policy.api.violations import ERROR, SOLVER_TIMEOUT, WARNING, Path
from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.findings import Finding, Report
from karpenter_policy.checks.proof.limits import limits_findings
from karpenter_policy.checks.proof.provisioners import check_provisioner, node_template_of, provisioner_os
from karpenter_policy.checks.proof.solver import Verdict
from karpenter_policy.checks.validation.policies import check_document, place
from karpenter_policy.checks.validation.v1 import karpenter_object
from karpenter_policy.model.amifamily import NODE_OSES
from karpenter_policy.scheduling import InstanceTable
from karpenter_policy.webhook.context import PolicyContext
from karpenter_policy.webhook.jsondoc import JsonDocument
from karpenter_policy.webhook.solvercache import DEFAULT_CACHE_SIZE, CachingSolver

#: The solver's time limit per call in the webhook (the CLI's default is 5,000 ms, the API server waits ≤ 5 s).
DEFAULT_WEBHOOK_TIMEOUT_MS = 1000


@dataclass(frozen=True, slots=True)
class CheckResult:
    """The verdict on one object: denial lines (empty: admissible) and warnings, and the findings behind them."""

    expected_kind: bool  # a Provisioner for the Provisioner routes; a v1 NodePool or EC2NodeClass for theirs
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def allowed(self) -> bool:
        return self.expected_kind and not self.errors

    def denial(self) -> str:
        """`status.message` of a denial: one line per error."""
        return "\n".join(self.errors)


#: Server-set metadata of a Provisioner that the checks read only the JSON type of (the schema's `objectMeta`;
#: no rule reads them): in the whole-check cache's key, this value stands for every other of its type.
_SERVER_SET_METADATA: Final[Mapping[str, str | int]] = {
    "uid": "",
    "resourceVersion": "",
    "generation": 0,
    "creationTimestamp": "",
}


def cache_view(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What the whole-check cache keys a Provisioner by: `obj` with the values the API server rewrites on every
    update, and no check reads, replaced by one value of the same JSON type — the server-set metadata above, the
    scalars inside each mapping of `metadata.managedFields` and inside `status` (the schema takes any mapping
    there). Keys, lengths and nesting are kept, so a finding is placed where it would be on `obj` itself (a
    position is a rank in document order: `jsondoc`), and a value a check could name in a message — one of
    another type than the schema's, a `managedFields` entry that is not a mapping — is kept as it is. Another
    kind is keyed as it is (a v1 object's CEL rules may read any field)."""
    if obj.get("apiVersion") != PROVISIONER_API_VERSION or obj.get("kind") != PROVISIONER_KIND:
        return obj
    view = dict(obj)
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        kept = dict(metadata)
        for key, blank in _SERVER_SET_METADATA.items():
            if type(kept.get(key)) is type(blank):  # `type is`: a boolean is not the integer the schema asks for
                kept[key] = blank
        entries = kept.get("managedFields")
        if isinstance(entries, list):
            kept["managedFields"] = [_shape(e) if isinstance(e, Mapping) else e for e in entries]
        view["metadata"] = kept
    status = obj.get("status")
    if isinstance(status, Mapping):
        view["status"] = _shape(status)
    return view


def _shape(value: Any) -> Any:
    """`value` with every string, integer and float replaced by the empty one of its type: its keys, lengths and
    nesting (and its booleans and nulls) kept."""
    if isinstance(value, Mapping):
        return {key: _shape(child) for key, child in value.items()}
    if isinstance(value, list):
        return [_shape(child) for child in value]
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return ""
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    return value


def _digest(obj: Mapping[str, Any]) -> bytes:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.blake2b(canonical.encode("utf-8", "surrogatepass"), digest_size=16).digest()


#: The v1 kinds the webhook validates (a NodeClaim is Karpenter's own object, never written by a user).
V1_WEBHOOK_KINDS: Final = frozenset({NODEPOOL_KIND, EC2NODECLASS_KIND})
_V1_EXPECTED = f"{NODEPOOL_API_VERSION} {NODEPOOL_KIND} or {EC2NODECLASS_API_VERSION} {EC2NODECLASS_KIND}"

#: What `warm_up` checks of v1: a NodePool and an EC2NodeClass Karpenter admits.
V1_WARM_UP: Final[tuple[Mapping[str, Any], ...]] = (
    {
        "apiVersion": NODEPOOL_API_VERSION,
        "kind": NODEPOOL_KIND,
        "metadata": {"name": "warm-up"},
        "spec": {
            "template": {
                "spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": EC2NODECLASS_KIND, "name": "warm-up"},
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                }
            }
        },
    },
    {
        "apiVersion": EC2NODECLASS_API_VERSION,
        "kind": EC2NODECLASS_KIND,
        "metadata": {"name": "warm-up"},
        "spec": {
            "role": "KarpenterNodeRole",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "warm-up"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "warm-up"}}],
        },
    },
)


def describe(obj: Mapping[str, Any]) -> str:
    """`v1 Pod` — what an object claims to be, for messages."""
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    return f"{api_version if isinstance(api_version, str) else '?'} {kind if isinstance(kind, str) else '?'}"


class Checker:
    """Validation (and solving) of Provisioner objects with the CLI's functions."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        timeout_ms: int = DEFAULT_WEBHOOK_TIMEOUT_MS,
        context: PolicyContext | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        self.catalog = catalog
        self.timeout_ms = timeout_ms
        self.context = context or PolicyContext()
        self.cache_size = cache_size
        self._solvers: dict[str, CachingSolver] = {}
        self._lock = threading.Lock()
        self._results: OrderedDict[tuple[bytes, bytes, bool], CheckResult] = OrderedDict()
        self._results_lock = threading.Lock()

    def _solver(self, os: str) -> CachingSolver:  # called with the lock held
        solver = self._solvers.get(os)
        if solver is None:
            solver = self._solvers[os] = CachingSolver(self.catalog, self.timeout_ms, os, self.cache_size)
        return solver

    def cache_stats(self) -> tuple[int, int, int]:
        """Solver cache (hits, misses, entries) over every OS."""
        solvers = list(self._solvers.values())
        return sum(s.hits for s in solvers), sum(s.misses for s in solvers), sum(len(s) for s in solvers)

    def check(self, obj: Mapping[str, Any], solve: bool = True) -> CheckResult:
        """Check one object as `karpenter-policy check` (or, with `solve=False`, `validate`) checks a document."""
        return self._cached((_digest(cache_view(obj)), b"", solve), lambda: self._check(obj, solve))

    def check_v1(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> CheckResult:
        """Check one Karpenter v1 object (NodePool, EC2NodeClass) created, or with `old` updated from `old`, as
        `karpenter-policy check` checks a document (see `_check_v1` for what an update may keep)."""
        key = (_digest(obj), _digest(old) if old is not None else b"", True)
        return self._cached(key, lambda: self._check_v1(obj, old))

    def _cached(self, key: tuple[bytes, bytes, bool], compute: Callable[[], CheckResult]) -> CheckResult:
        if self.cache_size <= 0:
            return compute()
        with self._results_lock:
            cached = self._results.get(key)
            if cached is not None:
                self._results.move_to_end(key)
                return cached
        result = compute()
        if not any(f.rule == SOLVER_TIMEOUT for f in result.findings):
            with self._results_lock:
                self._results[key] = result
                if len(self._results) > self.cache_size:
                    self._results.popitem(last=False)
        return result

    def _check(self, obj: Mapping[str, Any], solve: bool) -> CheckResult:
        doc = JsonDocument(obj)
        findings, is_policy = check_document(doc, Report())
        is_provisioner = is_policy and obj.get("kind") == PROVISIONER_KIND
        if is_provisioner and solve and not any(f.severity == ERROR for f in findings):
            template = node_template_of(obj, self.context.node_templates)
            os = provisioner_os(obj, self.context.node_templates)
            with self._lock:
                solver_findings, checked = check_provisioner(doc, self._solver(os))
            findings = [*findings, *solver_findings]
            if checked.verdict == Verdict.SAT:
                table = InstanceTable.of_catalog(self.catalog)
                findings += limits_findings(doc, checked.provisioner, checked.instance_types, table, template)
        ordered = sorted(findings, key=Finding.sort_key)
        errors = [self._line(doc, f) for f in ordered if f.severity == ERROR]
        if not is_provisioner and not errors:
            errors = [f"expected a {PROVISIONER_API_VERSION} {PROVISIONER_KIND}, not {describe(obj)}"]
        # A warning is one line in the API server's Warning header (control characters are not allowed there):
        # a multi-line finding gives its first line, which says what to do (`deprecated-provider`).
        warnings = [f"{f.message.split(chr(10), 1)[0]} [{f.rule}]" for f in ordered if f.severity != ERROR]
        return CheckResult(is_provisioner, tuple(errors), tuple(warnings), tuple(ordered))

    def _check_v1(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> CheckResult:
        """The v1 checks of `check` (`checks.validation.v1`: the CRD's schema and CEL rules, NodePool's
        RuntimeValidate). On an update, a refusal the old object had too (same field, same message) is a warning,
        not a denial: the API server ratchets an unchanged invalid field (CRDValidationRatcheting), and an object
        must stay editable — to fix it — even when a newer rule or Karpenter release refuses what it holds."""
        doc = JsonDocument(obj)
        verdict = karpenter_object(obj, old)
        if verdict is None or obj.get("kind") not in V1_WEBHOOK_KINDS:
            return CheckResult(False, (f"expected a {_V1_EXPECTED}, not {describe(obj)}",), (), ())
        kept: set[tuple[Path, str]] = set()
        if old is not None and (previous := karpenter_object(old)) is not None:
            kept = {(v.path, v.message) for v in previous.violations if v.severity == ERROR}
        violations = [
            replace(v, severity=WARNING, message=f"kept by this update, admitted: {v.message}")
            if v.severity == ERROR and (v.path, v.message) in kept
            else v
            for v in verdict.violations
        ]
        ordered = sorted((place(doc, v) for v in violations), key=Finding.sort_key)
        errors = [self._line(doc, f) for f in ordered if f.severity == ERROR]
        warnings = [f"{f.message} [{f.rule}]" for f in ordered if f.severity != ERROR]
        return CheckResult(True, tuple(errors), tuple(warnings), tuple(ordered))

    @staticmethod
    def _line(doc: JsonDocument, finding: Finding) -> str:
        where = doc.field_path(finding.line, finding.column)
        return f"{where}: {finding.message} [{finding.rule}]" if where else f"{finding.message} [{finding.rule}]"

    def warm_up(self, samples: Sequence[Mapping[str, Any]] = ()) -> None:
        """Build the solvers' catalog tables and compile the schema validators before the first request."""
        with self._lock:
            for os in NODE_OSES:
                self._solver(os)
        valid = {
            "apiVersion": PROVISIONER_API_VERSION,
            "kind": PROVISIONER_KIND,
            "metadata": {"name": "warm-up"},
            "spec": {"providerRef": {"name": "default"}, "limits": {"resources": {"cpu": "1"}}},
        }
        invalid = {**valid, "spec": {"requirements": [{"key": "x", "operator": "Bogus"}], "weight": "heavy"}}
        for obj in (valid, invalid, *samples):
            self.check(obj)
        for obj in V1_WARM_UP:  # builds cel-python's parser and the CRDs' programs (about a second)
            self.check_v1(obj)
