"""The node claim templates are built while nothing waits for them (`provisioning/provisioner.py`, `Provisioner.warm`):
the first burst after a start, after a new version of the constraint sets or after the cloud's offerings changed
does not build the instance table of the catalog's 1,392 types inside its batch window — at 500 nodes that build
took 0.3–0.7 s of the window's close to the first CreateFleet (`benchmarks/scale.py`)."""

from __future__ import annotations

from typing import Any

import pytest

from karpenter_policy.kube import objects
from karpenter_policy.reconcile.provisioning.provisioner import WARM_INTERVAL
from karpenter_policy.scheduling import InstanceTable

from .conftest import MakeHarness
from .support import create_all, inflate


@pytest.fixture
def tables_built(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """One entry per instance table built, by any of the controller's template builders."""
    built: list[float] = []
    shared = InstanceTable.shared

    def counting(cls: type[InstanceTable], *args: Any, **kwargs: Any) -> InstanceTable:
        built.append(1.0)
        return shared(*args, **kwargs)

    monkeypatch.setattr(InstanceTable, "shared", classmethod(counting))
    return built


def test_the_first_burst_finds_the_templates_built(make_harness: MakeHarness, tables_built: list[float]) -> None:
    h = make_harness(disruption_interval=0)
    h.step()  # the controller starts: no pod pending, no window
    started = len(tables_built)
    assert started >= 1, "the templates are built at the start, before any pod asks for them"
    create_all(h.cluster, objects.POD, inflate(0, 3))
    result = h.batch()
    assert result.launched and not h.unbound()
    assert len(tables_built) == started, "the window's close used the templates built at the start"


def test_changed_offerings_are_looked_at_between_windows(make_harness: MakeHarness, tables_built: list[float]) -> None:
    """The cloud's offerings change (a type marked unavailable after an insufficient-capacity error): the next look,
    at most WARM_INTERVAL later and with no window open, rebuilds the table — the burst after it builds nothing."""
    h = make_harness(disruption_interval=0)
    h.step()
    started = len(tables_built)
    h.cloud.mark_unavailable("m5.large", "us-east-1a", "on-demand", "InsufficientInstanceCapacity")
    h.clock.advance(WARM_INTERVAL / 2)
    h.step()
    assert len(tables_built) == started, "looked at no more often than every WARM_INTERVAL"
    h.clock.advance(WARM_INTERVAL / 2)
    assert h.controller.provisioning.poll() == WARM_INTERVAL, "an idle provisioning thread looks again this often"
    h.step()
    rebuilt = len(tables_built)
    assert rebuilt > started, "the changed offerings are built while no window is open"
    create_all(h.cluster, objects.POD, inflate(0, 3))
    assert h.batch().launched
    assert len(tables_built) == rebuilt


def test_a_new_version_of_the_sets_is_built_at_once(make_harness: MakeHarness, tables_built: list[float]) -> None:
    h = make_harness(disruption_interval=0)
    h.step()
    started = len(tables_built)
    h.controller.provisioner.sets_changed()
    h.cloud.mark_unavailable("m5.large", "us-east-1a", "on-demand", "InsufficientInstanceCapacity")
    h.step()
    assert len(tables_built) > started, "a new version of the sets (or of the offerings) is looked at with no delay"


def test_without_speculation_nothing_is_built_ahead(make_harness: MakeHarness, tables_built: list[float]) -> None:
    h = make_harness(disruption_interval=0, speculate=False)
    h.step()
    started = len(tables_built)
    create_all(h.cluster, objects.POD, inflate(0, 3))
    assert h.batch().launched
    assert len(tables_built) > started, "without speculation the window's close builds them"


def test_provisioning_and_disruption_share_one_index_but_not_their_templates(make_harness: MakeHarness) -> None:
    """Both builders of a controller make their tables over one index of the cloud's answer (built once), while a
    disruption decision keeps templates of its own (a scheduling run adjusts a template: disruption/controller.py)."""
    h = make_harness(disruption_interval=0)
    h.step()
    provisioning = h.controller.context.template_sets().templates
    disruption = h.controller.disruption._template_sets().templates
    assert provisioning and [t.name for t in disruption] == [t.name for t in provisioning]
    for mine, theirs in zip(provisioning, disruption, strict=True):
        assert mine is not theirs and mine.table is not theirs.table
        assert mine.table.names is theirs.table.names and mine.shapes.allocatable is theirs.shapes.allocatable
