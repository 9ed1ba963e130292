"""The public testing API: scenes to run the controllers on, in virtual or real time (see docs/testing.md).

Tests, benchmarks and simulations build what they need with :class:`Scene` — constraint sets, nodes of a given
type, zone, capacity type, age, labels and annotations, pods with requests, owners, affinity, priorities and
annotations (and pods that linger terminating once deleted until :meth:`Scene.finish_pod` — or for ever, stuck —,
static pods' mirrors owned by their Node), PodDisruptionBudgets, DaemonSets, deployments that replace evicted pods —
on the in-memory cluster and cloud (or moto's EC2: :class:`MotoCloud`), and run the real controllers on it
(:meth:`Scene.run` in virtual time; :meth:`Scene.runner` in real time, with :meth:`Scene.wait` for what it does);
:func:`instance_type` sells a catalog type at the offerings, prices and availability a test needs.
:func:`compile_policies` compiles a policy directory as `karpenter-policy compile` does, for a scene's constraint
sets.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from karpenter_policy.simulate.aws import MotoCloud
from karpenter_policy.simulate.clock import VirtualClock
from karpenter_policy.simulate.scene import (
    CLUSTER,
    EPOCH,
    REGION,
    Deployment,
    RealClock,
    Scene,
    instance_type,
)


def compile_policies(policies: str | Path, out: str | Path | None = None) -> Path:
    """Compile a policy directory as `karpenter-policy compile` does; the output directory (a temporary one when
    `out` is None). Raises ValueError with the report when it does not compile."""
    from karpenter_policy.commands.compile.compiler import compile_command

    target = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="scene-")) / "build"
    done = compile_command([str(policies)], str(target), quiet=True)
    if done.exit_code != 0:
        raise ValueError(f"{policies} does not compile:\n{done.stdout}{done.stderr}")
    return target


__all__ = [
    "CLUSTER",
    "EPOCH",
    "REGION",
    "Deployment",
    "MotoCloud",
    "RealClock",
    "Scene",
    "VirtualClock",
    "compile_policies",
    "instance_type",
]
