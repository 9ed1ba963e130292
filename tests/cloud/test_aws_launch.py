"""AwsCloudProvider.create / get / list / delete against moto's server over HTTP, through the fault proxy."""

from __future__ import annotations

import dataclasses

import pytest
from profiles import fast_first

from karpenter_policy.cloud import CloudError, ConfigurationError, InsufficientCapacity, Throttled
from karpenter_policy.cloud.aws.amis import AMI_TTL
from karpenter_policy.cloud.aws.fleet import MAX_OVERRIDES
from karpenter_policy.cloud.provider import (
    TAG_CLIENT_TOKEN,
    TAG_CONSTRAINT_SET_HASH,
    TAG_MANAGED_BY,
    TAG_NAME,
    TAG_PROVISIONER,
)
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.model.taints import Taint

from .conftest import CLUSTER, DISCOVERY, SSM_AL2, AwsEnv, _ssm_stub, catalog_types
from .support import launch_template, offer, request, user_data


@pytest.mark.slow
def test_create_launches_the_cheapest_option_with_tags_template_ami_and_user_data(aws: AwsEnv) -> None:
    provider = aws.provider()
    launch = request(
        aws.spec(tags={"team": "data", TAG_NAME: "data-node"}),
        [offer("m5.large", "us-east-1b", price=0.03), offer("c5.large", "us-east-1c", price=0.04)],
        labels={"team": "data"},
        taints=[Taint("dedicated", "NoSchedule", "data")],
        startup_taints=[Taint("node.cilium.io/agent-not-ready", "NoExecute")],
    )

    instance = provider.create(launch)

    assert (instance.instance_type, instance.zone, instance.capacity_type) == ("m5.large", "us-east-1b", "spot")
    assert instance.state == "running"
    assert instance.provider_id == f"aws:///us-east-1b/{instance.id}"
    assert instance.private_dns_name
    stored = aws.instances(**{"instance-id": [instance.id]})[0]
    assert stored["SubnetId"] == aws.subnets["us-east-1b"]
    assert stored["InstanceLifecycle"] == "spot"
    tags = {t["Key"]: t["Value"] for t in stored["Tags"]}
    assert tags == {
        f"kubernetes.io/cluster/{CLUSTER}": "owned",
        TAG_PROVISIONER: "default",
        TAG_MANAGED_BY: CLUSTER,
        TAG_CONSTRAINT_SET_HASH: launch.constraint_set_hash,
        TAG_CLIENT_TOKEN: launch.client_token,
        TAG_NAME: "data-node",  # the node template may override Name, not the others
        "team": "data",
    }
    assert instance.tags == tags
    # The AMI is the family default (the EKS AL2 SSM parameter) and the launch template carries the rest.
    assert stored["ImageId"] == aws.ami_amd64 == instance.image_id
    assert instance.launch_template.startswith("karpenter-policy/")
    data = launch_template(aws.ec2, instance.launch_template)
    assert data["ImageId"] == aws.ami_amd64
    assert data["SecurityGroupIds"] == [aws.security_group]
    assert data["IamInstanceProfile"] == {"Name": "KarpenterNodeInstanceProfile-blue"}
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {"VolumeSize": 20, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True},
        }
    ]
    script = data["UserData"]
    assert script == user_data(aws.ec2, instance.id)
    assert (
        "/etc/eks/bootstrap.sh blue \\\n--apiserver-endpoint https://ABCDEF.gr7.us-east-1.eks.amazonaws.com" in script
    )
    assert "--dns-cluster-ip 10.100.0.10" in script
    assert "--node-labels=karpenter.sh/provisioner-name=default,team=data" in script
    assert "--register-with-taints=dedicated=data:NoSchedule,node.cilium.io/agent-not-ready:NoExecute" in script
    assert "--max-pods=29" in script  # m5.large: 3 ENIs x (10 - 1) + 2


@pytest.mark.slow
def test_create_fleet_request_is_instant_spot_price_capacity_optimized_with_tags_everywhere(aws: AwsEnv) -> None:
    provider = aws.provider()
    provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a"), offer("c5.large", "us-east-1b")]))

    (call,) = aws.proxy.calls_to("CreateFleet")
    assert call.params["Type"] == "instant"
    assert call.params["TargetCapacitySpecification.TotalTargetCapacity"] == "1"
    assert call.params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "spot"
    assert call.params["SpotOptions.AllocationStrategy"] == "price-capacity-optimized"
    assert "OnDemandOptions.AllocationStrategy" not in call.params
    assert len(call.params["ClientToken"]) <= 64
    assert call.overrides() == [("m5.large", aws.subnets["us-east-1a"]), ("c5.large", aws.subnets["us-east-1b"])]
    resources = sorted(v for k, v in call.params.items() if k.endswith(".ResourceType"))
    assert resources == ["fleet", "instance", "volume"]


def test_on_demand_launch_uses_the_lowest_price_strategy(aws: AwsEnv) -> None:
    provider = aws.provider()
    instance = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a", "on-demand", 0.096)]))

    assert instance.capacity_type == "on-demand"
    assert "InstanceLifecycle" not in aws.instances(**{"instance-id": [instance.id]})[0]
    (call,) = aws.proxy.calls_to("CreateFleet")
    assert call.params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "on-demand"
    assert call.params["OnDemandOptions.AllocationStrategy"] == "lowest-price"
    assert "SpotOptions.AllocationStrategy" not in call.params


def test_ami_selector_picks_an_image_per_architecture_and_a_template_per_image(aws: AwsEnv) -> None:
    provider = aws.provider()
    spec = aws.spec(amiSelector={"aws-ids": f"{aws.ami_amd64},{aws.ami_arm64}"})

    instance = provider.create(request(spec, [offer("c6g.large", "us-east-1a"), offer("m5.large", "us-east-1a")]))

    assert instance.instance_type == "c6g.large"
    assert instance.image_id == aws.ami_arm64
    (call,) = aws.proxy.calls_to("CreateFleet")
    templates = {v for k, v in call.params.items() if k.endswith("LaunchTemplateSpecification.LaunchTemplateName")}
    assert {launch_template(aws.ec2, name)["ImageId"] for name in templates} == {aws.ami_amd64, aws.ami_arm64}
    assert not aws.proxy.calls_to("GetParameter")  # no default AMI looked up


@pytest.mark.slow
def test_default_ami_comes_from_the_ssm_parameter_of_each_architecture(aws: AwsEnv) -> None:
    provider = aws.provider()
    instance = provider.create(request(aws.spec(), [offer("c6g.large", "us-east-1a")]))

    assert instance.image_id == aws.ami_arm64
    names = {call.params["Name"] for call in aws.proxy.calls_to("GetParameter")}
    assert names == {"/aws/service/eks/optimized-ami/1.27/amazon-linux-2-arm64/recommended/image_id"}


def test_current_image_is_what_a_launch_gets_and_follows_a_new_release(aws: AwsEnv) -> None:
    """What AMI drift compares with: the image a launch would get now (the default AMI's SSM parameter), cached
    like launches' for AMI_TTL seconds; None for a type the catalog does not have."""
    provider = aws.provider()
    instance = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    assert provider.current_image("m5.large", aws.spec()) == instance.image_id == aws.ami_amd64

    aws.proxy.serve("GetParameter", _ssm_stub({SSM_AL2: aws.ami_arm64}))  # the parameter names a new image
    assert provider.current_image("m5.large", aws.spec()) == aws.ami_amd64, "cached"
    aws.clock.advance(AMI_TTL + 1)
    assert provider.current_image("m5.large", aws.spec()) == aws.ami_arm64
    assert provider.current_image("no-such.type", aws.spec()) is None


@pytest.mark.slow
def test_launch_templates_are_created_once_and_reused_by_content(aws: AwsEnv) -> None:
    provider = aws.provider()
    options = [offer("m5.large", "us-east-1a")]
    first = provider.create(request(aws.spec(), options, token="claim-1"))
    second = provider.create(request(aws.spec(), options, token="claim-2"))
    restarted = aws.provider().create(request(aws.spec(), options, token="claim-3"))

    assert first.launch_template == second.launch_template == restarted.launch_template
    assert len(aws.proxy.calls_to("CreateLaunchTemplate")) == 1
    assert len(aws.proxy.calls_to("DescribeLaunchTemplates")) == 2  # once per provider, then cached

    changed = provider.create(request(aws.spec(userData="#!/bin/bash\necho hi"), options, token="claim-4"))
    assert changed.launch_template != first.launch_template
    assert "echo hi" in launch_template(aws.ec2, changed.launch_template)["UserData"]


def test_a_launch_template_deleted_behind_its_back_is_created_again(aws: AwsEnv) -> None:
    provider = aws.provider()
    options = [offer("m5.large", "us-east-1a")]
    first = provider.create(request(aws.spec(), options, token="claim-1"))
    aws.ec2.delete_launch_template(LaunchTemplateName=first.launch_template)

    second = provider.create(request(aws.spec(), options, token="claim-2"))

    assert second.launch_template == first.launch_template
    assert launch_template(aws.ec2, second.launch_template)["ImageId"] == aws.ami_amd64
    assert len(aws.proxy.calls_to("CreateLaunchTemplate")) == 2
    tokens = [c.params["ClientToken"] for c in aws.proxy.calls_to("CreateFleet")]
    assert len(tokens) == 3 and len(set(tokens)) == 3  # the retry is a new request for EC2


@pytest.mark.slow
def test_a_named_launch_template_is_used_as_it_is(aws: AwsEnv) -> None:
    aws.ec2.create_launch_template(LaunchTemplateName="team-nodes", LaunchTemplateData={"ImageId": aws.ami_amd64})
    provider = aws.provider()
    spec = {"subnetSelector": dict(DISCOVERY), "launchTemplate": "team-nodes"}

    instance = provider.create(request(spec, [offer("m5.large", "us-east-1a")]))

    assert instance.launch_template == "team-nodes"
    assert not aws.proxy.calls_to("CreateLaunchTemplate")
    with pytest.raises(ConfigurationError, match="launch template 'missing' does not exist"):
        provider.create(request({**spec, "launchTemplate": "missing"}, [offer("m5.large", "us-east-1a")], token="b"))


@pytest.mark.slow
def test_the_same_client_token_launches_once(aws: AwsEnv) -> None:
    provider = aws.provider()
    launch = request(aws.spec(), [offer("m5.large", "us-east-1a")], token="claim-default-x1")

    first = provider.create(launch)
    again = aws.provider().create(launch)  # e.g. the reconciler restarted before it recorded the instance

    assert again.id == first.id
    assert len(aws.proxy.calls_to("CreateFleet")) == 1
    assert len(aws.instances()) == 1


@pytest.mark.slow
def test_a_lost_create_fleet_answer_is_retried_with_the_same_client_token(aws: AwsEnv) -> None:
    """EC2 acts on the request but the answer is lost (500): botocore retries, and the ClientToken makes EC2
    return the fleet it already launched instead of a second instance."""
    aws.proxy.fail("CreateFleet", after_forwarding=True)
    provider = aws.provider()

    instance = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))

    calls = aws.proxy.calls_to("CreateFleet")
    assert len(calls) == 2
    assert calls[0].params["ClientToken"] == calls[1].params["ClientToken"]
    assert [i["InstanceId"] for i in aws.instances()] == [instance.id]


def test_a_launch_whose_answers_were_all_lost_is_found_by_the_next_create_with_the_same_token(
    aws: AwsEnv,
) -> None:
    aws.proxy.fail("CreateFleet", times=2, after_forwarding=True)
    provider = aws.provider(max_attempts=2)
    launch = request(aws.spec(), [offer("m5.large", "us-east-1a")])
    with pytest.raises(CloudError, match="InternalError"):
        provider.create(launch)

    instance = provider.create(launch)  # the reconciler tries again with the same client token

    assert [i["InstanceId"] for i in aws.instances()] == [instance.id]
    assert len(aws.proxy.calls_to("CreateFleet")) == 2  # found by its client-token tag: no third request


@pytest.mark.slow
def test_throttled_create_fleet_is_retried_with_backoff(aws: AwsEnv) -> None:
    aws.proxy.throttle("CreateFleet", times=2)
    provider = aws.provider(max_attempts=3)

    instance = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))

    assert instance.state == "running"
    assert len(aws.proxy.calls_to("CreateFleet")) == 3
    assert len(aws.instances()) == 1


@pytest.mark.slow
def test_throttling_that_outlasts_the_retries_raises_throttled(aws: AwsEnv) -> None:
    aws.proxy.throttle("DescribeInstances", times=None)
    provider = aws.provider(max_attempts=2)

    with pytest.raises(Throttled, match="RequestLimitExceeded"):
        provider.get("i-0123456789abcdef0")
    assert len(aws.proxy.calls_to("DescribeInstances")) == 2


def test_insufficient_capacity_on_the_cheapest_pool_launches_the_next_and_marks_it_for_3_minutes(
    aws: AwsEnv,
) -> None:
    aws.proxy.insufficient_capacity("m5.large", aws.subnets["us-east-1a"])
    provider = aws.provider()
    options = [offer("m5.large", "us-east-1a", price=0.02), offer("m5.large", "us-east-1b", price=0.03)]

    instance = provider.create(request(aws.spec(), options + [offer("c5.large", "us-east-1a", price=0.04)]))

    assert (instance.instance_type, instance.zone) == ("m5.large", "us-east-1b")
    assert len(aws.proxy.calls_to("CreateFleet")) == 1  # EC2 moved on to the next pool itself

    def available(zone: str) -> bool:
        m5 = next(it for it in provider.instance_types() if it.name == "m5.large")
        return next(o.available for o in m5.offerings if (o.zone, o.capacity_type) == (zone, "spot"))

    assert not available("us-east-1a") and available("us-east-1b")
    # The next launch does not even ask for the refused pool.
    provider.create(request(aws.spec(), options, token="claim-2"))
    assert aws.proxy.calls_to("CreateFleet")[-1].overrides() == [("m5.large", aws.subnets["us-east-1b"])]
    aws.clock.advance(179)
    assert not available("us-east-1a")
    aws.clock.advance(2)
    assert available("us-east-1a")


def test_when_every_spot_pool_is_refused_on_demand_is_tried_in_the_same_create(aws: AwsEnv) -> None:
    for instance_type in ("m5.large", "c5.large"):
        aws.proxy.insufficient_capacity(instance_type, aws.subnets["us-east-1a"], "spot")
    provider = aws.provider()
    options = [
        offer("m5.large", "us-east-1a", "spot", 0.02),
        offer("c5.large", "us-east-1a", "spot", 0.03),
        offer("m5.large", "us-east-1a", "on-demand", 0.096),
    ]

    instance = provider.create(request(aws.spec(), options))

    assert (instance.instance_type, instance.capacity_type) == ("m5.large", "on-demand")
    calls = aws.proxy.calls_to("CreateFleet")
    assert [c.params["TargetCapacitySpecification.DefaultTargetCapacityType"] for c in calls] == ["spot", "on-demand"]
    assert provider.unavailable.is_unavailable("m5.large", "us-east-1a", "spot")
    assert provider.unavailable.is_unavailable("c5.large", "us-east-1a", "spot")
    assert not provider.unavailable.is_unavailable("m5.large", "us-east-1a", "on-demand")


def test_insufficient_capacity_everywhere_raises_and_launches_nothing(aws: AwsEnv) -> None:
    options = [offer("m5.large", "us-east-1a"), offer("m5.large", "us-east-1b", "on-demand", 0.096)]
    for option in options:
        aws.proxy.insufficient_capacity(option.instance_type, aws.subnets[option.zone])
    provider = aws.provider()

    with pytest.raises(InsufficientCapacity) as raised:
        provider.create(request(aws.spec(), options))

    assert [(f.instance_type, f.zone, f.capacity_type, f.code) for f in raised.value.failed] == [
        ("m5.large", "us-east-1a", "spot", "InsufficientInstanceCapacity"),
        ("m5.large", "us-east-1b", "on-demand", "InsufficientInstanceCapacity"),
    ]
    assert aws.instances() == []
    # Both offerings are now skipped without asking EC2.
    with pytest.raises(InsufficientCapacity, match="every option is unavailable"):
        provider.create(request(aws.spec(), options, token="claim-2"))
    assert len(aws.proxy.calls_to("CreateFleet")) == 2


def test_create_fleet_gets_at_most_60_overrides_and_the_rest_are_tried_next(aws: AwsEnv) -> None:
    families = ("c5", "m5", "r5", "c6i", "m6i", "r6i", "c5a", "m5a", "r5a", "c5n", "m5n", "r5n")
    types = [it for it in catalog_types() if it.family in families and it.zones("spot")][:70]
    assert len(types) == 70
    options = [offer(it.name, "us-east-1a", price=0.01 * (i + 1)) for i, it in enumerate(types)]
    for option in options[:MAX_OVERRIDES]:
        aws.proxy.insufficient_capacity(option.instance_type, aws.subnets["us-east-1a"])
    provider = aws.provider(catalog_types())

    instance = provider.create(request(aws.spec(), options))

    calls = aws.proxy.calls_to("CreateFleet")
    assert [len(c.overrides()) for c in calls] == [60, 10]
    assert sorted(t for t, _ in calls[0].overrides()) == sorted(o.instance_type for o in options[:60])
    assert sorted(t for t, _ in calls[1].overrides()) == sorted(o.instance_type for o in options[60:])
    assert instance.instance_type in {o.instance_type for o in options[60:]}
    # Types with different max pods get different templates (the userData differs), all in one request.
    templates = {v for k, v in calls[0].params.items() if k.endswith("LaunchTemplateName")}
    assert len(templates) > 1


@pytest.mark.slow
def test_options_the_requirements_do_not_allow_are_never_launched(aws: AwsEnv) -> None:
    provider = aws.provider()
    requirements = Requirements([Requirement.new("topology.kubernetes.io/zone", "In", ["us-east-1b"])])
    options = [offer("m5.large", "us-east-1a", price=0.01), offer("m5.large", "us-east-1b", price=0.02)]

    instance = provider.create(request(aws.spec(), options, requirements=requirements))

    assert instance.zone == "us-east-1b"
    assert aws.proxy.calls_to("CreateFleet")[0].overrides() == [("m5.large", aws.subnets["us-east-1b"])]


def test_delete_is_idempotent_and_get_forgets_terminated_instances(aws: AwsEnv) -> None:
    provider = aws.provider()
    instance = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    found = provider.get(instance.id)
    assert found is not None
    assert (found.id, found.instance_type, found.zone, found.state) == (
        instance.id,
        "m5.large",
        "us-east-1a",
        "running",
    )

    provider.delete(instance.id)
    provider.delete(instance.id)
    provider.delete("i-0123456789abcdef0")

    assert provider.get(instance.id) is None
    assert provider.get("i-0123456789abcdef0") is None
    assert aws.instances(**{"instance-id": [instance.id]})[0]["State"]["Name"] == "terminated"


@pytest.mark.slow
def test_a_failed_terminate_is_retried(aws: AwsEnv) -> None:
    provider = aws.provider()
    instance = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    aws.proxy.fail("TerminateInstances", status=500)

    provider.delete(instance.id)

    assert len(aws.proxy.calls_to("TerminateInstances")) == 2
    assert provider.get(instance.id) is None


@pytest.mark.slow
def test_list_returns_the_clusters_launched_instances_that_are_not_terminated(aws: AwsEnv) -> None:
    provider = aws.provider()
    options = [offer("m5.large", "us-east-1a")]
    ours = [provider.create(request(aws.spec(), options, token=f"claim-{n}")) for n in range(2)]
    provider.create(request(aws.spec(), options, token="green-1", cluster="green"))
    aws.ec2.run_instances(  # a node group's instance: the cluster's, but not launched by a provisioner
        ImageId=aws.ami_amd64,
        MinCount=1,
        MaxCount=1,
        SubnetId=aws.subnets["us-east-1a"],
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "kubernetes.io/cluster/blue", "Value": "owned"}]}
        ],
    )

    assert [i.id for i in provider.list(CLUSTER)] == sorted(i.id for i in ours)
    provider.delete(ours[0].id)
    assert [i.id for i in provider.list(CLUSTER)] == [ours[1].id]


@pytest.mark.parametrize(
    ("change", "message"),
    fast_first(
        [
            ({"subnetSelector": {"karpenter.sh/discovery": "nobody"}}, "no subnet matches subnetSelector"),
            ({"securityGroupSelector": {"karpenter.sh/discovery": "nobody"}}, "no security group matches"),
            ({"amiSelector": {"karpenter.sh/discovery": "nobody"}}, "amiSelector .* matches no image"),
            (
                {"amiFamily": "Bottlerocket", "amiSelector": DISCOVERY, "userData": "not toml ["},
                "userData is not valid TOML for Bottlerocket",
            ),
            ({"amiFamily": "Ubuntu"}, "no default Ubuntu AMI found"),
        ],
        unpack=True,
    ),
)
def test_provider_settings_that_cannot_launch_raise_a_configuration_error(
    aws: AwsEnv, change: dict[str, object], message: str
) -> None:
    provider = aws.provider()
    with pytest.raises(ConfigurationError, match=message):
        provider.create(request(aws.spec(**change), [offer("m5.large", "us-east-1a")]))
    assert not aws.proxy.calls_to("CreateFleet")


def test_options_in_zones_without_a_subnet_raise_a_configuration_error(aws: AwsEnv) -> None:
    provider = aws.provider()
    with pytest.raises(ConfigurationError, match=r"no subnet matching subnetSelector is in the zones \['us-east-1d'\]"):
        provider.create(request(aws.spec(), [offer("m5.large", "us-east-1d")]))


def test_no_instance_profile_anywhere_is_a_configuration_error(aws: AwsEnv) -> None:
    provider = aws.provider()
    provider.cluster = dataclasses.replace(provider.cluster, default_instance_profile=None)
    with pytest.raises(ConfigurationError, match="no instanceProfile"):
        provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    instance = provider.create(request(aws.spec(instanceProfile="nodes"), [offer("m5.large", "us-east-1a")]))
    assert launch_template(aws.ec2, instance.launch_template)["IamInstanceProfile"] == {"Name": "nodes"}


def test_ssm_default_parameter_name_is_the_eks_al2_one(aws: AwsEnv) -> None:
    aws.provider().create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    assert [c.params["Name"] for c in aws.proxy.calls_to("GetParameter")] == [SSM_AL2]
