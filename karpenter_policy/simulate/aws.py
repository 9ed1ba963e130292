"""EC2 for simulations and scenes: moto's server in the process, the account the node templates select, and the
AWS provider — the code `reconcile` runs — pointed at it, every time source on the given clock.

:class:`MotoCloud` builds, in this order: moto's server (`server`), the account the constraint sets' node
templates select (`account`: subnets, security groups, images, launch templates), the cluster in moto's EKS
(`SERVICE_CIDR`, which AL2023 nodes' NodeConfig names: the provider asks EKS for it, as against AWS), the AWS
provider over HTTP to the loopback server with dummy credentials given to its boto3 session only; then seeds moto's
random ids again, so that the same scenario gets the same instance ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.catalog import Catalog
from karpenter_policy.cloud.aws.api import AwsApi, AwsConnection
from karpenter_policy.cloud.aws.provider import AwsCloudProvider, ClusterSettings
from karpenter_policy.simulate.account import Account, AccountBuilder
from karpenter_policy.simulate.clock import VirtualClock
from karpenter_policy.simulate.declaredgroups import DeclaredGroup
from karpenter_policy.simulate.server import MotoServer, require_loopback

KUBERNETES_VERSION = "1.27"
#: What nodes are told to join: an address that resolves nowhere, and a CA that is only a PEM header.
API_SERVER = "https://kubernetes.simulated.invalid"
CA_BUNDLE = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"
INSTANCE_PROFILE = "KarpenterNodeInstanceProfile-simulated"
#: The simulated cluster's service CIDR (Karpenter's test environment's, aws pkg/test/environment.go at v1.14.1).
SERVICE_CIDR = "10.100.0.0/16"
#: The role moto's EKS wants for a cluster (never assumed: nothing runs in it).
CLUSTER_ROLE = "arn:aws:iam::123456789012:role/simulated-eks"
#: Given to the boto3 session of the simulation only (never to the environment): moto accepts any.
DUMMY_CREDENTIALS = ("simulated", "simulated", "simulated")


class MotoCloud:
    """See the module docstring. Use as a context manager (moto's server runs until :meth:`close`)."""

    def __init__(
        self,
        sets: Sequence[ConstraintSet],
        catalog: Catalog,
        clock: VirtualClock,
        *,
        region: str,
        spot_prices: Mapping[tuple[str, str], float] | None = None,
        seed: int = 42,
        cluster_name: str = "simulated",
        placement_groups: Mapping[str, DeclaredGroup] | None = None,
    ) -> None:
        self.region = region
        self.server = MotoServer(spot_prices, seed)
        try:
            access_key, secret_key, token = DUMMY_CREDENTIALS
            connection = AwsConnection(
                region, endpoint_url=self.server.url, access_key_id=access_key, secret_access_key=secret_key,
                session_token=token, max_attempts=2,
            )
            self.api = AwsApi(connection)
            for service in ("ec2", "ssm", "eks", "iam"):  # whatever the environment configures, only loopback
                require_loopback(self.api.endpoint(service))
            self.account_builder = AccountBuilder(self.api, INSTANCE_PROFILE, placement_groups)
            self.account: Account = self.account_builder.build(sets)
            self.api.call(
                "eks", "create_cluster", name=cluster_name, roleArn=CLUSTER_ROLE, resourcesVpcConfig={},
                kubernetesNetworkConfig={"serviceIpv4Cidr": SERVICE_CIDR},
            )
            self.server.front.images.update(self.account.images)
            self.provider = AwsCloudProvider(
                connection,
                ClusterSettings(
                    endpoint=API_SERVER, ca_bundle=CA_BUNDLE, kubernetes_version=KUBERNETES_VERSION,
                    default_instance_profile=INSTANCE_PROFILE, name=cluster_name,
                ),
                list(catalog.instance_types),
                clock=clock,
                wall_clock=clock.wall,
                sleep=clock.sleep,
                use_pricing_api=False,  # the embedded on-demand prices: the Price List API is AWS's only
            )
            self.server.reseed()
        except BaseException:
            self.server.close()
            raise

    def add(self, sets: Sequence[ConstraintSet]) -> list[str]:
        """What a new version of the constraint sets needs in the account; the notes it added."""
        known = len(self.account.notes)
        self.account_builder.add(sets)
        return self.account.notes[known:]

    def close(self) -> None:
        self.server.close()

    def __enter__(self) -> MotoCloud:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


__all__ = ["API_SERVER", "CA_BUNDLE", "INSTANCE_PROFILE", "KUBERNETES_VERSION", "SERVICE_CIDR", "MotoCloud"]
