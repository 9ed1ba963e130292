"""Options declared once (`optionspec`): every command's click parameters are the fields of its option set, with the
field's spelling, default and help; the option sets agree with the defaults of what they configure (the webhook
server, the controller, the solver, the launcher); a command run without flags gets the option set's defaults."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.checks.options import REGION_HELP, PolicyOptions
from karpenter_policy.checks.proof.solver import DEFAULT_TIMEOUT_MS
from karpenter_policy.cli import main
from karpenter_policy.cli_options import click_type
from karpenter_policy.commands.flags import (
    CatalogBuildFlags,
    CatalogRefreshFlags,
    CatalogShowFlags,
    CheckFlags,
    CompileFlags,
    DiffFlags,
    FmtFlags,
    MigrateFlags,
    PinFlags,
    RulesFlags,
    TestFlags,
    ValidateFlags,
)
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.optionspec import Flag, OptionValueError, command_line_default, flags, from_flags
from karpenter_policy.reconcile.command import controller_options_of
from karpenter_policy.reconcile.flags import STRATEGY_NAMES, ReconcileOptions, duration_text, read_duration
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.provisioning.binder import Binder
from karpenter_policy.reconcile.provisioning.launcher import Launcher
from karpenter_policy.scheduling import STRATEGIES
from karpenter_policy.simulate.flags import SimulateOptions
from karpenter_policy.webhook.command import WebhookOptions, webhook_options
from karpenter_policy.webhook.flags import WebhookFlags

#: The commands whose flags are made from an option set — every command — and the flags a run needs at least.
GENERATED: dict[str, tuple[type[Any], list[str]]] = {
    "webhook": (WebhookFlags, []),
    "reconcile": (ReconcileOptions, ["--constraints", "build", "--cluster-name", "test"]),
    "simulate": (SimulateOptions, ["--constraints", "build", "--workloads", "apps"]),
    "validate": (ValidateFlags, []),
    "check": (CheckFlags, []),
    "test": (TestFlags, ["--workloads", "apps"]),
    "compile": (CompileFlags, ["-o", "out"]),
    "pin": (PinFlags, ["apps"]),
    "fmt": (FmtFlags, []),
    "diff": (DiffFlags, ["base", "head"]),
    "catalog refresh": (CatalogRefreshFlags, ["-o", "catalog.json"]),
    "catalog show": (CatalogShowFlags, []),
    "catalog build": (CatalogBuildFlags, ["--sources", "."]),
    "rules": (RulesFlags, []),
    "migrate": (MigrateFlags, []),
    "plan": (PlanOptions, ["base", "head"]),  # --snapshot or --kubeconfig: the command asks for one
}
#: The policy commands' parameters that are not PolicyOptions flags: the paths and the report's shape, and the
#: flags the CLI reads into PolicyOptions' `scale` and `selection`.
NOT_POLICY_FLAGS = {
    "check": {"paths", "output", "fail_on_warn", "quiet", "scale", "exclude", "disabled", "budget_nodes",
              "budget_timezone", "budget_week"},
    "test": {"paths", "output", "quiet", "scale", "exclude", "disabled"},
}
POLICY_COMMANDS = ("check", "test", "diff", "compile", "pin")


def _command(name: str) -> click.Command:
    command: click.Command = main
    for word in name.split():  # "catalog show": a command of a group
        assert isinstance(command, click.Group)
        command = command.commands[word]
    return command


def _commands(group: click.Group, prefix: str = "") -> list[str]:
    """Every command of the CLI, a group's by their full name ("catalog show")."""
    names = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            names += _commands(command, f"{prefix}{name} ")
        else:
            names.append(f"{prefix}{name}")
    return names


def _declared(flag: Flag) -> set[str]:
    return {spelling for name in flag.names for spelling in name.split("/")}


def _assert_param_is_field(
    parsed: Mapping[str, Any], param: click.Parameter, field: dataclasses.Field[Any], flag: Flag, help: bool
) -> None:
    """`param` is `field`'s flag; `parsed`: what the command got from a run without this flag."""
    where = f"{param.name} ({flag.name})"
    if flag.argument:
        assert isinstance(param, click.Argument), where
        assert (param.name, param.nargs, param.required, param.metavar) == (
            field.name, flag.nargs, flag.required, flag.metavar), where
        assert param.type.to_info_dict() == (click_type(flag) or click.STRING).to_info_dict(), where
        if not flag.required:
            assert parsed[field.name] == command_line_default(field, flag), where
        return
    assert isinstance(param, click.Option), where
    assert {*param.opts, *param.secondary_opts} == _declared(flag), where
    if not flag.required:
        default = command_line_default(field, flag)
        assert parsed[field.name] == (default if default is not None or flag.multiple else None), where
    on_off = any("/" in name for name in flag.names)  # --a/--no-a: a boolean flag too
    assert (param.multiple, param.required, param.is_flag) == (flag.multiple, flag.required, flag.is_flag or on_off)
    if not param.is_flag:
        assert param.type.to_info_dict() == (click_type(flag) or click.STRING).to_info_dict(), where
    assert (param.show_default or False) == flag.show_default, where
    if help:
        assert param.help == flag.help, where


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_a_generated_command_has_a_parameter_per_field_and_no_other(name: str) -> None:
    options_type, required = GENERATED[name]
    command = _command(name)
    parsed = command.make_context(name, list(required)).params
    fields = {field.name: (field, flag) for field, flag in flags(options_type)}
    assert [p.name for p in command.params if p.name != "help"] == list(fields), "the order of --help"
    assert set(fields) == {f.name for f in dataclasses.fields(options_type)}, "every field is a flag"
    for param in command.params:
        if param.name in fields:
            _assert_param_is_field(parsed, param, *fields[param.name], help=True)


def test_every_command_has_its_flags_made_from_an_option_set() -> None:
    """No command spells its click options by hand: each has an option set (and the tests above hold them)."""
    assert sorted(_commands(main)) == sorted(GENERATED)


def test_a_flag_several_commands_take_is_declared_once() -> None:
    """check's flags that are PolicyOptions' are PolicyOptions' fields as they are (`optionspec.like`); the other
    commands change at most their help text or whether they are required."""
    policy = dict(flags(PolicyOptions))
    controller = {f.name: flag for f, flag in flags(ReconcileOptions)}
    for name, (options_type, _) in GENERATED.items():
        if name in ("webhook", "reconcile", "simulate", "catalog refresh"):  # their own: a 1 s solver limit, the
            continue  # region to describe
        for field, flag in flags(options_type):
            if name == "plan" and field.name == "feature_gates":  # the controllers' gates, as reconcile takes them
                assert dataclasses.replace(flag, help=None) == dataclasses.replace(controller[field.name], help=None)
                continue
            same = next((f for f in policy if f.name == field.name), None)
            if same is None:
                continue
            assert field.default == same.default, (name, field.name)
            assert dataclasses.replace(flag, help=None, required=False) == dataclasses.replace(
                policy[same], help=None, required=False), (name, field.name)
            if name == "check":
                assert flag == policy[same], field.name


def test_compile_and_diff_receive_their_option_set() -> None:
    from karpenter_policy.commands.compile.compiler import compile_command
    from karpenter_policy.commands.diff import diff_command

    assert inspect.signature(compile_command).parameters["flags"].annotation in (CompileFlags, "CompileFlags")
    assert inspect.signature(diff_command).parameters["flags"].annotation in (DiffFlags, "DiffFlags")


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_a_run_without_flags_gets_the_option_sets_defaults(name: str) -> None:
    """What reached the command before: a raw dict whose `or 0` fallback disagreed with the flag's 8080."""
    options_type, required = GENERATED[name]
    given_ = _command(name).make_context(name, list(required)).params
    got = from_flags(options_type, given_)
    named = {field.name: got.__getattribute__(field.name) for field, flag in flags(options_type) if flag.required}
    assert got == options_type(**named)


def test_the_reconcile_defaults_are_the_documented_ones() -> None:
    options = from_flags(ReconcileOptions, {"constraints": "build", "cluster_name": "test"})
    assert options.metrics_port == 8080, "docs/reconcile.md and the chart's metrics.port"
    assert (options.batch_idle, options.batch_max, options.registration_ttl) == (1.0, 10.0, 900.0)
    assert options.unschedulable_only and options.leader_elect and options.strategy == "cost"


@pytest.mark.parametrize("name", POLICY_COMMANDS)
def test_a_policy_commands_shared_flags_are_policy_options_fields(name: str) -> None:
    fields = {field.name: (field, flag) for field, flag in flags(PolicyOptions)}
    command = _command(name)
    needed = {"test": ["--workloads", "apps"], "diff": ["base", "head"], "compile": ["-o", "out"], "pin": ["apps"]}
    parsed = command.make_context(name, needed.get(name, [])).params
    shared = [p for p in command.params if p.name in fields]
    assert shared, "each policy command takes some of PolicyOptions' flags"
    for param in shared:
        assert param.name is not None
        field, flag = fields[param.name]
        if name == "test" and param.name == "workload_paths":  # test needs workloads: its --workloads is required
            flag = dataclasses.replace(flag, required=True, help=param.help)
        _assert_param_is_field(parsed, param, field, flag, help=name == "check")


@pytest.mark.parametrize("name", sorted(NOT_POLICY_FLAGS))
def test_check_and_test_take_every_policy_option_and_nothing_unaccounted(name: str) -> None:
    params = {p.name for p in _command(name).params if p.name != "help"}
    assert params - NOT_POLICY_FLAGS[name] == {field.name for field, _ in flags(PolicyOptions)}


def test_check_without_flags_runs_with_policy_options_defaults() -> None:
    given_ = _command("check").make_context("check", []).params
    assert from_flags(PolicyOptions, given_) == PolicyOptions()


def test_the_option_sets_agree_with_what_they_configure() -> None:
    assert webhook_options(WebhookFlags()) == WebhookOptions(), "the webhook server's defaults"
    assert PolicyOptions().timeout_ms == DEFAULT_TIMEOUT_MS, "the solver's time limit"
    assert next(p.help for p in _command("check").params if p.name == "region") == REGION_HELP
    assert STRATEGY_NAMES == STRATEGIES
    controller = controller_options_of(ReconcileOptions("build", "test"))
    # The command runs in a real cluster (kube-scheduler marks pods Unschedulable and binds them); the rest is
    # the controller's own defaults.
    assert controller == ControllerOptions("test", unschedulable_only=True, bind_existing=False)


def test_the_launcher_and_binder_default_to_the_controllers_parallelism() -> None:
    """The launcher's own default was 16 where the controller's was 64: one constant now (Karpenter launches a
    batch's node claims all at once)."""
    defaults = ControllerOptions("test")
    assert inspect.signature(Launcher).parameters["parallelism"].default == defaults.launch_parallelism == 64
    assert inspect.signature(Binder).parameters["parallelism"].default == defaults.bind_parallelism


@given(st.integers(min_value=1, max_value=10**9))
@deterministic(200)
def test_a_duration_reads_back_as_the_flags_write_it(milliseconds: int) -> None:
    seconds = milliseconds / 1000
    assert read_duration(duration_text(seconds)) == pytest.approx(seconds)


def test_a_refused_combination_names_the_flags() -> None:
    given_ = {"constraints": "build", "cluster_name": "test", "batch_idle": "20s", "batch_max": "10s"}
    with pytest.raises(OptionValueError, match="--batch-max-duration must be at least --batch-idle-duration"):
        from_flags(ReconcileOptions, given_)
    with pytest.raises(OptionValueError, match="--cluster-name is required"):
        from_flags(ReconcileOptions, {**given_, "cluster_name": "", "batch_idle": "1s"})
