"""The public testing API: scenes to run the controllers on, in virtual or real time (see docs/testing.md).

Tests, benchmarks and simulations build what they need with :class:`Scene` — constraint sets, nodes of a given
type, zone, capacity type, age, labels and annotations (nodes that never initialize, nodes without the termination
finalizer), pods with requests, owners (or exact owner references), affinity, priorities and annotations (and pods
that linger terminating once deleted until :meth:`Scene.finish_pod` — or for ever, stuck —, static pods' mirrors
owned by their Node), PodDisruptionBudgets, DaemonSets, deployments that replace evicted pods — on the in-memory
cluster and cloud (or moto's EC2: :class:`MotoCloud`), and run the real controllers on it (:meth:`Scene.run` in
virtual time; :meth:`Scene.runner` in real time, with :meth:`Scene.wait` for what it does). What goes wrong comes
from outside: offerings unavailable from the start, launches that fail, instances stopped behind the controller's
back, interruption messages on :attr:`Scene.queue` (written by :mod:`eventbridge`); what happens is seen: every
Eviction and its answer (:class:`ClusterCall`), an action run in the middle of a step (:meth:`Scene.on_call`), the
controller's metrics and the unavailable offerings. :func:`instance_type` sells a catalog type at the offerings,
prices and availability a test needs; :func:`compile_policies` compiles a policy directory as `karpenter-policy
compile` does, for a scene's constraint sets. The kinds (:data:`NODE`, :data:`POD` …) name what
`scene.cluster` holds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from karpenter_policy.cloud.errors import CloudError, InsufficientCapacity
from karpenter_policy.cloud.provider import (
    STATE_RUNNING,
    STATE_SHUTTING_DOWN,
    STATE_STOPPED,
    STATE_STOPPING,
    STATE_TERMINATED,
    Instance,
)
from karpenter_policy.fakes import eventbridge
from karpenter_policy.fakes.cloud import FakeCloudProvider
from karpenter_policy.fakes.cluster import ClusterCall, MemoryCluster
from karpenter_policy.fakes.queue import FakeQueue
from karpenter_policy.kube.objects import (
    DAEMON_SET,
    EVENT,
    LEASE,
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    POD_DISRUPTION_BUDGET,
    STORAGE_CLASS,
    Kind,
    Obj,
)
from karpenter_policy.model.instancetypes import InstanceType, Offering
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.options import ControllerOptions
from karpenter_policy.reconcile.result import ReconcileResult
from karpenter_policy.simulate.aws import MotoCloud
from karpenter_policy.simulate.clock import VirtualClock
from karpenter_policy.simulate.scene import (
    CLUSTER,
    EPOCH,
    LINGER_FINALIZER,
    MIRROR_ANNOTATION,
    NEVER_INITIALIZED_TAINT,
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
    from karpenter_policy.commands.flags import CompileFlags

    target = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="scene-")) / "build"
    done = compile_command(CompileFlags(paths=(str(policies),), out=str(target), quiet=True))
    if done.exit_code != 0:
        raise ValueError(f"{policies} does not compile:\n{done.stdout}{done.stderr}")
    return target


__all__ = [
    "CLUSTER",
    "DAEMON_SET",
    "EPOCH",
    "EVENT",
    "LEASE",
    "LINGER_FINALIZER",
    "MIRROR_ANNOTATION",
    "NEVER_INITIALIZED_TAINT",
    "NODE",
    "PERSISTENT_VOLUME",
    "PERSISTENT_VOLUME_CLAIM",
    "POD",
    "POD_DISRUPTION_BUDGET",
    "REGION",
    "STATE_RUNNING",
    "STATE_SHUTTING_DOWN",
    "STATE_STOPPED",
    "STATE_STOPPING",
    "STATE_TERMINATED",
    "STORAGE_CLASS",
    "CloudError",
    "ClusterCall",
    "Controller",
    "ControllerOptions",
    "Deployment",
    "FakeCloudProvider",
    "FakeQueue",
    "InstanceType",
    "Instance",
    "InsufficientCapacity",
    "Kind",
    "MemoryCluster",
    "MotoCloud",
    "Obj",
    "Offering",
    "RealClock",
    "ReconcileResult",
    "Scene",
    "VirtualClock",
    "compile_policies",
    "eventbridge",
    "instance_type",
]
