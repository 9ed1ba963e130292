"""The control plane beside the test API server: the workload controllers (`workloads`), the kube-scheduler
stand-in (`scheduler`) and the kubelets (`kubelet`), run one after the other by one thread, as clients of the
server over HTTP with the admin token (RBAC never refuses them, as system:masters).

The thread runs a pass whenever the server stored a change (``ApiEmulator.written``), when a kubelet is due to
join, and at least every ``resync`` seconds; a pass reads the cluster and writes only what differs, so the
passes a pass's own writes cause find nothing to do. A pass that fails (the server going away at shutdown) is
logged and the next one tries again.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from karpenter_policy.kube.client import KubeCluster

from .kubelet import Kubelets
from .rbac import ADMIN_TOKEN
from .scheduler import SchedulerStandIn
from .workloads import Workloads

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControlPlaneOptions:
    """``join_after``: seconds before a Node's kubelet joins; ``never_join``: instance types whose never does."""

    join_after: float = 1.0
    never_join: frozenset[str] = frozenset()
    resync: float = 1.0


class ControlPlane:
    def __init__(
        self, url: str, written: threading.Event, options: ControlPlaneOptions, ca_file: str | None = None
    ) -> None:
        self.cluster = KubeCluster.from_url(url, token=ADMIN_TOKEN, ca_file=ca_file, retries=0)
        self.written = written
        self.options = options
        self.workloads = Workloads(self.cluster)
        self.scheduler = SchedulerStandIn(self.cluster)
        self.kubelets = Kubelets(self.cluster, options.join_after, options.never_join)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="control-plane", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.written.set()
        self._thread.join(30)
        self.cluster.close()

    def _run(self) -> None:
        wait = 0.0
        while not self._stop.is_set():
            self.written.wait(wait)
            self.written.clear()
            if self._stop.is_set():
                return
            try:
                self.workloads.sync()
                self.scheduler.sync()
                due = self.kubelets.sync()
            except Exception:  # a bug, or the server going away: logged, and the next pass tries again
                log.exception("the control plane's pass failed")
                due = None
            wait = min(self.options.resync, due) if due is not None else self.options.resync
