"""The self-contained HTML reports of simulations: one run (`simulate --report FILE`) and several runs of one
trace side by side (`benchmarks/soak.py --report FILE`: the comparison first, then each run), as inline SVG drawn
by `charts` — no script from anywhere, no network when the page is viewed, the same bytes for the same runs.

A run's page opens with its charts, two a row, so that a laptop's first screen holds them: pods pending, starting
and running and the nodes over time (spot interruptions marked), the fleet's $/h over time, a dot per pod for its
time from creation to running, and each node's cpu and memory packing at the end; then the run's figures (pods
scheduled, pending time per pod, nodes launched and deleted, dollars spent), the steps and the node table. A
comparison opens with a table of each run's figures (given by the caller) beside the dollars spent over time, the
nodes and the fleet's $/h over time, one line per run (and the reference, a static node group, dashed).

A small inline script only records errors the page raises into ``<body data-errors>`` (what the headless-browser
tests read; "not run" until the script runs) and shows the value under the pointer in a box at the bottom of the
window; the charts are drawn without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from karpenter_policy.simulate.charts import WIDTH, Dot, Line, Marker, chart, legend
from karpenter_policy.simulate.driver import SimulationResult
from karpenter_policy.simulate.measure import NodeRow
from karpenter_policy.simulate.table import header, placed, price_text, row

#: One colour per series, told apart by people with the commoner colour-vision deficiencies (Okabe and Ito's).
COLOURS = {
    "pending": "#d55e00",  # vermillion
    "starting": "#e69f00",  # orange
    "running": "#009e73",  # bluish green
    "nodes": "#0072b2",  # blue
    "cost": "#cc79a7",  # reddish purple
    "interruption": "#222222",  # dashed, across the plot
    "cpu": "#0072b2",
    "memory": "#009e73",
    "reference": "#6c757d",  # a static group, dashed
}
#: The runs of a comparison, in order.
RUN_COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9")

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;padding:14px 24px 40px;max-width:1180px;color:#212529}
h1{font-size:20px;margin:0 0 2px}h2{font-size:17px;margin:26px 0 6px;padding-top:8px;border-top:1px solid #dee2e6}
h3{font-size:14px;margin:0}p{margin:0 0 8px}p.note{font-size:12px;color:#495057;margin:0}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:10px 24px;align-items:start}
.charts.small{grid-template-columns:repeat(auto-fill,minmax(376px,1fr));margin:10px 0}
figure{margin:0}
svg{background:#fff;border:1px solid #dee2e6;display:block}
.axis,.tick{stroke:#868e96;stroke-width:1}line.grid{stroke:#e9ecef}
text{font-size:11px;fill:#495057}
table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
table.figures td{text-align:left}
table.comparison{font-size:13px;width:100%}table.comparison th,table.comparison td{padding:3px 8px;text-align:left;
border-bottom:1px solid #e9ecef}table.comparison thead th{border-bottom:2px solid #adb5bd}
.legend{font-size:12px}.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:-1px}
.legend i.key{background:var(--colour)}
.legend i.dash{height:0;border-top:2px dashed var(--colour);vertical-align:3px}
#hover{position:fixed;right:12px;bottom:12px;max-width:520px;background:#212529;color:#fff;font-size:12px;
padding:4px 8px;border-radius:4px}#hover:empty{display:none}
"""

SCRIPT = """
document.body.dataset.errors = "0";
window.addEventListener("error", function () {
  document.body.dataset.errors = String(Number(document.body.dataset.errors) + 1);
});
document.querySelectorAll("[data-value]").forEach(function (element) {
  element.addEventListener("mouseenter", function () {
    document.getElementById("hover").textContent = element.getAttribute("data-value");
  });
  element.addEventListener("mouseleave", function () {
    document.getElementById("hover").textContent = "";
  });
});
"""


def _end(result: SimulationResult) -> float:
    return max((s.at for s in result.samples), default=0.0) or 1.0


def _series(result: SimulationResult, name: str) -> list[tuple[float, float]]:
    return [(s.at, float(getattr(s, name))) for s in result.samples]


def _pods_chart(result: SimulationResult) -> str:
    lines = [Line(name, name, COLOURS[name], _series(result, name)) for name in ("pending", "starting", "running",
                                                                                 "nodes")]
    markers = [
        Marker(i.at, f"{i.at:.0f} s: spot interruption of {i.node} ({i.instance_type} in {i.zone})")
        for i in result.interruptions
    ]
    return chart("Pods and nodes over time", _end(result), lines, whole=True, markers=markers,
                 marker_colour=COLOURS["interruption"])


def _cost_chart(result: SimulationResult) -> str:
    return chart("Fleet cost over time ($/h)", _end(result), [Line("cost", "$/h", COLOURS["cost"],
                                                                   _series(result, "cost"))], unit="$")


def _waits_chart(result: SimulationResult) -> str:
    """A dot per pod that ran: when it was created (x), how long until it was Running (y)."""
    pods = sorted(
        (p for p in result.timeline.pods.values() if p.starting_seconds is not None), key=lambda p: (p.created, p.key)
    )
    dots = [
        Dot(pod.created, pod.starting_seconds or 0.0,
            f"{pod.key} ({pod.workload}): created at {pod.created:.0f} s, bound after {pod.pending_seconds or 0.0:.1f} "
            f"s, running after {pod.starting_seconds or 0.0:.1f} s")
        for pod in pods
    ]
    return chart("Time from creation to running, per pod (s)", _end(result), dots=dots, dot_colour=COLOURS["starting"],
                 note="A dot a pod: when it was created, how long until it ran (its pending time, and a new node's "
                      "startup when one had to be launched).")


def _packing_chart(nodes: Sequence[NodeRow]) -> str:
    bar, gap = 12, 8
    height = max(44, len(nodes) * (2 * bar + gap) + 12)
    label_width = 210
    span = WIDTH - label_width - 80
    parts = [f'<svg class="chart" role="img" aria-label="packing" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}">']
    for i, node in enumerate(nodes):
        y = 8 + i * (2 * bar + gap)
        label = f"{node.instance_type} {node.capacity_type} {node.zone}"
        parts.append(f'<text x="6" y="{y + bar + 3}">{escape(label)}</text>')
        for j, (name, share) in enumerate((("cpu", node.cpu), ("memory", node.memory))):
            top = y + j * bar
            width = max(span * min(share, 1.0), 1.0)
            value = f"{node.name}: {name} {share:.0%} of allocatable, {node.pods} pod(s), ${price_text(node.price)}/h"
            parts.append(f'<rect class="bar" x="{label_width}" y="{top}" width="{width:.1f}" height="{bar - 2}" '
                         f'fill="{COLOURS[name]}" data-value="{escape(value)}"/>')
            parts.append(f'<text x="{label_width + width + 4:.1f}" y="{top + bar - 3}">{name} {share:.0%}</text>')
    if not nodes:
        parts.append('<text x="6" y="26">no node at the end</text>')
    parts.append("</svg>")
    keys = legend([("cpu requested", COLOURS["cpu"], False), ("memory requested", COLOURS["memory"], False)])
    return f"<figure><h3>Packing at the end (share of each node's allocatable)</h3>{keys}{''.join(parts)}</figure>"


def _figures(result: SimulationResult) -> str:
    figures = result.figures
    rows = (
        ("pods scheduled", f"{figures.pods_scheduled} of {figures.pods_created} created ({figures.pods_completed} "
                           f"completed, {figures.pods_pending_at_end} pending at the end)"),
        ("pending time per pod (creation → bound)", f"max {figures.pending_max:.1f} s, p99 {figures.pending_p99:.1f} "
                                                     f"s, median {figures.pending_median:.1f} s"),
        ("time to running (creation → Running)", f"max {figures.running_max:.1f} s, p99 {figures.running_p99:.1f} s"),
        ("nodes", f"{figures.nodes_launched} launched, {figures.nodes_deleted} deleted"),
        ("spot interruptions", str(len(result.interruptions))),
        ("spent", f"${figures.dollars:.4f} over {figures.end:.0f} s (each node's $/h over its lifetime)"),
    )
    body = "".join(f"<tr><th>{escape(name)}</th><td>{escape(value)}</td></tr>" for name, value in rows)
    return f'<table class="figures"><tbody>{body}</tbody></table>'


def _node_table(nodes: Sequence[NodeRow]) -> str:
    head = "".join(f"<th>{h}</th>" for h in header(nodes))
    placement = placed(nodes)
    rows = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row(n, placement)) + "</tr>" for n in nodes)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _lead(result: SimulationResult) -> str:
    return (f"<p>Region {escape(result.region)}; constraint sets {escape(result.constraint_hash)}; provisioners "
            f"{escape(', '.join(result.provisioners))}. Fleet at the end: {len(result.nodes)} node(s), {result.pods} "
            f"pod(s), <b>${result.cost:.4f}/h</b>.</p>")


def _run(result: SimulationResult, heading: str = "h2") -> list[str]:
    """A run's charts (two a row), figures, steps and nodes."""
    steps = "".join(
        f"<li>{escape(s.label)}: {s.started:.0f} s → settled at {s.settled:.0f} s, {s.measurement.sample.nodes} "
        f"node(s), ${s.measurement.sample.cost:.4f}/h</li>"
        for s in result.steps
    )
    return [
        f'<div class="charts">{_pods_chart(result)}{_cost_chart(result)}{_waits_chart(result)}'
        f"{_packing_chart(result.nodes)}</div>",
        f"<{heading}>Figures of the run</{heading}>",
        _figures(result),
        f"<{heading}>Steps</{heading}>",
        f"<ol>{steps}</ol>",
        f"<{heading}>Nodes at the end</{heading}>",
        _node_table(result.nodes),
    ]


def _page(title: str, body: Sequence[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width"><title>{escape(title)}</title><style>{STYLE}</style>'
        f'</head>\n<body data-errors="not run">\n<h1>{escape(title)}</h1>{"".join(body)}<div id="hover"></div>\n'
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def render_report(result: SimulationResult, title: str) -> str:
    """The report page of `result` (deterministic: the same simulation gives the same bytes)."""
    return _page(title, [_lead(result), *_run(result)])


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a comparison: its short name (`ttl`), what it is (`ttlSecondsAfterEmpty (the examples)`) and
    its result."""

    name: str
    description: str
    result: SimulationResult


@dataclass(frozen=True, slots=True)
class Reference:
    """What the runs are measured against: a fleet of a fixed size and $/h for the whole trace (a static node
    group), drawn dashed."""

    label: str
    nodes: int
    cost: float  # $/h


#: The comparison's charts: three a row under the table.
SMALL = (376, 200)


def _comparison_table(runs: Sequence[Run], rows: Sequence[tuple[str, Sequence[str]]]) -> str:
    head = "<tr><th></th>" + "".join(
        f"<th>{escape(run.name)}: {escape(run.description)}</th>" for run in runs) + "</tr>"
    body = "".join(
        f"<tr><th>{escape(label)}</th>" + "".join(f"<td>{escape(cell)}</td>" for cell in cells) + "</tr>"
        for label, cells in rows
    )
    return f'<table class="comparison"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _spent(result: SimulationResult) -> list[tuple[float, float]]:
    """The dollars spent by each sample's time and at the end: between two samples the fleet's $/h holds, so the
    straight line between them is the running total."""
    moments = sorted({s.at for s in result.samples} | {_end(result)})
    return [(at, result.timeline.spent(at)) for at in moments]


def _comparison_charts(runs: Sequence[Run], reference: Reference | None) -> list[str]:
    end = max(_end(run.result) for run in runs)
    colours = {run.name: RUN_COLOURS[i % len(RUN_COLOURS)] for i, run in enumerate(runs)}
    spent = [Line(run.name, run.name, colours[run.name], _spent(run.result), straight=True) for run in runs]
    nodes = [Line(run.name, run.name, colours[run.name], _series(run.result, "nodes")) for run in runs]
    cost = [Line(run.name, run.name, colours[run.name], _series(run.result, "cost")) for run in runs]
    if reference is not None:
        colour = COLOURS["reference"]
        spent.append(Line("reference", reference.label, colour, [(0.0, 0.0), (end, reference.cost * end / 3600)],
                          dashed=True, straight=True))
        nodes.append(Line("reference", reference.label, colour, [(0.0, reference.nodes)], dashed=True))
        cost.append(Line("reference", reference.label, colour, [(0.0, reference.cost)], dashed=True))
    width, height = SMALL
    return [
        chart("Dollars spent so far", end, spent, unit="$", width=width, height=height),
        chart("Nodes over time", end, nodes, whole=True, width=width, height=height),
        chart("Fleet cost over time ($/h)", end, cost, unit="$", width=width, height=height),
    ]


def render_comparison(
    title: str,
    lead: str,
    runs: Sequence[Run],
    rows: Sequence[tuple[str, Sequence[str]]],
    reference: Reference | None = None,
) -> str:
    """Several runs of one trace in one page: `lead` (a sentence of the outcome), the table of `rows` (a label and
    a cell per run), the dollars spent, the nodes and the fleet's $/h over time, one line per run (and
    `reference`'s, dashed), three a row; then each run's own report. Deterministic."""
    links = " · ".join(f'<a href="#run-{escape(run.name)}">{escape(run.name)}</a>' for run in runs)
    body = [f"<p>{escape(lead)}</p>", _comparison_table(runs, rows),
            f'<div class="charts small">{"".join(_comparison_charts(runs, reference))}</div>',
            f"<p>Each run in full below: {links}.</p>"]
    for run in runs:
        body.append(f'<h2 id="run-{escape(run.name)}">{escape(run.name)}: {escape(run.description)}</h2>')
        body += [_lead(run.result), *_run(run.result, "h3")]
    return _page(title, body)


__all__ = ["COLOURS", "Reference", "Run", "render_comparison", "render_report"]
