"""One policy repository, read once: what the webhook and the commands (`check`, `test`, `compile`, `diff`, `pin`)
build from the policies under their PATHS.

`load_repository` validates every file (`validation.policies`: the schema, Karpenter's rules, suppression) and
keeps, of the documents without an error finding, what the readers need:

* the Provisioners and AWSNodeTemplates by name — a later definition of a name replaces an earlier one, as applying
  both would (`duplicate-name` reports them, so a repository without errors has one of each);
* the taints of each of those Provisioners (what a PinningPolicy rule naming it must tolerate, and what the webhook
  binds pinning to), read by `api.objects.taints_of` as the compiled Provisioner reads them, and of each NodePool
  (its template's);
* the PinningPolicy and PlacementTest documents, in file order;
* the Karpenter v1 NodePools and EC2NodeClasses by name, in file order (`api.v1.objects` builds the typed objects
  from them, after `api.v1.admission.stored_form`; `validation.budgets` checks the NodePools' budgets).

With `prove`, the solver proves every Provisioner whose errors (if any) leave its scheduling untouched (one refused
for a TTL combination or a provider field is still proven and takes workloads: one run shows every mistake),
against the node templates of the same reach (`proof.provisioners`), and every Karpenter v1 NodePool without an
error outside `spec.disruption` through its scheduling view, with the EC2NodeClass its nodeClassRef names
(`proof.nodepools`): both kinds side by side, as `checked`; the report then holds the solver's findings too.
Without it, neither the solver (z3) nor the catalog is loaded: the webhook's context and `pin --no-prove` need
neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from karpenter_policy.api.kinds import NODE_TEMPLATE_KIND, PINNING_POLICY_KIND, PLACEMENT_TEST_KIND, PROVISIONER_KIND
from karpenter_policy.api.objects import taints_of
from karpenter_policy.api.v1.crds import (
    EC2NODECLASS_API_VERSION,
    EC2NODECLASS_KIND,
    NODEPOOL_API_VERSION,
    NODEPOOL_KIND,
)
from karpenter_policy.api.v1.objects import is_static
from karpenter_policy.checks.findings import Report
from karpenter_policy.checks.selection import EVERYTHING, Selection
from karpenter_policy.checks.source.loader import Document
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.model.minvalues import STRICT
from karpenter_policy.model.taints import Taint

if TYPE_CHECKING:
    from karpenter_policy.catalog import Catalog
    from karpenter_policy.checks.proof.provisioners import CheckedProvisioner

__all__ = ["PolicyRepository", "check_paths", "load_repository"]


@dataclass(frozen=True, slots=True)
class PolicyRepository:
    """A policy repository as `load_repository` read it (see the module docstring): the report of its checks, the
    valid documents each reader builds from, and (`proven`) what the solver proved of its provisioners, in file
    and line order. Look at the report's errors before building anything from the documents."""

    report: Report
    provisioners: Mapping[str, Document] = field(default_factory=dict)
    node_templates: Mapping[str, Document] = field(default_factory=dict)
    taints: Mapping[str, tuple[Taint, ...]] = field(default_factory=dict)
    pinning_documents: tuple[Document, ...] = ()
    placement_tests: tuple[Document, ...] = ()
    #: The valid Karpenter v1 NodePools and EC2NodeClasses by name, in file order.
    nodepools: Mapping[str, Document] = field(default_factory=dict)
    #: The taints of each of those NodePools (`spec.template.spec.taints`): what a pinning rule naming it tolerates.
    nodepool_taints: Mapping[str, tuple[Taint, ...]] = field(default_factory=dict)
    #: The names of those NodePools that are static (`spec.replicas`: `api.v1.objects.is_static`), which a pinning
    #: rule may not name (`pinning.bind_provisioners`).
    static_nodepools: frozenset[str] = frozenset()
    node_classes: Mapping[str, Document] = field(default_factory=dict)
    checked: tuple[CheckedProvisioner, ...] = ()
    proven: bool = False

    def node_template_specs(self) -> dict[str, Mapping[str, Any]]:
        """The spec of each valid AWSNodeTemplate by name (AMI family, block devices: a provisioner's node OS and
        shape)."""
        return {name: _spec(doc) for name, doc in self.node_templates.items()}


def _name(doc: Document) -> str:
    return str(doc.data["metadata"]["name"])


def _is_v1(doc: Document, api_version: str) -> bool:
    return bool(doc.data.get("apiVersion") == api_version)


def _spec(doc: Document) -> dict[str, Any]:
    return dict(doc.data.get("spec") or {})


def _is_static(doc: Document) -> bool:
    spec = doc.data.get("spec")
    return isinstance(spec, Mapping) and is_static(spec)


def _template_spec(doc: Document) -> dict[str, Any]:
    """A NodePool's `spec.template.spec`."""
    return dict((_spec(doc).get("template") or {}).get("spec") or {})


class _Gathered:
    """What validation hands over while it reads the files: the valid documents of each kind, and the documents
    the solver can prove (their errors, if any, leave scheduling untouched)."""

    def __init__(self) -> None:
        self.valid: dict[str, list[Document]] = {}
        self.checkable: list[Document] = []
        self.checkable_templates: dict[str, Mapping[str, Any]] = {}
        self.checkable_nodepools: list[Document] = []
        self.checkable_node_classes: dict[str, Document] = {}

    def on_valid(self, doc: Document) -> None:
        self.valid.setdefault(str(doc.data.get("kind")), []).append(doc)

    def on_checkable(self, doc: Document) -> None:
        kind = doc.data.get("kind")
        if kind == PROVISIONER_KIND:
            self.checkable.append(doc)
        elif kind == NODE_TEMPLATE_KIND:  # not a PinningPolicy of the same name
            self.checkable_templates[_name(doc)] = _spec(doc)
        elif kind == NODEPOOL_KIND and doc.data.get("apiVersion") == NODEPOOL_API_VERSION:
            self.checkable_nodepools.append(doc)
        elif kind == EC2NODECLASS_KIND and doc.data.get("apiVersion") == EC2NODECLASS_API_VERSION:
            self.checkable_node_classes[_name(doc)] = doc

    def nodepool_views(self) -> list[Document]:
        """The scheduling view of each checkable NodePool (`proof.nodepools`), with its EC2NodeClass."""
        if not self.checkable_nodepools:
            return []
        # api.v1 brings in cel-python: only when there are NodePools (validation imported it already)
        from karpenter_policy.api.v1.admission import stored_form
        from karpenter_policy.checks.proof.nodepools import nodepool_views

        classes = {name: stored_form(doc.data) for name, doc in self.checkable_node_classes.items()}
        return list(nodepool_views(((doc, stored_form(doc.data)) for doc in self.checkable_nodepools), classes))

    def of_kind(self, kind: str) -> list[Document]:
        return self.valid.get(kind, [])


def load_repository(
    paths: Iterable[str],
    values: Mapping[str, Any] | None = None,
    *,
    prove: bool = False,
    catalog: Catalog | None = None,
    timeout_ms: int | None = None,
    selection: Selection = EVERYTHING,
    max_file_bytes: int | None = None,
    min_values_policy: str = STRICT,
) -> PolicyRepository:
    """Read and check the policies under `paths` (see the module docstring). `values`: the template values
    (`--values`) of `*.yaml.j2` files; `selection`: the files left out and the rules disabled. With `prove`: the
    solver's checks too, against `catalog` (the embedded one when None, loaded only when there is a Provisioner to
    prove) within `timeout_ms` per provisioner (the solver's default when None); a NodePool's unmet minValues as
    Karpenter's `min_values_policy` makes it (`proof.nodepools.min_values_findings`)."""
    gathered = _Gathered()
    report = validate_paths(
        paths,
        max_file_bytes,
        on_valid=gathered.on_valid,
        values=values,
        selection=selection,
        on_checkable=gathered.on_checkable,
    )
    checked: list[CheckedProvisioner] = []
    if prove:
        # the solver (z3) is imported only to prove: validating (the webhook's context, `pin --no-prove`) starts
        # without it
        from karpenter_policy.checks.proof.provisioners import DEFAULT_TIMEOUT_MS, prove_provisioners

        timeout = DEFAULT_TIMEOUT_MS if timeout_ms is None else timeout_ms
        documents = [*gathered.checkable, *gathered.nodepool_views()]
        findings, checked = prove_provisioners(
            documents, gathered.checkable_templates, catalog, timeout, min_values_policy
        )
        report.findings.extend(findings)
    provisioners = {_name(doc): doc for doc in gathered.of_kind(PROVISIONER_KIND)}
    nodepools = {_name(doc): doc for doc in gathered.of_kind(NODEPOOL_KIND) if _is_v1(doc, NODEPOOL_API_VERSION)}
    return PolicyRepository(
        report,
        provisioners=provisioners,
        node_templates={_name(doc): doc for doc in gathered.of_kind(NODE_TEMPLATE_KIND)},
        taints={name: taints_of(doc.data.get("spec") or {}) for name, doc in provisioners.items()},
        pinning_documents=tuple(gathered.of_kind(PINNING_POLICY_KIND)),
        placement_tests=tuple(gathered.of_kind(PLACEMENT_TEST_KIND)),
        nodepools=nodepools,
        nodepool_taints={name: taints_of(_template_spec(doc)) for name, doc in nodepools.items()},
        static_nodepools=frozenset(name for name, doc in nodepools.items() if _is_static(doc)),
        node_classes={
            _name(doc): doc for doc in gathered.of_kind(EC2NODECLASS_KIND) if _is_v1(doc, EC2NODECLASS_API_VERSION)
        },
        checked=tuple(checked),
        proven=prove,
    )


def check_paths(
    paths: Iterable[str],
    catalog: Catalog | None = None,
    timeout_ms: int | None = None,
    *,
    values: Mapping[str, Any] | None = None,
    max_file_bytes: int | None = None,
    selection: Selection = EVERYTHING,
) -> tuple[Report, list[CheckedProvisioner]]:
    """The report and the proven provisioners of `load_repository(paths, prove=True, …)`: the pair tests and
    benchmarks look at."""
    repository = load_repository(
        paths,
        values,
        prove=True,
        catalog=catalog,
        timeout_ms=timeout_ms,
        selection=selection,
        max_file_bytes=max_file_bytes,
    )
    return repository.report, list(repository.checked)
