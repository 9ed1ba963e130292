"""Karpenter v1's `minValues`: a NodePool requirement may ask that the instance types a node claim keeps carry at
least N distinct values of its key (instance types, families, zones…). What this module holds is the vocabulary,
shared by the scheduler, the proofs and the flags: the operator's `--min-values-policy` values (core v1.14.1
pkg/operator/options/options.go: `MinValuesPolicyStrict`, the default, and `MinValuesPolicyBestEffort`), how the
terms of a NodePool merge into one `minValues` per key, and Karpenter's wording when the count is not met
(`InstanceTypes.SatisfiesMinValues` in pkg/cloudprovider/types.go).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from karpenter_policy.model.labels import normalize_key

#: Karpenter's default: a node claim whose instance types cannot meet minValues is never launched.
STRICT: Final = "Strict"
#: minValues is lowered to what the instance types left offer, and the NodeClaim says so
#: (`karpenter.sh/nodeclaim-min-values-relaxed: "true"`).
BEST_EFFORT: Final = "BestEffort"
POLICIES: Final = (STRICT, BEST_EFFORT)
#: The NodeClaim annotation Karpenter v1.14.1 writes on a claim whose minValues it relaxed (pkg/apis/v1/labels.go).
RELAXED_ANNOTATION: Final = "karpenter.sh/nodeclaim-min-values-relaxed"

__all__ = ["BEST_EFFORT", "POLICIES", "RELAXED_ANNOTATION", "STRICT", "merged_min_values", "unmet_text"]


def merged_min_values(terms: Iterable[tuple[str, int | None]]) -> dict[str, int]:
    """(key, minValues) of each requirement term → each key some term sets minValues on, with the largest: terms on
    one key merge and keep the larger (`Requirement.Intersection`'s `maxIntPtr` in core pkg/scheduling/requirement.go);
    beta keys count as their GA names."""
    found: dict[str, int] = {}
    for key, wanted in terms:
        if wanted is not None:
            stable = normalize_key(key)
            found[stable] = max(found.get(stable, 0), wanted)
    return found


def unmet_text(unmet: Mapping[str, int]) -> str:
    """Karpenter's error for keys whose minValues the instance types left do not meet: `minValues requirement is
    not met for label(s) (label(s)=[key …])` (operatorpkg's serrors.Wrap of the keys, sorted here: Go's map order is
    random)."""
    return f"minValues requirement is not met for label(s) (label(s)=[{' '.join(sorted(unmet))}])"
