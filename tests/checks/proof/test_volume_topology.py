"""Volume topology in `check --workloads` (issue #27): PersistentVolumes, PersistentVolumeClaims and StorageClasses
among the workloads read as Karpenter v0.31.1 reads them (karpenter-core
pkg/controllers/provisioning/scheduling/volumetopology.go, `VolumeTopology.Inject`) — a bound claim's PV zone and an
unbound claim's StorageClass allowedTopologies become hard requirements of the pod; volumes in different zones are a
`volume-zones-conflict` error naming them; a claim not among the files is a warning."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.checks.source.workloads import read_workloads
from karpenter_policy.model.labels import ZONE
from tests.workloadcheck import ROOT, check_workloads, line_of


def provisioner(*zones: str) -> str:
    return dedent(f"""\
        apiVersion: karpenter.sh/v1alpha5
        kind: Provisioner
        metadata:
          name: default
        spec:
          requirements:
            - key: topology.kubernetes.io/zone
              operator: In
              values: [{", ".join(zones)}]
            - key: node.kubernetes.io/instance-type
              operator: In
              values: [c6a.large, c6a.xlarge]
          providerRef: {{name: default}}
        ---
        apiVersion: karpenter.k8s.aws/v1alpha1
        kind: AWSNodeTemplate
        metadata:
          name: default
        spec:
          subnetSelector: {{karpenter.sh/discovery: t}}
          securityGroupSelector: {{karpenter.sh/discovery: t}}
        """)


STATEFUL_SET = """\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
        - name: db
          resources: {requests: {cpu: "1", memory: 1Gi}}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
"""


def claim(name: str, volume: str = "", storage_class: str | None = None) -> str:
    spec = {**({"volumeName": volume} if volume else {}), **({"storageClassName": storage_class}
                                                               if storage_class is not None else {})}  # fmt: skip
    shown = ", ".join(f"{k}: {v!r}" if v == "" else f"{k}: {v}" for k, v in spec.items())
    return f"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}}}\nspec: {{{shown}}}\n"


def volume(name: str, *zones: str, key: str = ZONE) -> str:
    return dedent(f"""\
        apiVersion: v1
        kind: PersistentVolume
        metadata: {{name: {name}}}
        spec:
          capacity: {{storage: 10Gi}}
          nodeAffinity:
            required:
              nodeSelectorTerms:
                - matchExpressions:
                    - {{key: {key}, operator: In, values: [{", ".join(zones)}]}}
        """)


def storage_class(name: str, *zones: str, default: bool = False) -> str:
    annotations = '{storageclass.kubernetes.io/is-default-class: "true"}' if default else "{}"
    return dedent(f"""\
        apiVersion: storage.k8s.io/v1
        kind: StorageClass
        metadata: {{name: {name}, annotations: {annotations}}}
        provisioner: ebs.csi.aws.com
        volumeBindingMode: WaitForFirstConsumer
        allowedTopologies:
          - matchLabelExpressions:
              - {{key: topology.ebs.csi.aws.com/zone, values: [{", ".join(zones)}]}}
        """)


def pod(name: str, volumes: str, zones: tuple[str, ...] = (), terms: str = "") -> str:
    affinity = ""
    if zones or terms:
        first = f"            - matchExpressions: [{{key: {ZONE}, operator: In, values: [{', '.join(zones)}]}}]\n"
        affinity = (
            "  affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
            "        nodeSelectorTerms:\n" + (first if zones else "") + terms
        )
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n"
        "  containers: [{name: app, resources: {requests: {cpu: 100m}}}]\n"
        f"  volumes:\n{volumes}{affinity}"
    )


def claim_volume(claim_name: str) -> str:
    return f"    - {{name: data, persistentVolumeClaim: {{claimName: {claim_name}}}}}\n"


def ephemeral_volume(storage_class_name: str) -> str:
    return (
        "    - name: data\n      ephemeral:\n        volumeClaimTemplate:\n"
        f"          spec: {{storageClassName: {storage_class_name}, accessModes: [ReadWriteOnce]}}\n"
    )


# --- through the CLI ------------------------------------------------------------------------------------------


def run(tmp_path: Path, zones: tuple[str, ...], *documents: str) -> tuple[int, dict[str, Any]]:
    return check_workloads(tmp_path, provisioner(*zones), "---\n".join(documents))


def test_a_statefulset_whose_claim_is_bound_to_a_volume_in_a_provisioners_zone_lands_there(tmp_path: Path) -> None:
    code, report = run(tmp_path, ("us-east-1a", "us-east-1b"), STATEFUL_SET, claim("data-db-0", "pv-a", "gp3"),
                       volume("pv-a", "us-east-1b"))  # fmt: skip
    assert code == 0, report["findings"]
    [db] = report["workloads"]
    assert db["schedulable"] and db["launch"]["zone"] == "us-east-1b", "the volume's zone, not the cheapest"
    kinds = report["summary"]["kinds"]
    assert (kinds["PersistentVolume"], kinds["PersistentVolumeClaim"]) == (1, 1), "counted as read"


def test_a_statefulset_whose_volume_is_in_a_zone_no_provisioner_has_is_unschedulable(tmp_path: Path) -> None:
    """Before #27 the PV was ignored and the StatefulSet reported schedulable."""
    code, report = run(tmp_path, ("us-east-1b", "us-east-1c"), STATEFUL_SET, claim("data-db-0", "pv-a"),
                       volume("pv-a", "us-east-1a"))  # fmt: skip
    assert code == 1
    [db] = report["workloads"]
    assert not db["schedulable"]
    [error] = report["findings"]
    assert error["rule"] == "workload-unschedulable" and "us-east-1a" in error["message"]


def test_the_ebs_csi_zone_key_is_read_as_the_zone(tmp_path: Path) -> None:
    code, report = run(tmp_path, ("us-east-1b", "us-east-1c"), STATEFUL_SET, claim("data-db-0", "pv-a"),
                       volume("pv-a", "us-east-1a", key="topology.ebs.csi.aws.com/zone"))  # fmt: skip
    assert code == 1 and not report["workloads"][0]["schedulable"]


def test_claims_bound_to_volumes_in_different_zones_are_an_error_naming_the_volumes(tmp_path: Path) -> None:
    volumes = claim_volume("one") + "    - {name: logs, persistentVolumeClaim: {claimName: two}}\n"
    code, report = run(tmp_path, ("us-east-1a", "us-east-1b"), pod("app", volumes), claim("one", "pv-a"),
                       claim("two", "pv-b"), volume("pv-a", "us-east-1a"), volume("pv-b", "us-east-1b"))  # fmt: skip
    assert code == 1
    [error] = report["findings"]
    assert (error["rule"], error["severity"], error["object"], error["line"]) == (
        "volume-zones-conflict", "error", "Pod/app", line_of(tmp_path, "spec:"),
    )  # fmt: skip
    assert "data (PersistentVolume pv-a" in error["message"] and "logs (PersistentVolume pv-b" in error["message"]
    assert report["workloads"] == [], "it is not placed: no node can hold it"


def test_a_claim_that_is_not_among_the_files_is_a_warning_and_adds_nothing(tmp_path: Path) -> None:
    code, report = run(tmp_path, ("us-east-1a",), pod("app", claim_volume("elsewhere")))
    assert code == 0
    [warning] = report["findings"]
    assert (warning["rule"], warning["severity"], warning["object"]) == ("unresolved-reference", "warning", "Pod/app")
    assert warning["message"].startswith("PersistentVolumeClaim elsewhere is not among the files read")
    assert report["workloads"][0]["schedulable"]


def test_a_volume_zones_conflict_can_be_disabled(tmp_path: Path) -> None:
    """Silenced like any rule (the workload is still left out: it cannot run)."""
    volumes = claim_volume("one") + "    - {name: logs, persistentVolumeClaim: {claimName: two}}\n"
    documents = (pod("app", volumes), claim("one", "pv-a"), claim("two", "pv-b"), volume("pv-a", "us-east-1a"),
                 volume("pv-b", "us-east-1b"))  # fmt: skip
    (tmp_path / "apps").mkdir()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.yaml").write_text(provisioner("us-east-1a"))
    (tmp_path / "apps" / "a.yaml").write_text("---\n".join(documents))
    result = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "check", str(tmp_path / "policies"), "--workloads",
         str(tmp_path / "apps"), "--disable", "volume-zones-conflict"],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "volume-zones-conflict" not in result.stdout


# --- Karpenter's own cases, as data ---------------------------------------------------------------------------
# karpenter-core v0.31.1 pkg/controllers/provisioning/provisioner_test.go, Describe("Volume Topology Requirements")
# (its StorageClass allows zones 2 and 3, line 977; zones 1, 2, 3 here are us-east-1a, 1b, 1c).

SC = storage_class("sc", "us-east-1b", "us-east-1c")


@dataclass(frozen=True)
class Case:
    name: str  # Karpenter's It(...) and its line
    documents: tuple[str, ...]
    zones: frozenset[str] | None  # the zones the pod may land in (None: no zone requirement); empty: none
    warning: str | None = None


CASES = [
    Case("should schedule with an empty storage class (987)", (pod("p", claim_volume("c")), claim("c", "", "")), None),
    Case("invalid pvc (999): a warning here, Karpenter does not schedule the pod",
         (pod("p", claim_volume("invalid")),), None, "PersistentVolumeClaim invalid"),
    Case("invalid pvc, storage class (1008): a warning here", (pod("p", claim_volume("c")), claim("c", "", "nope")),
         None, "StorageClass nope"),
    Case("invalid pvc, volume name (1021): a warning here", (pod("p", claim_volume("c")), claim("c", "gone", "sc")),
         None, "PersistentVolume gone"),
    Case("should schedule to storage class zones if volume does not exist (1034)",
         (SC, pod("p", claim_volume("c"), ("us-east-1a", "us-east-1c")), claim("c", "", "sc")),
         frozenset({"us-east-1c"})),
    Case("should schedule to storage class zones if volume does not exist (ephemeral volume) (1047)",
         (SC, pod("p", ephemeral_volume("sc"), ("us-east-1a", "us-east-1c")), claim("p-data", "", "sc")),
         frozenset({"us-east-1c"})),
    Case("should not schedule if storage class zones are incompatible (1069)",
         (SC, pod("p", claim_volume("c"), ("us-east-1a",)), claim("c", "", "sc")), frozenset()),
    Case("should not schedule if storage class zones are incompatible (ephemeral volume) (1081)",
         (SC, pod("p", ephemeral_volume("sc"), ("us-east-1a",)), claim("p-data", "", "sc")), frozenset()),
    Case("should schedule to volume zones if volume already bound (1102)",
         (SC, pod("p", claim_volume("c")), claim("c", "pv", "sc"), volume("pv", "us-east-1c")),
         frozenset({"us-east-1c"})),
    Case("should schedule to volume zones if volume already bound (ephemeral volume) (1113)",
         (SC, pod("p", ephemeral_volume("sc")), claim("p-data", "pv", "sc"), volume("pv", "us-east-1c")),
         frozenset({"us-east-1c"})),
    Case("should not schedule if volume zones are incompatible (1134)",
         (SC, pod("p", claim_volume("c"), ("us-east-1a",)), claim("c", "pv", "sc"), volume("pv", "us-east-1c")),
         frozenset()),
    Case("should not schedule if volume zones are incompatible (ephemeral volume) (1147)",
         (SC, pod("p", ephemeral_volume("sc"), ("us-east-1a",)), claim("p-data", "pv", "sc"),
          volume("pv", "us-east-1c")), frozenset()),
    # ours: the ephemeral claim not among the files is made from its template (unbound, the class's zones)
    Case("an ephemeral volume whose claim is not among the files follows its template's class",
         (SC, pod("p", ephemeral_volume("sc"))), frozenset({"us-east-1b", "us-east-1c"})),
    Case("no storageClassName: the default class",
         (storage_class("gp3", "us-east-1a", default=True), pod("p", claim_volume("c")), claim("c")),
         frozenset({"us-east-1a"})),
]  # fmt: skip


def read(tmp_path: Path, documents: tuple[str, ...]) -> Any:
    (tmp_path / "a.yaml").write_text("---\n".join(documents))
    return read_workloads([str(tmp_path)])


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_karpenters_volume_topology_cases(tmp_path: Path, case: Case) -> None:
    found = read(tmp_path, case.documents)
    warnings = [f.message for f in found.findings]
    assert len(warnings) == (0 if case.warning is None else 1), warnings
    if case.warning is not None:
        assert warnings[0].startswith(f"{case.warning} is not among the files read")
    [workload] = found.workloads
    terms = workload.shape.scheduling.required_terms
    if case.zones is None:
        assert all(ZONE not in term for term in terms)
    else:
        assert terms and all(term[ZONE].values == case.zones and not term[ZONE].complement for term in terms)


def test_the_volume_requirement_is_added_to_every_required_term_so_relaxation_keeps_it(tmp_path: Path) -> None:
    """`should not relax an added volume topology zone node-selector away` (provisioner_test.go line 1170)."""
    second = "            - matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]\n"
    documents = (pod("p", claim_volume("c"), terms="            - matchExpressions: [{key: example.com/label, "
                      "operator: In, values: [unsupported]}]\n" + second), claim("c", "pv"), volume("pv", "us-east-1c"))
    [workload] = read(tmp_path, documents).workloads
    terms = workload.shape.scheduling.required_terms
    assert len(terms) == 2 and all(term[ZONE].values == {"us-east-1c"} for term in terms)
    assert "karpenter.sh/capacity-type" in terms[1] and "example.com/label" in terms[0]


def test_each_ordinal_of_a_statefulset_has_its_own_claim(tmp_path: Path) -> None:
    """Claim data-db-0 is bound to a volume in us-east-1a; those of ordinals 1 and 2 are not among the files and
    follow the template (no class, no default: no zone). The pods are read as ordinal 0's (docs/scheduling.md)."""
    two = STATEFUL_SET.replace("replicas: 1", "replicas: 3")
    found = read(tmp_path, (two, claim("data-db-0", "pv-a"), volume("pv-a", "us-east-1a")))
    assert not found.findings
    [db] = found.workloads
    assert db.shape.scheduling.required_terms[0][ZONE].values == {"us-east-1a"}


ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


@deterministic(150)
@given(
    volume_zones=st.lists(st.sets(st.sampled_from(ZONES), min_size=1), min_size=1, max_size=3),
    pod_zones=st.one_of(st.none(), st.sets(st.sampled_from(ZONES), min_size=1)),
)
def test_a_pods_zones_are_those_all_its_volumes_and_its_own_affinity_share(
    volume_zones: list[set[str]], pod_zones: set[str] | None
) -> None:
    """Whatever the volumes' zones: no zone in common among them is `volume-zones-conflict` (the pod left out);
    otherwise the pod's required zone is the intersection of theirs and its own affinity's."""
    count = len(volume_zones)
    volumes = "".join(f"    - {{name: v{i}, persistentVolumeClaim: {{claimName: c{i}}}}}\n" for i in range(count))
    documents = [pod("p", volumes, tuple(sorted(pod_zones or ())))]
    for i, zones in enumerate(volume_zones):
        documents += [claim(f"c{i}", f"pv{i}"), volume(f"pv{i}", *sorted(zones))]
    with tempfile.TemporaryDirectory() as directory:
        found = read(Path(directory), tuple(documents))
    shared = set.intersection(*volume_zones)
    if not shared:
        [conflict] = found.findings
        assert conflict.rule == "volume-zones-conflict" and all(f"pv{i}" in conflict.message for i in range(2))
        assert found.workloads == []
        return
    assert found.findings == []
    [workload] = found.workloads
    [term] = workload.shape.scheduling.required_terms
    assert term[ZONE].values == shared & (pod_zones if pod_zones is not None else shared)


def test_a_volume_that_requires_a_label_to_be_absent_is_no_conflict(tmp_path: Path) -> None:
    """`DoesNotExist` leaves no value of its key by design: the pod must land where the label is absent."""
    absent = volume("pv", "us-east-1a").replace(
        "operator: In, values: [us-east-1a]}", "operator: In, values: [us-east-1a]}\n"
        "            - {key: example.com/tier, operator: DoesNotExist}",
    )  # fmt: skip
    found = read(tmp_path, (pod("p", claim_volume("c")), claim("c", "pv"), absent))
    assert found.findings == []
    [term] = found.workloads[0].shape.scheduling.required_terms
    assert term[ZONE].values == {"us-east-1a"} and term["example.com/tier"].is_empty()


def test_a_persistent_volume_with_an_unreadable_node_affinity_is_an_error_at_the_field(tmp_path: Path) -> None:
    broken = volume("pv", "us-east-1a").replace("operator: In", "operator: Near")
    found = read(tmp_path, (pod("p", claim_volume("c")), claim("c", "pv"), broken))
    [error, warning] = found.findings
    assert (error.rule, error.severity, error.object_ref) == ("invalid-workload", "error", "PersistentVolume/pv")
    lines = (tmp_path / "a.yaml").read_text().splitlines()
    assert "operator 'Near'" in error.message and "Near" in lines[error.line - 1]
    assert warning.rule == "unresolved-reference" and warning.message.startswith("PersistentVolume pv is not among")


def test_a_claim_whose_class_is_not_a_string_is_an_error_at_the_field(tmp_path: Path) -> None:
    """`storageClassName: 5` was read as unset (the default class) before the reading was shared with the controller
    (`model/volumes.py`); it is an `invalid-workload` error at its line, as a volume's unreadable field is."""
    found = read(tmp_path, (pod("p", claim_volume("c")), claim("c", storage_class="5")))
    error = next(f for f in found.findings if f.rule == "invalid-workload")
    assert (error.severity, error.object_ref) == ("error", "PersistentVolumeClaim/c")
    assert error.message == "spec.storageClassName must be a string"
    assert "storageClassName" in (tmp_path / "a.yaml").read_text().splitlines()[error.line - 1]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@deterministic(200)
@given(
    kind=st.sampled_from(["PersistentVolume", "PersistentVolumeClaim", "StorageClass", "RuntimeClass"]),
    api_version=st.sampled_from(["v1", "storage.k8s.io/v1"]) | JSON,
    spec=JSON,
    topologies=JSON,
    volumes=JSON,
)
def test_volume_objects_of_any_shape_are_read_or_refused_never_a_crash(
    kind: str, api_version: object, spec: object, topologies: object, volumes: object
) -> None:
    """Whatever crosses the boundary: a volume object (or a RuntimeClass: an apiVersion list crashed it) is read, or
    an `invalid-workload` error, never an exception."""
    documents = [
        {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": spec,
         "allowedTopologies": topologies},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"containers": [{"name": "a"}], "volumes": volumes}},
    ]  # fmt: skip
    with tempfile.TemporaryDirectory() as directory:
        (Path(directory) / "a.yaml").write_text(yaml.safe_dump_all(documents))
        found = read_workloads([directory])
    assert {f.rule for f in found.findings} <= {"invalid-workload", "unresolved-reference", "parse-error"}
