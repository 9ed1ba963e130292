"""Karpenter v1.14.1's `--feature-gates`, read as its operator reads it (core pkg/operator/options/options.go
`ParseFeatureGates` over Kubernetes' `cliflag.MapStringBool`), and refused by name where a gate is turned away from
its default: this tool models the defaults, and `StaticCapacity=true` in `reconcile` and `simulate` (the static
controllers, `reconcile.static`) and `plan` (a change of `replicas`, `commands.plan.staticnodepools`); `check` and
`test` still refuse it — their reports say what the gate off does. The flag of `check`, `test`, `plan`, `reconcile`
and `simulate`."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.featuregates import (
    DEFAULTS,
    FeatureGateError,
    parse_feature_gates,
    static_capacity,
    unmodelled,
)
from karpenter_policy.commands.flags import CheckFlags, TestFlags
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.optionspec import OptionValueError, from_flags
from karpenter_policy.reconcile.flags import ReconcileOptions
from karpenter_policy.simulate.flags import SimulateOptions
from tests.clirun import run_cli
from tests.profiles import deterministic

#: options.go:134, FEATURE_GATES's default at v1.14.1.
KARPENTER_DEFAULT = (
    "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,"
    "CapacityBuffer=false"
)


def test_karpenters_default_string_is_the_defaults_and_runs() -> None:
    assert parse_feature_gates(KARPENTER_DEFAULT) == dict(DEFAULTS) == parse_feature_gates("")
    assert unmodelled(KARPENTER_DEFAULT) is None


def test_pairs_are_trimmed_unknown_names_ignored_and_go_bools_read() -> None:
    gates = parse_feature_gates(" StaticCapacity = F ,Unknown=true,, NodeRepair=0")
    assert gates["StaticCapacity"] is False and gates["NodeRepair"] is False and "Unknown" not in gates
    assert parse_feature_gates("StaticCapacity=TRUE")["StaticCapacity"] is True


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("StaticCapacity", "malformed pair, expect string=bool: 'StaticCapacity'"),
        ("StaticCapacity=yes", 'invalid value of StaticCapacity: yes, err: strconv.ParseBool: parsing "yes"'),
    ],
)
def test_a_value_karpenter_refuses_is_refused_with_its_reason(text: str, said: str) -> None:
    with pytest.raises(FeatureGateError, match=said):
        parse_feature_gates(text)


def test_static_capacity_on_runs_in_the_controller_and_is_refused_by_check_and_plan() -> None:
    assert unmodelled("StaticCapacity=true") is None  # reconcile, simulate: the static controllers (reconcile.static)
    assert static_capacity("StaticCapacity=true") and not static_capacity("") and not static_capacity("NodeRepair=f")
    why = unmodelled("StaticCapacity=true", controller=False)  # check, test
    assert why is not None and why.startswith("StaticCapacity=true: static NodePools' provisioning and deprovisioning")
    assert unmodelled("ReservedCapacity=false") is None  # nothing launches into a reservation yet: nothing changes


@deterministic(100)
@given(st.dictionaries(st.sampled_from(sorted(DEFAULTS)), st.booleans()))
def test_a_gate_set_runs_exactly_when_every_modelled_gate_keeps_its_default(given_gates: dict[str, bool]) -> None:
    text = ",".join(f"{name}={str(on).lower()}" for name, on in given_gates.items())
    for controller, modelled in ((True, {"ReservedCapacity", "StaticCapacity"}), (False, {"ReservedCapacity"})):
        changed = sorted(n for n, on in given_gates.items() if on != DEFAULTS[n] and n not in modelled)
        why = unmodelled(text, controller=controller)
        assert (why is None) == (not changed)
        assert why is None or all(f"{name}=" in why for name in changed)


@pytest.mark.parametrize(
    ("options_type", "given"),
    [
        (CheckFlags, {}),
        (TestFlags, {}),
    ],
)
def test_check_and_test_refuse_static_capacity(options_type: type, given: dict[str, object]) -> None:
    assert from_flags(options_type, {**given, "feature_gates": KARPENTER_DEFAULT}).feature_gates == KARPENTER_DEFAULT
    with pytest.raises(OptionValueError, match=r"^--feature-gates StaticCapacity=true: static NodePools'"):
        from_flags(options_type, {**given, "feature_gates": "StaticCapacity=true"})


@pytest.mark.parametrize(
    ("options_type", "given"),
    [
        (ReconcileOptions, {"constraints": "build", "cluster_name": "c"}),
        (SimulateOptions, {"constraints": "build", "workload_paths": ("apps",)}),
        (PlanOptions, {"base": "a", "head": "b"}),
    ],
)
def test_reconcile_simulate_and_plan_take_static_capacity_and_refuse_the_others(
    options_type: type, given: dict[str, object]
) -> None:
    assert from_flags(options_type, {**given, "feature_gates": "StaticCapacity=true"}).feature_gates == (
        "StaticCapacity=true"
    )
    with pytest.raises(OptionValueError, match=r"^--feature-gates NodeRepair=true: node repair"):
        from_flags(options_type, {**given, "feature_gates": "StaticCapacity=true,NodeRepair=true"})


def test_the_cli_exits_2_naming_the_gate() -> None:
    done = run_cli("check", "examples/v1/positive", "--feature-gates", "StaticCapacity=true")
    assert done.returncode == 2 and done.stdout == ""
    assert "karpenter-policy check: --feature-gates StaticCapacity=true: static NodePools'" in done.stderr
