"""A Karpenter v1 object (NodePool, NodeClaim, EC2NodeClass) checked as the Kubernetes API server admits it
against Karpenter's CRDs, then, for a NodePool, as Karpenter's controller validates it at run time.

The API server's order (apiextensions-apiserver `customresource` strategy): the status of a kind with a status
subresource is dropped; unknown fields are pruned (reported here, as `kubectl apply` refuses them); defaults are
applied; the OpenAPI schema is checked; then the `x-kubernetes-validations` CEL rules, unless the schema check
found a wrong type, a value outside an enum, a missing required field or a size over its maximum, which make the
API server skip them (`hasBlockingErr`: "some validation rules were not checked because the object was
invalid"). Karpenter v1 has no admission webhook of its own: what the CRDs
admit is admitted. `RuntimeValidate` (NodePool only) runs later, in the NodePool readiness controller; before it,
Karpenter's controller decodes the object, which a duration beyond Go's `time.Duration` fails (`durations`). An
admitted NodePool whose nodeClassRef is not an EC2NodeClass is an error, `foreign-node-class` (`managed`): the AWS
provider never manages it. An admitted static NodePool (`spec.replicas`) has one warning more, `static-nodepool`
(`static`): Karpenter gives it no node with its StaticCapacity gate off, the default.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpenter_policy.api.v1.cel import cel_violations
from karpenter_policy.api.v1.crds import NODEPOOL_KIND, CrdVersion, crd_version
from karpenter_policy.api.v1.durations import duration_violations
from karpenter_policy.api.v1.managed import foreign_class_violations
from karpenter_policy.api.v1.nodepool import runtime_violations
from karpenter_policy.api.v1.static import static_violations
from karpenter_policy.api.v1.structural import defaulted, defaulted_and_problems
from karpenter_policy.api.violations import ERROR, SCHEMA, Violation

#: What the API server adds when a schema error kept it from running the CEL rules.
RULES_NOT_CHECKED = ("some validation rules were not checked because the object was invalid; correct the existing "
                     "errors to complete validation")


@dataclass(frozen=True, slots=True)
class Admission:
    """The API server's verdict on one object: the object as it would be stored (defaults applied, unknown fields
    and a status subresource's status dropped) and every reason it would refuse it (none: admitted)."""

    stored: dict[str, Any]
    refusals: tuple[Violation, ...]

    @property
    def admitted(self) -> bool:
        return not any(violation.severity == ERROR for violation in self.refusals)


def crd_of(doc: Mapping[str, Any]) -> CrdVersion | None:
    """The CRD version `doc`'s apiVersion and kind name, None for anything else."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    return crd_version(api_version, kind)


#: The scalar types JSON carries as they are (exactly these types: a subclass goes through the checks below).
_JSON_SCALARS = frozenset({str, int, float, bool})


def json_form(value: Any) -> Any:
    """`value` as kubectl sends a YAML document to the API server (sigs.k8s.io/yaml: YAML to JSON): mapping keys as
    strings, an unquoted date or time as its text, any other scalar JSON has no type for as its text. A value that
    is in that form already (what the loader reads: string keys, JSON's scalars) is returned as it is, not copied:
    the API server's steps after it (`structural`) build their own copy."""
    if value is None or type(value) in _JSON_SCALARS:
        return value
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is not str:
                break
            if item is not None and type(item) not in _JSON_SCALARS and json_form(item) is not item:
                break  # a scalar is its own JSON form: asked without a call
        else:
            return value
    elif type(value) is list:
        for item in value:
            if item is not None and type(item) not in _JSON_SCALARS and json_form(item) is not item:
                break
        else:
            return value
    return _converted(value)


def _converted(value: Any) -> Any:
    """`json_form(value)` as a new value (lists and mappings copied)."""
    if value is None or type(value) in _JSON_SCALARS:
        return value
    if type(value) is dict or isinstance(value, Mapping):
        return {_key_text(key): _converted(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_converted(item) for item in value]
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def _key_text(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def _body(doc: Mapping[str, Any], crd: CrdVersion) -> dict[str, Any]:
    """The object the API server goes on with: its JSON form, without the status of a status subresource (a
    mapping of its own: `doc` is never changed)."""
    body: dict[str, Any] = json_form(doc)
    if crd.status_subresource:
        return {key: item for key, item in body.items() if key != "status"}
    return dict(body) if body is doc else body


def admit(doc: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Admission:
    """`doc` created (or, with `old`, updated from `old`) as the API server would take it.
    Raises LookupError for a document of a kind the package has no CRD of (`crd_of` says which have one)."""
    crd = crd_of(doc)
    if crd is None:
        raise LookupError(f"no Karpenter v1 CRD for apiVersion {doc.get('apiVersion')!r} kind {doc.get('kind')!r}")
    body = _body(doc, crd)
    stored, problems = defaulted_and_problems(body, crd.schema)  # unknown fields, then the schema's problems
    refusals = [problem.violation for problem in problems]
    if any(problem.blocking for problem in problems):
        refusals.append(Violation(SCHEMA, (), RULES_NOT_CHECKED))  # the API server lists it among its errors
    else:
        old_stored = defaulted(_body(old, crd), crd.schema) if old is not None else None
        if old_stored is None:
            refusals.extend(cel_violations(stored, crd.schema))
        else:
            refusals.extend(cel_violations(stored, crd.schema, old_stored))
    return Admission(stored, tuple(refusals))


def stored_form(doc: Mapping[str, Any]) -> dict[str, Any]:
    """`doc` as the API server would store it (defaults applied, unknown fields and status dropped), without
    checking it: for a document `check` already found admissible (`admit(doc).stored`, without the CEL rules'
    cost). Raises LookupError as `admit` does."""
    crd = crd_of(doc)
    if crd is None:
        raise LookupError(f"no Karpenter v1 CRD for apiVersion {doc.get('apiVersion')!r} kind {doc.get('kind')!r}")
    stored: dict[str, Any] = defaulted(_body(doc, crd), crd.schema)
    return stored


def check(doc: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> list[Violation]:
    """Every problem Karpenter would have with `doc`: the API server's refusals and, for an admitted object, the
    durations Karpenter's controller cannot decode (`durations`), a NodePool's RuntimeValidate (admitted, but
    never Ready), a NodePool of another provider's node class (`managed`: the AWS provider never manages it) and, a
    warning, a static NodePool (`static`: no node while the StaticCapacity gate is off)."""
    admission = admit(doc, old)
    found = list(admission.refusals)
    if admission.admitted:
        found.extend(duration_violations(admission.stored))
    if admission.admitted and doc.get("kind") == NODEPOOL_KIND:
        found.extend(runtime_violations(admission.stored))
        found.extend(foreign_class_violations(admission.stored))
        found.extend(static_violations(admission.stored))
    return found
