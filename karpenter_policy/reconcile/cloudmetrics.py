"""The cloud provider's calls, measured once for every controller: Karpenter's `metrics.Decorate(cloudProvider)`.

:class:`MeasuredCloud` wraps a :class:`~karpenter_policy.cloud.provider.CloudProvider` (the controller wraps the
one it is given, so every controller calls through it) and records, for each call:

* `karpenter_cloudprovider_duration_seconds{controller, method, provider}` — its duration (the Go client's default
  buckets, as Karpenter's histogram has none of its own);
* `karpenter_cloudprovider_errors_total{controller, method, provider, error}` — a call that raised, with
  Karpenter's error label: `InsufficientCapacityError`, `NodeClaimNotFoundError` (the instance is gone),
  `NodeClassNotReadyError` (the node template cannot launch anything: no subnet, security group or image), else "".

`controller` is the controller the call is made for (:data:`~karpenter_policy.reconcile.metrics.CONTROLLER`, set by
:meth:`Metrics.reconciling`), `provider` is `aws`, `method` Karpenter's name of the call: `Create` (create),
`Delete` (delete), `Get` (get), `List` (list), `GetInstanceTypes` (instance_types) and `IsDrifted` (current_image:
the image a node would get now, which drift compares). `mark_unavailable` is not a call to the cloud (the
provider's cache of offerings that lacked capacity) and is not measured.

The instance types the provider answers with are exported at each scrape, as Karpenter's AWS provider does when
it lists them: `karpenter_cloudprovider_instance_type_cpu_cores{instance_type}`,
`karpenter_cloudprovider_instance_type_memory_bytes{instance_type}` (the type's memory) and
`karpenter_cloudprovider_instance_type_price_estimate{instance_type, capacity_type, region, zone}` (on-demand
per region with an empty zone, spot per zone).
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from karpenter_policy.cloud.errors import ConfigurationError, InsufficientCapacity, NotFound
from karpenter_policy.cloud.provider import CloudProvider, Instance, LaunchRequest, Network, NodeClassResolution
from karpenter_policy.model import labels as wk
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.reconcile.exposition import ExactCounter
from karpenter_policy.reconcile.metrics import CONTROLLER, GO_DEFAULT_BUCKETS, Metrics

PROVIDER = "aws"
_T = TypeVar("_T")


def error_label(error: Exception) -> str:
    """Karpenter's `error` label of a failed call (`cloudprovider/metrics.GetErrorTypeLabelValue`)."""
    if isinstance(error, InsufficientCapacity):
        return "InsufficientCapacityError"
    if isinstance(error, NotFound):
        return "NodeClaimNotFoundError"
    if isinstance(error, ConfigurationError):
        return "NodeClassNotReadyError"
    return ""


class MeasuredCloud:
    """See the module docstring. Anything else of the provider (a fake's test helpers) passes through."""

    def __init__(self, cloud: CloudProvider, metrics: Metrics, region: str) -> None:
        self.inner = cloud
        self.region = region
        self.duration = Histogram(
            "karpenter_cloudprovider_duration_seconds",
            "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
            ["controller", "method", "provider"], buckets=GO_DEFAULT_BUCKETS, registry=None,
        )
        self.errors = ExactCounter(
            "karpenter_cloudprovider_errors_total", "Total number of errors returned from CloudProvider calls.",
            ["controller", "method", "provider", "error"],
        )
        self._types: dict[str, InstanceType] = {}
        self._lock = threading.Lock()
        metrics.use("cloudprovider", _Families(self))

    def _measure(self, method: str, call: Callable[[], _T]) -> _T:
        controller = CONTROLLER.get()
        started = time.perf_counter()
        try:
            return call()
        except Exception as error:
            self.errors.labels(controller, method, PROVIDER, error_label(error)).inc()
            raise
        finally:
            self.duration.labels(controller, method, PROVIDER).observe(time.perf_counter() - started)

    def create(self, request: LaunchRequest) -> Instance:
        """Launch through the inner provider, measured as Karpenter's `Create`."""
        return self._measure("Create", lambda: self.inner.create(request))

    def delete(self, instance_id: str) -> None:
        """Terminate through the inner provider, measured as Karpenter's `Delete`."""
        self._measure("Delete", lambda: self.inner.delete(instance_id))

    def get(self, instance_id: str) -> Instance | None:
        """Look the instance up through the inner provider, measured as Karpenter's `Get`."""
        return self._measure("Get", lambda: self.inner.get(instance_id))

    def list(self, cluster_name: str) -> builtins.list[Instance]:
        """List the cluster's instances through the inner provider, measured as Karpenter's `List`."""
        return self._measure("List", lambda: self.inner.list(cluster_name))

    def instance_types(
        self, region: str | None = None, provider: Mapping[str, Any] | None = None
    ) -> builtins.list[InstanceType]:
        """The inner provider's instance types, measured as Karpenter's `GetInstanceTypes` (and remembered for the
        instance-type gauges)."""
        found = self._measure("GetInstanceTypes", lambda: self.inner.instance_types(region, provider))
        with self._lock:
            self._types.update((t.name, t) for t in found)
        return found

    def mark_unavailable(self, instance_type: str, zone: str, capacity_type: str, reason: str) -> None:
        """Mark the offering unavailable in the inner provider (not a cloud call: not measured)."""
        self.inner.mark_unavailable(instance_type, zone, capacity_type, reason)

    def current_image(self, instance_type: str, provider: Mapping[str, Any] | None = None) -> str | None:
        """The inner provider's current image for the type, measured as Karpenter's `IsDrifted`."""
        return self._measure("IsDrifted", lambda: self.inner.current_image(instance_type, provider))

    def node_class(self, provider: Mapping[str, Any] | None) -> NodeClassResolution:
        """The inner provider's answer (Karpenter's node class status controller does not call its cloud provider:
        not measured)."""
        return self.inner.node_class(provider)

    def network(self, provider: Mapping[str, Any] | None) -> Network | None:
        """The inner provider's subnets and security groups, measured as Karpenter's `IsDrifted`."""
        return self._measure("IsDrifted", lambda: self.inner.network(provider))

    def unlaunchable(self, provider: Mapping[str, Any] | None) -> str | None:
        """The inner provider's answer (a cached fact, not a call Karpenter's metrics name: not measured)."""
        return self.inner.unlaunchable(provider)

    def collect_launch_templates(self, cluster_name: str) -> builtins.list[str]:
        """The inner provider's launch-template collection (no Karpenter metric names it: not measured)."""
        return self.inner.collect_launch_templates(cluster_name)  # not a call Karpenter's metrics name

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def known_types(self) -> builtins.list[InstanceType]:
        """Every instance type seen in an answer so far, by name."""
        with self._lock:
            return [self._types[name] for name in sorted(self._types)]


class _Families(Collector):
    """The calls' families and the instance types' gauges, read at each scrape."""

    def __init__(self, cloud: MeasuredCloud) -> None:
        self.cloud = cloud

    def collect(self) -> Iterable[Metric]:
        yield from self.cloud.duration.collect()
        yield from self.cloud.errors.collect()
        cores = GaugeMetricFamily(
            "karpenter_cloudprovider_instance_type_cpu_cores", "VCPUs cores for a given instance type.",
            labels=["instance_type"],
        )
        memory = GaugeMetricFamily(
            "karpenter_cloudprovider_instance_type_memory_bytes", "Memory, in bytes, for a given instance type.",
            labels=["instance_type"],
        )
        prices = GaugeMetricFamily(
            "karpenter_cloudprovider_instance_type_price_estimate",
            "Estimated hourly price used when making informed decisions on node cost calculation. This is updated "
            "once on startup and then every 12 hours.",
            labels=["instance_type", "capacity_type", "region", "zone"],
        )
        region = self.cloud.region
        for instance_type in self.cloud.known_types():
            name = instance_type.name
            cores.add_metric([name], instance_type.vcpu)
            memory.add_metric([name], instance_type.memory_mib * 1024 * 1024)
            priced: dict[tuple[str, str], float] = {}
            for offering in instance_type.offerings:
                if offering.price is None:
                    continue
                zone = "" if offering.capacity_type == wk.CAPACITY_ON_DEMAND else offering.zone
                priced.setdefault((offering.capacity_type, zone), offering.price)
            for (capacity_type, zone), price in sorted(priced.items()):
                prices.add_metric([name, capacity_type, region, zone], price)
        yield from (cores, memory, prices)


__all__ = ["PROVIDER", "MeasuredCloud", "error_label"]
