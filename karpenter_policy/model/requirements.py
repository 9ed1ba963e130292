"""Node-selector requirements as sets: Karpenter's scheduling algebra.

A `Requirement` is the set of values a label key may take: a finite set (`In`, `DoesNotExist` = the empty set)
or the complement of one (`NotIn`, `Exists` = everything), optionally bounded by integer `Gt`/`Lt`. Sets
intersect; `Requirements` (one requirement per key) intersect key by key and answer Karpenter's two
questions: do two sets of requirements *intersect*, and is a pod *compatible* with a provisioner (a custom
label in the pod must be defined by the provisioner unless the pod says NotIn/DoesNotExist; well-known
labels that the provisioner leaves open are allowed).

Semantics follow Karpenter v0.31 `pkg/scheduling/requirement(s).go`, with one deliberate difference: a pair
of bounds with no integer between them (`Gt 3`, `Lt 4`) is empty here, where v0.31 only caught `Gt >= Lt`.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from karpenter_policy.model.labels import WELL_KNOWN_LABELS, normalize_key, typo_hint


class Operator(StrEnum):
    """The node-selector operators Karpenter supports."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"


SUPPORTED_OPERATORS: frozenset[str] = frozenset(op.value for op in Operator)

#: Karpenter v1's inclusive bounds (`NodeSelectorOpGte`/`NodeSelectorOpLte`, pkg/apis/v1/nodeclaim.go at v1.14.1):
#: NodePool and NodeClaim requirements only — not Kubernetes operators, so neither a pod nor a v1alpha5
#: Provisioner may use them (`SUPPORTED_OPERATORS` leaves them out). `Requirement.new` reads `Gte N` as `Gt N-1`
#: and `Lte N` as `Lt N+1`, the integer equivalents of Karpenter's `NewRequirementWithFlexibility`, which stores
#: every bound inclusively (pkg/scheduling/requirement.go).
GTE: Final = "Gte"
LTE: Final = "Lte"
V1_OPERATORS: frozenset[str] = SUPPORTED_OPERATORS | {GTE, LTE}
_MAX_LISTED_VALUES = 5


#: The largest integer Go's strconv.Atoi reads on a 64-bit platform (an int64); Karpenter v0.31.1 reads Gt/Lt
#: bounds (`ValidateRequirement` in pkg/apis/v1alpha5/provisioner_validation.go) and compares label values
#: (`withinIntPtrs` in pkg/scheduling/requirement.go) with it.
MAX_GO_INT = 2**63 - 1
_MAX_GO_INT_DIGITS = len(str(MAX_GO_INT))


def go_int(value: str) -> int | None:
    """The integer Go's strconv.Atoi reads from `value` (optional sign, ASCII decimal digits, within int64),
    else None. The digits are counted before any conversion, so a value of thousands of digits costs nothing
    (and never meets Python's limit on long integer strings)."""
    digits = value[1:] if value[:1] in ("+", "-") else value
    if not digits.isascii() or not digits.isdigit():
        return None
    significant = digits.lstrip("0") or "0"
    if len(significant) > _MAX_GO_INT_DIGITS:
        return None
    number = -int(significant) if value[0] == "-" else int(significant)
    return number if -MAX_GO_INT - 1 <= number <= MAX_GO_INT else None


def _within(value: str, greater_than: int | None, less_than: int | None) -> bool:
    if greater_than is None and less_than is None:
        return True
    number = go_int(value)
    if number is None:
        return False
    if greater_than is not None and number <= greater_than:
        return False
    return not (less_than is not None and number >= less_than)


def _max_bound(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _min_bound(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _list(values: Iterable[str]) -> str:
    ordered = sorted(values)
    if len(ordered) > _MAX_LISTED_VALUES:
        shown = ordered[:_MAX_LISTED_VALUES] + [f"and {len(ordered) - _MAX_LISTED_VALUES} others"]
        return "[" + ", ".join(shown) + "]"
    return "[" + ", ".join(ordered) + "]"


def _allows_all(requirement: Requirement) -> bool:
    """`Exists`: every value (no value excluded, no bound)."""
    return (
        requirement.complement
        and not requirement.values
        and requirement.greater_than is None
        and requirement.less_than is None
    )


#: `Requirement.exists` of the keys asked so far, at most `_EXISTS_CACHED` of them (label keys come from input).
_EXISTS: dict[str, Requirement] = {}
_EXISTS_CACHED = 4096


@dataclass(frozen=True, slots=True)
class Requirement:
    """The set of values one label key may take.

    `complement=False`: exactly `values`. `complement=True`: every value except `values`. Bounds restrict
    either form to integers strictly between `greater_than` and `less_than`.
    """

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    greater_than: int | None = None
    less_than: int | None = None

    @classmethod
    def new(cls, key: str, operator: str, values: Sequence[str] = ()) -> Requirement:
        """Build a requirement from a node-selector term; the key is normalised (beta keys → GA)."""
        key = normalize_key(key)
        if operator == Operator.IN:
            return cls(key, False, frozenset(values))
        if operator == Operator.NOT_IN:
            return cls(key, True, frozenset(values))
        if operator == Operator.EXISTS:
            return cls(key, True)
        if operator == Operator.DOES_NOT_EXIST:
            return cls(key, False)
        if operator in (Operator.GT, Operator.LT, GTE, LTE):
            bound = go_int(values[0]) if len(values) == 1 else None
            if bound is None or bound < 0:
                raise ValueError(f"key {key} with operator {operator} must have a single integer value ≥ 0")
            if operator == Operator.GT:
                return cls(key, True, greater_than=bound)
            if operator == GTE:
                return cls(key, True, greater_than=bound - 1)
            if operator == LTE:
                return cls(key, True, less_than=bound + 1)
            return cls(key, True, less_than=bound)
        raise ValueError(f"key {key} has an unsupported operator {operator}")

    @classmethod
    def exists(cls, key: str) -> Requirement:
        """`key Exists` (one shared, immutable value per key: asked for every undefined key of every check)."""
        found = _EXISTS.get(key)
        if found is None:
            found = cls(normalize_key(key), True)
            if len(_EXISTS) < _EXISTS_CACHED:
                _EXISTS[key] = found
        return found

    def operator(self) -> Operator:
        """The operator that best names this set (bounded complements read as Exists, as in Karpenter)."""
        if self.complement:
            return Operator.NOT_IN if self.values else Operator.EXISTS
        return Operator.IN if self.values else Operator.DOES_NOT_EXIST

    def has(self, value: str) -> bool:
        """True when `value` is in the set."""
        if self.complement:
            return value not in self.values and _within(value, self.greater_than, self.less_than)
        return value in self.values and _within(value, self.greater_than, self.less_than)

    def is_empty(self) -> bool:
        """True when no value satisfies the requirement (the key must then be absent)."""
        if not self.complement:
            return not self.values
        if self.greater_than is None or self.less_than is None:
            return False
        room = self.less_than - self.greater_than - 1
        if room <= 0:
            return True
        excluded = sum(1 for v in self.values if _within(v, self.greater_than, self.less_than))
        return excluded >= room

    def size(self) -> int | None:
        """How many values satisfy the requirement; None when unbounded."""
        if not self.complement:
            return len(self.values)
        if self.greater_than is None or self.less_than is None:
            return None
        room = max(0, self.less_than - self.greater_than - 1)
        return max(0, room - sum(1 for v in self.values if _within(v, self.greater_than, self.less_than)))

    def intersection(self, other: Requirement) -> Requirement:
        """The values allowed by both requirements."""
        if other is self or _allows_all(other):  # the common cases, without building an equal copy
            return self
        if _allows_all(self):
            return other
        complement = self.complement and other.complement
        greater_than = _max_bound(self.greater_than, other.greater_than)
        less_than = _min_bound(self.less_than, other.less_than)
        if greater_than is not None and less_than is not None and greater_than + 1 >= less_than:
            return Requirement(self.key, False)
        if self.complement and other.complement:
            values = self.values | other.values
        elif self.complement:
            values = other.values - self.values
        elif other.complement:
            values = self.values - other.values
        else:
            values = self.values & other.values
        values = frozenset(v for v in values if _within(v, greater_than, less_than))
        if not complement:
            greater_than = less_than = None
        return Requirement(self.key, complement, values, greater_than, less_than)

    def describe_values(self) -> str:
        """The set without its key, in operator words: `[a, b]`, `NotIn [a]`, `Gt 2`, `Exists`…"""
        parts: list[str] = []
        op = self.operator()
        if op == Operator.IN:
            parts.append(_list(self.values))
        elif op == Operator.NOT_IN:
            parts.append(f"NotIn {_list(self.values)}")
        elif op == Operator.DOES_NOT_EXIST or (self.greater_than is None and self.less_than is None):
            parts.append(op.value)
        if self.greater_than is not None:
            parts.append(f"Gt {self.greater_than}")
        if self.less_than is not None:
            parts.append(f"Lt {self.less_than}")
        return " ".join(parts)

    def __str__(self) -> str:
        op = self.operator()
        if op == Operator.IN:
            return f"{self.key} In {_list(self.values)}"
        return f"{self.key} {self.describe_values()}"

    def to_node_selector(self) -> list[dict[str, object]]:
        """The node-selector requirements (API form) that spell this set, in a stable order."""
        terms: list[dict[str, object]] = []
        op = self.operator()
        if op in (Operator.IN, Operator.NOT_IN):
            terms.append({"key": self.key, "operator": op.value, "values": sorted(self.values)})
        elif op == Operator.DOES_NOT_EXIST or (self.greater_than is None and self.less_than is None):
            terms.append({"key": self.key, "operator": op.value})
        if self.greater_than is not None:
            terms.append({"key": self.key, "operator": Operator.GT.value, "values": [str(self.greater_than)]})
        if self.less_than is not None:
            terms.append({"key": self.key, "operator": Operator.LT.value, "values": [str(self.less_than)]})
        return terms


_NEGATIVE = (Operator.NOT_IN, Operator.DOES_NOT_EXIST)


class Requirements(Mapping[str, Requirement]):
    """Requirements on several keys, at most one (already intersected) requirement per key."""

    __slots__ = ("_by_key", "_hash")

    def __init__(self, requirements: Iterable[Requirement] = ()) -> None:
        self._by_key: dict[str, Requirement] = {}
        self._hash: int | None = None
        for requirement in requirements:
            self._add(requirement)

    @classmethod
    def from_node_selector(cls, terms: Iterable[Mapping[str, object]]) -> Requirements:
        """From API node-selector requirements (`{key, operator, values}`), which must be valid."""
        built = []
        for term in terms:
            values = term.get("values") or []
            assert isinstance(values, list)
            built.append(Requirement.new(str(term["key"]), str(term["operator"]), [str(v) for v in values]))
        return cls(built)

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        """Each label as `key In [value]`."""
        return cls(Requirement.new(key, Operator.IN, [value]) for key, value in labels.items())

    def _add(self, requirement: Requirement) -> None:
        """Intersect one requirement in (only while the object is being built: requirements are never changed
        once made — they key caches)."""
        existing = self._by_key.get(requirement.key)
        self._by_key[requirement.key] = requirement if existing is None else existing.intersection(requirement)
        self._hash = None

    def add(self, *requirements: Requirement) -> Requirements:
        """A copy with `requirements` intersected in."""
        result = Requirements()
        result._by_key = dict(self._by_key)
        for requirement in requirements:
            result._add(requirement)
        return result

    def intersection(self, other: Requirements) -> Requirements:
        """The requirements of both (key-wise intersection)."""
        return self.add(*other._by_key.values())

    def __getitem__(self, key: str) -> Requirement:
        return self._by_key[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The requirement on `key`, else `default` (as a mapping's `get`, without its exception)."""
        return self._by_key.get(key, default)

    def get_or_exists(self, key: str) -> Requirement:
        """The requirement on `key`; an undefined key allows every value."""
        return self._by_key.get(key) or Requirement.exists(key)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._by_key))

    def unordered(self) -> ItemsView[str, Requirement]:
        """(key, requirement) pairs in no particular order (iterating the mapping sorts its keys)."""
        return self._by_key.items()

    def __len__(self) -> int:
        return len(self._by_key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Requirements) and self._by_key == other._by_key

    def __hash__(self) -> int:  # computed once: requirements key many caches
        if self._hash is None:
            self._hash = hash(frozenset(self._by_key.items()))
        return self._hash

    def __repr__(self) -> str:
        return f"Requirements({', '.join(str(self._by_key[k]) for k in self)})"

    def __str__(self) -> str:
        return ", ".join(str(self._by_key[k]) for k in self)

    def disjoint_keys(self, other: Requirements) -> list[str]:
        """The keys on which `other` (incoming, e.g. a pod) shares no value with these requirements, each as a reason
        (Karpenter's `Intersects`, named for what it returns).

        Empty list: they intersect. Two negative requirements (NotIn/DoesNotExist) never conflict.
        """
        return [f"{other._by_key[key]} not in {self._by_key[key].describe_values()}" for key in self.disjoint(other)]

    def disjoint(self, other: Requirements) -> list[str]:
        """The keys of :meth:`disjoint_keys`' reasons, sorted."""
        keys: list[str] = []
        for key in sorted(self._by_key.keys() & other._by_key.keys()):
            existing, incoming = self._by_key[key], other._by_key[key]
            if not existing.intersection(incoming).is_empty():
                continue
            if incoming.operator() in _NEGATIVE and existing.operator() in _NEGATIVE:
                continue
            keys.append(key)
        return keys

    def admits(self, other: Requirements, allow_undefined: frozenset[str] = WELL_KNOWN_LABELS) -> bool:
        """Whether a pod with requirements `other` may run on a node with these requirements: no
        :meth:`incompatibilities`, decided without putting them into words."""
        mine = self._by_key
        for key, incoming in other._by_key.items():
            existing = mine.get(key)
            if existing is None:
                if key in allow_undefined or incoming.operator() in _NEGATIVE:
                    continue
                return False
            if existing.intersection(incoming).is_empty() and not (
                incoming.operator() in _NEGATIVE and existing.operator() in _NEGATIVE
            ):
                return False
        return True

    def incompatibilities(
        self, other: Requirements, allow_undefined: frozenset[str] = WELL_KNOWN_LABELS
    ) -> list[str]:
        """Why a pod with requirements `other` cannot run on a node with these requirements (Karpenter's rules).

        A key the pod constrains must be defined here unless it is in `allow_undefined` (the well-known
        labels) or the pod only excludes values (NotIn/DoesNotExist); keys defined on both sides must intersect. An
        undefined key carries Karpenter's hint when it looks like a typo (` (typo of "topology.kubernetes.io/zone"?)`).
        """
        errors: list[str] = []
        for key in sorted(other._by_key.keys() - allow_undefined):
            if key in self._by_key or other._by_key[key].operator() in _NEGATIVE:
                continue
            errors.append(f"label {key} does not have known values{typo_hint(key, self._by_key)}")
        return errors + self.disjoint_keys(other)

    def single_values(self) -> dict[str, str]:
        """The keys pinned to exactly one value (what a node launched for them is labelled with)."""
        return {
            key: next(iter(req.values))
            for key, req in sorted(self._by_key.items())
            if not req.complement and len(req.values) == 1
        }

    def to_node_selector(self) -> list[dict[str, object]]:
        """API node-selector requirements, sorted by key."""
        return [term for key in self for term in self._by_key[key].to_node_selector()]
