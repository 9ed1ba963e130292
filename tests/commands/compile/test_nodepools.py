"""`compile` on Karpenter v1 input: NodePools and EC2NodeClasses compile to constraint sets beside the Provisioners'
(`commands/compile/nodepools.py`), byte-identical on re-run; their manifests are written as they are; the readers
of sets read both kinds (a NodePool's set listed as a Provisioner's is refused, naming it), simulate runs them;
`--api v1` refuses a conversion that would write a second NodePool of a NodePool's name. All through the CLI on
examples/v1/."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from karpenter_policy.api.constraintset import ConstraintSetError, content_hash, read_compiled, read_wire_data
from karpenter_policy.catalog import load_catalog
from karpenter_policy.model import labels as wk

ROOT = Path(__file__).resolve().parents[3]
MIXED = ROOT / "examples" / "v1" / "mixed" / "policies"
POSITIVE = ROOT / "examples" / "v1" / "positive"
CATALOG = load_catalog()


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=180
    )


def tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mixed") / "out"
    run = cli("compile", str(MIXED), "-o", str(out), "--policy-version", "v1-test")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "compiled 5 objects (1 AWSNodeTemplate, 1 EC2NodeClass, 2 NodePool, 1 Provisioner)" in run.stdout
    assert "3 constraint sets, 6 manifests" in run.stderr
    return out


def test_a_mixed_repository_compiles_a_set_for_each_provisioner_and_nodepool_under_its_own_key(mixed: Path) -> None:
    files = tree(mixed)
    assert sorted(f for f in files if f.startswith("constraintsets/")) == [
        "constraintsets/default.json",  # the Provisioner `default`
        "constraintsets/index.json",
        "constraintsets/nodepool.batch.json",
        "constraintsets/nodepool.default.json",  # the NodePool `default`: same name, another key
    ]
    index = json.loads(files["constraintsets/index.json"])
    assert [(e["name"], e.get("kind"), e["key"]) for e in index["sets"]] == [
        ("batch", "NodePool", "nodepool.batch.json"),
        ("default", None, "default.json"),
        ("default", "NodePool", "nodepool.default.json"),
    ]
    provisioner = json.loads(files["constraintsets/default.json"])
    assert "origin" not in provisioner and "nodePool" not in provisioner and "ttlSecondsAfterEmpty" in provisioner


def test_a_nodepool_set_is_its_scheduling_view_with_what_v1_adds(mixed: Path) -> None:
    batch = json.loads((mixed / "constraintsets" / "nodepool.batch.json").read_text())
    assert batch["origin"] == "NodePool" and batch["name"] == "batch" and batch["weight"] == 10
    assert batch["limits"] == {"cpu": "1000", "nodes": "50"}  # spec.limits, nodes included
    assert batch["labels"] == {"workload": "batch"}
    assert batch["taints"] == [{"effect": "NoSchedule", "key": "example.com/batch"}]
    assert batch["provider"]["source"] == "nodeClassRef" and batch["provider"]["name"] == "default"
    assert batch["provider"]["spec"]["amiSelectorTerms"] == [{"alias": "al2023@latest"}]
    assert batch["nodePool"]["minValues"] == {wk.INSTANCE_FAMILY: 3}
    assert batch["nodePool"]["disruption"]["budgets"] == [{"nodes": "10%"}]  # the CRD's default, applied
    assert batch["nodePool"]["expireAfter"] == "720h"
    assert not {"ttlSecondsAfterEmpty", "ttlSecondsUntilExpired", "consolidation"} & batch.keys()
    families = {name.split(".")[0] for name in batch["admitted"]}
    assert families == {"c6a", "c6i", "c7a", "c7i", "m6a", "m6i"}
    for listed in batch["instanceTypes"]:
        assert set(listed["offerings"]) == {"spot"}
    assert batch["sources"] == ["examples/v1/mixed/policies/nodepools.yaml"]


def test_gte_is_compiled_as_its_kubernetes_equivalent_and_admits_the_same_types(mixed: Path) -> None:
    default = json.loads((mixed / "constraintsets" / "nodepool.default.json").read_text())
    assert {"key": wk.INSTANCE_GENERATION, "operator": "Gt", "values": ["5"]} in default["requirements"]
    by_name = {it.name: it for it in CATALOG}
    generations = {int(by_name[name].linux_labels[wk.INSTANCE_GENERATION]) for name in default["admitted"]}
    assert min(generations) == 6
    categories = {by_name[name].linux_labels[wk.INSTANCE_CATEGORY] for name in default["admitted"]}
    assert categories == {"c", "m", "r"}


def test_nodepool_and_ec2nodeclass_manifests_are_written_as_they_are(mixed: Path) -> None:
    documents = yaml.safe_load_all((MIXED / "nodepools.yaml").read_text())
    sources = {(d["kind"], d["metadata"]["name"]): d for d in documents}
    for (kind, name), source in sources.items():
        written = yaml.safe_load((mixed / "manifests" / f"{kind.lower()}-{name}.yaml").read_text())
        assert written == source
    kustomization = yaml.safe_load((mixed / "kustomization.yaml").read_text())
    assert "manifests/nodepool-batch.yaml" in kustomization["resources"]


def test_compile_on_v1_input_is_byte_identical_on_rerun_and_whatever_the_order_of_paths(
    mixed: Path, tmp_path: Path
) -> None:
    again = tmp_path / "again"
    run = cli(
        "compile", str(MIXED / "provisioner.yaml"), str(MIXED / "nodepools.yaml"), "-o", str(again),
        "--policy-version", "v1-test",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert tree(again) == tree(mixed)
    rerun = cli("compile", str(MIXED), "-o", str(again), "--policy-version", "v1-test")
    assert "0 added, 0 replaced, 11 unchanged" in rerun.stderr
    assert tree(again) == tree(mixed)


def test_a_v1_only_repository_compiles_its_nodepools(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = cli("compile", str(POSITIVE), "-o", str(out))
    assert run.returncode == 0, run.stderr
    sets = sorted(p.name for p in (out / "constraintsets").iterdir())
    assert sets == [
        "index.json", "nodepool.batch.json", "nodepool.default.json", "nodepool.general-purpose.json",
        "nodepool.windows2022.json",
    ]  # fmt: skip
    windows = json.loads((out / "constraintsets" / "nodepool.windows2022.json").read_text())
    assert windows["admitted"]  # Windows2022's arithmetic, from the EC2NodeClass's alias
    elsewhere = json.loads((out / "constraintsets" / "nodepool.batch.json").read_text())
    assert elsewhere["provider"] == {"source": "nodeClassRef", "name": "shared-al2023", "spec": None}


def test_a_nodepool_with_a_proof_error_stops_compile_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = cli("compile", str(ROOT / "examples" / "v1" / "proofs"), "-o", str(out))
    assert run.returncode == 1
    assert "NodePool/too-few-categories" in run.stdout and "[min-values]" in run.stdout
    assert "nothing written: 4 errors" in run.stderr
    assert not out.exists()


def test_the_sets_of_both_kinds_are_read_and_simulate_runs_them(mixed: Path) -> None:
    _, sets = read_compiled(mixed)
    assert sorted(s.pool for s in sets) == ["NodePool/batch", "NodePool/default", "default"]
    workloads = ROOT / "examples" / "v1" / "mixed" / "apps"
    run = cli("simulate", "--constraints", str(mixed), "--workloads", str(workloads))
    # the NodePools' EC2NodeClass boots AL2023: the simulated cluster's service CIDR comes from moto's EKS, so
    # every set runs and every pod lands (the batch pods on the NodePool's spot node)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "left out" not in run.stdout
    assert re.search(r"NodePool/batch +c\S+ +\S+ +spot +3 ", run.stdout), run.stdout
    assert "Traceback" not in run.stderr


def test_the_configmap_holds_both_kinds_and_a_nodepool_set_listed_as_a_provisioners_is_refused(mixed: Path) -> None:
    configmap = yaml.safe_load((mixed / "manifests" / "configmap-karpenter-policy-constraints.yaml").read_text())
    assert sorted(configmap["data"]) == ["default.json", "index.json", "nodepool.batch.json", "nodepool.default.json"]
    _, sets = read_wire_data(configmap["data"])
    assert sorted(s.pool for s in sets) == ["NodePool/batch", "NodePool/default", "default"]
    # a NodePool's set under a Provisioner's key, should a hand-made index list it as a Provisioner's, is refused
    data = dict(configmap["data"])
    index = json.loads(data["index.json"])
    index["sets"] = [entry for entry in index["sets"] if entry.get("kind") != "NodePool"]
    index["hash"] = content_hash({k: v for k, v in index.items() if k not in ("hash", "types", "nodeTemplates")})
    data["index.json"] = json.dumps(index)
    data["default.json"] = data["nodepool.default.json"]
    with pytest.raises(ConstraintSetError, match=r'default.json: kind "NodePool" is not the index\'s "Provisioner"'):
        read_wire_data(data)


def test_api_v1_refuses_a_conversion_that_would_write_a_second_nodepool_of_one_name(tmp_path: Path) -> None:
    out = tmp_path / "out"
    role = "KarpenterNodeRole-demo"
    run = cli("compile", "examples/v1/mixed/policies", "--api", "v1", "--node-role", role, "-o", str(out))
    assert run.returncode == 1
    lines = [line for line in run.stdout.splitlines() if "[duplicate-name]" in line]
    assert lines == [
        "examples/v1/mixed/policies/nodepools.yaml:6:9: error: NodePool/default: compile --api v1 would write two "
        "NodePool objects named 'default': this one and one converted from the repository's Provisioners; rename "
        "one, or compile with --api v1alpha5 [duplicate-name]",
        "examples/v1/mixed/policies/nodepools.yaml:61:9: error: EC2NodeClass/default: compile --api v1 would write "
        "two EC2NodeClass objects named 'default': this one and one converted from the repository's "
        "AWSNodeTemplates; rename one, or compile with --api v1alpha5 [duplicate-name]",
    ]
    assert not out.exists()


def test_api_v1_writes_a_repositorys_nodepools_beside_the_converted_provisioners(tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    shutil.copytree(MIXED, policies)
    text = (policies / "provisioner.yaml").read_text()
    (policies / "provisioner.yaml").write_text(text.replace("name: default", "name: legacy"))
    out = tmp_path / "out"
    run = cli("compile", str(policies), "--api", "v1", "--node-role", "KarpenterNodeRole-demo", "-o", str(out))
    assert run.returncode == 0, run.stdout + run.stderr
    manifests = sorted(p.name for p in (out / "manifests").iterdir())
    assert manifests == [
        "configmap-karpenter-policy-constraints.yaml", "ec2nodeclass-default.yaml", "ec2nodeclass-legacy.yaml",
        "nodepool-batch.yaml", "nodepool-default.yaml", "nodepool-legacy.yaml",
    ]  # fmt: skip
