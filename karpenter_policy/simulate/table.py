"""The node table and the fleet's $/h that `simulate` prints after its log (plain text, deterministic)."""

from __future__ import annotations

from collections.abc import Sequence

from karpenter_policy.model.pools import pools_noun
from karpenter_policy.simulate.driver import SimulationResult
from karpenter_policy.simulate.measure import NodeRow


def placed(nodes: Sequence[NodeRow]) -> bool:
    """Some node is in a placement group: the table has a last column, `placement group` (`NodeRow.placement`)."""
    return any(n.placement for n in nodes)


def header(nodes: Sequence[NodeRow]) -> tuple[str, ...]:
    """The columns; the second headed `provisioner`, `nodepool` (every node a NodePool's) or `pool` (`pools_noun`);
    `placement group` last when some node is in one."""
    pool = pools_noun((n.provisioner for n in nodes), 1).lower()
    group = ("placement group",) if placed(nodes) else ()
    return ("node", pool, "type", "zone", "capacity", "pods", "cpu", "memory", "$/h", *group)


def price_text(price: float | None) -> str:
    return "n/a" if price is None else f"{price:.4f}"


def row(node: NodeRow, placement: bool = False) -> tuple[str, ...]:
    """A node's cells, in `header`'s order (`placement`: with the placement-group column)."""
    return (
        node.name, node.provisioner, node.instance_type, node.zone, node.capacity_type, str(node.pods),
        f"{node.cpu:.0%}", f"{node.memory:.0%}", price_text(node.price), *((node.placement,) if placement else ()),
    )


def _render(head: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> list[str]:
    right = {5, 6, 7, 8}
    widths = [max(len(r[i]) for r in (head, *rows)) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        padded = zip(cells, widths, strict=True)
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(padded))

    return [line(head).rstrip(), "  ".join("-" * w for w in widths), *(line(r).rstrip() for r in rows)]


def node_table(result: SimulationResult) -> str:
    """The nodes at the end with their packing and price, then the fleet's $/h and what is left pending."""
    out: list[str] = []
    if result.nodes:
        out += _render(header(result.nodes), [row(n, placed(result.nodes)) for n in result.nodes])
    else:
        out.append("no nodes")
    unpriced = sum(1 for n in result.nodes if n.price is None)
    spot = "spot at the live spot price" if result.spot_priced else "spot priced at on-demand (no spot price data)"
    fleet = f"fleet: {len(result.nodes)} node(s), {result.pods} pod(s), ${result.cost:.4f}/h ({spot})"
    if unpriced:
        fleet += f"; {unpriced} node(s) without price data for {result.region} not counted"
    out.append(fleet)
    if result.pending:
        out.append(f"pending: {result.pending} pod(s)")
        out += [f"  {pod}: {reason}" for pod, reason in result.unschedulable.items()]
    return "\n".join(out) + "\n"


__all__ = ["header", "node_table", "placed", "price_text", "row"]
