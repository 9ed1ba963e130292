"""Max pods with an EC2NodeClass's `efa-only` network interfaces, as Karpenter v1.14.1's `ENILimitedPods` (aws
pkg/providers/instancetype/types.go:485-503): an `efa-only` interface on network card 0 takes an ENI of the default
card from the VPC CNI (`networkInterfaces - reservedENIs - numEFAOnly`), one on another card takes none. Ported from
instancetype suite_test.go (v1.14.1) Context "Network Interfaces", whose m6idn.32xlarge (8 ENIs on card 0, 50
IPv4 addresses each) is the embedded catalog's too."""

from __future__ import annotations

from typing import Any

from karpenter_policy.api.v1.objects import EC2NodeClass
from karpenter_policy.catalog import load_catalog
from karpenter_policy.model.allocatable import MEMORY, MIB, kube_reserved, max_pods, node_configuration

M6IDN = load_catalog().get("m6idn.32xlarge")


def _class(*interfaces: tuple[int, int, str], family: str = "AL2023") -> dict[str, Any]:
    return {
        "amiFamily": family,
        "networkInterfaces": [
            {"networkCardIndex": card, "deviceIndex": device, "interfaceType": kind}
            for card, device, kind in interfaces
        ],
    }


def test_the_catalogs_m6idn_is_the_suites() -> None:
    assert M6IDN is not None and (M6IDN.max_enis, M6IDN.ipv4_per_eni) == (8, 50)


def test_no_efa_only_interface_on_card_0_keeps_max_pods() -> None:
    """suite_test.go:3233 "should calculate max pods according when no EFA-only interfaces used on NC 0": 8 * 49 + 2."""
    assert M6IDN is not None
    node = node_configuration(None, _class((0, 0, "interface"), (1, 0, "efa-only")))
    assert max_pods(M6IDN, node) == 394


def test_an_efa_only_interface_on_card_0_takes_an_eni_from_the_pods() -> None:
    """suite_test.go:3249 "should calculate max pods according to EFA-only interfaces used": (8 - 1) * 49 + 2."""
    assert M6IDN is not None
    node = node_configuration(None, _class((0, 0, "interface"), (0, 1, "efa-only")))
    assert max_pods(M6IDN, node) == 345


def test_kube_reserved_memory_counts_the_fewer_pods() -> None:
    """types.go:151: kube-reserved reads `ENILimitedPods(…, networkInterfaces)` too — on AL2, whose kube-reserved
    memory counts the ENI-limited pods, 11 MiB for each of the 49 pods fewer."""
    assert M6IDN is not None
    plain = node_configuration(None, _class((0, 0, "interface"), family="AL2"))
    efa = node_configuration(None, _class((0, 0, "interface"), (0, 1, "efa-only"), family="AL2"))
    assert kube_reserved(M6IDN, plain)[MEMORY] - kube_reserved(M6IDN, efa)[MEMORY] == 11 * 49 * MIB


def test_the_scheduler_reads_them_from_the_ec2nodeclass() -> None:
    """The node template the scheduler, `plan` and `check` read of an EC2NodeClass (`EC2NodeClass.node_template`)
    carries its network interfaces, so the `efa-only` ones on card 0 count the same pods as the launch (and all of
    them decide the EFA offered and the types, `model.nodeclassfit`); one on card 1 takes no pod's ENI; a class
    without interfaces has the node template it had (no `networkInterfaces` key: the compiled output is
    unchanged)."""
    assert M6IDN is not None
    nics = _class((0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"))
    spec = {"amiSelectorTerms": [{"alias": "al2023@latest"}], **nics}
    template = EC2NodeClass.from_document({"metadata": {"name": "efa"}, "spec": spec}).node_template()
    assert template["networkInterfaces"] == nics["networkInterfaces"]
    assert max_pods(M6IDN, node_configuration(None, template)) == 345
    spec = {**spec, **_class((0, 0, "interface"), (1, 0, "efa-only"))}
    assert max_pods(M6IDN, node_configuration(None, EC2NodeClass.from_document({"spec": spec}).node_template())) == 394
    del spec["networkInterfaces"]
    assert "networkInterfaces" not in EC2NodeClass.from_document({"spec": spec}).node_template()
