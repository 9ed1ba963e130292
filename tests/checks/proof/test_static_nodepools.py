"""Static NodePools (`spec.replicas`) in `validate`, `check` and `check --workloads`, as Karpenter v1.14.1 treats
them with its StaticCapacity feature gate off (the default): the `static-nodepool` warning at `spec.replicas`; the
proofs still run on the NodePool, but no workload is placed on it (provisioner.go `NewScheduler`:
`nodepoolutils.IsStatic`), and with no other NodePool a workload is unschedulable with Karpenter's
`no dynamic nodepools found`. tests/data/static-nodepools puts the static NodePool first by name, where the
scheduler would place the pods if it did not leave it out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.admission import check
from karpenter_policy.api.v1.objects import NodePool
from karpenter_policy.checks.options import PolicyOptions
from karpenter_policy.commands.check import check_command
from karpenter_policy.testing import compile_policies
from karpenter_policy.webhook.context import ContextError, ContextSource
from tests.profiles import deterministic

ROOT = Path(__file__).resolve().parents[3]
DATA = ROOT / "tests" / "data" / "static-nodepools"
STATIC, DYNAMIC, NODE_CLASS = (DATA / "nodepools.yaml").read_text().split("---\n")
WARNING = (
    "nodepools.yaml:8:13: warning: NodePool/a-reserved: replicas 2: static NodePool: Karpenter v1.14.1 provisions it "
    "only with the StaticCapacity feature gate (alpha, off by default): with the gate off it gets no node and no "
    "pod is provisioned to it; remove spec.replicas for a NodePool that provisions for pending pods, or run "
    "Karpenter with --feature-gates StaticCapacity=true (this tool models the default) [static-nodepool]"
)


def _policies(tmp_path: Path, *documents: str) -> Path:
    policies = tmp_path / "policies"
    policies.mkdir(parents=True)
    (policies / "nodepools.yaml").write_text("---\n".join(documents))
    return policies


def _check(policies: Path, *, workloads: bool = True) -> tuple[int, list[str]]:
    options = PolicyOptions(workload_paths=(str(DATA / "apps"),)) if workloads else PolicyOptions()
    result = check_command([str(policies)], options=options, quiet=True)
    return result.exit_code, result.stdout.splitlines()


def test_the_static_nodepool_has_its_warning_at_spec_replicas(tmp_path: Path) -> None:
    code, lines = _check(_policies(tmp_path, STATIC, DYNAMIC, NODE_CLASS), workloads=False)
    assert code == 0
    assert [line.removeprefix(f"{tmp_path}/policies/") for line in lines] == [WARNING]


def test_the_warning_can_be_silenced_on_the_line_above(tmp_path: Path) -> None:
    silenced = STATIC.replace("  replicas: 2", "  # karpenter-policy: disable=static-nodepool\n  replicas: 2")
    code, lines = _check(_policies(tmp_path, silenced, DYNAMIC, NODE_CLASS), workloads=False)
    assert code == 0 and lines == []


def test_workloads_land_on_the_dynamic_nodepool_never_on_the_static_one_before_it(tmp_path: Path) -> None:
    """As kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go:2859 (should still provision
    dynamic NodeClaims when there are both Static and Dynamic NodePools)."""
    policies = _policies(tmp_path, STATIC, DYNAMIC, NODE_CLASS)
    result = check_command([str(policies)], "json", PolicyOptions(workload_paths=(str(DATA / "apps"),)))
    assert result.exit_code == 0, result.stdout
    report = json.loads(result.stdout)
    (placement,) = report["workloads"]
    assert placement["provisioner"] == "NodePool/dynamic"
    nodes = report["capacity"]["nodes"]
    assert nodes and {n["provisioner"] for n in nodes} == {"NodePool/dynamic"}


def test_with_only_the_static_nodepool_the_workload_is_unschedulable_in_karpenters_words(tmp_path: Path) -> None:
    """As kubernetes-sigs/karpenter v1.14.1 pkg/controllers/provisioning/suite_test.go:2848 (should not create
    NodeClaims for StaticNodePool), with `Schedule`'s words on ErrNodePoolsNotFound (provisioner.go:409)."""
    code, lines = _check(_policies(tmp_path, STATIC, NODE_CLASS))
    assert code == 1
    (error,) = [line for line in lines if "[workload-unschedulable]" in line]
    assert error.endswith(
        "apps/web.yaml:8:3: error: Deployment/web: none of its 2 replicas can be placed: no NodePool can launch a "
        "node for it: no dynamic nodepools found: NodePool/a-reserved: static NodePool (spec.replicas): Karpenter "
        "v1.14.1 never schedules pods onto it; its nodes are its replicas, launched only with the StaticCapacity "
        "feature gate (alpha, off by default) [workload-unschedulable]"
    )


def test_the_proofs_still_run_on_a_static_nodepool(tmp_path: Path) -> None:
    """Its requirements are proven as any NodePool's: a conflict is an error whether or not it is static."""
    conflicting = STATIC.replace('values: ["c", "m"]', 'values: ["zz"]')
    code, lines = _check(_policies(tmp_path, conflicting, NODE_CLASS), workloads=False)
    assert code == 1 and any("NodePool/a-reserved" in line and "error" in line for line in lines)


_BASE = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "p"},
    "spec": {"template": {"spec": {
        "requirements": [],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }}},
}


@deterministic(50)
@given(replicas=st.one_of(st.none(), st.integers(min_value=0, max_value=2**31)))
def test_every_admitted_replicas_makes_the_nodepool_static_and_warned(replicas: int | None) -> None:
    """`IsStatic` is `Spec.Replicas != nil` (core pkg/utils/nodepool/nodepool.go:43): 0 is static too."""
    spec = dict(_BASE["spec"])  # type: ignore[arg-type]
    if replicas is not None:
        spec["replicas"] = replicas
    document = {**_BASE, "spec": spec}
    found = [v for v in check(document) if v.rule == "static-nodepool"]
    pool = NodePool.from_document(document)
    assert pool.is_static is (replicas is not None) and pool.replicas == replicas
    assert len(found) == (replicas is not None)
    assert all(v.path == ("spec", "replicas") and v.severity == "warning" for v in found)


def test_compile_leaves_a_dynamic_nodepools_set_as_before(tmp_path: Path) -> None:
    """No `replicas` key in a dynamic NodePool's set: its content and hash are those of the code before."""
    build = compile_policies(_policies(tmp_path, STATIC, DYNAMIC, NODE_CLASS), tmp_path / "build")
    sets = build / "constraintsets"
    assert '"replicas":2' in (sets / "nodepool.a-reserved.json").read_text().replace(" ", "")
    assert "replicas" not in (sets / "nodepool.dynamic.json").read_text()
    shutil.rmtree(build)


PINNING = """\
apiVersion: karpenter-policy.dev/v1alpha1
kind: PinningPolicy
metadata:
  name: reserved-web
spec:
  rules:
    - name: web-on-reserved
      match:
        kinds: [Deployment]
      nodePool: a-reserved
"""


def test_a_pinning_rule_naming_a_static_nodepool_is_a_conflict_in_check_and_the_webhook(tmp_path: Path) -> None:
    """Pinning pods to a static NodePool pins them where Karpenter v1.14.1 (StaticCapacity off) provisions nothing:
    `pinning-conflict` at the rule, and the webhook refuses the rules (its context does not load)."""
    policies = _policies(tmp_path, STATIC, DYNAMIC, NODE_CLASS)
    (policies / "pinning.yaml").write_text(PINNING)
    code, lines = _check(policies)
    conflicts = [line for line in lines if line.endswith("[pinning-conflict]")]
    assert code == 1 and len(conflicts) == 1, lines
    assert "pinning.yaml:7:7: error: PinningPolicy/reserved-web rule web-on-reserved names NodePool 'a-reserved', " \
           "a static NodePool (spec.replicas)" in conflicts[0]
    (policies / "pinning.yaml").write_text(PINNING.replace("a-reserved", "dynamic"))
    assert not [line for line in _check(policies)[1] if "[pinning-conflict]" in line]
    (policies / "pinning.yaml").write_text(PINNING)
    build = compile_policies(_policies(tmp_path / "c", STATIC, DYNAMIC, NODE_CLASS), tmp_path / "build")
    try:
        ContextSource(constraints=str(build), pinning=(str(policies / "pinning.yaml"),)).load()
    except ContextError as error:
        assert "names NodePool 'a-reserved', a static NodePool (spec.replicas)" in str(error)
    else:
        raise AssertionError("the webhook loaded a rule pinning pods to a static NodePool")
