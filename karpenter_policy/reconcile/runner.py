"""Driving the controller in real time: informers for input, a pass whenever there is something to do.

The runner keeps informers on pods, nodes, DaemonSets and namespaces (and the constraint-set ConfigMap, when the
sets come from one), so that a pass reads caches instead of listing. A provisionable pod in a watch event
triggers the controller's batcher at once (the event's time is the pod's arrival); the runner then sleeps until
the batch window closes — a burst of a thousand pod events costs a thousand triggers, not a thousand passes —
and runs a pass then. It also runs one when the ConfigMap changes, when a retry is due, and at least every
`resync` seconds (constraint-set directory polling, nodes to label initialized, launches to settle).

With a :class:`~karpenter_policy.kube.lease.LeaderElector`, only the replica holding the lease runs passes; the
others keep their caches warm to take over at once. A replica that becomes the leader first picks up what the
previous one left (:meth:`Controller.took_over`: adoption and garbage collection at its next pass). A pass that
fails unexpectedly is logged with its traceback and retried after a pause; the loop never dies of it.

With an :class:`~karpenter_policy.reconcile.interruption.InterruptionHandler`, a second thread polls the
interruption queue (long polling) while this replica leads, matching messages against the Node cache; it too
survives any failure (a queue that cannot be read is tried again after a pause).
"""

from __future__ import annotations

import threading

from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster, WatchEvent
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.lease import LeaderElector
from karpenter_policy.kube.objects import Kind
from karpenter_policy.reconcile import logs
from karpenter_policy.reconcile.constraints import ConfigMapSource
from karpenter_policy.reconcile.controller import Controller
from karpenter_policy.reconcile.interruption.handler import InterruptionHandler
from karpenter_policy.reconcile.state.pods import is_provisionable
from karpenter_policy.reconcile.state.view import InformerView

RUNNER = logs.logger("runner")
DEFAULT_RESYNC = 10.0
FAILURE_PAUSE = 5.0
#: Pause after the interruption queue could not be read (a long poll usually paces the loop).
QUEUE_ERROR_PAUSE = 5.0


class Runner:
    """See the module docstring: :meth:`run` until :meth:`stop` (from another thread or a signal handler)."""

    def __init__(
        self,
        controller: Controller,
        cluster: Cluster,
        *,
        elector: LeaderElector | None = None,
        resync: float = DEFAULT_RESYNC,
        interruption: InterruptionHandler | None = None,
    ) -> None:
        self.controller = controller
        self.elector = elector
        self.resync = resync
        self.interruption = interruption
        self.clock = controller.clock  # a pass's `due` is on the controller's clock
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self.view = InformerView(cluster, on_event=self._on_event)
        controller.view = self.view
        self.configmap: Informer | None = None
        source = controller.constraints
        if isinstance(source, ConfigMapSource):
            informer = Informer(
                cluster,
                objects.CONFIG_MAP,
                namespace=source.namespace,
                field_selector=f"metadata.name={source.name}",
                on_event=lambda _: self._wake.set(),
            )
            source.use_reader(lambda: informer.get(source.name, source.namespace))
            self.configmap = informer
        if interruption is not None:
            interruption.use_nodes(self.view.informers[objects.NODE].items)

    def _informers(self) -> list[Informer]:
        found = list(self.view.informers.values())
        return [*found, self.configmap] if self.configmap is not None else found

    def _synced(self) -> bool:
        """Start the informers and wait until the required ones have listed once (False: stopped first)."""
        for informer in self._informers():
            informer.start()
        required = self.view.required() + ([self.configmap] if self.configmap is not None else [])
        for informer in required:
            while not informer.wait_synced(0.5):
                if self._stopping.is_set():
                    return False
        return True

    def _on_event(self, kind: Kind, event: WatchEvent) -> None:
        if kind != objects.POD or event.type not in ("ADDED", "MODIFIED"):
            return
        if is_provisionable(event.object, self.controller.options.unschedulable_only):
            opens = self.controller.batcher.due() is None
            self.controller.notify(objects.uid(event.object))
            if opens:  # the runner may be asleep until the next resync: the window it opened must close on time
                self._wake.set()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()

    def _leading(self) -> bool:
        return not self._stopping.is_set() and (self.elector is None or self.elector.is_leader)

    def _poll_interruptions(self, handler: InterruptionHandler) -> None:
        while not self._stopping.is_set():
            if self.elector is not None and not self.elector.is_leader:
                self.elector.wait_for_leadership(1.0)
                continue
            try:
                result = handler.poll_once(acting=self._leading)
            except Exception:  # a bug must not end interruption handling
                RUNNER.exception("interruption poll failed; trying again in %.0f s", FAILURE_PAUSE)
                self._stopping.wait(FAILURE_PAUSE)
                continue
            if result.error is not None:
                self._stopping.wait(QUEUE_ERROR_PAUSE)

    def run(self) -> None:
        """Start the informers, wait until they have listed, then pass after pass until :meth:`stop`."""
        try:
            if not self._synced():
                return
            if self.interruption is not None:
                handler = self.interruption
                threading.Thread(
                    target=self._poll_interruptions, args=(handler,), name="interruption", daemon=True
                ).start()
            leading = False
            while not self._stopping.is_set():
                if self.elector is not None and not self.elector.is_leader:
                    leading = False
                    self.elector.wait_for_leadership(1.0)
                    continue
                if not leading:
                    leading = True
                    self.controller.took_over()
                timeout = self.resync
                try:
                    result = self.controller.reconcile_once()
                except Exception:  # a bug or an unforeseen failure must not end the controller
                    RUNNER.exception("reconcile pass failed; trying again in %.0f s", FAILURE_PAUSE)
                    timeout = FAILURE_PAUSE
                else:
                    if result.due is not None:
                        timeout = min(max(result.due - self.clock(), 0.0), self.resync)
                self._wake.wait(timeout)
                self._wake.clear()
        finally:
            for informer in self._informers():
                informer.stop()


def run_in_thread(runner: Runner) -> threading.Thread:
    thread = threading.Thread(target=runner.run, name="reconcile", daemon=True)
    thread.start()
    return thread


__all__ = ["DEFAULT_RESYNC", "Runner", "run_in_thread"]
