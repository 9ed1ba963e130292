"""What the webhook knows beyond the object under review: `--policies DIR` or `--constraints DIR`.

* `--policies DIR` — the policy repository, read by the engine's `checks.repository` as the CLI reads it (without
  the solver): the AWSNodeTemplates give the OS of a Provisioner that references one (Windows AMIs launch Windows
  nodes: the solver proves against those), the Provisioners give the taints a pinning rule's `provisioner:` must
  tolerate, and its `PinningPolicy` documents are the pinning rules. A repository with errors is refused (the
  webhook does not start: a rolling update then keeps the old replicas serving).
* `--constraints DIR` — the output of `karpenter-policy compile -o DIR` (or its `constraintsets/`): the same
  facts, from the compiled, hash-checked constraint sets (`api.constraintset`), Provisioners' and Karpenter v1
  NodePools' side by side (a NodePool's set gives the taints of its template, which a rule's `nodePool:`
  tolerates); pinning rules then come from `--pinning PATH` (`load_pinning_documents`).

`ContextSource` is what the webhook was started with: it loads the context and the pinning rules (at start-up,
and again when its files change: `reload`) and lists the files they come from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from karpenter_policy.api.constraintset import PROVIDER_REF, ConstraintSetError, read_compiled
from karpenter_policy.api.kinds import PROVISIONER_KIND
from karpenter_policy.checks.reporters import render_text
from karpenter_policy.checks.repository import PolicyRepository, load_repository
from karpenter_policy.checks.source.loader import Document, discover
from karpenter_policy.model.taints import Taint
from karpenter_policy.webhook.pinning import PinningError, PolicyPinner
from karpenter_policy.webhook.watch import directory_files


class ContextError(ValueError):
    """The policies or constraint sets cannot be used (the webhook refuses to start)."""


@dataclass(frozen=True, slots=True)
class PolicyContext:
    """The spec of each AWSNodeTemplate by name (AMI family and block devices: a provisioner's node OS and node
    shape), taints per Provisioner name (for pinning), and the valid PinningPolicy documents."""

    node_templates: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    provisioner_taints: Mapping[str, Sequence[Taint]] = field(default_factory=dict)
    pinning_documents: tuple[Document, ...] = ()
    source: str = ""
    #: Taints per Karpenter v1 NodePool name (a rule naming a `nodePool`), from the repository or the NodePools'
    #: compiled sets.
    nodepool_taints: Mapping[str, Sequence[Taint]] = field(default_factory=dict)
    #: The static ones among them (`spec.replicas`), which a pinning rule may not name.
    static_nodepools: frozenset[str] = frozenset()


def _load(paths: Sequence[str], values: Mapping[str, Any] | None) -> PolicyRepository:
    """The policy repository under `paths`, read as the CLI reads it (no solver); ContextError on errors."""
    repository = load_repository(paths, values)
    report = repository.report
    if report.errors or report.could_not_run:
        raise ContextError(f"the policies under {', '.join(paths)} have errors:\n{render_text(report).rstrip()}")
    return repository


def load_pinning_documents(paths: Sequence[str], values: Mapping[str, Any] | None = None) -> tuple[Document, ...]:
    """The PinningPolicy documents under `paths` (validated as the CLI validates them). Raises ContextError."""
    return _load(paths, values).pinning_documents


def load_policies(paths: Sequence[str], values: Mapping[str, Any] | None = None) -> PolicyContext:
    """The context of a policy repository (the CLI's validation runs on it first). Raises ContextError."""
    repository = _load(paths, values)
    return PolicyContext(
        repository.node_template_specs(),
        repository.taints,
        repository.pinning_documents,
        ", ".join(paths),
        repository.nodepool_taints,
        repository.static_nodepools,
    )


def load_constraints(directory: str, region: str | None = None) -> PolicyContext:
    """The context of compiled constraint sets, Provisioners' and NodePools' (every set checked and every hash
    verified); `region` must match theirs when given. Raises ContextError."""
    try:
        index, sets = read_compiled(directory)
    except ConstraintSetError as error:
        raise ContextError(str(error)) from None
    for entry, constraint_set in zip(index.entries, sets, strict=True):
        if region is not None and constraint_set.region != region:
            raise ContextError(
                f"{directory}: {entry.key}: compiled for region {constraint_set.region}, "
                f"the webhook's catalog is {region}"
            )
    node_templates: dict[str, Mapping[str, Any]] = {}
    for constraint_set in sets:
        provider = constraint_set.provider
        if provider is not None and provider.source == PROVIDER_REF and provider.name and provider.spec is not None:
            node_templates[provider.name] = dict(provider.spec)
    taints = {s.name: tuple(s.taints) for s in sets if s.origin == PROVISIONER_KIND}
    pools = {s.name: tuple(s.taints) for s in sets if s.origin != PROVISIONER_KIND}
    static = frozenset(s.name for s in sets if s.is_static)
    return PolicyContext(node_templates, taints, (), directory, pools, static)


@dataclass(frozen=True, slots=True)
class ContextSource:
    """`--policies`, or `--constraints` (with the webhook's catalog region), and `--pinning`, `--values`."""

    policies: Sequence[str] = ()
    constraints: str | None = None
    pinning: Sequence[str] = ()
    values: Mapping[str, Any] | None = None
    region: str | None = None

    def load(self) -> tuple[PolicyContext, PolicyPinner]:
        """The context and the pinning rules bound to its provisioners. Raises ContextError."""
        if self.policies and self.constraints:
            raise ContextError("give --policies or --constraints, not both")
        context = PolicyContext()
        if self.policies:
            context = load_policies(self.policies, self.values)
        elif self.constraints:
            context = load_constraints(self.constraints, self.region)
        documents = load_pinning_documents(self.pinning, self.values) if self.pinning else context.pinning_documents
        try:
            return context, PolicyPinner.from_documents(
                documents, context.provisioner_taints, context.nodepool_taints, context.static_nodepools
            )
        except PinningError as error:
            raise ContextError(str(error)) from None

    def files(self) -> list[str]:
        """Every file `load` reads (and the paths that do not exist), in a stable order."""
        found, missing = discover([*self.policies, *self.pinning])
        files = [*found, *missing]
        if self.constraints:  # compile -o DIR output (its constraintsets/), or a ConfigMap mounted as a directory
            base = Path(self.constraints)
            files += [str(f) for folder in (base, base / "constraintsets") for f in directory_files(folder)]
        return files

    def describe(self) -> str:
        """What the context comes from, for log lines."""
        parts = [f"--policies {' '.join(self.policies)}"] if self.policies else []
        parts += [f"--constraints {self.constraints}"] if self.constraints else []
        parts += [f"--pinning {' '.join(self.pinning)}"] if self.pinning else []
        return ", ".join(parts) or "none"
