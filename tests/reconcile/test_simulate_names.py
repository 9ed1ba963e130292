"""The pods `simulate` creates for a workload are named as its controller names them, and never twice the same:
`simulate --scale deployment/inflate=100000` used to stop on `AlreadyExists` (a hashed suffix per replica collides,
by the birthday bound, a few hundred times in 100,000). Names are distinct for every ordinal and the same in every
run."""

from __future__ import annotations

import pytest

from karpenter_policy.simulate.workloads import ScenarioWorkload, pod_name

REPLICAS = 100_000
SUFFIXES = 27**5  # five characters of the API server's suffix alphabet


@pytest.mark.parametrize("kind", ["Deployment", "Job", "CronJob", "ReplicaSet"])
@pytest.mark.slow
def test_a_hundred_thousand_replicas_have_a_hundred_thousand_names(kind: str) -> None:
    workload = ScenarioWorkload(kind, "inflate", "default", {"spec": {"containers": [{"name": "app"}]}}, REPLICAS)
    names = [pod_name(workload, ordinal, REPLICAS) for ordinal in range(REPLICAS)]
    assert len(set(names)) == REPLICAS
    assert names == [pod_name(workload, ordinal, REPLICAS) for ordinal in range(REPLICAS)], "the same every run"
    prefix = names[0].rpartition("-")[0]
    assert all(name.rpartition("-")[0] == prefix and len(name.rpartition("-")[2]) == 5 for name in names)


def test_beyond_the_five_character_suffixes_names_grow_a_character_and_stay_distinct() -> None:
    workload = ScenarioWorkload("Deployment", "inflate", "default", {"spec": {}}, 1)
    edge = [pod_name(workload, ordinal, 1) for ordinal in range(SUFFIXES - 1000, SUFFIXES + 1000)]
    assert len(set(edge)) == len(edge)
    assert {len(name.rpartition("-")[2]) for name in edge[:1000]} == {5}
    assert {len(name.rpartition("-")[2]) for name in edge[1000:]} == {6}
