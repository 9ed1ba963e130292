"""The self-contained HTML report of a simulation (`simulate --report FILE`, `benchmarks/soak.py --report FILE`):
the run's figures (pods scheduled, pending time per pod, nodes launched and deleted, dollars spent), pods and nodes
over virtual time with the spot interruptions marked, the fleet's $/h over time, each pod's time from creation to
running, and each node's packing, as inline SVG drawn here — no script from anywhere, no network when the page is
viewed, the same bytes for the same simulation.

A small inline script only records errors the page raises into ``<body data-errors>`` (what the headless-browser
test reads; "not run" until the script runs) and shows a value under the pointer; the charts are drawn without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from karpenter_policy.reconcile.sim.driver import SimulationResult
from karpenter_policy.reconcile.sim.measure import NodeRow, Sample
from karpenter_policy.reconcile.sim.spot import Interruption
from karpenter_policy.reconcile.sim.table import price_text

WIDTH, HEIGHT, PAD = 760, 220, 44
COLOURS = {"pending": "#d9480f", "running": "#2b8a3e", "starting": "#f59f00", "nodes": "#1c7ed6", "cost": "#5f3dc4",
           "interruption": "#e03131"}

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:820px;color:#212529}
h1{font-size:20px}h2{font-size:16px;margin-top:28px}
svg{background:#fff;border:1px solid #dee2e6}
.axis{stroke:#868e96;stroke-width:1}.grid{stroke:#f1f3f5}
text{font-size:11px;fill:#495057}
table{border-collapse:collapse;font-size:12px}td,th{padding:2px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}
table.figures td{text-align:left}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px}
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
});
"""


def _x(at: float, end: float) -> float:
    return PAD + (WIDTH - 2 * PAD) * (at / end if end else 0.0)


def _y(value: float, top: float) -> float:
    return HEIGHT - PAD + (2 * PAD - HEIGHT) * (value / top if top else 0.0)


def _steps(samples: Sequence[Sample], value: str, end: float, top: float) -> str:
    """A step line (the value holds until the next sample) as an SVG path."""
    points: list[str] = []
    previous: float | None = None
    for sample in samples:
        y = _y(float(getattr(sample, value)), top)
        x = _x(sample.at, end)
        if previous is not None:
            points.append(f"L{x:.1f},{previous:.1f}")
        points.append(f"{'M' if not points else 'L'}{x:.1f},{y:.1f}")
        previous = y
    if previous is not None:
        points.append(f"L{_x(end, end):.1f},{previous:.1f}")
    return "".join(points)


def _axes(end: float, top: float, unit: str) -> list[str]:
    parts = [
        f'<line class="axis" x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}"/>',
        f'<line class="axis" x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}"/>',
    ]
    for i in range(5):
        value = top * i / 4
        y = _y(value, top)
        parts.append(f'<line class="grid" x1="{PAD + 1}" y1="{y:.1f}" x2="{WIDTH - PAD}" y2="{y:.1f}"/>')
        label = f"{value:.2f}" if unit == "$/h" else f"{value:.0f}"
        parts.append(f'<text x="{PAD - 6}" y="{y + 4:.1f}" text-anchor="end">{label}</text>')
    for i in range(5):
        at = end * i / 4
        parts.append(f'<text x="{_x(at, end):.1f}" y="{HEIGHT - PAD + 16}" text-anchor="middle">{at:.0f} s</text>')
    return parts


def _line_chart(
    title: str, samples: Sequence[Sample], series: Sequence[str], unit: str,
    interruptions: Sequence[Interruption] = (),
) -> str:
    end = max((s.at for s in samples), default=0.0) or 1.0
    top = max((float(getattr(s, name)) for s in samples for name in series), default=0.0) or 1.0
    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}">', *_axes(end, top, unit)]
    for name in series:
        parts.append(f'<path class="series" data-series="{name}" d="{_steps(samples, name, end, top)}" fill="none" '
                     f'stroke="{COLOURS[name]}" stroke-width="2"/>')
    for interruption in interruptions:  # a dashed line where each spot interruption warning came
        x = _x(interruption.at, end)
        value = (f"{interruption.at:.0f} s: spot interruption of {interruption.node} ({interruption.instance_type} "
                 f"in {interruption.zone})")
        parts.append(f'<line class="interruption" x1="{x:.1f}" y1="{PAD}" x2="{x:.1f}" y2="{HEIGHT - PAD}" '
                     f'stroke="{COLOURS["interruption"]}" stroke-dasharray="4 3" stroke-width="2" '
                     f'data-value="{escape(value)}"/>')
    parts.append("</svg>")
    names = [*series, *(["interruption"] if interruptions else [])]
    legend = "".join(f'<span><i style="background:{COLOURS[n]}"></i>{n}</span>' for n in names)
    return f'<h2>{escape(title)}</h2><div class="legend">{legend}</div>{"".join(parts)}'


def _waits_chart(result: SimulationResult, end: float) -> str:
    """A dot per pod that ran: when it was created (x), how long until it was Running (y)."""
    pods = sorted(
        (p for p in result.timeline.pods.values() if p.starting_seconds is not None), key=lambda p: (p.created, p.key)
    )
    top = max((p.starting_seconds or 0.0 for p in pods), default=0.0) or 1.0
    parts = [f'<svg class="chart" role="img" aria-label="time to running" width="{WIDTH}" height="{HEIGHT}" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}">', *_axes(end, top, "s")]
    for pod in pods:
        value = (f"{pod.key} ({pod.workload}): created at {pod.created:.0f} s, bound after "
                 f"{pod.pending_seconds or 0.0:.1f} s, running after {pod.starting_seconds or 0.0:.1f} s")
        x, y = _x(pod.created, end), _y(pod.starting_seconds or 0.0, top)
        parts.append(f'<circle class="pod" cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{COLOURS["starting"]}" '
                     f'fill-opacity="0.6" data-value="{escape(value)}"/>')
    parts.append("</svg>")
    return ("<h2>Time from creation to running, per pod (s)</h2><p>Each dot a pod: when it was created, how long "
            f"until it ran (its pending time plus, when a node had to be launched, the node's startup).</p>"
            f"{''.join(parts)}")


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
    return f'<h2>Figures of the run</h2><table class="figures"><tbody>{body}</tbody></table>'


def _packing_chart(nodes: Sequence[NodeRow]) -> str:
    bar, gap = 14, 10
    height = max(PAD, len(nodes) * (2 * bar + gap) + 30)
    label_width = 230
    span = WIDTH - label_width - 60
    parts = [f'<svg class="chart" role="img" aria-label="packing" width="{WIDTH}" height="{height}" '
             f'viewBox="0 0 {WIDTH} {height}">']
    for i, node in enumerate(nodes):
        y = 10 + i * (2 * bar + gap)
        label = f"{node.instance_type} {node.capacity_type} {node.zone}"
        parts.append(f'<text x="4" y="{y + bar}">{escape(label)}</text>')
        for j, (name, share) in enumerate((("cpu", node.cpu), ("memory", node.memory))):
            top = y + j * bar
            width = max(span * min(share, 1.0), 1.0)
            value = f"{node.name}: {name} {share:.0%} of allocatable, {node.pods} pod(s), ${price_text(node.price)}/h"
            colour = COLOURS["nodes"] if name == "cpu" else COLOURS["running"]
            parts.append(f'<rect class="bar" x="{label_width}" y="{top}" width="{width:.1f}" height="{bar - 2}" '
                         f'fill="{colour}" data-value="{escape(value)}"/>')
            parts.append(f'<text x="{label_width + width + 4:.1f}" y="{top + bar - 4}">{name} {share:.0%}</text>')
    parts.append("</svg>")
    legend = (f'<div class="legend"><span><i style="background:{COLOURS["nodes"]}"></i>cpu requested</span>'
              f'<span><i style="background:{COLOURS["running"]}"></i>memory requested</span></div>')
    return f"<h2>Packing at the end (share of each node's allocatable)</h2>{legend}{''.join(parts)}"


def _node_table(nodes: Sequence[NodeRow]) -> str:
    head = "".join(f"<th>{h}</th>" for h in ("node", "provisioner", "type", "zone", "capacity", "pods", "cpu",
                                             "memory", "$/h"))
    rows = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in (
            n.name, n.provisioner, n.instance_type, n.zone, n.capacity_type, str(n.pods), f"{n.cpu:.0%}",
            f"{n.memory:.0%}", price_text(n.price))) + "</tr>"
        for n in nodes
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def render_report(result: SimulationResult, title: str) -> str:
    """The report page of `result` (deterministic: the same simulation gives the same bytes)."""
    steps = "".join(
        f"<li>{escape(s.label)}: {s.started:.0f} s → settled at {s.settled:.0f} s, {s.measurement.sample.nodes} "
        f"node(s), ${s.measurement.sample.cost:.4f}/h</li>"
        for s in result.steps
    )
    body = [
        f"<h1>{escape(title)}</h1>",
        f"<p>Region {escape(result.region)}; constraint sets {escape(result.constraint_hash)}; provisioners "
        f"{escape(', '.join(result.provisioners))}. Fleet at the end: {len(result.nodes)} node(s), {result.pods} "
        f"pod(s), <b>${result.cost:.4f}/h</b>. <span id=\"hover\"></span></p>",
        _figures(result),
        f"<ol>{steps}</ol>",
        _line_chart("Pods and nodes over time", result.samples, ("pending", "starting", "running", "nodes"), "count",
                    result.interruptions),
        _line_chart("Fleet cost over time ($/h)", result.samples, ("cost",), "$/h"),
        _waits_chart(result, max((s.at for s in result.samples), default=0.0) or 1.0),
        _packing_chart(result.nodes),
        "<h2>Nodes</h2>",
        _node_table(result.nodes),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{STYLE}</style></head>\n"
        f'<body data-errors="not run">\n{"".join(body)}\n<script>{SCRIPT}</script>\n</body></html>\n'
    )


__all__ = ["render_report"]
