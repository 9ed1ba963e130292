"""An EC2NodeClass's `context` (an ODCR context) on the CreateFleet request the AWS adapter sends, over moto's server
through the fault proxy, as Karpenter v1.14.1 sets it (aws pkg/providers/instance/instance.go:379-381,
`CreateFleetInputBuilder.WithContextID`, types.go:186 and :224): the request the front saw is read."""

from __future__ import annotations

import dataclasses

from karpenter_policy.api.v1.launchsettings import CONTEXT

from .conftest import AwsEnv
from .support import offer, request

CONTEXT_ID = "context-1234"


def _fleet_params(aws: AwsEnv) -> dict[str, str]:
    (call,) = aws.proxy.calls_to("CreateFleet")
    return call.params


def test_context_is_set_on_the_create_fleet_request(aws: AwsEnv) -> None:
    """aws pkg/cloudprovider/suite_test.go:332 "should set context on the CreateFleet request if specified on the
    NodePool" (v1.14.1)."""
    instance = aws.provider().create(request(aws.spec(**{CONTEXT: CONTEXT_ID}), [offer("m5.large", "us-east-1a")]))

    assert instance.instance_type == "m5.large"
    assert _fleet_params(aws)["Context"] == CONTEXT_ID


def test_no_context_when_the_claims_min_values_were_relaxed(aws: AwsEnv) -> None:
    """aws pkg/cloudprovider/suite_test.go:342 "should not set context on the CreateFleet request when min values are
    relaxed even if specified on the NodePool" (v1.14.1): the claim's `karpenter.sh/nodeclaim-min-values-relaxed`
    is the launch request's `min_values_relaxed`."""
    launch = request(aws.spec(**{CONTEXT: CONTEXT_ID}), [offer("m5.large", "us-east-1a")])

    aws.provider().create(dataclasses.replace(launch, min_values_relaxed=True))

    assert "Context" not in _fleet_params(aws)


def test_no_context_by_default(aws: AwsEnv) -> None:
    """aws pkg/cloudprovider/suite_test.go:355 "should default to no EC2 Context" (v1.14.1)."""
    aws.provider().create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))

    assert "Context" not in _fleet_params(aws)
