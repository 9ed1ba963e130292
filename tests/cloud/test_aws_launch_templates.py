"""Launch templates are deleted once no launch needs them, against moto's server over HTTP (through the proxy):
their number stays bounded across AMI releases and node template deletions; those earlier runs left are taken
in and deleted after their TTL; a template a CreateFleet under way uses is never deleted under it; what is not
ours (another cluster's, a node template's own, a name without our prefix) is never deleted."""

from __future__ import annotations

import threading
import urllib.parse
from typing import Any

import pytest

from karpenter_policy.cloud import CloudError
from karpenter_policy.cloud.aws.amis import AMI_TTL
from karpenter_policy.cloud.aws.launchtemplates import NAME_PREFIX, TEMPLATE_TTL
from karpenter_policy.cloud.provider import TAG_MANAGED_BY, cluster_tag

from .conftest import CLUSTER, SSM_AL2, AwsEnv, _ssm_stub
from .faultproxy import Answer, Call
from .support import offer, request


def templates(aws: AwsEnv) -> set[str]:
    """Every launch template moto holds, by name."""
    return {t["LaunchTemplateName"] for t in aws.ec2.describe_launch_templates()["LaunchTemplates"]}


def ours(aws: AwsEnv, cluster: str = CLUSTER) -> set[str]:
    """The templates tagged for the cluster as this controller tags the ones it makes."""
    found = aws.ec2.describe_launch_templates(
        Filters=[{"Name": f"tag:{cluster_tag(cluster)}", "Values": ["owned"]},
                 {"Name": f"tag:{TAG_MANAGED_BY}", "Values": [cluster]}]
    )["LaunchTemplates"]
    return {t["LaunchTemplateName"] for t in found}


def tagged(aws: AwsEnv, name: str, cluster: str) -> None:
    aws.ec2.create_launch_template(
        LaunchTemplateName=name, LaunchTemplateData={"ImageId": aws.ami_amd64},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": [
            {"Key": cluster_tag(cluster), "Value": "owned"}, {"Key": TAG_MANAGED_BY, "Value": cluster}]}],
    )


@pytest.mark.slow  # the fast test of deletion after the TTL: the one of templates an earlier run left
def test_the_count_stays_bounded_across_ami_releases_and_node_template_deletions(aws: AwsEnv) -> None:
    """Each generation an AMI is released (the SSM parameter names a new image) and a node template is created,
    used once and deleted; one node template lives throughout. Whatever the number of generations, the cluster
    holds the templates of the last hour only."""
    provider = aws.provider()
    created: set[str] = set()
    previous: set[str] = set()
    for generation in range(4):
        image = aws.ec2.copy_image(SourceImageId=aws.ami_amd64, SourceRegion="us-east-1",
                                   Name=f"eks-node-{generation}")["ImageId"]
        aws.proxy.serve("GetParameter", _ssm_stub({SSM_AL2: image}))
        aws.clock.advance(max(AMI_TTL, TEMPLATE_TTL) + 1)
        kept = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")], token=f"kept-{generation}"))
        passing = provider.create(request(
            aws.spec(userData=f"echo generation {generation}"), [offer("m5.large", "us-east-1a")],
            token=f"passing-{generation}", provisioner=f"passing-{generation}",
        ))
        assert kept.image_id == image
        deleted = set(provider.collect_launch_templates(CLUSTER))
        now = {kept.launch_template, passing.launch_template}
        assert deleted == previous, f"generation {generation}: the last generation's, unused for an hour"
        assert ours(aws) == now, f"generation {generation}: only the templates launches used this hour"
        created |= now
        previous = now
    assert len(created) == 8, "each generation needed templates of its own"
    aws.clock.advance(TEMPLATE_TTL + 1)
    assert set(provider.collect_launch_templates(CLUSTER)) == previous
    assert ours(aws) == set(), "unused for an hour: every one is gone"


def test_templates_an_earlier_run_left_are_taken_in_and_deleted_only_after_their_ttl(aws: AwsEnv) -> None:
    first = aws.provider()
    launched = first.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    tagged(aws, NAME_PREFIX + "left-by-an-older-version", CLUSTER)
    tagged(aws, NAME_PREFIX + "of-another-cluster", "green")
    tagged(aws, "a-template-someone-else-tagged", CLUSTER)
    aws.ec2.create_launch_template(LaunchTemplateName="team-nodes", LaunchTemplateData={"ImageId": aws.ami_amd64})
    named = first.create(request(aws.spec(launchTemplate="team-nodes"), [offer("m5.large", "us-east-1a")],
                                 token="named"))
    assert named.launch_template == "team-nodes"
    aws.clock.advance(TEMPLATE_TTL + 1)

    restarted = aws.provider()  # a new process: it knows nothing yet
    assert restarted.collect_launch_templates(CLUSTER) == [], "taken in: a full TTL from now"
    aws.clock.advance(TEMPLATE_TTL - 1)
    assert restarted.collect_launch_templates(CLUSTER) == []
    aws.clock.advance(1)
    deleted = restarted.collect_launch_templates(CLUSTER)

    assert sorted(deleted) == sorted([launched.launch_template, NAME_PREFIX + "left-by-an-older-version"])
    assert templates(aws) == {NAME_PREFIX + "of-another-cluster", "a-template-someone-else-tagged", "team-nodes"}
    aws.clock.advance(TEMPLATE_TTL + 1)
    assert restarted.collect_launch_templates(CLUSTER) == [], "each is deleted once"


def test_a_template_a_create_fleet_under_way_uses_is_not_deleted_under_it(aws: AwsEnv) -> None:
    """A collection runs while CreateFleet is on the wire, an hour after the template was last needed: the template
    is pinned by the launch and stays; once the launch is over it ages from then."""
    provider = aws.provider()
    first = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")], token="first"))
    template = first.launch_template
    collected_meanwhile: list[list[str]] = []
    present_meanwhile: list[bool] = []

    def collect_then_forward(call: Call) -> Answer:
        aws.clock.advance(TEMPLATE_TTL + 1)
        collected_meanwhile.append(provider.collect_launch_templates(CLUSTER))
        present_meanwhile.append(template in templates(aws))
        body = urllib.parse.urlencode(call.params).encode()
        return aws.proxy._forward("POST", "/", call.headers, body)

    aws.clock.advance(TEMPLATE_TTL + 1)  # the existence check is due again too: the launch describes it first
    aws.proxy.serve("CreateFleet", collect_then_forward, times=1)
    fleets = len(aws.proxy.calls_to("CreateFleet"))
    second = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")], token="second"))

    assert collected_meanwhile == [[]] and present_meanwhile == [True]
    assert second.launch_template == template and second.state in ("pending", "running")
    assert len(aws.proxy.calls_to("CreateFleet")) == fleets + 1, "no retry was needed: the template never went away"
    assert provider.collect_launch_templates(CLUSTER) == [], "the launch just ended: it ages from now"
    aws.clock.advance(TEMPLATE_TTL + 1)
    assert provider.collect_launch_templates(CLUSTER) == [template]


def test_a_launch_that_needs_a_template_being_deleted_waits_and_creates_it_again(aws: AwsEnv) -> None:
    """DeleteLaunchTemplate is on the wire when a launch needs that template: the launch waits for the deletion,
    creates the template again, and CreateFleet finds it."""
    provider = aws.provider()
    first = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")], token="first"))
    outcome: dict[str, Any] = {}
    deleting = threading.Event()
    release = threading.Event()

    def hold_the_deletion(call: Call) -> Answer:
        deleting.set()
        release.wait(10)
        body = urllib.parse.urlencode(call.params).encode()
        return aws.proxy._forward("POST", "/", call.headers, body)

    def launch() -> None:
        outcome["instance"] = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")], token="second"))

    aws.proxy.serve("DeleteLaunchTemplate", hold_the_deletion, times=1)
    aws.clock.advance(TEMPLATE_TTL + 1)
    collector = threading.Thread(target=lambda: outcome.setdefault("deleted", provider.collect_launch_templates(
        CLUSTER)))
    collector.start()
    assert deleting.wait(10)
    launcher = threading.Thread(target=launch)
    launcher.start()
    launcher.join(0.5)
    assert launcher.is_alive(), "the launch waits for the deletion under way"
    release.set()
    collector.join(10)
    launcher.join(30)

    assert outcome["deleted"] == [first.launch_template]
    assert outcome["instance"].launch_template == first.launch_template
    assert first.launch_template in templates(aws), "created again after the deletion, before CreateFleet"
    assert len(aws.proxy.calls_to("CreateFleet")) == 2, "no retry: CreateFleet found the template"


def test_a_failed_take_in_or_deletion_is_tried_again_at_the_next_collection(aws: AwsEnv) -> None:
    provider = aws.provider(max_attempts=1)
    launched = provider.create(request(aws.spec(), [offer("m5.large", "us-east-1a")]))
    aws.clock.advance(TEMPLATE_TTL + 1)
    aws.proxy.fail("DescribeLaunchTemplates")
    with pytest.raises(CloudError):
        provider.collect_launch_templates(CLUSTER)  # nothing is deleted before the cluster's templates are known
    assert launched.launch_template in templates(aws)
    aws.proxy.fail("DeleteLaunchTemplate")
    assert provider.collect_launch_templates(CLUSTER) == [], "the deletion failed: the template is still there"
    assert launched.launch_template in templates(aws)
    assert provider.collect_launch_templates(CLUSTER) == [launched.launch_template]
    assert launched.launch_template not in templates(aws)
