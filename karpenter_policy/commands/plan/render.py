"""A plan as text, JSON or a markdown pull-request comment (laid out as `diff`'s: a headline with the rollout and
its cost first, tables next, the waves folded away in `<details>`)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from karpenter_policy.checks.proof.placement import money
from karpenter_policy.commands.costcomment import markdown_text
from karpenter_policy.commands.plan.consolidation import Consolidation, Move
from karpenter_policy.commands.plan.cost import Cost
from karpenter_policy.commands.plan.drift import NodeDrift
from karpenter_policy.commands.plan.fleet import Fleet
from karpenter_policy.commands.plan.staticnodepools import StaticNodePool
from karpenter_policy.commands.plan.waves import GRACED, Rollout, Wave
from karpenter_policy.model.pools import MIXED_NOUN, NODEPOOL_NOUN, PROVISIONER_NOUN

__all__ = ["PlanResult", "plan_json", "render_plan"]

#: Waves, blocked nodes and pending pods listed in text and markdown (all of them in JSON).
_SHOWN = 20
MODEL = "Karpenter v0.31, v1alpha5 Provisioners"
MODEL_V1 = "Karpenter v1.14.1, v1 NodePools"


@dataclass(slots=True)
class PlanResult:
    base: str
    head: str
    start: dt.datetime
    drift_enabled: bool
    fleet: Fleet
    drift: Mapping[str, NodeDrift]
    rollout: Rollout
    cost: Cost
    notes: list[str] = field(default_factory=list)
    region: str = ""
    #: what consolidation would do now (BASE = HEAD; None: not asked)
    consolidation: Consolidation | None = None
    #: HEAD's static NodePools: nodes added and removed (the StaticCapacity gate on), static drift per node
    static: list[StaticNodePool] = field(default_factory=list)

    def field_counts(self) -> list[tuple[str, int]]:
        """Each static field that drifts nodes, with how many, most first."""
        counts: Counter[str] = Counter()
        for name, drift in self.drift.items():
            node = self.fleet.nodes[name]
            owner = f"nodepool {node.nodepool}" if node.nodepool is not None else f"provisioner {node.provisioner}"
            for changed in drift.fields:
                template = changed.startswith(("AWSNodeTemplate", "EC2NodeClass"))
                counts[changed if template else f"{changed} ({owner})"] += 1
        return sorted(counts.items(), key=lambda e: (-e[1], e[0]))

    @property
    def model(self) -> str:
        """The Karpenter the plan follows: v0.31 for Provisioners' nodes, v1.14.1 for NodePools', both when mixed."""
        nodes = self.fleet.nodes.values()
        v1 = any(n.nodepool is not None for n in nodes)
        v1alpha5 = any(n.nodepool is None and n.provisioner is not None for n in nodes)
        if v1 and v1alpha5:
            return "Karpenter v0.31 for v1alpha5 Provisioners, v1.14.1 for v1 NodePools"
        return MODEL_V1 if v1 else MODEL


def _time(moment: dt.datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _requirement_drift(result: PlanResult) -> int:
    return sum(1 for d in result.drift.values() if any(r.startswith("requirement drift") for r in d.reasons))


def _one_line(text: str) -> str:
    """A multi-line reason (one line per provisioner) on one line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] + " " + "; ".join(lines[1:])).strip() if lines and lines[0].endswith(":") else "; ".join(lines)


def _wave_json(wave: Wave) -> dict[str, object]:
    return {
        "index": wave.index,
        "start": _time(wave.start),
        "method": wave.method,
        "nodes": list(wave.nodes),
        "replacements": [
            {"provisioner": r.provisioner, "instance_type": r.instance_type, "zone": r.zone,
             "capacity_type": r.capacity_type, "price": r.price, "reservation_id": r.reservation_id or None}
            for r in wave.replacements
        ],
        "evicted_pods": wave.evicted_pods,
        "evicted": dict(sorted(wave.evicted.items())),
        "drain_seconds": wave.drain_seconds,
        "slowed_by": dict(sorted(wave.slowed.items())),
        "seconds": wave.seconds,
        "kept": list(wave.kept),
    }


def plan_json(result: PlanResult) -> dict[str, object]:
    rollout = result.rollout
    nodes = []
    for name in sorted(result.fleet.nodes):
        node, drift = result.fleet.nodes[name], result.drift[name]
        nodes.append({
            "name": name,
            "provisioner": node.provisioner,
            "nodepool": node.nodepool,
            "drifted": drift.drifted,
            "reasons": list(drift.reasons),
            "expires": drift.expires,
            "expires_at": _time(drift.expires_at),
            "removed": drift.removed,
            "wave": rollout.wave_of.get(name),
        })
    return {
        "base": result.base,
        "head": result.head,
        "model": result.model,
        "drift_enabled": result.drift_enabled,
        "start": _time(result.start),
        "end": _time(rollout.end),
        "finishes": not rollout.never_finishes,
        "nodes": nodes,
        "drift": [{"field": name, "nodes": count} for name, count in result.field_counts()],
        "waves": [_wave_json(w) for w in rollout.waves],
        "blocked": [{"node": b.node, "reason": b.reason, "by": b.by, "forever": b.forever} for b in rollout.blocked],
        "pending": [{"pod": p.pod, "workload": p.workload, "node": p.node, "reason": p.reason, "held": p.held}
                    for p in rollout.pending],
        "cost": result.cost.to_json(),
        **({"consolidation": result.consolidation.to_json()} if result.consolidation is not None else {}),
        **({"static": [s.to_json() for s in result.static]} if result.static else {}),
        "notes": list(result.notes),
    }


def _counts(result: PlanResult) -> dict[str, int]:
    drift = result.drift.values()
    return {
        "nodes": len(result.fleet.nodes),
        "karpenter": sum(1 for n in result.fleet.nodes.values() if n.owner is not None),
        "drifted": sum(1 for d in drift if d.drifted),
        "expires": sum(1 for d in drift if d.expires),
        "removed": sum(1 for d in drift if d.removed),
        "unknown": sum(1 for d in drift if d.unknown),
    }


def _owners(result: PlanResult) -> str:
    """What the plan's lines call the pools of its model: as every message does (`pools_noun`), a mix of both
    kinds `pool`."""
    return {MODEL: PROVISIONER_NOUN, MODEL_V1: NODEPOOL_NOUN.lower()}.get(result.model, MIXED_NOUN)


def _gate(result: PlanResult) -> str:
    if result.model == MODEL_V1:
        return "drift always on (Karpenter v1 has no feature gate)"
    gate = ("drift modelled on (Karpenter v0.31's featureGates.driftEnabled=true, as this project's controller runs; "
            "--drift-disabled for a cluster that keeps it off)" if result.drift_enabled else
            "drift modelled off (--drift-disabled: featureGates.driftEnabled=false): only expiry and removed "
            "provisioners replace nodes")
    return gate if result.model == MODEL else f"{gate}; NodePools' nodes drift always (Karpenter v1 has no gate)"


def _wave_line(wave: Wave) -> str:
    launched = Counter(f"{r.instance_type} ({r.capacity_type}{' ' + r.reservation_id if r.reservation_id else ''})"
                       for r in wave.replacements)
    new = ", ".join(f"{n} × {t}" if n > 1 else t for t, n in sorted(launched.items())) or "no new node"
    workloads = ", ".join(f"{w} {n}" for w, n in sorted(wave.evicted.items(), key=lambda e: (-e[1], e[0]))[:3])
    more = "" if len(wave.evicted) <= 3 else f", +{len(wave.evicted) - 3} more"
    evicted = f"{_plural(wave.evicted_pods, 'pod')} evicted" + (f" ({workloads}{more})" if workloads else "")
    slowed = "".join(f"; {name.removesuffix(GRACED)} holds the drain until the terminationGracePeriod ({_duration(s)})"
                     if name.endswith(GRACED) else f"; PDB {name} makes the drain {_duration(s)}"
                     for name, s in sorted(wave.slowed.items()))
    nodes = ", ".join(wave.nodes[:3]) + ("" if len(wave.nodes) <= 3 else f" +{len(wave.nodes) - 3} more")
    if wave.kept:  # a command that failed: it launched, deleted nothing
        return (f"{_time(wave.start)}  {wave.method:<10}  {', '.join(wave.kept)} kept (its replacement not up within "
                f"Karpenter's readiness wait) → {new} launched, stays")
    return f"{_time(wave.start)}  {wave.method:<10}  {nodes} → {new} · {evicted}{slowed}"


def _summary(result: PlanResult) -> str:
    c = _counts(result)
    parts = [f"{_plural(c['drifted'], 'node')} drift", f"{c['expires']} expire{'s' if c['expires'] == 1 else ''}"]
    if c["removed"]:
        parts.append(f"{c['removed']} go with their removed {_owners(result)}" if c["removed"] > 1 else
                     f"1 goes with its removed {_owners(result)}")
    return f"{c['karpenter']} of {_plural(c['nodes'], 'node')} are Karpenter's: " + ", ".join(parts)


def _timeline(result: PlanResult) -> str:
    rollout = result.rollout
    if not rollout.waves:
        return "no wave: nothing is replaced"
    end = rollout.end
    took = (end - result.start).total_seconds() if end is not None else 0.0
    return (f"{_plural(len(rollout.waves), 'wave')} from {_time(result.start)}, the last ending {_time(end)} "
            f"({_duration(took)})")


def render_text(result: PlanResult) -> str:
    rollout, cost = result.rollout, result.cost
    lines = [f"plan {result.base} → {result.head} ({result.model})", _gate(result), _summary(result)]
    for name, count in result.field_counts():
        lines.append(f"  {name} → {_plural(count, 'node')} drift")
    requirement = _requirement_drift(result)
    if requirement:
        lines.append(f"  requirements no longer met → {_plural(requirement, 'node')} drift")
    lines.append(_timeline(result))
    for wave in rollout.waves[:_SHOWN]:
        lines.append(f"  wave {wave.index}  {_wave_line(wave)}")
    if len(rollout.waves) > _SHOWN:
        lines.append(f"  … {len(rollout.waves) - _SHOWN} more waves (--output json lists them all)")
    if rollout.blocked:
        never = " — the rollout never finishes" if rollout.never_finishes else ""
        lines.append(f"blocked: {_plural(len(rollout.blocked), 'node')}{never}")
        lines += [f"  {b.node}: {b.reason}{'' if b.forever else ' (for now)'}" for b in rollout.blocked[:_SHOWN]]
    if rollout.pending:
        lines.append(f"pending: {_plural(len(rollout.pending), 'pod')} no {_owners(result)} of HEAD takes")
        lines += [f"  {p.pod} ({p.workload}, on {p.node}{', Karpenter keeps the node' if p.held else ''}): "
                  f"{_one_line(p.reason)}" for p in rollout.pending[:_SHOWN]]
    unpriced = f" ({cost.unpriced} nodes without a price)" if cost.unpriced else ""
    lines.append(f"cost a month: before {money(cost.before_monthly)}, peak {money(cost.peak_monthly)}, after "
                 f"{money(cost.after_monthly)}{unpriced}")
    for name, before, peak, after in cost.rows():
        lines.append(f"  {name}: {money(before)} → peak {money(peak)} → {money(after)}")
    if cost.workloads:
        some = "" if len(cost.workloads) <= _SHOWN else f", the {_SHOWN} most expensive of {len(cost.workloads)}"
        lines.append(f"cost a month per workload (a pod's share of its node by requests){some}:")
        lines += [f"  {w.workload}: {money(w.before)} → peak {money(w.peak)} → {money(w.after)}"
                  for w in cost.workloads[:_SHOWN]]
    if result.consolidation is not None:
        lines += _consolidation_text(result.consolidation)
    for static in result.static:
        lines += static.lines()
    lines += [f"note: {n}" for n in result.notes[:_SHOWN]]
    if len(result.notes) > _SHOWN:
        lines.append(f"note: … {len(result.notes) - _SHOWN} more (--output json lists them all)")
    return "\n".join(lines) + "\n"


def _move_line(move: Move) -> str:
    new = f" → {', '.join(move.launched)}" if move.launched else ""
    saved = money(move.saved_monthly) if move.saved_monthly is not None else "unpriced"
    workloads = ", ".join(f"{w} {n}" for w, n in sorted(move.evicted.items(), key=lambda e: (-e[1], e[0]))[:3])
    more = "" if len(move.evicted) <= 3 else f", +{len(move.evicted) - 3} more"
    evicted = f"{_plural(move.evicted_pods, 'pod')} evicted" + (f" ({workloads}{more})" if workloads else "")
    nodes = ", ".join(move.removed[:3]) + ("" if len(move.removed) <= 3 else f" +{len(move.removed) - 3} more")
    return f"{move.stage} {move.action}: {nodes}{new} · saves {saved} a month · {evicted}{_wave(move)}"


def _wave(move: Move) -> str:
    """A NodePool's move: the wave it starts in and when (moves of one wave run side by side)."""
    return "" if move.wave is None else f" · wave {move.wave}, starts {_time(move.start)}"


def _consolidation_headline(consolidation: Consolidation) -> str:
    if not consolidation.moves:
        return "consolidation now (BASE = HEAD): nothing to consolidate"
    return (f"consolidation now (BASE = HEAD): {_plural(len(consolidation.moves), 'move')}, saving "
            f"{money(consolidation.saved_monthly)} a month, {_plural(consolidation.evicted_pods, 'pod')} evicted")


def _consolidation_text(consolidation: Consolidation) -> list[str]:
    lines = [_consolidation_headline(consolidation)]
    lines += [f"  {i}. {_move_line(m)}" for i, m in enumerate(consolidation.moves[:_SHOWN], 1)]
    if len(consolidation.moves) > _SHOWN:
        lines.append(f"  … {len(consolidation.moves) - _SHOWN} more moves (--output json lists them all)")
    if consolidation.not_candidates:
        lines.append(f"not consolidated: {_plural(len(consolidation.not_candidates), 'node')}")
        lines += [f"  {n.node}: {n.reason}" for n in consolidation.not_candidates[:_SHOWN]]
    lines += [f"note: {n}" for n in consolidation.notes]
    return lines


def render_markdown(result: PlanResult) -> str:
    rollout, cost = result.rollout, result.cost
    c = _counts(result)
    verdict = ("⛔ the rollout never finishes" if rollout.never_finishes else
               f"⛔ {_plural(len(rollout.pending), 'pod')} left pending" if rollout.pending else
               f"{_plural(c['drifted'] + c['expires'] + c['removed'], 'node')} replaced")
    out = [
        f"### karpenter-policy plan: {verdict}",
        "",
        f"**{money(cost.before_monthly)} → peak {money(cost.peak_monthly)} → {money(cost.after_monthly)} a month** · "
        f"{markdown_text(_timeline(result))}",
        "",
        f"{markdown_text(_summary(result))}; {markdown_text(_gate(result))}.",
        "",
    ]
    fields = result.field_counts()
    requirement = _requirement_drift(result)
    if fields or requirement:
        out += ["| What changed | Nodes that drift |", "|---|---:|"]
        out += [f"| `{markdown_text(name)}` | {count} |" for name, count in fields]
        if requirement:
            out.append(f"| requirements no longer met by the nodes' labels | {requirement} |")
        out.append("")
    owner = {MODEL: "Provisioner", MODEL_V1: "NodePool"}.get(result.model, "Provisioner / NodePool")
    out += [f"| {owner} | Before | Peak | After |", "|---|---:|---:|---:|"]
    for name, before, peak, after in cost.rows():
        out.append(f"| `{markdown_text(name)}` | {money(before)} | {money(peak)} | {money(after)} |")
    out.append(f"| **Total** | **{money(cost.before_monthly)}** | **{money(cost.peak_monthly)}** | "
               f"**{money(cost.after_monthly)}** |")
    out.append("")
    if rollout.blocked:
        out += ["| Blocked node | Why |", "|---|---|"]
        out += [f"| `{markdown_text(b.node)}` | {markdown_text(b.reason)}{'' if b.forever else ' (for now)'} |"
                for b in rollout.blocked[:_SHOWN]]
        out.append("")
    if rollout.pending:
        out += ["| Pending pod | Workload | Why |", "|---|---|---|"]
        out += [f"| `{markdown_text(p.pod)}` | `{markdown_text(p.workload)}` | {markdown_text(p.reason)} |"
                for p in rollout.pending[:_SHOWN]]
        out.append("")
    if cost.workloads:
        out += ["<details><summary>Cost per workload (a pod's share of its node by requests)</summary>", "",
                "| Workload | Before | Peak | After |", "|---|---:|---:|---:|"]
        out += [f"| `{markdown_text(w.workload)}` | {money(w.before)} | {money(w.peak)} | {money(w.after)} |"
                for w in cost.workloads[:_SHOWN]]
        if len(cost.workloads) > _SHOWN:
            out.append(f"\n… {len(cost.workloads) - _SHOWN} more workloads (`--output json` lists them all)")
        out += ["", "</details>", ""]
    if rollout.waves:
        out += ["<details><summary>Waves</summary>", "", "| Wave | Start | Method | Nodes | New nodes | Pods evicted |",
                "|---:|---|---|---|---|---:|"]
        for wave in rollout.waves[:_SHOWN]:
            new = ", ".join(sorted(r.instance_type for r in wave.replacements)) or "—"
            shown = ', '.join(wave.nodes[:5]) if not wave.kept else f"{', '.join(wave.kept)} kept (command failed)"
            out.append(f"| {wave.index} | {_time(wave.start)} | {wave.method} | "
                       f"{markdown_text(shown)}{' …' if len(wave.nodes) > 5 else ''} | "
                       f"{markdown_text(new)} | {wave.evicted_pods} |")
        if len(rollout.waves) > _SHOWN:
            out.append(f"\n… {len(rollout.waves) - _SHOWN} more waves (`--output json` lists them all)")
        out += ["", "</details>", ""]
    if result.consolidation is not None:
        out += _consolidation_markdown(result.consolidation)
    if result.static:
        out += ["| Static NodePool | Nodes | Replicas | Added | Removed | Static drift |",
                "|---|---:|---|---:|---|---|"]
        for s in result.static:
            drift = "; ".join(f"{n}: {v}" for n, v in s.drift) or "—"
            out.append(f"| `{markdown_text(s.name)}` | {s.nodes} | {s.replicas_text} | {s.added} | "
                       f"{markdown_text(', '.join(s.removed)) or '—'} | {markdown_text(drift)} |")
        out.append("")
    for note in result.notes[:_SHOWN]:
        out.append(f"> {markdown_text(note)}")
    if len(result.notes) > _SHOWN:
        out.append(f"> … {len(result.notes) - _SHOWN} more notes (`--output json` lists them all)")
    return "\n".join(out).rstrip("\n") + "\n"


def render_plan(result: PlanResult, output: str) -> str:
    if output == "json":
        return json.dumps(plan_json(result), indent=2, sort_keys=False) + "\n"
    if output == "markdown":
        return render_markdown(result)
    return render_text(result)


def _consolidation_markdown(consolidation: Consolidation) -> list[str]:
    out = [f"**{markdown_text(_consolidation_headline(consolidation))}**", ""]
    if consolidation.moves:
        out += ["<details><summary>Consolidation moves, in order</summary>", "",
                "| # | Stage | Action | Nodes removed | New nodes | Saves a month | Pods evicted |",
                "|---:|---|---|---|---|---:|---:|"]
        for i, move in enumerate(consolidation.moves[:_SHOWN], 1):
            saved = money(move.saved_monthly) if move.saved_monthly is not None else "unpriced"
            stage = move.stage if move.wave is None else f"{move.stage} (wave {move.wave})"
            out.append(f"| {i} | {stage} | {move.action} | {markdown_text(', '.join(move.removed))} | "
                       f"{markdown_text(', '.join(move.launched)) or '—'} | {saved} | {move.evicted_pods} |")
        if len(consolidation.moves) > _SHOWN:
            out.append(f"\n… {len(consolidation.moves) - _SHOWN} more moves (`--output json` lists them all)")
        out += ["", "</details>", ""]
    if consolidation.not_candidates:
        out += ["<details><summary>Nodes consolidation does not take</summary>", "", "| Node | Why |", "|---|---|"]
        out += [f"| `{markdown_text(n.node)}` | {markdown_text(n.reason)} |"
                for n in consolidation.not_candidates[:_SHOWN]]
        out += ["", "</details>", ""]
    out += [f"> {markdown_text(n)}" for n in consolidation.notes]
    return out
