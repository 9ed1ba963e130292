"""Leader election's metrics, read from the elector (:class:`~karpenter_policy.kube.lease.LeaderElector`) at each
scrape:

* `leader_election_master_status{name}` — client-go's leader election gauge as controller-runtime registers it
  (sigs.k8s.io/controller-runtime `pkg/metrics/leaderelection.go`, over k8s.io/client-go/tools/leaderelection's
  metrics provider): 1 while this replica acts as the leader of the Lease `name`, else 0 (a standby, or a leader
  past its renew deadline). Summed over the replicas it is never more than 1;
* `karpenter_policy_lease_malformed_total{reason}` — Lease versions this replica found malformed, by the field
  that could not be trusted (`spec`, `holder`, `duration`, `transitions`, `metadata`), and answers to the Lease's
  requests that could not be read at all (`answer`).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from karpenter_policy.kube.lease import LeaderElector


class LeaderElectionMetrics(Collector):
    """See the module docstring."""

    def __init__(self, elector: LeaderElector) -> None:
        self.elector = elector

    def collect(self) -> Iterable[Metric]:
        status = GaugeMetricFamily(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            labels=["name"],
        )
        status.add_metric([self.elector.name], 1.0 if self.elector.is_leader else 0.0)
        yield status
        malformed = CounterMetricFamily(
            "karpenter_policy_lease_malformed",
            "Lease versions found malformed (and unreadable answers about the Lease), by reason.",
            labels=["reason"],
        )
        for reason, count in sorted(self.elector.malformed().items()):
            malformed.add_metric([reason], count)
        yield malformed


__all__ = ["LeaderElectionMetrics"]
