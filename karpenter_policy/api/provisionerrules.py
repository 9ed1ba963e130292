"""Karpenter's Provisioner validation rules (core webhook, v0.31), as `Violation`s with field paths.

Input is a Provisioner document that already passed the JSON Schema (types are right); these are the rules a
schema cannot express. The AWS provider rules live in `api.aws`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml

from karpenter_policy.api import aws
from karpenter_policy.api.metadata import metadata_violations
from karpenter_policy.api.v1.goduration import MAX_DURATION_SECONDS
from karpenter_policy.api.violations import (
    DEPRECATED_LABEL,
    DEPRECATED_PROVIDER,
    DURATION_OVERFLOW,
    INVALID_REQUIREMENT,
    INVALID_SPEC,
    QUANTITY_OUT_OF_RANGE,
    RESTRICTED_LABEL,
    TTL_CHURN,
    UNKNOWN_LABEL_KEY,
    WARNING,
    Path,
    Violation,
)
from karpenter_policy.model import labels as wk
from karpenter_policy.model.requirements import MAX_GO_INT, SUPPORTED_OPERATORS, Operator, go_int
from karpenter_policy.model.resources import QuantityError, out_of_range_message, read_quantity
from karpenter_policy.model.taints import TAINT_EFFECTS

Document = Mapping[str, Any]

SUPPORTED_EVICTION_SIGNALS = frozenset(
    {
        "memory.available",
        "nodefs.available",
        "nodefs.inodesFree",
        "imagefs.available",
        "imagefs.inodesFree",
        "pid.available",
    }
)
#: Values shown in a Gt/Lt message, and the length past which a value is shown cut.
_SHOWN_VALUES = 5
_SHOWN_CHARS = 64
#: An expiry under an hour churns nodes (the `ttl-churn` warning, docs/rules/ttl-churn.md).
CHURNING_EXPIRY_SECONDS = 3600
SUPPORTED_RESERVED_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pid"})


def validate_provisioner(doc: Document) -> list[Violation]:
    """Every Karpenter validation rule that `doc` (a schema-valid Provisioner) breaks."""
    spec: Mapping[str, Any] = doc.get("spec") or {}
    found: list[Violation] = []
    found += metadata_violations(doc.get("metadata") or {})
    found += _limits((spec.get("limits") or {}).get("resources") or {})
    found += _requirements(spec.get("requirements") or [])
    found += _labels(spec.get("labels") or {})
    found += _taints(spec)
    found += _ttls(spec)
    found += _provider(spec, doc.get("metadata"))
    found += _kubelet(spec.get("kubeletConfiguration"))
    return found


def requirement_violations(requirement: Mapping[str, Any], path: Path) -> Iterator[Violation]:
    """Karpenter's `ValidateRequirement` for one node-selector requirement (provisioner or pod)."""
    raw_key = requirement.get("key", "")
    key = wk.normalize_key(raw_key)
    operator = requirement.get("operator", "")
    values: Sequence[str] = requirement.get("values") or []
    if raw_key in wk.DEPRECATED_LABELS:
        yield Violation(
            DEPRECATED_LABEL,
            (*path, "key"),
            f"label {raw_key} is deprecated; Karpenter reads it as {key}, write that instead",
        )
    if key == wk.PROVISIONER_NAME:
        yield Violation(RESTRICTED_LABEL, (*path, "key"), f"{key} is restricted: Karpenter sets it on every node")
    elif (reason := wk.restricted_label_reason(key)) is not None:
        yield Violation(RESTRICTED_LABEL, (*path, "key"), reason)
    elif (hint := unknown_key_message(key)) is not None:
        yield Violation(UNKNOWN_LABEL_KEY, (*path, "key"), hint)
    for error in wk.qualified_name_errors(key):
        yield Violation(INVALID_REQUIREMENT, (*path, "key"), f"key {key!r} is not a qualified name: {error}")
    if operator not in SUPPORTED_OPERATORS:
        yield Violation(
            INVALID_REQUIREMENT,
            (*path, "operator"),
            f"key {key} has an unsupported operator {operator!r}; use one of {', '.join(o.value for o in Operator)}",
        )
    for index, value in enumerate(values):
        for error in wk.label_value_errors(value):
            yield Violation(
                INVALID_REQUIREMENT,
                (*path, "values", index),
                f"invalid value {shown_value(value)} for key {key}: {error}",
            )
    if operator == Operator.IN and not values:
        yield Violation(INVALID_REQUIREMENT, path, f"key {key} with operator In must have at least one value")
    if operator in (Operator.GT, Operator.LT):
        bound = go_int(values[0]) if len(values) == 1 else None
        if bound is None or bound < 0:
            where: Path = (*path, "values") if values else path
            yield Violation(INVALID_REQUIREMENT, where, _bound_message(key, operator, values))
    if operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST) and values:
        yield Violation(
            INVALID_REQUIREMENT,
            (*path, "values"),
            f"key {key} with operator {operator} ignores its values {list(values)}; remove them",
            WARNING,
        )


def _bound_message(key: str, operator: str, values: Sequence[str]) -> str:
    """Karpenter's `ValidateRequirement` reads a Gt/Lt bound with Go's strconv.Atoi, an int64 on the nodes it
    runs on: a bound past 9223372036854775807 is refused there as "value out of range" (say so, not just "an
    integer")."""
    shown = "[" + ", ".join(shown_value(v) for v in values[:_SHOWN_VALUES])
    shown += f", and {len(values) - _SHOWN_VALUES} more]" if len(values) > _SHOWN_VALUES else "]"
    if len(values) == 1 and (digits := values[0].lstrip("+")).isascii() and digits.isdigit():
        return (
            f"key {key} with operator {operator} must have a single integer value from 0 to {MAX_GO_INT}: Karpenter "
            f"reads it as a 64-bit integer (Go's strconv.Atoi) and refuses a larger one, got {shown}"
        )
    return f"key {key} with operator {operator} must have a single integer value ≥ 0, got {shown}"


def shown_long(value: str) -> str:
    """`value` as it is when a label value could be that long, else :func:`shown_value` (quoted and cut): for a
    message that names short values unquoted."""
    return value if len(value) <= _SHOWN_CHARS else shown_value(value)


def shown_value(value: str) -> str:
    """`value` quoted for a message, cut to its first and last characters when longer than a label value can
    be: a finding about a value of thousands of characters names it without printing it all."""
    if len(value) <= _SHOWN_CHARS:
        return repr(value)
    return f"{value[:24] + '…' + value[-8:]!r} ({len(value)} characters)"


def unknown_key_message(key: str) -> str | None:
    """The `unknown-label-key` warning for a key Karpenter admits that looks like a typo of a well-known key
    (`node.kubernetes.io/instance-generation`), None for any other key."""
    hint = wk.label_key_hint(key)
    if hint is None:
        return None
    return f"{key} is not a well-known label, no node has it unless it is set; did you mean {hint}?"


def quantity_violations(
    value: object, path: Path, field: str, *, unreadable: str | None = None, negative: str | None = None
) -> Iterator[Violation]:
    """What is wrong with the quantity `value` at `path`: `invalid-spec` when Kubernetes cannot read it
    (`unreadable`, else the parser's reason) or, given a `negative` message, when it is below zero; a
    `quantity-out-of-range` warning when it is beyond what a quantity holds as an integer (it is read capped)."""
    try:
        quantity = read_quantity(value)
    except QuantityError as error:
        yield Violation(INVALID_SPEC, path, unreadable or f"{field}: {error}")
        return
    if negative is not None and quantity.value < 0:
        yield Violation(INVALID_SPEC, path, negative)
    elif quantity.out_of_range:
        yield Violation(QUANTITY_OUT_OF_RANGE, path, out_of_range_message(field, value))


def _limits(resources: Mapping[str, Any]) -> Iterator[Violation]:
    for name, value in resources.items():
        yield from quantity_violations(value, ("spec", "limits", "resources", name), f"limits.resources.{name}")


def _requirements(requirements: Sequence[Mapping[str, Any]]) -> Iterator[Violation]:
    for index, requirement in enumerate(requirements):
        yield from requirement_violations(requirement, ("spec", "requirements", index))


def _labels(labels: Mapping[str, str]) -> Iterator[Violation]:
    for key, value in labels.items():
        path: Path = ("spec", "labels", key)
        if key == wk.PROVISIONER_NAME:
            yield Violation(RESTRICTED_LABEL, path, f"label {key} is restricted: Karpenter sets it", at_key=True)
        elif (reason := wk.restricted_label_reason(key)) is not None:
            yield Violation(RESTRICTED_LABEL, path, reason, at_key=True)
        elif (hint := unknown_key_message(key)) is not None:
            yield Violation(UNKNOWN_LABEL_KEY, path, hint, at_key=True)
        for error in wk.qualified_name_errors(key):
            yield Violation(INVALID_SPEC, path, f"label key {key!r} is not a qualified name: {error}", at_key=True)
        for error in wk.label_value_errors(value):
            yield Violation(INVALID_SPEC, path, f"label {key} has an invalid value {value!r}: {error}")


def _taints(spec: Mapping[str, Any]) -> Iterator[Violation]:
    seen: dict[tuple[str, str], Path] = {}
    for field in ("taints", "startupTaints"):
        for index, taint in enumerate(spec.get(field) or []):
            path: Path = ("spec", field, index)
            key, value, effect = taint.get("key", ""), taint.get("value", ""), taint.get("effect", "")
            if not key:
                yield Violation(INVALID_SPEC, (*path, "key"), f"{field}[{index}] needs a key")
            else:
                for error in wk.qualified_name_errors(key):
                    yield Violation(INVALID_SPEC, (*path, "key"), f"taint key {key!r} is not a qualified name: {error}")
            if value:
                for error in wk.qualified_name_errors(value):
                    yield Violation(INVALID_SPEC, (*path, "value"), f"taint value {value!r} is invalid: {error}")
            if effect not in TAINT_EFFECTS:
                yield Violation(
                    INVALID_SPEC,
                    (*path, "effect"),
                    f"taint effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}",
                )
            first = seen.get((key, effect))
            if first is not None:
                yield Violation(
                    INVALID_SPEC,
                    path,
                    f"duplicate taint {key}:{effect}: the same key and effect already appear at {first[1]}[{first[2]}]",
                    related=(first,),
                )
            else:
                seen[(key, effect)] = path


def _ttls(spec: Mapping[str, Any]) -> Iterator[Violation]:
    consolidation = spec.get("consolidation") or {}
    for field in ("ttlSecondsAfterEmpty", "ttlSecondsUntilExpired"):
        value = spec.get(field)
        if isinstance(value, int) and value < 0:
            yield Violation(INVALID_SPEC, ("spec", field), f"{field} cannot be negative ({value})")
        converted = field == "ttlSecondsUntilExpired" or not (
            isinstance(consolidation, Mapping) and consolidation.get("enabled") is True)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_DURATION_SECONDS and converted:
            # core pkg/utils/nodepool/nodepool.go New: lo.Must(time.ParseDuration(fmt.Sprintf("%ds", ttl)))
            yield Violation(
                DURATION_OVERFLOW, ("spec", field),
                f"{field} {value} is more seconds than Go's time.Duration holds ({MAX_DURATION_SECONDS}, about 292 "
                "years): Karpenter v0.31 converts it with time.ParseDuration under lo.Must, which panics in every "
                "controller that reads this Provisioner; leave the field out for no limit",
            )
    expiry = spec.get("ttlSecondsUntilExpired")
    if isinstance(expiry, int) and not isinstance(expiry, bool) and 0 <= expiry < CHURNING_EXPIRY_SECONDS:
        yield Violation(
            TTL_CHURN,
            ("spec", "ttlSecondsUntilExpired"),
            f"ttlSecondsUntilExpired {expiry}: every node expires {expiry} s after its launch, under an hour: the "
            "provisioner replaces its nodes about as fast as it launches them (a launch, readiness and the drain "
            "take minutes, and evict every pod), and a replacement that expires before it is ready is replaced "
            "in turn, without end; use hours or days (2592000 is 30 days), or leave it out",
        )
    if isinstance(consolidation, Mapping) and consolidation.get("enabled") is True and (
            spec.get("ttlSecondsAfterEmpty") is not None):
        yield Violation(
            INVALID_SPEC,
            ("spec", "ttlSecondsAfterEmpty"),
            "ttlSecondsAfterEmpty and consolidation.enabled are mutually exclusive: consolidation already "
            "removes empty nodes",
            related=(("spec", "consolidation", "enabled"),),
        )


def _provider(spec: Mapping[str, Any], metadata: Mapping[str, Any] | None) -> Iterator[Violation]:
    provider, provider_ref = spec.get("provider"), spec.get("providerRef")
    if provider is not None and provider_ref is not None:
        yield Violation(
            INVALID_SPEC,
            ("spec", "providerRef"),
            "provider and providerRef are mutually exclusive: keep the AWSNodeTemplate reference (providerRef)",
            related=(("spec", "provider"),),
        )
    elif provider is None and provider_ref is None:
        yield Violation(
            INVALID_SPEC,
            ("spec",),
            "exactly one of provider or providerRef is required: name an AWSNodeTemplate in providerRef",
        )
    if isinstance(provider, Mapping):
        yield from aws.validate_aws(provider, ("spec", "provider"), inline=True, metadata=metadata)
        if provider_ref is None:
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            yield Violation(
                DEPRECATED_PROVIDER,
                ("spec", "provider"),
                deprecated_provider_message(provider, name if isinstance(name, str) and name else "NAME"),
                at_key=True,
            )


#: Lines of the AWSNodeTemplate shown in a `deprecated-provider` message before the rest is cut.
_SHOWN_TEMPLATE_LINES = 40
#: How many `deprecated-provider` messages are remembered (by the provider's content and the Provisioner's name).
MESSAGE_CACHE_SIZE = 256
_JSON_SCALARS = (str, int, float, bool, type(None))


def deprecated_provider_message(provider: Mapping[str, Any], name: str) -> str:
    """The `deprecated-provider` warning: its first line says what to do (it is the whole of the webhook's
    warning), the lines under it are the AWSNodeTemplate to write: the provider's fields as its spec (Karpenter's
    `AWSNodeTemplateSpec` inlines the AWS provider's fields; the provider's own apiVersion and kind are not
    fields of it), named after the Provisioner.

    Rendering the YAML costs about 2 ms, and the webhook sees the same Provisioner again on every update: the
    message is remembered by the provider's content (its JSON text, key order included) when the provider holds
    only JSON's own types, as an admission review's does; anything else is rendered every time."""
    key = _content_key(provider, name)
    if key is None:
        return _render_message(provider, name)
    return _remembered_message(key)


def _content_key(provider: Mapping[str, Any], name: str) -> str | None:
    """The JSON text of (name, provider), None when the provider holds anything but dicts with string keys, lists,
    strings, numbers, booleans and nulls (a key JSON would turn into a string, a subclass YAML renders apart)."""
    if type(name) is not str or not _plain_json(provider):
        return None
    try:
        return json.dumps([name, provider], ensure_ascii=False, allow_nan=True)
    except (ValueError, RecursionError):  # an integer beyond Python's digit limit for str(), or nesting too deep
        return None


def _plain_json(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if any(type(k) is not str for k in item):
                return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind not in _JSON_SCALARS:
            return False
    return True


@functools.lru_cache(maxsize=MESSAGE_CACHE_SIZE)
def _remembered_message(key: str) -> str:
    """The message of the (name, provider) whose JSON text is `key` (decoded: the same keys in the same order, the
    same values of the same types)."""
    name, provider = json.loads(key)
    return _render_message(provider, name)


def _render_message(provider: Mapping[str, Any], name: str) -> str:
    spec = {k: v for k, v in provider.items() if k not in ("apiVersion", "kind")}
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": name},
        "spec": spec,
    }
    lines = yaml.safe_dump(template, sort_keys=False, default_flow_style=False, allow_unicode=True).splitlines()
    if len(lines) > _SHOWN_TEMPLATE_LINES:
        cut = len(lines) - _SHOWN_TEMPLATE_LINES
        lines = [*lines[:_SHOWN_TEMPLATE_LINES], f"… ({cut} more lines: every field of spec.provider)"]
    # Short enough for the webhook's warning (120 characters with the rule id) for a name of 14 characters.
    head = f"spec.provider is deprecated: use an AWSNodeTemplate and providerRef: {{name: {name}}}"
    return "\n".join([head, *("  " + line for line in lines)])


def _eviction(thresholds: Mapping[str, str], path: Path) -> Iterator[Violation]:
    for signal, value in thresholds.items():
        where: Path = (*path, signal)
        if signal not in SUPPORTED_EVICTION_SIGNALS:
            yield Violation(
                INVALID_SPEC,
                where,
                f"eviction signal {signal!r} is not one of {', '.join(sorted(SUPPORTED_EVICTION_SIGNALS))}",
                at_key=True,
            )
        text = str(value)
        if text.endswith("%"):
            try:
                percent = float(text[:-1])
            except ValueError:
                percent = -1.0
            if not 0 <= percent <= 100:
                yield Violation(INVALID_SPEC, where, f"{signal}: {text!r} is not a percentage between 0% and 100%")
        else:
            yield from quantity_violations(
                text,
                where,
                signal,
                unreadable=f"{signal}: {text!r} is neither a percentage nor a quantity",
                negative=f"{signal}: {text!r} cannot be negative",
            )


def _kubelet(kubelet: Mapping[str, Any] | None) -> Iterator[Violation]:
    if not kubelet:
        return
    base: Path = ("spec", "kubeletConfiguration")
    for field in ("kubeReserved", "systemReserved"):
        for resource, quantity in (kubelet.get(field) or {}).items():
            if resource not in SUPPORTED_RESERVED_RESOURCES:
                yield Violation(
                    INVALID_SPEC,
                    (*base, field, resource),
                    f"{field}: {resource!r} is not one of {', '.join(sorted(SUPPORTED_RESERVED_RESOURCES))}",
                    at_key=True,
                )
            yield from quantity_violations(
                quantity,
                (*base, field, resource),
                f"{field}.{resource}",
                negative=f"{field}.{resource} cannot be negative",
            )
    for field in ("evictionHard", "evictionSoft"):
        yield from _eviction(kubelet.get(field) or {}, (*base, field))
    high, low = kubelet.get("imageGCHighThresholdPercent"), kubelet.get("imageGCLowThresholdPercent")
    if isinstance(high, int) and isinstance(low, int) and high < low:
        yield Violation(
            INVALID_SPEC,
            (*base, "imageGCHighThresholdPercent"),
            f"imageGCHighThresholdPercent ({high}) must be greater than imageGCLowThresholdPercent ({low})",
        )
    soft = kubelet.get("evictionSoft") or {}
    grace = kubelet.get("evictionSoftGracePeriod") or {}
    for signal in sorted(soft.keys() - grace.keys()):
        yield Violation(
            INVALID_SPEC,
            (*base, "evictionSoft", signal),
            f"evictionSoft.{signal} needs a matching evictionSoftGracePeriod.{signal}",
            at_key=True,
        )
    for signal in sorted(grace):
        if signal not in SUPPORTED_EVICTION_SIGNALS:
            yield Violation(
                INVALID_SPEC,
                (*base, "evictionSoftGracePeriod", signal),
                f"eviction signal {signal!r} is not one of {', '.join(sorted(SUPPORTED_EVICTION_SIGNALS))}",
                at_key=True,
            )
    for signal in sorted(grace.keys() - soft.keys()):
        yield Violation(
            INVALID_SPEC,
            (*base, "evictionSoftGracePeriod", signal),
            f"evictionSoftGracePeriod.{signal} has no matching evictionSoft.{signal}",
            at_key=True,
        )
