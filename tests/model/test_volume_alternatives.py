"""`model/volumes.py` as each version reads a pod's volumes (issue #25): v1.14.1's alternatives — every term of a
PersistentVolume's required node affinity and of a StorageClass's allowedTopologies, a local or hostPath volume's
hostname dropped, their cross product across volumes with incompatible branches pruned (all kept when none is
compatible) — beside v0.31.1's first term, and v0.31.1's claim checks (`ignored_v031`). Kubernetes-sigs/karpenter
v1.14.1 and v0.31.1 pkg/controllers/provisioning/scheduling/volumetopology.go."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.model.labels import HOSTNAME, ZONE
from karpenter_policy.model.requirements import Requirement, Requirements
from karpenter_policy.model.volumes import (
    MAX_VOLUME_ALTERNATIVES,
    PodVolume,
    VolumeRequirements,
    Volumes,
    claim_of,
    ignored_v031,
    persistent_volume_of,
    requirements_of,
    storage_class_of,
)

ZONES = ["us-east-1a", "us-east-1b", "us-east-1c"]
FAMILY = "karpenter.k8s.aws/instance-family"


def zones(*values: str) -> Requirements:
    return Requirements([Requirement.new(ZONE, "In", list(values))])


def pv(terms: list[dict[str, Any]], name: str = "pv", **source: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {**source, "nodeAffinity": {"required": {"nodeSelectorTerms": terms}}}}


def term(**expressions: list[str]) -> dict[str, Any]:
    keys = {"zone": ZONE, "host": HOSTNAME, "family": FAMILY}
    return {"matchExpressions": [{"key": keys[k], "operator": "In", "values": v} for k, v in expressions.items()]}


def test_a_volumes_terms_are_alternatives_in_order_and_v031_reads_the_first() -> None:
    volume = persistent_volume_of(pv([term(zone=["us-east-1a"]), term(zone=["us-east-1b"])]))
    assert volume.requirements == zones("us-east-1a")
    assert volume.alternatives == (zones("us-east-1a"), zones("us-east-1b"))


@pytest.mark.parametrize("source", [{"local": {"path": "/mnt"}}, {"hostPath": {"path": "/mnt"}}])
def test_a_local_volume_drops_its_hostname_and_a_hostname_only_term_allows_any_node(source: dict[str, Any]) -> None:
    """v1.14.1 `getPersistentVolumeRequirements`: the hostname rejected; a term left empty by it is kept as an
    unconstrained alternative (scheduling/suite_test.go:3093); v0.31.1 keeps the hostname."""
    volume = persistent_volume_of(pv([term(host=["ip-1"]), term(host=["ip-1"], zone=["us-east-1c"])], **source))
    assert volume.alternatives == (Requirements(), zones("us-east-1c"))
    assert HOSTNAME in volume.requirements


def test_a_csi_volume_keeps_its_hostname() -> None:
    volume = persistent_volume_of(pv([term(host=["ip-1"])], csi={"driver": "ebs.csi.aws.com"}))
    assert [HOSTNAME in alternative for alternative in volume.alternatives] == [True]


def test_a_classs_topologies_are_alternatives_and_an_empty_term_is_none() -> None:
    found = storage_class_of({"metadata": {"name": "sc"}, "allowedTopologies": [
        {"matchLabelExpressions": [{"key": ZONE, "values": ["us-east-1a"]}]}, {"matchLabelExpressions": []},
        {"matchLabelExpressions": [{"key": "topology.ebs.csi.aws.com/zone", "values": ["us-east-1b"]}]}]})
    assert found.topology == zones("us-east-1a")
    assert found.alternatives == (zones("us-east-1a"), zones("us-east-1b"))


def test_the_pruned_cross_product_of_scheduling_suite_test_3165() -> None:
    """scheduling/suite_test.go:3165: of A's two terms and B's two, the two compatible branches remain, in order."""
    a = (Requirements([Requirement.new(FAMILY, "In", ["c6a"])]), Requirements([Requirement.new(FAMILY, "In", ["m6a"])]))
    b = (zones("us-east-1a").intersection(a[1]), zones("us-east-1b").intersection(a[0]))
    found = VolumeRequirements(alternatives_per_volume=(a, b))
    assert found.alternatives == (b[1], b[0])
    assert not found.alternatives_conflict


def test_crossing_stops_at_the_bound_and_says_why() -> None:
    """`MAX_VOLUME_ALTERNATIVES` (a bound of this project's, not v1.14.1's): volumes whose terms would cross into
    more alternatives are not crossed — the NodePool reading is a refusal naming the count — and up to it they are."""
    def keyed(volume: int, count: int) -> tuple[Requirements, ...]:
        return tuple(Requirements([Requirement.new(f"example.com/k{volume}", "In", [f"x{j}"])]) for j in range(count))

    at_bound = VolumeRequirements(alternatives_per_volume=(keyed(0, 16), keyed(1, 16)))
    assert len(at_bound.alternatives) == MAX_VOLUME_ALTERNATIVES == 256 and at_bound.too_many is None
    past = VolumeRequirements(alternatives_per_volume=(keyed(0, 16), keyed(1, 16), keyed(2, 2)))
    assert past.alternatives == () and past.v1_reading()[0] is None
    assert past.too_many is not None and "cross into 512 alternatives, more than the 256" in past.too_many
    assert past.differs_v1


_alternative = st.lists(st.sampled_from(ZONES), min_size=1, max_size=2, unique=True).map(lambda z: zones(*z))
_volumes = st.lists(st.lists(_alternative, min_size=1, max_size=3), min_size=1, max_size=3)


@deterministic(300)
@given(_volumes)
def test_the_alternatives_are_the_compatible_branches_of_the_cross_product_in_order(
    per_volume: list[list[Requirements]],
) -> None:
    """Against the definition read off v1.14.1's loops: each branch of the cross product (volume by volume, in
    term order) whose every prefix is compatible with the next volume's choice; when some volume leaves no
    compatible pair, every branch from there on."""
    found = VolumeRequirements(alternatives_per_volume=tuple(tuple(v) for v in per_volume))
    branches: list[Requirements] = [Requirements()]
    fell_back = False
    for alternatives in per_volume:
        pairs = [(b, a) for b in branches for a in alternatives]
        kept = [(b, a) for b, a in pairs if not b.disjoint(a)]
        fell_back = fell_back or not kept
        branches = [b.intersection(a) for b, a in (kept or pairs)]
    assert found.alternatives == tuple(branches)
    assert found.alternatives_conflict is fell_back
    if not fell_back:  # a compatible branch leaves a zone
        assert all(not r[ZONE].is_empty() for r in found.alternatives)
    every = {functools.reduce(Requirements.intersection, choice, Requirements())
             for choice in itertools.product(*per_volume)}
    assert set(found.alternatives) <= every


def _known(*objects: Any) -> Volumes:
    known = Volumes()
    for read in objects:
        known.put(read)
    return known


def _claim(name: str, volume: str = "", storage_class: str | None = None) -> Any:
    spec: dict[str, Any] = {"volumeName": volume} if volume else {}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return claim_of({"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": {"phase": "Bound"}})


SC = storage_class_of({"metadata": {"name": "gp3"}})
PV = persistent_volume_of({"metadata": {"name": "pv-a"}, "spec": {}})


@pytest.mark.parametrize(("volumes", "known", "reason"), [
    ([PodVolume("v", "data")], (), 'getting persistent volume claim "data", persistentvolumeclaims "data" not found'),
    ([PodVolume("v", "data")], (_claim("data", storage_class="gone"),),
     'storageclasses.storage.k8s.io "gone" not found'),
    ([PodVolume("v", "data")], (_claim("data", "pv-gone", "gp3"), SC), 'persistentvolumes "pv-gone" not found'),
    ([PodVolume("v", "data")], (_claim("data", "pv-a", "gp3"), SC, PV), None),
    ([PodVolume("v", "data")], (_claim("data", storage_class=""),), None),  # "" is not validated
    ([PodVolume("v", "p-v", "gone", True)], (), 'storageclasses.storage.k8s.io "gone" not found'),
    ([PodVolume("v", "p-v", "gp3", True)], (SC,),
     'getting volume topology requirements, discovering persistent volume claim for ephemeral volume, '
     'persistentvolumeclaims "p-v" not found'),
    ([PodVolume("v", "p-v", "gp3", True)], (SC, _claim("p-v", storage_class="gp3")), None),
])  # fmt: skip
def test_v031s_claim_checks_in_its_words(volumes: list[PodVolume], known: tuple[Any, ...], reason: str | None) -> None:
    """v0.31.1 `ValidatePersistentVolumeClaims` (provisioner.go `GetPendingPods`: "ignoring pod, …") then
    `injectTopology` ("getting volume topology requirements, …"), on a cluster; files are never judged."""
    index = _known(*known)
    assert ignored_v031(volumes, "default", index, complete=True) == reason
    assert ignored_v031(volumes, "default", index) is None


def test_requirements_of_gives_both_readings() -> None:
    index = _known(_claim("data", "pv-a"), persistent_volume_of(pv([term(zone=["us-east-1a"]),
                                                                     term(zone=["us-east-1b"])], "pv-a")))
    found = requirements_of([PodVolume("v", "data")], "default", index)
    assert found.combined == zones("us-east-1a")
    assert found.alternatives == (zones("us-east-1a"), zones("us-east-1b"))
    assert found.differs_v1


def test_an_unbound_claim_of_class_empty_is_read_as_the_default_class_by_v031_only() -> None:
    """v0.31.1 `getRequirements` reads `storageClassName: ""` as the default class (`DiscoverDefaultStorageClassName`);
    v1.14.1 reads no class (`sc != ""`)."""
    default = storage_class_of({"metadata": {"name": "gp3", "creationTimestamp": "2026-01-01T00:00:00Z",
                                             "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                                "allowedTopologies": [{"matchLabelExpressions": [{"key": ZONE,
                                                                                   "values": ["us-east-1c"]}]}]})
    index = _known(default, _claim("data", storage_class=""))
    found = requirements_of([PodVolume("v", "data")], "default", index)
    assert found.combined == zones("us-east-1c")
    assert found.alternatives == ()
    assert found.differs_v1
