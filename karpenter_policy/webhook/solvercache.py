"""A `Solver` that remembers its verdicts: the same requirements are proven once, then looked up.

A satisfiable Provisioner takes the solver's bit masks tens of microseconds, an unsatisfiable one Z3 a few
milliseconds (its minimal cores); a webhook sees the same Provisioners again and again (every `kubectl apply`,
every GitOps sync, the reinvocation of mutating webhooks), and the outcome depends only on the terms'
requirements (in order) and the catalog and OS the solver was built for. So `solve` is memoised on the
sequence of requirements, in a bounded LRU. The unsat cores of a cached outcome are kept as term indices and
handed back as the caller's own `Term` objects (`check_provisioner` recognises core members by identity).
Undecided outcomes (a solver timeout) are not cached: a later request may have the time to decide.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Sequence

from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.proof.solver import DEFAULT_TIMEOUT_MS, Solver, SolverResult, Term, Verdict
from karpenter_policy.model.requirements import Requirement

DEFAULT_CACHE_SIZE = 4096


class CachingSolver(Solver):
    """`Solver.solve`, memoised (not thread-safe, like `Solver`: callers serialise)."""

    def __init__(
        self,
        catalog: Catalog,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        os: str = "linux",
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        super().__init__(catalog, timeout_ms, os)
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[Requirement, ...], tuple[SolverResult, tuple[tuple[int, ...], ...]]] = (
            OrderedDict()
        )
        self.hits = 0
        self.misses = 0

    def solve(self, terms: Sequence[Term]) -> SolverResult:
        if self.cache_size <= 0:
            return super().solve(terms)
        key = tuple(term.requirement for term in terms)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self.hits += 1
            outcome, cores = cached
            if not cores:
                return outcome
            return dataclasses.replace(outcome, cores=tuple(tuple(terms[i] for i in core) for core in cores))
        self.misses += 1
        outcome = super().solve(terms)
        if outcome.verdict == Verdict.UNKNOWN:
            return outcome
        index = {id(term): i for i, term in enumerate(terms)}
        try:
            cores = tuple(tuple(index[id(term)] for term in core) for core in outcome.cores)
        except KeyError:  # a core member that is not one of the given terms: do not cache what cannot be mapped
            return outcome
        self._cache[key] = (dataclasses.replace(outcome, cores=()), cores)
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return outcome

    def __len__(self) -> int:
        return len(self._cache)
