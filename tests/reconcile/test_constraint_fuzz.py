"""A property over hostile constraint sets: take a good compiled set (or its index), damage one field — deleted,
renamed, retyped, out-of-range numbers, `Infinity` and `NaN`, odd and huge strings, unknown keys, duplicated items
— and fix the hashes, as an edit that also reran them would. Then the controller's loader either refuses the
version in one line naming the file, or takes it, and then the controller schedules a pod aimed at that set
(its provisioner name selected, every taint tolerated) without an exception: a launch, or a reason the pod fits
nowhere. Never an exception, never a set that fails later, at schedule time.

Derandomized: the same examples in every run.
"""

from __future__ import annotations

import io
import json
import tempfile
from pathlib import Path
from typing import Any

from api.tampering import tamper_directory
from fuzz.properties import FUZZ
from fuzz.strategies import mutate, pick
from hypothesis import event, given, settings
from hypothesis import strategies as st
from profiles import examples

from karpenter_policy.fakes.cluster import MemoryCluster
from karpenter_policy.kube import objects
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded, Refused
from karpenter_policy.reconcile.controller import Controller, ControllerOptions
from karpenter_policy.simulate.kubelet import FakeKubelet

from .awsaccount import REGION
from .conftest import CLUSTER, fake_cloud
from .support import FakeClock, Harness, container, pod

EXAMPLES = 300
SETS = ("batch", "default", "gpu", "kspark")
#: A few types each example set admits (the cloud sells only these: a pass stays cheap).
TYPES = ["c5.2xlarge", "c6a.xlarge", "m6i.large", "r6i.large", "g5.2xlarge", "c5a.4xlarge"]


#: The fields of a set that shape what the controller launches: most damage goes there.
POLICY_FIELDS = (
    "requirements", "labels", "taints", "startupTaints", "limits", "weight", "ttlSecondsAfterEmpty",
    "ttlSecondsUntilExpired", "consolidation", "provider", "kubelet", "name", "region", "admitted", "annotations",
)  # fmt: skip


def damage(draw: st.DrawFn, document: dict[str, Any]) -> str:
    """One mutation (tests/fuzz's) of one top-level field of `document`, in place; what it did."""
    fields = [f for f in POLICY_FIELDS if f in document]
    field = pick(draw, fields) if fields and draw(st.integers(0, 5)) else pick(draw, sorted(document, key=str))
    docs: list[Any] = [{field: document.pop(field)}]
    what = mutate(draw, docs)
    if isinstance(docs[0], dict):
        document.update(docs[0])
    else:
        document[field] = docs[0]
    return f"{field}: {what}"


def aimed_at(name: str) -> dict[str, Any]:
    """A pod only the set `name` can take: its provisioner name selected, any taint tolerated."""
    return pod(
        "probe",
        containers=[container("100m", "128Mi")],
        nodeSelector={"karpenter.sh/provisioner-name": name},
        tolerations=[{"operator": "Exists"}],
    )


@settings(FUZZ, max_examples=examples(EXAMPLES))
@given(st.data())
def test_a_damaged_set_is_refused_in_one_line_or_schedules_without_an_exception(
    compiled: Path, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(SETS), label="set")
    in_index = data.draw(st.integers(0, 7), label="index?") == 0
    described: list[str] = []

    def edit(document: dict[str, Any]) -> None:
        if document.get("instanceTypes"):  # the audit listing: kept short, so the draws go to the policy's fields
            document["instanceTypes"] = document["instanceTypes"][:2]
        described.append(damage(data.draw, document))

    with tempfile.TemporaryDirectory() as scratch:
        build = Path(scratch) / "build"
        if in_index:
            tamper_directory(compiled, name, None, edit, copy_to=build)
        else:
            tamper_directory(compiled, name, edit, copy_to=build)
        damaged = f"damaged {'the index' if in_index else 'a set'}: {described[0].split(':')[0]}"
        event(damaged)
        source = DirectorySource(build)
        version = source.poll()
        if isinstance(version, Refused):
            event("refused")
            assert version.message.startswith(f"{build / 'constraintsets'}/"), version.message
            assert "\n" not in version.message and len(version.message) < 1000, version.message
            return
        assert isinstance(version, Loaded)
        event(f"taken, {damaged}")
        clock, cluster = FakeClock(), MemoryCluster()
        cloud = fake_cloud(clock, TYPES)
        options = ControllerOptions(cluster_name=CLUSTER, launch_parallelism=1)
        controller = Controller(cluster, cloud, _Once(version), options, region=REGION, clock=clock)
        harness = Harness(cluster, cloud, controller, FakeKubelet(cluster, clock), clock, io.StringIO())
        cluster.create(objects.POD, aimed_at(name))
        result = harness.batch()
        assert result.launched or result.unschedulable, json.dumps(described)


class _Once:
    """A source that hands the controller one version, then nothing."""

    description = "fuzzed"

    def __init__(self, version: Loaded) -> None:
        self._version: Loaded | None = version

    def poll(self) -> Loaded | None:
        version, self._version = self._version, None
        return version
