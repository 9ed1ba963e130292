"""The policy context and pinning rules, reloaded when their files change (as the serving certificate is).

A `Poller` fingerprints every file `ContextSource.load` reads — the policy repository (`--policies`), the compiled
constraint sets or the ConfigMap mounted in their place (`--constraints`), the pinning rules (`--pinning`) —
every `interval` seconds. On a change it loads them again, exactly as at start-up, and hands the new context and
rules to `apply` (the webhook builds a new checker and replaces its worker processes: `command.Webhook`). A
version that does not load — a policy with errors, a constraint set whose hash does not match, a pinning rule
naming an unknown provisioner, a half-written file — is refused: logged once, with its reason, counted in
`karpenter_policy_webhook_context_reloads_total{result="error"}`, and the last good version keeps serving; the
next change is tried again. A constraint set is checked as the controller checks it (`api.constraintcheck`): its
refusal is one line naming the set, the field and why, once per version, never a traceback.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from karpenter_policy.webhook.context import ContextError, ContextSource, PolicyContext
from karpenter_policy.webhook.metrics import Metrics
from karpenter_policy.webhook.pinning import PolicyPinner
from karpenter_policy.webhook.watch import Poller, fingerprint

log = logging.getLogger(__name__)

Apply = Callable[[PolicyContext, PolicyPinner], None]


class ContextReloader:
    """Watches a `ContextSource`'s files: `load` at start-up, then `check` (polled by `start`) reloads and
    applies what changed."""

    def __init__(self, source: ContextSource, apply: Apply, metrics: Metrics | None, interval: float) -> None:
        self.source, self._apply, self.metrics = source, apply, metrics
        self._stamp: bytes | None = None
        self._refused: bytes | None = None
        self._lock = threading.Lock()
        self._poller = Poller("context-reloader", interval, self.check)
        self.reloads = 0

    def _fingerprint(self) -> bytes:
        return fingerprint(self.source.files())

    def load(self) -> tuple[PolicyContext, PolicyPinner]:
        """The version on disk now (start-up: not applied, and a ContextError is the caller's to report). The
        fingerprint is taken first: a change made while loading is seen by the next check."""
        with self._lock:
            stamp = self._fingerprint()
            loaded = self.source.load()
            self._stamp = stamp
            return loaded

    def check(self) -> bool:
        """Reload when the files changed since the version in use; True when a new version was applied."""
        with self._lock:
            stamp = self._fingerprint()
            if stamp in (self._stamp, self._refused):
                return False
            try:
                context, pinner = self.source.load()
            except ContextError as error:
                self._refused = stamp
                reason = str(error)  # one line (a constraint set's refusal), or a report of policy findings
                log.warning(
                    "%s changed but does not load; keeping the version in use:%s%s",
                    self.source.describe(),
                    "\n" if "\n" in reason else " ",
                    reason,
                )
                self._count("error")
                return False
            self._apply(context, pinner)
            self._stamp, self._refused = stamp, None
            self.reloads += 1
            self._count("ok")
            log.info(
                "reloaded %s: %d node templates, %d provisioners, %d NodePools, %d pinning rules",
                self.source.describe(),
                len(context.node_templates),
                len(context.provisioner_taints),
                len(context.nodepool_taints),
                len(pinner),
            )
            return True

    def _count(self, result: str) -> None:
        if self.metrics is not None:
            self.metrics.context_reloads.labels(result).inc()

    def start(self) -> None:
        self._poller.start()

    def stop(self) -> None:
        self._poller.stop()
