"""Table tests for the requirements algebra, including Karpenter's own cases (requirement_test.go)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.model.labels import ARCH, CAPACITY_TYPE, INSTANCE_GENERATION, WELL_KNOWN_LABELS, ZONE
from karpenter_policy.model.requirements import (
    GTE,
    LTE,
    MAX_GO_INT,
    SUPPORTED_OPERATORS,
    V1_OPERATORS,
    Operator,
    Requirement,
    Requirements,
    go_int,
)

R = Requirement.new
K = "key"

EXISTS = R(K, "Exists")
DOES_NOT_EXIST = R(K, "DoesNotExist")
IN_A = R(K, "In", ["A"])
IN_B = R(K, "In", ["B"])
IN_AB = R(K, "In", ["A", "B"])
NOT_IN_A = R(K, "NotIn", ["A"])
IN_1 = R(K, "In", ["1"])
IN_9 = R(K, "In", ["9"])
IN_19 = R(K, "In", ["1", "9"])
NOT_IN_12 = R(K, "NotIn", ["1", "2"])
GT_1 = R(K, "Gt", ["1"])
GT_9 = R(K, "Gt", ["9"])
LT_1 = R(K, "Lt", ["1"])
LT_9 = R(K, "Lt", ["9"])


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        # Exists / DoesNotExist
        (EXISTS, EXISTS, EXISTS),
        (EXISTS, DOES_NOT_EXIST, DOES_NOT_EXIST),
        (EXISTS, IN_A, IN_A),
        (EXISTS, NOT_IN_A, NOT_IN_A),
        (EXISTS, GT_1, GT_1),
        (DOES_NOT_EXIST, DOES_NOT_EXIST, DOES_NOT_EXIST),
        (DOES_NOT_EXIST, IN_A, DOES_NOT_EXIST),
        (DOES_NOT_EXIST, NOT_IN_A, DOES_NOT_EXIST),
        (DOES_NOT_EXIST, GT_1, DOES_NOT_EXIST),
        # In / NotIn: complement sets
        (IN_A, IN_A, IN_A),
        (IN_A, IN_B, DOES_NOT_EXIST),
        (IN_A, IN_AB, IN_A),
        (IN_A, NOT_IN_A, DOES_NOT_EXIST),
        (IN_AB, NOT_IN_A, IN_B),
        (NOT_IN_A, NOT_IN_A, NOT_IN_A),
        (NOT_IN_A, R(K, "NotIn", ["B"]), R(K, "NotIn", ["A", "B"])),
        # Bounds filter concrete values and vanish from concrete sets
        (IN_19, GT_1, IN_9),
        (IN_19, LT_9, IN_1),
        (IN_1, GT_1, DOES_NOT_EXIST),
        (IN_A, GT_1, DOES_NOT_EXIST),  # a non-integer value never satisfies a bound
        (NOT_IN_12, GT_1, Requirement(K, True, frozenset({"2"}), greater_than=1)),
        (GT_1, GT_9, GT_9),
        (LT_1, LT_9, LT_1),
        (GT_1, LT_9, Requirement(K, True, greater_than=1, less_than=9)),
        # Empty ranges: Gt >= Lt, and (unlike v0.31) no integer strictly between the bounds
        (GT_9, LT_1, DOES_NOT_EXIST),
        (GT_1, R(K, "Lt", ["2"]), DOES_NOT_EXIST),
        (R(K, "Gt", ["3"]), R(K, "Lt", ["4"]), DOES_NOT_EXIST),
    ],
)
def test_intersection(a: Requirement, b: Requirement, expected: Requirement) -> None:
    assert a.intersection(b) == expected
    assert b.intersection(a) == expected  # intersection is commutative


@pytest.mark.parametrize(
    ("requirement", "value", "expected"),
    [
        (EXISTS, "anything", True),
        (DOES_NOT_EXIST, "anything", False),
        (IN_A, "A", True),
        (IN_A, "B", False),
        (NOT_IN_A, "A", False),
        (NOT_IN_A, "B", True),
        (GT_1, "2", True),
        (GT_1, "1", False),
        (GT_1, "x", False),
        (LT_9, "8", True),
        (LT_9, "9", False),
        (Requirement(K, True, frozenset({"5"}), greater_than=1, less_than=9), "5", False),
        (Requirement(K, True, frozenset({"5"}), greater_than=1, less_than=9), "6", True),
    ],
)
def test_has(requirement: Requirement, value: str, expected: bool) -> None:
    assert requirement.has(value) is expected


@pytest.mark.parametrize(
    ("requirement", "operator"),
    [
        (EXISTS, Operator.EXISTS),
        (DOES_NOT_EXIST, Operator.DOES_NOT_EXIST),
        (IN_A, Operator.IN),
        (NOT_IN_A, Operator.NOT_IN),
        (GT_1, Operator.EXISTS),
        (LT_9, Operator.EXISTS),
    ],
)
def test_operator_names_the_set(requirement: Requirement, operator: Operator) -> None:
    assert requirement.operator() is operator


def test_size_and_emptiness_of_bounded_complements() -> None:
    between = GT_1.intersection(R(K, "Lt", ["5"]))  # {2, 3, 4}
    assert between.size() == 3 and not between.is_empty()
    assert between.intersection(R(K, "NotIn", ["2", "3", "4"])).is_empty()
    assert GT_1.size() is None


def test_beta_keys_are_normalised() -> None:
    assert R("failure-domain.beta.kubernetes.io/zone", "In", ["us-east-1a"]).key == ZONE
    assert R("beta.kubernetes.io/arch", "In", ["arm64"]).key == ARCH


@pytest.mark.parametrize(
    ("operator", "values"), [("Gt", []), ("Gt", ["a"]), ("Lt", ["-1"]), ("Lt", ["1", "2"]), ("Foo", [])]
)
def test_invalid_operator_or_bound(operator: str, values: list[str]) -> None:
    with pytest.raises(ValueError):
        R(K, operator, values)


def test_string_forms() -> None:
    assert str(R(ARCH, "In", ["arm64", "amd64"])) == "kubernetes.io/arch In [amd64, arm64]"
    assert str(R(INSTANCE_GENERATION, "Gt", ["2"])) == "karpenter.k8s.aws/instance-generation Gt 2"
    assert str(R(K, "In", [str(i) for i in range(8)])) == "key In [0, 1, 2, 3, 4, and 3 others]"
    assert str(NOT_IN_A) == "key NotIn [A]"
    assert str(EXISTS) == "key Exists"


def _reqs(*requirements: Requirement) -> Requirements:
    return Requirements(requirements)


class TestCompatible:
    """A pod's requirements against a provisioner's (Karpenter's Compatible)."""

    provisioner = _reqs(R(ARCH, "In", ["amd64"]), R(CAPACITY_TYPE, "In", ["spot"]), R("team", "In", ["a"]))

    def test_matching_pod(self) -> None:
        pod = _reqs(R(ARCH, "In", ["amd64", "arm64"]), R("team", "In", ["a"]))
        assert self.provisioner.incompatibilities(pod) == []

    def test_conflicting_well_known_label(self) -> None:
        assert self.provisioner.incompatibilities(_reqs(R(ARCH, "In", ["arm64"]))) == [
            "kubernetes.io/arch In [arm64] not in [amd64]"
        ]

    def test_undefined_well_known_label_is_allowed(self) -> None:
        assert self.provisioner.incompatibilities(_reqs(R(ZONE, "In", ["us-east-1a"]))) == []

    def test_undefined_custom_label_is_denied(self) -> None:
        assert self.provisioner.incompatibilities(_reqs(R("app", "In", ["kspark"]))) == [
            "label app does not have known values"
        ]

    @pytest.mark.parametrize("operator", ["NotIn", "DoesNotExist"])
    def test_undefined_custom_label_may_be_excluded(self, operator: str) -> None:
        values = ["x"] if operator == "NotIn" else []
        assert self.provisioner.incompatibilities(_reqs(R("app", operator, values))) == []

    def test_undefined_custom_label_with_exists_is_denied(self) -> None:
        assert self.provisioner.incompatibilities(_reqs(R("app", "Exists"))) == ["label app does not have known values"]

    def test_two_negative_requirements_never_conflict(self) -> None:
        provisioner = _reqs(R("team", "DoesNotExist"))
        assert provisioner.incompatibilities(_reqs(R("team", "DoesNotExist"))) == []
        assert provisioner.incompatibilities(_reqs(R("team", "NotIn", ["a"]))) == []
        assert provisioner.incompatibilities(_reqs(R("team", "In", ["a"]))) == ["team In [a] not in DoesNotExist"]

    def test_exists_against_does_not_exist(self) -> None:
        assert _reqs(R("team", "DoesNotExist")).incompatibilities(_reqs(R("team", "Exists"))) == [
            "team Exists not in DoesNotExist"
        ]

    def test_bounds(self) -> None:
        provisioner = _reqs(R(INSTANCE_GENERATION, "Gt", ["2"]))
        assert provisioner.incompatibilities(_reqs(R(INSTANCE_GENERATION, "In", ["5"]))) == []
        assert provisioner.incompatibilities(_reqs(R(INSTANCE_GENERATION, "Lt", ["3"]))) == [
            "karpenter.k8s.aws/instance-generation Lt 3 not in Gt 2"
        ]


def test_requirements_intersect_key_by_key_and_round_trip() -> None:
    merged = Requirements.from_node_selector(
        [
            {"key": ARCH, "operator": "In", "values": ["amd64", "arm64"]},
            {"key": ARCH, "operator": "NotIn", "values": ["arm64"]},
            {"key": INSTANCE_GENERATION, "operator": "Gt", "values": ["2"]},
        ]
    )
    assert merged[ARCH] == R(ARCH, "In", ["amd64"])
    assert merged.single_values() == {ARCH: "amd64"}
    assert Requirements.from_node_selector(merged.to_node_selector()) == merged
    assert list(merged) == [INSTANCE_GENERATION, ARCH]  # sorted by key


def test_labels_become_single_value_requirements() -> None:
    assert Requirements.from_labels({"app": "kspark"})["app"] == R("app", "In", ["kspark"])


_KEYS = ("team", "app", ZONE, ARCH)
_VALUES = ("a", "b", "1", "5", "amd64", "us-east-1a")


@st.composite
def _requirement_sets(draw: st.DrawFn) -> Requirements:
    found = []
    for key in draw(st.lists(st.sampled_from(_KEYS), unique=True, max_size=3)):
        operator = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
        if operator in ("Gt", "Lt"):
            values = [str(draw(st.integers(0, 6)))]
        elif operator in ("In", "NotIn"):
            values = draw(st.lists(st.sampled_from(_VALUES), min_size=1, max_size=3, unique=True))
        else:
            values = []
        found.append(R(key, operator, values))
    return _reqs(*found)


@given(_requirement_sets(), _requirement_sets(), st.booleans())
def test_admits_is_exactly_no_incompatibilities(node: Requirements, pod: Requirements, well_known: bool) -> None:
    """The scheduler's fast yes/no (`admits`) and the reasons it words on demand (`incompatibilities`) never
    disagree: a template refused without words always has words to show."""
    allow = WELL_KNOWN_LABELS if well_known else frozenset()
    assert node.admits(pod, allow) == (not node.incompatibilities(pod, allow))


@given(st.integers())
def test_go_int_reads_what_strconv_atoi_reads(number: int) -> None:
    """Within int64 a number and its other spellings (a plus sign, leading zeros) read back; beyond it None,
    as Atoi's "value out of range"."""
    expected = number if -MAX_GO_INT - 1 <= number <= MAX_GO_INT else None
    assert go_int(str(number)) == expected
    if number >= 0:
        assert go_int(f"+{number}") == expected
        assert go_int(f"000{number}") == expected


def test_go_int_refuses_thousands_of_digits_without_converting() -> None:
    """Python refuses int() of over 4,300 digits (ValueError): the digits are counted first."""
    assert go_int("9" * 5000) is None
    assert go_int("0" * 5000 + "7") == 7
    assert go_int("-" + "9" * 5000) is None
    assert go_int("１２") is None  # non-ASCII digits are not Go's
    with pytest.raises(ValueError, match="single integer"):
        R(K, "Gt", ["9" * 5000])
    assert not GT_1.has("9" * 5000)
    assert not R(K, "NotIn", ["2"]).intersection(LT_9).has("9" * 5000)


# --- Karpenter v1's inclusive operators ---------------------------------------------------------------------


@given(bound=st.integers(min_value=0, max_value=10**6), value=st.integers(min_value=0, max_value=10**6))
def test_gte_and_lte_are_inclusive_bounds(bound: int, value: int) -> None:
    """`Gte N` admits N and above, `Lte N` N and below (Karpenter v1.14.1's `NewRequirementWithFlexibility`
    canonicalises Gt N to Gte N+1: pkg/scheduling/requirement.go)."""
    key = INSTANCE_GENERATION
    assert Requirement.new(key, GTE, [str(bound)]).has(str(value)) is (value >= bound)
    assert Requirement.new(key, LTE, [str(bound)]).has(str(value)) is (value <= bound)
    if bound > 0:
        assert Requirement.new(key, GTE, [str(bound)]) == Requirement.new(key, "Gt", [str(bound - 1)])


def test_gte_and_lte_are_v1_only() -> None:
    """Pods and v1alpha5 Provisioners keep Kubernetes' operators; only NodePools have Gte/Lte."""
    assert GTE not in SUPPORTED_OPERATORS and LTE not in SUPPORTED_OPERATORS
    assert {GTE, LTE} <= V1_OPERATORS
    with pytest.raises(ValueError, match="single integer"):
        Requirement.new(INSTANCE_GENERATION, GTE, ["-1"])
    together = Requirement.new(INSTANCE_GENERATION, GTE, ["5"]).intersection(
        Requirement.new(INSTANCE_GENERATION, LTE, ["5"])
    )
    assert [v for v in map(str, range(10)) if together.has(v)] == ["5"]
    assert Requirement.new(INSTANCE_GENERATION, GTE, ["6"]).intersection(
        Requirement.new(INSTANCE_GENERATION, LTE, ["5"])
    ).is_empty()


_UNIVERSE = (*_VALUES, "0", "3", "6", "7", "x")


@given(_requirement_sets(), _requirement_sets())
def test_intersections_allow_exactly_what_both_sides_allow(left: Requirements, right: Requirements) -> None:
    """Key by key, an intersection allows a value exactly when both sides do — also where it takes a shortcut
    (one side `Exists`, or the same object: the other side is returned as it is); requirements built alike are
    equal and hash alike (the hash is kept once computed)."""
    both = left.intersection(right)
    for key in set(left) | set(right):
        mine, theirs = left.get_or_exists(key), right.get_or_exists(key)
        assert {v for v in _UNIVERSE if both[key].has(v)} == {v for v in _UNIVERSE if mine.has(v) and theirs.has(v)}
        assert mine.intersection(Requirement.exists(key)) == mine == Requirement.exists(key).intersection(mine)
        assert mine.intersection(mine) == mine
    again = Requirements([*left.values(), *right.values()])
    assert hash(both) == hash(again) and both == again
