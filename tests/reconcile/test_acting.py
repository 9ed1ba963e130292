"""Only the leader changes anything: a replica whose leadership lapsed in the middle of a step changes nothing more
— no launch, no Node, no binding, no deletion, no Event — whichever controller tries, and acts again once it
leads. The controller runs step by step on the in-memory cluster and cloud; leadership is what the runner would
set (`Controller.acting`)."""

from __future__ import annotations

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.reconcile.acting import NotLeading, NotLeadingInCloud

from .conftest import CLUSTER, MakeHarness
from .support import create_all, inflate


def test_a_replica_that_does_not_lead_launches_registers_and_binds_nothing(make_harness: MakeHarness) -> None:
    leading = False
    h = make_harness(batch_idle=1.0, batch_max=10.0, acting=lambda: leading)
    create_all(h.cluster, objects.POD, inflate(0, 3))

    h.step()
    h.clock.advance(1.1)  # the batch window closes: a leader would launch now
    h.step()

    assert h.cloud.list(CLUSTER) == [], "an instance launched by a replica that does not lead"
    assert h.nodes() == [] and len(h.unbound()) == 3
    assert h.cluster.list(objects.EVENT).items == []

    leading = True  # it leads again: the same pods get their node
    result = h.batch()
    assert len(result.launched) == 1 and len(h.cloud.list(CLUSTER)) == 1 and h.unbound() == []


def test_leadership_lapsing_in_the_middle_of_a_step_stops_it_at_its_next_change(make_harness: MakeHarness) -> None:
    """The check is per change, not per step: leadership that lapses between the launch and the Node's registration
    stops the step there (the launch is picked up by whoever leads next, as after any take-over)."""
    changes: list[bool] = []

    def leads_for_one_change() -> bool:
        changes.append(not h.cloud.list(CLUSTER))  # every change up to the launch is allowed, none after it
        return changes[-1]

    h = make_harness(batch_idle=1.0, batch_max=10.0, acting=leads_for_one_change)
    create_all(h.cluster, objects.POD, inflate(0, 2))
    h.step()
    h.clock.advance(1.1)
    h.step()

    assert len(h.cloud.list(CLUSTER)) == 1  # launched while leading
    assert h.nodes() == [] and len(h.unbound()) == 2, "a Node registered or a pod bound after the lapse"
    assert changes.count(False) >= 1


def test_reads_pass_and_every_kind_of_change_is_refused_when_not_leading(make_harness: MakeHarness) -> None:
    h = make_harness(acting=lambda: False)
    cluster, cloud = h.controller.cluster, h.controller.cloud
    pod = inflate(0, 1)[0]
    h.cluster.create(objects.POD, pod)

    assert [objects.name(p) for p in cluster.list(objects.POD).items] == [objects.name(pod)]
    assert cluster.get(objects.POD, objects.name(pod), "default") is not None
    assert cloud.list(CLUSTER) == [] and cloud.get("i-0123456789abcdef0") is None
    refused = [
        lambda: cluster.create(objects.NODE, {"metadata": {"name": "n"}}),
        lambda: cluster.update(objects.POD, pod),
        lambda: cluster.patch(objects.POD, objects.name(pod), {"metadata": {"labels": {"a": "b"}}}, "default"),
        lambda: cluster.delete(objects.POD, objects.name(pod), "default"),
        lambda: cluster.bind("default", objects.name(pod), "n"),
        lambda: cluster.evict("default", objects.name(pod)),
        lambda: cluster.record_event(pod, "Reason", "message"),
    ]
    for change in refused:
        with pytest.raises(NotLeading) as raised:
            change()
        assert isinstance(raised.value, ClusterError)  # handled as any failed call is
    with pytest.raises(NotLeadingInCloud):
        cloud.delete("i-0123456789abcdef0")
    with pytest.raises(NotLeadingInCloud):  # garbage collection's deletion of launch templates is a change too
        cloud.collect_launch_templates(CLUSTER)
    assert len(h.pods()) == 1 and h.nodes() == []
