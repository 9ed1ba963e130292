"""`karpenter-policy plan`: BASE and HEAD read (git revisions or directories, as `diff` reads them), the snapshot
read and checked, drift, waves and cost computed, the result rendered, and the exit code: 0; 1 when HEAD has error
findings, or the plan leaves pods pending or can never finish (unless `--allow-stranded`); 2 when it cannot run
(an unreadable or malformed snapshot, a cluster `--kubeconfig` cannot fully read within `--request-timeout`, an
unknown revision, a bad `--start`, `--horizon`, `--request-timeout`, `--consolidation-timeout` or
`--rollout-timeout`); a rollout (v0.31 or v1) not planned to its end within `--rollout-timeout` is exit 1 too."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any, BinaryIO

from karpenter_policy.api.schema import show_value
from karpenter_policy.api.v1.admission import stored_form
from karpenter_policy.api.v1.featuregates import reserved_capacity, static_capacity
from karpenter_policy.api.v1.goduration import GoDurationError, parse_go_duration
from karpenter_policy.catalog import Catalog
from karpenter_policy.checks.findings import CommandOutput, Report
from karpenter_policy.checks.options import OptionError, spot_prices_option
from karpenter_policy.checks.proof.placement import static_templates_for, templates_for
from karpenter_policy.checks.repository import PolicyRepository, load_repository
from karpenter_policy.checks.source.gitrepo import find_repository
from karpenter_policy.commands.diff import DiffError, is_revision, materialise, shallow_hint
from karpenter_policy.commands.plan.amidrift import AmiDriftRules
from karpenter_policy.commands.plan.capacityblocks import CapacityBlocks
from karpenter_policy.commands.plan.consolidation import Consolidate
from karpenter_policy.commands.plan.cost import fleet_cost
from karpenter_policy.commands.plan.drift import DriftRules, NodeDrift, PolicySide
from karpenter_policy.commands.plan.ec2answers import Ec2FileError, instance_id, read_ec2_answers
from karpenter_policy.commands.plan.fleet import fleet_of
from karpenter_policy.commands.plan.networkdrift import NetworkDriftRules
from karpenter_policy.commands.plan.nodepooldrift import NodePoolDriftRules
from karpenter_policy.commands.plan.nodepoolwaves import nodepool_budgets, plan_nodepool_waves
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.pairing import claims_by_node
from karpenter_policy.commands.plan.redact import hashed, redact_snapshot
from karpenter_policy.commands.plan.render import PlanResult, render_plan
from karpenter_policy.commands.plan.reservationdrift import ReservationDriftRules
from karpenter_policy.commands.plan.reservedlaunches import ReservedLaunches
from karpenter_policy.commands.plan.rolloutbudget import RolloutClock
from karpenter_policy.commands.plan.snapshot import Snapshot, read_snapshots
from karpenter_policy.commands.plan.staticnodepools import (
    static_launches,
    static_nodepools,
    static_nodes,
    static_work,
)
from karpenter_policy.commands.plan.templateamidrift import TemplateAmiDrift
from karpenter_policy.commands.plan.waves import PdbBudgets, Replacements, Timing, plan_waves
from karpenter_policy.commands.plan.workloadcost import workload_costs
from karpenter_policy.kube.objects import parse_time
from karpenter_policy.scheduling import InstanceTable

__all__ = ["parse_start", "plan_command"]


def parse_start(text: str | None, now: dt.datetime | None = None) -> dt.datetime:
    """`--start` (RFC 3339; a time without a zone is UTC) or now. ValueError: not a time."""
    if text is None:
        return (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    moment = parse_time(text)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _duration_flag(flag: str, text: str, zero_allowed: bool, examples: str) -> dt.timedelta | str:
    """A Go duration flag's value, or what is wrong with it. Durations are kept to the microsecond: a value
    below one (`1ns`) rounds to 0, and the message says so rather than calling it "not more than 0"."""
    wanted = "0 or more" if zero_allowed else "more than 0"
    try:
        value = parse_go_duration(text)
    except GoDurationError:
        value = None
    if value is not None and (value > dt.timedelta(0) or (zero_allowed and value == dt.timedelta(0))):
        return value
    rounded = value == dt.timedelta(0) and any(digit in text for digit in "123456789")
    why = " — it rounds to 0: durations are kept to the microsecond (1us is the least)" if rounded else ""
    return (f"{flag} {show_value(text)} is not a duration of {wanted} (a Go duration up to 2562047h: {examples})"
            f"{why}")


def _load(spec: str, paths: Sequence[str], catalog: Catalog, scratch: str, values: Mapping[str, Any] | None,
          timeout_ms: int, prove: bool, min_values_policy: str) -> PolicyRepository:
    if os.path.isdir(spec):
        root, wanted = spec, list(paths) or ["."]
    else:
        repository = find_repository(os.curdir)
        if repository is None or not is_revision(spec, repository):
            raise DiffError(f"{spec!r} is neither a directory nor a git revision{shallow_hint(repository)}")
        wanted = list(paths) or ["policies/"]
        root, _ = materialise(repository, spec, wanted, scratch)
    targets = [os.path.normpath(os.path.join(root, p)) for p in wanted if os.path.exists(os.path.join(root, p))]
    if not targets:
        return PolicyRepository(Report())
    return load_repository(targets, values, prove=prove, catalog=catalog, timeout_ms=timeout_ms,
                           min_values_policy=min_values_policy)


def _side(label: str, policies: PolicyRepository) -> PolicySide:
    return PolicySide(
        label,
        {name: doc.data for name, doc in policies.provisioners.items()},
        {name: doc.data for name, doc in policies.node_templates.items()},
        {name: stored_form(doc.data) for name, doc in policies.nodepools.items()},
        {name: stored_form(doc.data) for name, doc in policies.node_classes.items()},
    )


def _instance_ids(snapshot: Snapshot, redact: bool) -> dict[str, str]:
    """Node (as the plan names it) → its EC2 instance (`spec.providerID`), read before `--redact` hashes it."""
    out: dict[str, str] = {}
    for node in snapshot.nodes:
        spec, name = node.get("spec"), (node.get("metadata") or {}).get("name")
        found = instance_id(spec.get("providerID")) if isinstance(spec, Mapping) else None
        if found is not None and isinstance(name, str):
            out[hashed("node", name) if redact else name] = found
    return out


def _claim_images(snapshot: Snapshot, redact: bool) -> dict[str, str]:
    """Node (as the plan names it) → its NodeClaim's `status.imageID` (its claim: the one of its providerID,
    `pairing`), read before `--redact` drops it."""
    out: dict[str, str] = {}
    for node, claims in claims_by_node(snapshot.nodes, snapshot.node_claims, ("NodeClaim",)).items():
        status = claims[0].get("status")
        image = status.get("imageID") if isinstance(status, Mapping) else None
        if isinstance(image, str) and image:
            out[hashed("node", node) if redact else node] = image
    return out


def plan_command(
    options: PlanOptions,
    catalog: Catalog,
    values: Mapping[str, Any] | None = None,
    stdin: BinaryIO | None = None,
    now: dt.datetime | None = None,
    consolidate: Consolidate | None = None,
) -> CommandOutput:
    """Run `karpenter-policy plan` (see the module docstring). With BASE = HEAD (the same policies), `consolidate`
    (the CLI gives the controller's: `simulate/consolidation.py`) says what consolidation would do now."""
    try:
        start = parse_start(options.start, now)
    except ValueError:
        return CommandOutput(2, "", f"karpenter-policy plan: --start {show_value(options.start)} is not an RFC 3339 "
                             "time\n")
    durations: dict[str, dt.timedelta] = {}
    for flag, text, zero_allowed, examples in (
        ("--horizon", options.horizon, True, "24h, 90m, 0s"),
        ("--request-timeout", options.request_timeout, False, "30s, 2m"),
        ("--consolidation-timeout", options.consolidation_timeout, True, "60s, 5m, 0s"),
        ("--rollout-timeout", options.rollout_timeout, False, "120s, 5m"),
    ):
        value = _duration_flag(flag, text, zero_allowed, examples)
        if isinstance(value, str):
            return CommandOutput(2, "", f"karpenter-policy plan: {value}\n")
        durations[flag] = value
    horizon = durations["--horizon"]
    request_timeout = durations["--request-timeout"]
    consolidation_timeout = durations["--consolidation-timeout"]
    rollout_timeout = durations["--rollout-timeout"]
    try:
        pricing = spot_prices_option(catalog, options.spot_prices_file)
    except OptionError as error:
        return CommandOutput(2, "", f"karpenter-policy plan: {error}\n")
    try:
        answers = read_ec2_answers(options.instances, options.images, options.ssm_parameters, options.subnets,
                                   options.security_groups, options.capacity_reservations)
    except Ec2FileError as error:
        return CommandOutput(2, "", f"karpenter-policy plan: {error}\n")
    if bool(options.snapshot) == bool(options.kubeconfig):
        return CommandOutput(2, "", "karpenter-policy plan: give the cluster as --snapshot FILE or --kubeconfig FILE "
                             "(one of them)\n")
    if options.context and not options.kubeconfig:
        return CommandOutput(2, "", "karpenter-policy plan: --context is a context of --kubeconfig\n")
    if options.kubeconfig:
        # here, not at the top: the Kubernetes client it loads costs a file snapshot's plan ~17 MiB and its start
        from karpenter_policy.commands.plan.cluster import read_cluster

        snapshot = read_cluster(options.kubeconfig, options.context,
                                request_timeout=request_timeout.total_seconds())
    else:
        snapshot = read_snapshots(options.snapshot, stdin)
    instance_ids = _instance_ids(snapshot, options.redact) if answers.given or answers.network_given else {}
    # read before the redaction drops them, whatever answers are given: the cluster's status alone decides drift
    claim_images = _claim_images(snapshot, options.redact) if options.redact else {}
    if options.redact:
        snapshot = redact_snapshot(snapshot)
    fleet = fleet_of(snapshot, start) if not snapshot.errors else None
    if snapshot.errors or fleet is None:
        lines = [str(p) for p in snapshot.problems]
        return CommandOutput(2, "", "".join(f"karpenter-policy plan: {line}\n" for line in lines)
                             + "karpenter-policy plan: the snapshot cannot be trusted: no plan\n")
    scratch = tempfile.mkdtemp(prefix="karpenter-policy-plan-")
    try:
        try:
            base = _load(options.base, options.paths, catalog, os.path.join(scratch, "base"), values,
                         options.timeout_ms, prove=False, min_values_policy=options.min_values_policy)
            head = _load(options.head, options.paths, catalog, os.path.join(scratch, "head"), values,
                         options.timeout_ms, prove=True, min_values_policy=options.min_values_policy)
        except DiffError as error:
            return CommandOutput(2, "", f"karpenter-policy plan: {error}\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if head.report.errors:
        findings = "".join(f"  {f.file}:{f.line}: {f.rule}: {f.message}\n" for f in head.report.sorted_findings()
                           if f.severity == "error")
        return CommandOutput(1, "", f"karpenter-policy plan: HEAD ({options.head}) has {head.report.errors} "
                             f"error(s); fix them first (`karpenter-policy check`):\n{findings}")
    base_side, head_side = _side(options.base, base), _side(options.head, head)
    ami = TemplateAmiDrift(head_side, answers, pricing.catalog, instance_ids, redact=options.redact)
    reservations = ReservationDriftRules(base_side, head_side, snapshot.node_classes, redact=options.redact,
                                         answers=answers, instance_ids=instance_ids, now=start,
                                         reserved_capacity=reserved_capacity(options.feature_gates))
    network = NetworkDriftRules(base_side, head_side, snapshot.node_classes, answers, instance_ids,
                                redact=options.redact, reservations=reservations)
    rules = DriftRules(base_side, head_side, start, drift_enabled=not options.drift_disabled, horizon=horizon,
                       ami=ami, network=network)
    v1_ami = AmiDriftRules(base_side, head_side, snapshot.node_classes, answers, pricing.catalog, instance_ids, start,
                           redact=options.redact, claim_images=claim_images)
    v1_rules = NodePoolDriftRules(base_side, head_side, start, snapshot.node_classes, horizon=horizon, ami=v1_ami,
                                  network=network, blocks=CapacityBlocks(
                                      snapshot.node_classes, redact=options.redact,
                                      described=answers.capacity_reservations or (), now=start))
    drift: dict[str, NodeDrift] = {name: v1_rules(node) if node.nodepool is not None else rules(node)
                                   for name, node in fleet.nodes.items()}
    table = InstanceTable.of_catalog(pricing.catalog)
    templates = templates_for(head.checked, table, options.min_values_policy)
    timing = Timing(options.node_startup, options.pod_startup)
    checked = dict(zip((t.name for t in templates), (c for c in head.checked if not c.static), strict=True))
    reserved = ReservedLaunches(
        reservations, fleet, pricing.catalog.instance_types, pricing.catalog.region,
        lambda name, over: templates_for([checked[name]], over, options.min_values_policy)[0])
    pdbs = PdbBudgets(fleet.pdbs, fleet.pod_objects)
    replacements = Replacements(templates, fleet.daemons, reserved if reserved.pools else None)
    v1alpha5 = {n: d for n, d in drift.items() if fleet.nodes[n].nodepool is None}
    gate = static_capacity(options.feature_gates)
    static_templates = static_templates_for(head.checked, table, options.min_values_policy)
    launches = static_launches(static_templates)
    try:
        statics = static_nodepools(fleet, drift, base_side, head_side, gate, launches)
    except DiffError as error:  # replicas past what a plan can model
        return CommandOutput(2, "", f"karpenter-policy plan: {error}\n")
    static = static_nodes(fleet, head_side)
    work = static_work(statics, launches, static, static_templates)
    # a static NodePool's drifted node is static drift's (`staticnodepools`): in the waves when it is replaced one
    # for one or removed, never while it waits; an expiring one is a wave's (expiry deletes it first)
    planned = set(work.removed) | set(work.replaced)
    v1 = {n: d for n, d in drift.items() if fleet.nodes[n].nodepool is not None
          and not (n in static and d.drifted and not d.expires and n not in planned)}
    planning = RolloutClock(rollout_timeout.total_seconds())  # one for both models' waves
    rollout = plan_waves(fleet, v1alpha5, templates, start, timing, pdbs, replacements, planning)
    if v1 or work.any:
        budgets = nodepool_budgets(head_side.nodepools)
        rollout = rollout.merged(plan_nodepool_waves(fleet, v1, budgets, start, timing, pdbs, replacements, planning,
                                                     work))
    cost = fleet_cost(pricing.catalog, fleet.nodes.values(), rollout)
    cost.workloads = workload_costs(pricing.catalog, fleet, rollout)
    notes = (rules.notes() + ami.notes() + v1_rules.notes() + reserved.notes(templates) + rollout.notes
             + [str(p) for p in snapshot.problems])
    if fleet.volume_note is not None:
        notes.append(fleet.volume_note)
    if pricing.description:
        notes.insert(0, f"priced with {pricing.description}")
    elif any(n.capacity_type == "spot" for n in fleet.nodes.values()):
        notes.insert(0, "spot nodes priced at the on-demand price (no --spot-prices): an estimate")
    if base.report.errors:
        notes.append(f"BASE ({options.base}) has {base.report.errors} error(s): its invalid provisioners are "
                     "compared as absent (static drift of their nodes is not assessed)")
    same = (base_side.provisioners, base_side.node_templates, base_side.nodepools, base_side.node_classes) == (
        head_side.provisioners, head_side.node_templates, head_side.nodepools, head_side.node_classes)
    budget = consolidation_timeout.total_seconds()
    consolidation = None
    if same and consolidate is not None and budget > 0:
        consolidation = consolidate(snapshot, fleet, head_side, pricing.catalog, start, budget, timing)
    elif same and consolidate is not None:
        notes.append("BASE = HEAD: what consolidation would do now is not worked out (--consolidation-timeout 0s)")
    result = PlanResult(options.base, options.head, start, not options.drift_disabled, fleet, drift, rollout, cost,
                        notes, catalog.region, consolidation, statics)
    stranded = bool(rollout.pending) or rollout.never_finishes
    code = 1 if stranded and not options.allow_stranded else 0
    return CommandOutput(code, render_plan(result, options.output), "")
