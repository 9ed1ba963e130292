"""The process's own metrics for the long-running commands (`reconcile`, `webhook`): one definition, used by both.

A Go controller such as Karpenter exposes its client library's `process_*` and `go_*` families; these are
prometheus-client's counterparts, added to the command's own registry (each command keeps a registry of its own,
so the client's global one, which would carry them, is not served):

* `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
  `process_open_fds`, `process_max_fds`, `process_start_time_seconds` (read from /proc at each scrape: Linux only,
  absent elsewhere);
* `python_info{implementation, major, minor, patchlevel, version}`;
* `python_gc_objects_collected_total{generation}`, `python_gc_objects_uncollectable_total{generation}`,
  `python_gc_collections_total{generation}` (the runtime's garbage collector, as `go_gc_*` is Go's).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector


def register_process_metrics(registry: CollectorRegistry) -> None:
    """Add the process and runtime collectors (see the module docstring) to ``registry``."""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


__all__ = ["register_process_metrics"]
