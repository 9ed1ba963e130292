"""What the ports of Karpenter v0.31.1's deprovisioning tests share: the provisioners they run under (compiled by
the real `compile`, once per distinct text), and readers of what a run did.

Every ported test names its Go test (`Describe`/`Context`/`It` text) and the `file:line` of its `It` in
kubernetes-sigs/karpenter at v0.31.1, under pkg/controllers/deprovisioning/. Karpenter's fake instance types become
real EC2 types of the embedded catalog (us-east-1, on-demand price = spot price there): its `leastExpensiveInstance`
is an m5.large, `mostExpensiveInstance` an m5.8xlarge; where a test needs its own offerings (prices by zone, an
unavailable offering) the scene sells :func:`karpenter_policy.testing.instance_type`. A Machine marked Expired,
Drifted or Empty becomes a node that is, as this controller sees it: older than its provisioner's TTL, stamped with
a stale node hash, without pods.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path

from karpenter_policy.kube import objects
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.testing import Scene, compile_policies

#: Where the ported tests are, at tag v0.31.1 of kubernetes-sigs/karpenter.
GO = "pkg/controllers/deprovisioning"
LEAST_EXPENSIVE = "m5.large"
MOST_EXPENSIVE = "m5.8xlarge"
M5 = ["m5.large", "m5.xlarge", "m5.2xlarge", "m5.4xlarge", "m5.8xlarge"]
#: A provisioner requirement: only m5.large (as Karpenter's fake types, no larger type is cheaper per pod).
ONLY_LARGE = "    - key: node.kubernetes.io/instance-type\n      operator: In\n      values: [\"m5.large\"]\n"

_PROVIDER = """  provider:
    subnetSelector:
      karpenter.sh/discovery: ports
    securityGroupSelector:
      karpenter.sh/discovery: ports
"""


def provisioner(
    name: str = "default",
    *,
    capacity_types: Sequence[str] = ("on-demand",),
    consolidation: bool = False,
    ttl_until_expired: int | None = None,
    ttl_after_empty: int | None = None,
    requirements: str = "",
    cpu_limit: int | None = None,
    weight: int | None = None,
) -> str:
    """A Provisioner's YAML (Karpenter's `test.Provisioner` with the options the tests set)."""
    values = ", ".join(f'"{c}"' for c in capacity_types)
    text = (
        f"apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n"
        f"  requirements:\n    - key: karpenter.sh/capacity-type\n      operator: In\n      values: [{values}]\n"
        f"{requirements}"
    )
    if weight is not None:
        text += f"  weight: {weight}\n"
    if cpu_limit is not None:
        text += f"  limits:\n    resources:\n      cpu: {cpu_limit}\n"
    text += _PROVIDER
    if consolidation:
        text += "  consolidation:\n    enabled: true\n"
    if ttl_until_expired is not None:
        text += f"  ttlSecondsUntilExpired: {ttl_until_expired}\n"
    if ttl_after_empty is not None:
        text += f"  ttlSecondsAfterEmpty: {ttl_after_empty}\n"
    return text


class Policies:
    """Compiles provisioners (YAML texts) with the real compile, once per distinct set of texts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._compiled: dict[tuple[str, ...], Path] = {}

    def __call__(self, *provisioners: str) -> Path:
        key = tuple(provisioners)
        if key not in self._compiled:
            source = self.root / f"policies-{len(self._compiled)}"
            source.mkdir(parents=True)
            for i, text in enumerate(provisioners):
                (source / f"p{i}.yaml").write_text(text)
            self._compiled[key] = compile_policies(source, self.root / f"build-{len(self._compiled)}")
        return self._compiled[key]


def run(
    scene: Scene,
    controller: Controller,
    seconds: float,
    until: Callable[[list[ReconcileResult]], bool] | None = None,
) -> list[ReconcileResult]:
    """The scene's controllers, a step a virtual second, for `seconds` or until `until(results so far)` holds."""
    results: list[ReconcileResult] = []
    end = scene.clock.now + seconds
    while scene.clock.now <= end:
        results.append(scene.step(controller))
        if until is not None and until(results):
            break
        scene.advance(1)
    return results


def decided(results: Sequence[ReconcileResult]) -> list[str]:
    """The commands acted on, in order (their log message)."""
    return [r.disrupted.decided for r in results if r.disrupted is not None and r.disrupted.decided]


def blocked(results: Sequence[ReconcileResult]) -> dict[str, str]:
    """Node → why it could not be disrupted, as the last decision that found blocked nodes said."""
    for result in reversed(results):
        if result.disrupted is not None and result.disrupted.blocked:
            return result.disrupted.blocked
    return {}


def held(results: Sequence[ReconcileResult]) -> list[str]:
    return [r.disrupted.held for r in results if r.disrupted is not None and r.disrupted.held]


def gone(scene: Scene, *names: str) -> bool:
    """Every node named is gone from the cluster."""
    nodes = scene.nodes()
    return not any(name in nodes for name in names)


def deleting(scene: Scene) -> list[str]:
    return sorted(name for name, node in scene.nodes().items() if objects.is_deleting(node))


def instance_type(scene: Scene, node: str) -> str:
    found = scene.node(node)
    assert found is not None, node
    return str(objects.labels(found)["node.kubernetes.io/instance-type"])


def replacements(results: Sequence[ReconcileResult]) -> list[str]:
    return [n for r in results if r.disrupted is not None for n in r.disrupted.replacements]


def logged(log: io.StringIO, text: str) -> bool:
    return text in log.getvalue()


__all__ = [
    "GO",
    "blocked",
    "LEAST_EXPENSIVE",
    "M5",
    "MOST_EXPENSIVE",
    "ONLY_LARGE",
    "Policies",
    "decided",
    "deleting",
    "gone",
    "held",
    "instance_type",
    "logged",
    "provisioner",
    "replacements",
    "run",
]
