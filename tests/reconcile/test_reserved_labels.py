"""A node launched into a capacity reservation is labelled as Karpenter v1.14.1 labels its NodeClaim (aws
pkg/cloudprovider/cloudprovider.go:465-470 `instanceToNodeClaim`): `karpenter.sh/capacity-type: reserved` with the
reservation's id, type and interruptibility from the instance; an on-demand or spot node never carries them. The
NodeClaim takes the same labels from its Node (`claims.objects.node_labels`, `PopulateNodeClaimDetails`)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from karpenter_policy.api.constraintset import ConstraintSet
from karpenter_policy.cloud.provider import STATE_PENDING, Instance
from karpenter_policy.model import labels as wk
from karpenter_policy.reconcile.claims import objects as claim_objects
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded
from karpenter_policy.reconcile.state import nodes
from karpenter_policy.reconcile.templates import TemplateBuilder

from .conftest import REGION, fake_cloud
from .support import FakeClock

RESERVED = Instance(
    id="i-0123456789abcdef0", instance_type="m5.large", zone="us-east-1a", capacity_type=wk.CAPACITY_RESERVED,
    state=STATE_PENDING, private_dns_name="ip-10-0-0-1.ec2.internal", provider_id="aws:///us-east-1a/i-0123",
    reservation_id="cr-0123456789abcdef0", reservation_type="capacity-block", reservation_interruptible=False,
)
RESERVATION_KEYS = (wk.CAPACITY_RESERVATION_ID, wk.CAPACITY_RESERVATION_TYPE, wk.CAPACITY_RESERVATION_INTERRUPTIBLE)


@pytest.fixture(scope="module")
def first_set(compiled: Path) -> ConstraintSet:
    loaded = DirectorySource(compiled).read()
    assert isinstance(loaded, Loaded)
    return loaded.sets[0]


def _node(instance: Instance, constraint_set: ConstraintSet) -> dict[str, str]:
    templates = TemplateBuilder(fake_cloud(FakeClock()), REGION).build([constraint_set])
    template = templates.template(constraint_set.pool)
    node = nodes.node_object(instance, template, constraint_set, template.requirements)
    labels: dict[str, str] = node["metadata"]["labels"]
    return labels


def test_a_reserved_node_and_its_claim_carry_the_reservation(first_set: ConstraintSet) -> None:
    """cloudprovider.go:465-470: capacity type reserved, the reservation's id, type and interruptible `false`."""
    labels = _node(RESERVED, first_set)
    expected = {
        wk.CAPACITY_TYPE: wk.CAPACITY_RESERVED,
        wk.CAPACITY_RESERVATION_ID: "cr-0123456789abcdef0",
        wk.CAPACITY_RESERVATION_TYPE: "capacity-block",
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
    }
    assert {key: labels.get(key) for key in expected} == expected
    claim = claim_objects.node_labels({"metadata": {"labels": labels}})
    assert {key: claim.get(key) for key in expected} == expected


def test_an_interruptible_reservation_says_so(first_set: ConstraintSet) -> None:
    """cloudprovider.go:469: `fmt.Sprintf("%t", Interruptible)`."""
    interruptible = dataclasses.replace(RESERVED, reservation_type="default", reservation_interruptible=True)
    labels = _node(interruptible, first_set)
    assert (labels[wk.CAPACITY_RESERVATION_TYPE], labels[wk.CAPACITY_RESERVATION_INTERRUPTIBLE]) == ("default", "true")


@pytest.mark.parametrize("capacity_type", [wk.CAPACITY_ON_DEMAND, wk.CAPACITY_SPOT])
def test_other_capacity_types_carry_no_reservation(first_set: ConstraintSet, capacity_type: str) -> None:
    """cloudprovider.go:466: only a reserved instance is labelled with its reservation (an instance in an open
    reservation, read as on-demand, is not)."""
    labels = _node(dataclasses.replace(RESERVED, capacity_type=capacity_type), first_set)
    assert labels[wk.CAPACITY_TYPE] == capacity_type
    assert not set(RESERVATION_KEYS) & set(labels)
