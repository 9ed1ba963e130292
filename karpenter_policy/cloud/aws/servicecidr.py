"""The cluster's service CIDR, read from EKS as Karpenter v1.14.1 reads it, and checked at the edge.

AL2023 nodes boot with nodeadm, whose NodeConfig names the cluster's service CIDR (`userdata.node_config`).
Karpenter v1 asks EKS once, on the first EC2NodeClass that needs it (`DefaultProvider.ResolveClusterCIDR`, aws
pkg/providers/launchtemplate/launchtemplate.go at v1.14.1, called from the node class's validation,
pkg/controllers/nodeclass/validation.go): `DescribeCluster`'s `cluster.kubernetesNetworkConfig.serviceIpv4Cidr`,
else its `serviceIpv6Cidr`, else "no CIDR found in DescribeCluster response"; until then the class is not ready
and its NodePools launch nothing. :class:`ServiceCidr` does the same through boto3: the first good answer is kept
for the process's life (a cluster's service CIDR cannot change); a failure — the call failing, or an answer
without a CIDR or with one that is not an IP network — raises :class:`~karpenter_policy.cloud.CloudError` and is
remembered for `retry` seconds, so that a pass that asks every second does not call EKS every second (an answer
botocore cannot even parse into the model's shape is such a failure).
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable
from typing import Any

from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.errors import CloudError

#: How long a failed resolution is remembered before EKS is asked again.
RETRY = 30.0
OPERATION = "DescribeCluster"


def service_cidr_of(answer: Any) -> str | None:
    """The service CIDR a DescribeCluster answer names (IPv4 first, as Karpenter), None when it names no valid
    one: any shape other than `{cluster: {kubernetesNetworkConfig: {serviceIpv4Cidr | serviceIpv6Cidr: str}}}`
    with an IP network of the matching family is none."""
    cluster = answer.get("cluster") if isinstance(answer, dict) else None
    config = cluster.get("kubernetesNetworkConfig") if isinstance(cluster, dict) else None
    if not isinstance(config, dict):
        return None
    for key, version in (("serviceIpv4Cidr", 4), ("serviceIpv6Cidr", 6)):
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, str) or len(value) > 64:
            return None
        try:
            network = ipaddress.ip_network(value, strict=True)
        except ValueError:
            return None
        return value if network.version == version else None
    return None


class ServiceCidr:
    """The service CIDR of cluster `name` (see the module docstring); `given` is used as is, without asking EKS
    (as Karpenter's own tests store it)."""

    def __init__(
        self, api: AwsApi, name: str | None, clock: Callable[[], float], given: str | None = None,
        retry: float = RETRY,
    ) -> None:
        self._api = api
        self._name = name
        self._clock = clock
        self._retry = retry
        self._lock = threading.Lock()
        self._value = given
        self._failed: tuple[float, CloudError] | None = None  # (when, why)

    def get(self) -> str:
        """The CIDR; raises CloudError when it cannot be told (see the module docstring)."""
        with self._lock:
            if self._value is not None:
                return self._value
            if self._failed is not None and self._clock() - self._failed[0] < self._retry:
                raise self._failed[1]
        try:
            value = self._describe()
        except CloudError as error:
            with self._lock:
                self._failed = (self._clock(), error)
            raise
        with self._lock:
            self._value, self._failed = value, None
        return value

    def _describe(self) -> str:
        if not self._name:
            raise CloudError("EKS", "the cluster's name is not known: its service CIDR cannot be asked", OPERATION)
        answer = self._api.call("eks", "describe_cluster", name=self._name)  # a misshapen answer: CloudError
        value = service_cidr_of(answer)
        if value is None:
            cluster = answer.get("cluster") if isinstance(answer, dict) else None
            config = cluster.get("kubernetesNetworkConfig") if isinstance(cluster, dict) else None
            shown = repr(config)[:120] if config is not None else "none"
            raise CloudError(
                self._api.endpoint("eks"),
                f"no service CIDR in the answer for cluster {self._name!r} (kubernetesNetworkConfig: {shown})",
                OPERATION,
            )
        return value


__all__ = ["RETRY", "ServiceCidr", "service_cidr_of"]
