"""An EC2NodeClass's `instanceStorePolicy: RAID0` launches (issue #26): each family's user data says it as Karpenter
v1.14.1's bootstrap package writes it (aws pkg/providers/amifamily/bootstrap/: eksbootstrap.go, nodeadm.go,
bottlerocket.go), and the nodes' ephemeral storage is the instance store (instancetype/types.go `ephemeralStorage`)
in the one arithmetic every command reads (`model.allocatable`)."""

from __future__ import annotations

import dataclasses
import tomllib
from typing import Any

import pytest
import yaml

from karpenter_policy.api.v1.launchsettings import launch_settings
from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.aws.userdata import (
    Bootstrap,
    bottlerocket_version,
    node_config,
    render,
    supports_default_bind,
)
from karpenter_policy.model.allocatable import GIB, node_configuration, node_resources
from karpenter_policy.model.resources import EPHEMERAL_STORAGE

from .conftest import DISCOVERY, AwsEnv
from .faultproxy import Answer, Call, error_answer, json_answer
from .support import launch_template, offer, request

NODE = Bootstrap(cluster_name="test-cluster", cluster_endpoint="https://test-cluster", ca_bundle="Y2EtYnVuZGxlCg==",
                 cluster_cidr="10.100.0.0/16", max_pods=110)
RAID0 = dataclasses.replace(NODE, raid0=True)


def bootstrap_commands(text: str) -> dict[str, Any]:
    commands: dict[str, Any] = tomllib.loads(text)["settings"].get("bootstrap-commands", {})
    return commands


# --- user data ---------------------------------------------------------------------------------------------------


def test_al2_passes_local_disks_raid0_to_bootstrap_sh_last() -> None:
    """launchtemplate suite_test.go:1448 "should specify --local-disks raid0 when instance-store policy is set on
    AL2" (eksbootstrap.go:81 appends it after every other argument)."""
    script = render("AL2", RAID0)
    assert script.rstrip().splitlines()[-2].endswith("--local-disks raid0")
    assert "--local-disks" not in render("AL2", NODE)


def test_al2023_sets_nodeadms_local_storage_strategy() -> None:
    """launchtemplate suite_test.go:2076 "should set LocalDiskStrategy to Raid0 when specified by the
    InstanceStorePolicy" (nodeadm.go:87)."""
    config = yaml.safe_load(node_config(RAID0).split("\n", 1)[1])
    assert config["spec"]["instance"]["localStorage"] == {"strategy": "RAID0"}
    assert yaml.safe_load(node_config(NODE).split("\n", 1)[1])["spec"]["instance"]["localStorage"] == {}


#: v1.14.1's expected TOML (launchtemplate suite_test.go:1466-1471 and :1512-1517; its one-line `commands` of
#: the second split here), parsed.
DEFAULT_BIND = tomllib.loads("""
[settings.bootstrap-commands.000-mount-instance-storage]
commands = [['apiclient', 'ephemeral-storage', 'init'], ['apiclient', 'ephemeral-storage', 'bind']]
mode = 'always'
essential = true
""")["settings"]["bootstrap-commands"]
EXPLICIT_DIRS = tomllib.loads("""
[settings.bootstrap-commands.000-mount-instance-storage]
commands = [['apiclient', 'ephemeral-storage', 'init'],
            ['apiclient', 'ephemeral-storage', 'bind', '--dirs', '/var/lib/containerd', '/var/lib/kubelet',
             '/var/log/pods']]
mode = 'always'
essential = true
""")["settings"]["bootstrap-commands"]


@pytest.mark.parametrize(("default_mount_paths", "expected"), [
    (True, DEFAULT_BIND),  # suite_test.go:1459 (bottlerocket@latest) and :1519 (bottlerocket@v1.46.0)
    (False, EXPLICIT_DIRS),  # suite_test.go:1503 (bottlerocket@v1.45.0)
])
def test_bottlerocket_mounts_the_instance_store_with_a_bootstrap_command(default_mount_paths: bool,
                                                                         expected: dict[str, Any]) -> None:
    node = dataclasses.replace(RAID0, default_mount_paths=default_mount_paths)
    assert bootstrap_commands(render("Bottlerocket", node)) == expected
    assert bootstrap_commands(render("Bottlerocket", NODE)) == {}


def test_bottlerocket_merges_the_command_with_the_templates_own() -> None:
    """launchtemplate suite_test.go:1476 "should merge bootstrap-commands when instance-store policy is set on
    Bottlerocket"."""
    custom = "[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\nmode = 'always'\n" \
             "essential = true\n"
    node = dataclasses.replace(RAID0, default_mount_paths=True, custom=custom)
    hello = {"commands": [["echo", "hello"]], "mode": "always", "essential": True}
    assert bootstrap_commands(render("Bottlerocket", node)) == {**DEFAULT_BIND, "111-say-hello": hello}


@pytest.mark.parametrize(("version", "expected"), [
    # version/version_test.go:30-42, every entry
    ("1.45.0", False), ("1.46.0", True), ("1.47.0", True), ("2.0.0", True), ("v1.45.0", False), ("v1.46.0", True),
    ("1.9.0", False), ("latest", True), ("invalid", False), ("1", False), ("", False), ("1.46", False),
    ("abc.def.ghi", False),
])
def test_which_bottlerocket_releases_bind_the_default_directories(version: str, expected: bool) -> None:
    assert supports_default_bind(version) is expected


def test_a_bottlerocket_image_name_says_its_release() -> None:
    """`extractVersionFromName` (amifamily/bottlerocket.go:171)."""
    assert bottlerocket_version(["my-ami", "bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a"]) == "v1.46.0"
    assert bottlerocket_version(["bottlerocket-*"]) == ""


@pytest.mark.parametrize(("alias", "dirs"), [("bottlerocket@latest", False), ("bottlerocket@v1.45.0", True)])
def test_a_launch_of_a_raid0_class_writes_the_command_for_its_release(aws: AwsEnv, alias: str, dirs: bool) -> None:
    """suite_test.go:1459 and :1503 through the launcher, read back from moto's launch template; the SSM parameter
    of the alias is answered with the test's image."""
    settings = launch_settings({"amiSelectorTerms": [{"alias": alias}], "instanceStorePolicy": "RAID0",
                                "subnetSelectorTerms": [{"tags": DISCOVERY}],
                                "securityGroupSelectorTerms": [{"tags": DISCOVERY}]})
    release = alias.partition("@")[2].lstrip("v")
    parameter = f"/aws/service/bottlerocket/aws-k8s-1.27/x86_64/{release}/image_id"
    aws.proxy.serve("GetParameter", lambda call: _parameter(call, parameter, aws.ami_amd64))
    aws.provider().create(request(settings, [offer("m5.large", "us-east-1a")]))
    (template,) = aws.ec2.describe_launch_templates()["LaunchTemplates"]
    text = launch_template(aws.ec2, template["LaunchTemplateName"])["UserData"]
    assert bootstrap_commands(text) == (EXPLICIT_DIRS if dirs else DEFAULT_BIND)


def _parameter(call: Call, name: str, image: str) -> Answer:
    if call.params.get("Name") != name:
        return error_answer(call, 400, "ParameterNotFound", "")
    return json_answer({"Parameter": {"Name": name, "Type": "String", "Value": image, "Version": 1}})


# --- ephemeral storage -------------------------------------------------------------------------------------------


def test_a_raid0_nodes_ephemeral_storage_is_its_instance_store() -> None:
    """instancetype suite_test.go:845 "should pack pods if the pod's ephemeral-storage exceeds node capacity and
    instance storage is mounted": m6idn.32xlarge's capacity is 7600G under RAID0; a type without an instance store
    keeps its root volume (20Gi), as does every type without the policy."""
    catalog = load_catalog()
    raid0 = node_configuration(None, {"amiFamily": "AL2023", "instanceStorePolicy": "RAID0"})
    plain = node_configuration(None, {"amiFamily": "AL2023"})
    nvme, ebs = catalog.get("m6idn.32xlarge"), catalog.get("m5.large")
    assert nvme is not None and ebs is not None
    assert node_resources(nvme, raid0).capacity[EPHEMERAL_STORAGE] == 7600 * 10**9
    assert node_resources(nvme, plain).capacity[EPHEMERAL_STORAGE] == 20 * GIB
    assert node_resources(ebs, raid0).capacity[EPHEMERAL_STORAGE] == 20 * GIB
    assert node_resources(nvme, raid0).allocatable[EPHEMERAL_STORAGE] > 5000 * GIB  # the Go test's 5000Gi pod fits
