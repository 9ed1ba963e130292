"""The cost in the pull-request comments of `check --workloads --output markdown` and `diff --workloads --output
markdown`, laid out as infracost's comments are (what reviewers already know): a headline with the monthly figure
— the total for `check`, the change for `diff` — first; then a table with a row per workload (the provisioner and
node types its pods land on, its $/month, its share of the bill) and a total; the nodes folded away in
`<details>`. A month is 730 h (`placement.HOURS_PER_MONTH`); each workload's part of the bill is
`Capacity.bills`'."""

from __future__ import annotations

import re

from karpenter_policy.checks.proof.placement import Capacity, WorkloadBill, money

#: A change below half a cent a month is no change.
_CENT = 0.005


def markdown_text(text: str) -> str:
    """`text` as one line of Markdown that GitHub shows as written: table pipes, backslashes and angle brackets
    escaped; the lines of a multi-line message (one reason per line) as `<br>` line breaks, their indentation
    dropped."""
    escaped = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return _LINE_BREAK.sub("<br>", escaped.strip("\n"))


#: A newline and the indentation after it.
_LINE_BREAK = re.compile(r"\n[ \t]*")


#: Between a sign and its amount: no line break there, however narrow the table cell.
_WORD_JOINER = "\u2060"


def money_change(amount: float) -> str:
    """`+$12.00`, `−$12.00` (a minus sign, as infracost writes it; never broken across lines), `$0.00` for less
    than half a cent."""
    if abs(amount) < _CENT:
        return money(0.0)
    return f"{'+' if amount > 0 else '−'}{_WORD_JOINER}{money(abs(amount))}"


def ratio_text(before: float, after: float) -> str:
    """`+50%`, `−4%`; `new` from nothing."""
    if before == 0:
        return "new" if after else "0%"
    ratio = after / before - 1
    return "0%" if abs(ratio) < 0.005 else f"{ratio:+.0%}".replace("-", "−")


def monthly_text(capacity: Capacity) -> str:
    """`$1,718.86 a month`, or that it is unknown (a node without price data)."""
    monthly = capacity.monthly
    return f"{money(monthly)} a month" if monthly is not None else "unknown"


def _pods(count: int) -> str:
    return f"{count} pod{'s' if count != 1 else ''}"


def _nodes(count: int) -> str:
    return f"{count} new node{'s' if count != 1 else ''}"


def pricing_note(capacity: Capacity) -> str:
    """How the prices were known: `spot priced at the on-demand price (no spot prices given): an estimate`."""
    if capacity.cost is None:
        return capacity.cost_text()
    return capacity.pricing + (": an estimate" if capacity.estimated else "")


def _where(bill: WorkloadBill) -> str:
    if not bill.landings:
        return "fits nowhere"
    return bill.where(lambda name: f"`{markdown_text(name)}`")


def _share(cost: float | None, total: float | None) -> str:
    return "—" if cost is None or not total else f"{cost / total:.0%}"


def _monthly(bill: WorkloadBill) -> str:
    monthly = bill.monthly
    return "unknown" if monthly is None else money(monthly)


def check_cost_lines(capacity: Capacity) -> list[str]:
    """`check`'s cost: the total line, then a row per workload (the dearest first) and the total, then the nodes
    in `<details>`."""
    total = capacity.cost
    lines = [
        f"**{monthly_text(capacity)}** for the workloads' nodes"
        + (f" ({money(total)}/h)" if total is not None else "")
        + f": {_pods(capacity.pods)} on {_nodes(len(capacity.nodes))}; {markdown_text(pricing_note(capacity))}.",
    ]
    left = sum(capacity.unscheduled.values())
    if left:
        lines[0] += f" {_pods(left)} fit nowhere (see the errors)."
    bills = capacity.bills()
    if bills:
        lines += ["", "| Workload | Pods | Lands on | Monthly cost | Share of the bill |", "|---|---:|---|---:|---:|"]
        for bill in bills:
            pods = str(bill.pods) + (f" (+{bill.unscheduled} fit nowhere)" if bill.unscheduled else "")
            lines.append(
                f"| `{markdown_text(bill.workload)}` | {pods} | {_where(bill)} | {_monthly(bill)} | "
                f"{_share(bill.cost, total)} |"
            )
        total_cell = _monthly_figure(capacity)
        lines.append(f"| **Total** | **{capacity.pods}** | {_nodes(len(capacity.nodes))} | **{total_cell}** | 100% |")
    if capacity.nodes:
        lines += node_details(capacity, f"{_nodes(len(capacity.nodes))}: {capacity.cost_text()}")
    return lines


def node_details(capacity: Capacity, summary: str) -> list[str]:
    """The node table folded in `<details>` under `summary`."""
    return ["", f"<details><summary>{markdown_text(summary)}</summary>", "", *capacity.table(markdown=True), "",
            "</details>"]


#: The monthly figures of BASE and HEAD a diff compares (None: unknown).
Compared = tuple[float | None, float | None]


def cost_headline(base: Capacity, head: Capacity, compared: Compared | None = None) -> str:
    """The diff's headline: `📈 Monthly cost increases by $223.38 (+50%)`, `📉 … decreases …`, `Monthly cost
    unchanged: $446.76`, or unknown. `compared`: the figures to compare instead of the bills' totals — without the
    pods one side cannot place (like for like), which the headline then says."""
    before, after = (base.monthly, head.monthly) if compared is None else compared
    like = "" if compared is None else " for the pods both sides place"
    if before is None or after is None:
        region = head.region or base.region or "the region"
        return f"Monthly cost unknown (no price data for {region})"
    delta = after - before
    if abs(delta) < _CENT:
        return f"Monthly cost unchanged{like}: {money(after)}"
    verb, icon = ("increases", "📈") if delta > 0 else ("decreases", "📉")
    return f"{icon} Monthly cost {verb} by {money(abs(delta))} ({ratio_text(before, after)}){like}"


def diff_cost_lines(base: Capacity, head: Capacity, compared: Compared | None = None) -> tuple[list[str], list[str]]:
    """The diff's cost: the before → after line and the workloads whose nodes or cost change, a row each (the
    largest change first) with where their pods land on each side, their $/month and share, and the total (like
    for like when `compared` gives the figures without the pods one side cannot place: see `cost_headline`); then,
    for the end of the comment, the unchanged ones and the nodes of both sides in `<details>`. A workload whose
    pods one side cannot place says so in its change: the cost of pods that do not run is no saving."""
    line = f"**{_monthly_figure(base)} → {monthly_text(head)}** for the workloads' nodes"
    if base.cost is not None and head.cost is not None:
        line += f" ({money(base.cost)}/h → {money(head.cost)}/h)"
    line += f", {len(base.nodes)} → {_nodes(len(head.nodes))}"
    if (base.estimated or head.estimated) and base.cost is not None and head.cost is not None:
        line += "; spot priced at the on-demand price: an estimate"
    lines = [line + "."]
    before = {b.workload: b for b in base.bills()}
    after = {b.workload: b for b in head.bills()}
    changed: list[tuple[float, str]] = []
    same: list[str] = []
    for workload in sorted(set(before) | set(after)):
        b, h = before.get(workload), after.get(workload)
        if b is not None and h is not None and b.where() == h.where() and _close(b.monthly, h.monthly):
            same.append(workload)
        else:
            changed.append((-abs(_delta(b, h) or 0.0), workload))
    header = ["| Workload | Lands on, BASE → HEAD | Monthly cost, BASE → HEAD | Change | Share of the bill |",
              "|---|---|---:|---:|---:|"]
    if changed:
        lines += ["", *header]
        lines += [_change_row(w, before.get(w), after.get(w), base, head) for _, w in sorted(changed)]
        lines.append(_total_row(base, head, compared))
    elif same:
        lines += ["", f"No workload's nodes or cost change ({_workloads(len(same))})."]
    details: list[str] = []
    if same and changed:
        details += ["", f"<details><summary>{_workloads(len(same))} unchanged</summary>", "", *header]
        details += [*(_change_row(w, before[w], after[w], base, head) for w in same), "", "</details>"]
    if base.nodes:
        details += node_details(base, f"BASE: {_nodes(len(base.nodes))}, {base.cost_text()}")
    if head.nodes:
        details += node_details(head, f"HEAD: {_nodes(len(head.nodes))}, {head.cost_text()}")
    return lines, details


def _workloads(count: int) -> str:
    return f"{count} workload{'s' if count != 1 else ''}"


def _monthly_figure(capacity: Capacity) -> str:
    monthly = capacity.monthly
    return "unknown" if monthly is None else money(monthly)


def _close(a: float | None, b: float | None) -> bool:
    return a is None and b is None or (a is not None and b is not None and abs(a - b) < _CENT)


def _delta(before: WorkloadBill | None, after: WorkloadBill | None) -> float | None:
    b = 0.0 if before is None else before.monthly
    a = 0.0 if after is None else after.monthly
    return None if a is None or b is None else a - b


def _change_row(
    workload: str, before: WorkloadBill | None, after: WorkloadBill | None, base: Capacity, head: Capacity
) -> str:
    where = [("—" if bill is None else _where(bill)) for bill in (before, after)]
    moved = f"{where[0]} → {where[1]}" if where[0] != where[1] else f"{where[0]} (both)"
    costs = ["—" if bill is None else _monthly(bill) for bill in (before, after)]
    delta = _delta(before, after)
    change = "unknown" if delta is None else money_change(delta)
    pending = [0 if bill is None else bill.unscheduled for bill in (before, after)]
    if pending[1] > pending[0]:
        change += f" ({_pods(pending[1] - pending[0])} left pending: no saving)"
    elif pending[0] > pending[1] and before is not None:
        change += f" ({_pods(pending[0] - pending[1])} placed now)"
    shares = [
        "—" if bill is None else _share(bill.cost, capacity.cost) for bill, capacity in ((before, base), (after, head))
    ]
    return (
        f"| `{markdown_text(workload)}` | {moved} | {costs[0]} → {costs[1]} | "
        f"{change} | {shares[0]} → {shares[1]} |"
    )


def _total_row(base: Capacity, head: Capacity, compared: Compared | None = None) -> str:
    before, after = (base.monthly, head.monthly) if compared is None else compared
    delta = None if before is None or after is None else after - before
    costs = f"{_monthly_figure(base)} → {_monthly_figure(head)}"
    change = "unknown" if delta is None else f"**{money_change(delta)}**"
    if compared is not None:
        change += " like for like"
    return f"| **Total** | {len(base.nodes)} → {_nodes(len(head.nodes))} | **{costs}** | {change} | 100% |"


__all__ = [
    "check_cost_lines",
    "cost_headline",
    "diff_cost_lines",
    "markdown_text",
    "money_change",
    "monthly_text",
    "node_details",
    "pricing_note",
    "ratio_text",
]
