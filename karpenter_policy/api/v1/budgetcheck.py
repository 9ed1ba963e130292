"""What a NodePool's disruption budgets mean over time (docs/budgets.md): the violations of the `budgets` rule
family (`api/rules/budgets.py`) with a witness each — a concrete moment (UTC, as Karpenter reads schedules) and
the budget that decides it — and the allowance per reason over a week, for the timeline. Pure: the caller passes
the start of the range and the node count assumed when the NodePool has no `limits.nodes`.

The range looked at starts at the caller's moment and lasts a week when every schedule repeats weekly, a year
otherwise (`budgettimeline.horizon`), and two days more so that no window is cut at its end; "never" means never
in that range, and the messages say which. A reason Karpenter never disrupts the NodePool for (`Empty` and
`Underutilized` for a static NodePool — `spec.replicas` — or with `consolidateAfter: Never`, `Underutilized` with
`consolidationPolicy: WhenEmpty`: v1.14.1 `pkg/controllers/disruption/consolidation.go`, `emptiness.go`) needs no
budget and gets no finding. The node count is the NodePool's `spec.replicas` (a static NodePool), else its
`spec.limits.nodes`, else the caller's, else assumed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from karpenter_policy.api.v1.budgets import (
    DRIFTED,
    EMPTY,
    REASONS,
    UNBOUNDED,
    UNDERUTILIZED,
    Budget,
    BudgetError,
    active_windows,
    budgets_of,
    scaled_nodes,
)
from karpenter_policy.api.v1.budgettimeline import WEEK, Span, allowances, horizon
from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration
from karpenter_policy.api.violations import (
    BUDGET_BLOCKS_DRIFT,
    BUDGET_OVERLAP,
    BUDGET_REASON_UNBOUNDED,
    BUDGET_UNREADABLE,
    BUDGET_WINDOW_TOO_SHORT,
    Path,
    Violation,
)
from karpenter_policy.model.quantity import QuantityError, read_quantity

#: The node count assumed when the NodePool has no `limits.nodes` and none is given (`check --nodes`).
ASSUMED_NODES: Final = 10
#: Launching a replacement until it is initialized (EC2 launch, boot, kubelet Ready): an estimate.
LAUNCH: Final = timedelta(minutes=3)
#: Draining a node when the NodePool sets no `terminationGracePeriod`: an estimate.
DRAIN: Final = timedelta(minutes=5)
#: `expireAfter`'s default (the NodePool CRD's, v1.14.1).
DEFAULT_EXPIRE_AFTER: Final = "720h"
BUDGETS_PATH: Final[Path] = ("spec", "disruption", "budgets")
_TEMPLATE_SPEC: Final[Path] = ("spec", "template", "spec")


@dataclass(frozen=True, slots=True)
class NodeCount:
    """How many nodes the NodePool is taken to have, and whence: `spec.replicas`, `spec.limits.nodes`, `--nodes`
    or assumed."""

    nodes: int
    source: str

    def describe(self) -> str:
        """`20 nodes (spec.limits.nodes)`."""
        return f"{self.nodes} node{'s' if self.nodes != 1 else ''} ({self.source})"


@dataclass(frozen=True, slots=True)
class PoolBudgets:
    """A NodePool's budgets as the API server stores them (`written` False: the CRD's default), with what the
    checks need besides: the node count, `expireAfter` and the drain estimate."""

    budgets: tuple[Budget, ...]
    written: bool
    count: NodeCount
    expire_after: str
    drain: timedelta
    drain_source: str
    #: The reasons Karpenter never disrupts this NodePool for, and why (its consolidation settings).
    unused: Mapping[str, str] = field(default_factory=dict)

    def used(self, reason: str) -> bool:
        """Whether Karpenter ever disrupts this NodePool for `reason`."""
        return reason not in self.unused

    @property
    def replacement(self) -> timedelta:
        """One replacement: launch, then drain."""
        return LAUNCH + self.drain


def pool_budgets(data: Mapping[str, Any], nodes: int | None = None) -> PoolBudgets:
    """The budgets of a NodePool object; `nodes`: the count to assume without `spec.limits.nodes` (`--nodes`)."""
    spec = _mapping(data.get("spec"))
    disruption = _mapping(spec.get("disruption"))
    template = _mapping(_mapping(spec.get("template")).get("spec"))
    grace = template.get("terminationGracePeriod")
    drain, drain_source = DRAIN, f"drain ≈ {_length(DRAIN)}, estimated"
    if isinstance(grace, str):
        with contextlib.suppress(GoDurationError):  # the schema check reports it
            drain, drain_source = parse_go_duration(grace), f"drain ≤ terminationGracePeriod {grace}"
    expire = template.get("expireAfter")
    unused: dict[str, str] = {}
    if spec.get("replicas") is not None:  # consolidation.go, emptiness.go: OwnedByStaticNodePool
        unused = {EMPTY: "spec.replicas: a static NodePool", UNDERUTILIZED: "spec.replicas: a static NodePool"}
    elif disruption.get("consolidateAfter") == "Never":  # consolidation.go, emptiness.go: ConsolidateAfter nil
        unused = {EMPTY: "consolidateAfter: Never", UNDERUTILIZED: "consolidateAfter: Never"}
    elif disruption.get("consolidationPolicy") == "WhenEmpty":
        unused = {UNDERUTILIZED: "consolidationPolicy: WhenEmpty"}
    return PoolBudgets(
        budgets=budgets_of(disruption),
        written=disruption.get("budgets") is not None,
        count=_node_count(spec, nodes),
        expire_after=str(expire) if isinstance(expire, str) else DEFAULT_EXPIRE_AFTER,
        drain=drain,
        drain_source=drain_source,
        unused=unused,
    )


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _node_count(spec: Mapping[str, Any], nodes: int | None) -> NodeCount:
    replicas = spec.get("replicas")
    if isinstance(replicas, int) and not isinstance(replicas, bool) and 0 <= replicas <= 2**31:
        return NodeCount(replicas, "spec.replicas")
    limit = _mapping(spec.get("limits")).get("nodes")
    if limit is not None:
        try:
            quantity = read_quantity(limit)
        except QuantityError:
            quantity = None
        if quantity is not None and not quantity.out_of_range and quantity.value >= 0:
            return NodeCount(int(quantity.value), "spec.limits.nodes")
    if nodes is not None:
        return NodeCount(nodes, "--nodes")
    return NodeCount(ASSUMED_NODES, "assumed; --nodes N to change")


def week(pool: PoolBudgets, start: datetime, end: datetime | None = None) -> dict[str, list[Span]]:
    """The allowance per reason from `start` to `end` (a week after `start` when None; a local week around a
    change of daylight saving time is an hour shorter or longer)."""
    return allowances(pool.budgets, start, start + WEEK if end is None else end, pool.count.nodes)


def _windows(budget: Budget, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    try:
        return active_windows(budget, start, end)
    except BudgetError:  # reported as unreadable before the windows are asked for
        return []


def budget_violations(pool: PoolBudgets, start: datetime) -> list[Violation]:
    """The budget rules' violations, looking from `start` (see the module docstring)."""
    unreadable = _unreadable(pool)
    if unreadable:  # Karpenter allows nothing: the other questions have no answer
        return unreadable
    wrapped = _wrapped_counts(pool)
    if not pool.budgets and not pool.written:
        return wrapped
    # two days past the range, so that a window the range's end would cut is seen whole a week later
    weekly = horizon(pool.budgets) == WEEK
    end = start + horizon(pool.budgets) + timedelta(days=2)
    windows = [_windows(budget, start, end) for budget in pool.budgets]
    timeline = allowances(pool.budgets, start, end, pool.count.nodes, REASONS, windows)
    within = "at any time (every schedule repeats weekly)" if weekly else f"in the year from {_moment(start)}"
    found = [*_drift_blocked(pool, timeline[DRIFTED], within), *_unbounded(pool, timeline)]
    found += _short_windows(pool, timeline, start, end)
    found += _never_deciding(pool, timeline, windows)
    return [*wrapped, *found]


def _moment(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%a %Y-%m-%d %H:%M UTC")


def _length(length: timedelta) -> str:
    minutes = int(length.total_seconds() // 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours and minutes else (f"{hours}h" if hours else f"{minutes}m")


def _budget_path(index: int) -> Path:
    return (*BUDGETS_PATH, index)


def _named(pool: PoolBudgets, index: int) -> str:
    budget = pool.budgets[index]
    when = "always" if budget.always_active() else f'schedule "{budget.schedule}" for {budget.duration}'
    return f'budgets[{index}] (nodes: "{budget.nodes}", {when})'


def _reasons_text(reasons: Sequence[str]) -> str:
    return reasons[0] if len(reasons) == 1 else ", ".join(reasons[:-1]) + " and " + reasons[-1]


def _unreadable(pool: PoolBudgets) -> list[Violation]:
    found = []
    consequence = ("Karpenter fails closed: no node of this NodePool is disrupted voluntarily (Empty, Underutilized, "
                   "Drifted) while this budget stays")
    for index, budget in enumerate(pool.budgets):
        if budget.always_active():
            continue
        try:
            budget.cron()
        except BudgetError as error:
            hint = ""
            if (budget.schedule or "").lstrip().startswith(("TZ=", "CRON_TZ=")):
                hint = "; schedules are always UTC in Karpenter: write the hours in UTC, without a TZ= prefix"
            found.append(Violation(BUDGET_UNREADABLE, (*_budget_path(index), "schedule"),
                                   f"Karpenter cannot parse this schedule ({error}): {consequence}{hint}"))
            continue
        try:
            budget.window()
        except BudgetError as error:
            found.append(Violation(BUDGET_UNREADABLE, (*_budget_path(index), "duration"),
                                   f"Karpenter cannot read this duration ({error}): {consequence}"))
    for index, budget in enumerate(pool.budgets):
        try:
            scaled_nodes(budget.nodes, pool.count.nodes)
        except BudgetError as error:
            found.append(Violation(BUDGET_UNREADABLE, (*_budget_path(index), "nodes"),
                                   f'Karpenter cannot read nodes "{budget.nodes}" ({error}): while this budget is '
                                   f"active, {consequence[0].lower()}{consequence[1:]}"))
    return found


def _wrapped_counts(pool: PoolBudgets) -> list[Violation]:
    """Counts Karpenter keeps as a 32-bit integer (`intstr.FromInt`): what they become."""
    found = []
    for index, budget in enumerate(pool.budgets):
        try:
            value = scaled_nodes(budget.nodes, pool.count.nodes)
        except BudgetError:
            continue
        if not budget.nodes.endswith("%") and value != int(budget.nodes):
            effect = "no node of this NodePool is disrupted for its reasons" if value <= 0 else f"it allows {value}"
            found.append(Violation(BUDGET_UNREADABLE, (*_budget_path(index), "nodes"),
                                   f'Karpenter keeps nodes "{budget.nodes}" as a 32-bit integer, {value}: while '
                                   f"this budget is active {effect}"))
    return found


def _drift_blocked(pool: PoolBudgets, drifted: list[Span], within: str) -> list[Violation]:
    if pool.count.nodes < 1 or any(span.allowed > 0 for span in drifted):
        return []
    first = drifted[0]
    deciding = first.deciding[0]
    if pool.expire_after == "Never":
        expiry = "; with expireAfter: Never nothing replaces them: an unpatched fleet is certain"
    else:
        expiry = f"; only expiry replaces them (expireAfter: {pool.expire_after}, which budgets do not limit)"
    return [Violation(
        BUDGET_BLOCKS_DRIFT, _budget_path(deciding),
        f"Drifted disruptions are never allowed {within} (e.g. at {_moment(first.start)}, "
        f"{_named(pool, deciding)} allows 0): drifted nodes are never replaced, so AMI patches never land{expiry}",
        related=((*_TEMPLATE_SPEC, "expireAfter"),),
    )]


def _unbounded(pool: PoolBudgets, timeline: Mapping[str, list[Span]]) -> list[Violation]:
    if not pool.written:
        return []
    if not pool.budgets:
        return [Violation(BUDGET_REASON_UNBOUNDED, BUDGETS_PATH,
                          "an empty list of budgets limits nothing: Karpenter may disrupt every node of this NodePool "
                          "at once for any reason (leave budgets out for the default of 10 %)")]
    never = [reason for reason in REASONS
             if pool.used(reason) and not any(budget.applies_to(reason) for budget in pool.budgets)]
    found = []
    if never:
        found.append(Violation(
            BUDGET_REASON_UNBOUNDED, BUDGETS_PATH,
            f"no budget applies to {_reasons_text(never)}: Karpenter may disrupt every node of this NodePool at once "
            f"for {'it' if len(never) == 1 else 'them'} (the 10 % default applies only when budgets is left out); "
            "add a budget without reasons, or one naming "
            f"{'it' if len(never) == 1 else 'them'}"))
    sometimes: dict[datetime, list[str]] = {}
    for reason in REASONS:
        if reason in never or not pool.used(reason):
            continue
        gap = next((span for span in timeline[reason] if span.allowed == UNBOUNDED), None)
        if gap is not None:
            sometimes.setdefault(gap.start, []).append(reason)
    for moment, reasons in sorted(sometimes.items()):
        found.append(Violation(
            BUDGET_REASON_UNBOUNDED, BUDGETS_PATH,
            f"at {_moment(moment)} no budget for {_reasons_text(reasons)} is active: Karpenter may then "
            "disrupt every node of this NodePool at once for "
            f"{'it' if len(reasons) == 1 else 'them'} — outside their schedules budgets limit nothing, and the 10 % "
            "default applies only when budgets is left out; add an always-active budget"))
    return found


def _open_windows(timeline: Sequence[Span]) -> list[tuple[datetime, datetime, int, int | None]]:
    """The maximal stretches in which the allowance is above 0, each with its smallest allowance and the budget
    deciding the 0 just before it."""
    windows: list[tuple[datetime, datetime, int, int | None]] = []
    closing: int | None = None
    for span in timeline:
        if span.allowed == 0:
            closing = span.deciding[0] if span.deciding else None
            continue
        if windows and windows[-1][1] == span.start:
            opens, _, least, before = windows[-1]
            windows[-1] = (opens, span.end, min(least, span.allowed), before)
        else:
            windows.append((span.start, span.end, span.allowed, closing))
    return windows


def _short_windows(pool: PoolBudgets, timeline: Mapping[str, list[Span]], start: datetime,
                   end: datetime) -> list[Violation]:
    found: dict[tuple[datetime, datetime, int | None], tuple[list[str], int, int]] = {}
    for reason in REASONS:
        if not pool.used(reason) or not any(span.allowed == 0 for span in timeline[reason]):
            continue
        short = [(opens, closes, least, closing) for opens, closes, least, closing in _open_windows(timeline[reason])
                 if opens != start and closes != end and closes - opens < pool.replacement]
        if short:
            opens, closes, least, closing = short[0]
            found.setdefault((opens, closes, closing), ([], least, len(short)))[0].append(reason)
    violations = []
    for (opens, closes, closing), (reasons, least, count) in found.items():
        where = _budget_path(closing) if closing is not None else BUDGETS_PATH
        allowed = "every node starts" if least == UNBOUNDED else (
            f"{least} node{'s start' if least != 1 else ' starts'}")
        more = f" ({count} such windows in the range)" if count > 1 else ""
        violations.append(Violation(
            BUDGET_WINDOW_TOO_SHORT, where,
            f"{_reasons_text(reasons)} disruptions are allowed only {_length(closes - opens)} at a time (e.g. "
            f"{_moment(opens)} to {_moment(closes)}){more}, shorter than one replacement (≈ "
            f"{_length(pool.replacement)}: launch ≈ {_length(LAUNCH)}, {pool.drain_source}): Karpenter checks "
            f"budgets only when it decides, so a disruption started in the window runs on after it closes, and at "
            f"most {allowed} per window"))
    return violations


def _never_deciding(pool: PoolBudgets, timeline: Mapping[str, list[Span]],
                    windows: Sequence[Sequence[tuple[datetime, datetime]]]) -> list[Violation]:
    found = []
    for index, budget in enumerate(pool.budgets):
        reasons = [reason for reason in REASONS if budget.applies_to(reason) and pool.used(reason)]
        if not reasons or not windows[index]:
            continue
        if any(index in span.deciding for reason in reasons for span in timeline[reason]):
            continue
        moment = windows[index][0][0]
        winner = _deciding_at(timeline[reasons[0]], moment)
        if winner is None:
            continue
        mine = scaled_nodes(budget.nodes, pool.count.nodes)
        theirs = scaled_nodes(pool.budgets[winner].nodes, pool.count.nodes)
        found.append(Violation(
            BUDGET_OVERLAP, _budget_path(index),
            f"this budget never decides: whenever it is active, a more restrictive budget is too (e.g. at "
            f"{_moment(moment)}, {_named(pool, winner)} allows {theirs} where this one allows {mine}, of "
            f"{pool.count.describe()}) — Karpenter uses the most restrictive active budget; a budget only restricts, "
            "it never adds disruptions",
            related=(_budget_path(winner),),
        ))
    return found


def _deciding_at(timeline: Iterable[Span], moment: datetime) -> int | None:
    for span in timeline:
        if span.start <= moment < span.end:
            return span.deciding[0] if span.deciding else None
    return None
