"""`reconcile.state.nodepoolcounts`: a static NodePool's claims counted as Karpenter v1.14.1's `NodePoolState`
(core pkg/controllers/state/statenodepool.go `GetNodeCount`, `ReserveNodeCount`), over many claim sets."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.state.nodepoolcounts import NodeCounts, node_counts, node_limit_left
from karpenter_policy.reconcile.state.records import ClaimRecord

_CLAIM = st.builds(
    lambda i, pool, deleted, node: ClaimRecord(
        name=f"c{i}", uid=str(i), labels={wk.NODEPOOL: pool}, deletion_timestamp="2026-01-01T00:00:00Z" if deleted
        else None, finalizers=(), node_name=node, provider_id="", obj={}),
    st.integers(0, 10**6), st.sampled_from(["static", "other"]), st.booleans(),
    st.sampled_from(["", "n1", "n2", "n3", "n4"]),
)


@deterministic(200)
@given(st.lists(_CLAIM, max_size=12, unique_by=lambda c: c.name), st.frozensets(st.sampled_from(["n1", "n2"])),
       st.frozensets(st.sampled_from(["n2", "n3"])))
def test_every_claim_of_the_nodepool_is_counted_once(
    claims: list[ClaimRecord], deleting: frozenset[str], disrupting: frozenset[str]
) -> None:
    counts = node_counts(claims, "static", deleting, disrupting)
    own = [c for c in claims if c.labels[wk.NODEPOOL] == "static"]
    assert counts.total == len(own)
    # a claim being deleted, or whose node is, is deleting before it is pending disruption (MarkNodeClaimDeleting)
    assert counts.deleting == sum(1 for c in own if c.deletion_timestamp is not None or c.node_name in deleting)
    assert counts.pending_disruption == sum(
        1 for c in own if c.deletion_timestamp is None and c.node_name not in deleting and c.node_name
        and c.node_name in disrupting)


@deterministic(200)
@given(st.integers(0, 20), st.integers(0, 20), st.integers(0, 20), st.one_of(st.none(), st.integers(0, 40)),
       st.integers(-5, 40))
def test_the_node_limit_never_grants_past_the_limit_nor_more_than_wanted(
    active: int, deleting: int, pending: int, limit: int | None, wanted: int
) -> None:
    counts = NodeCounts(active, deleting, pending)
    granted = node_limit_left(counts, limit, wanted)
    assert 0 <= granted <= max(wanted, 0)
    if limit is None:
        assert granted == max(wanted, 0)
    else:
        assert granted == 0 or counts.total + granted <= limit
        assert granted == max(0, min(wanted, limit - counts.total))  # ReserveNodeCount's grant
