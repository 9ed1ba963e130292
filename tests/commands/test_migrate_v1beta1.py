"""`migrate --to v1beta1` (clusters on Karpenter v0.32–v0.37): the output is what karpenter-convert v0.32.10 wrote
for the same inputs, case by case, but for the differences named here (each checked to be exactly that
difference); it passes the v1beta1 CRDs' OpenAPI schemas (aws/karpenter-provider-aws v0.32.10 and v0.37.8,
pkg/apis/crds/, copied into tests/data/karpenter-v1beta1-crds/), field by field, and their CEL rules on
`disruption`; each NodePool is proven equivalent to its Provisioner, as with `--to v1`."""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from profiles import fast_first

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command
from karpenter_policy.model.resources import parse_quantity

DATA = Path(__file__).resolve().parents[1] / "data"
INPUTS = DATA / "karpenter-convert-v0.32.10"
EXPECTED = INPUTS / "expected"
CRDS = DATA / "karpenter-v1beta1-crds"
EXAMPLES = DATA / "karpenter-v0.31.5-examples"
#: Karpenter v0.31.5's Provisioner examples v1beta1 refuses too (v0.31.1 itself rejects `ami456` as an id);
#: ubuntu-kubelet-log-query.yaml, refused for v1 (no Ubuntu alias), migrates: v1beta1 keeps amiFamily Ubuntu.
REFUSED_EXAMPLES = {"al2-custom-ami.yaml", "custom-family.yaml"}
TEMPLATE = "nodetemplate_kubectl_output.yaml"
ROLE = "$KARPENTER_NODE_ROLE"  # the role karpenter-convert v0.32.10 writes into every EC2NodeClass
#: karpenter-convert's test table (tools/karpenter-convert/pkg/convert/suite_test.go, v0.32.10): input → its
#: expected output; the provider case is convert.go's combined output (testdata/nodepool_nodeclass_provider_combined).
CASES = {
    "provisioner.yaml": "nodepool.yaml",
    "provisioner_defaults.yaml": "nodepool_defaults.yaml",
    "provisioner_no_defaults.yaml": "nodepool_no_defaults.yaml",
    "provisioner_kubectl_output.yaml": "nodepool_kubectl_output.yaml",
    "provisioner_provider.yaml": "nodepool_nodeclass_provider_combined.yaml",
    "nodetemplate_no_amifamily.yaml": "nodeclass_no_amifamily.yaml",
    "nodetemplate_kubectl_output.yaml": "nodeclass_kubectl_output.yaml",
}
#: The v0.31 default requirements `migrate` makes explicit (proven equivalent) where karpenter-convert's
#: ignore-defaults output has `requirements: null` (which v1beta1 reads as any architecture and capacity type).
V031_DEFAULTS = [
    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
    {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"]},
]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _migrate(name: str, tmp_path: Path, catalog: Catalog, **options: Any) -> tuple[int, str, list[dict[str, Any]]]:
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(INPUTS / name, source / name)
    if name.startswith("provisioner") and name != "provisioner_provider.yaml":
        shutil.copy(INPUTS / TEMPLATE, source / TEMPLATE)
    out = tmp_path / "out"
    result = migrate_command([str(source)], MigrateOptions(to="v1beta1", out=str(out), **options), catalog)
    objects = [d for f in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    return result.exit_code, result.stdout + result.stderr, objects


def _seconds(duration: str) -> Decimal | str:
    """A Go duration ("720h0m0s", "1m30s") in seconds; "Never" as it is."""
    if duration == "Never":
        return duration
    parts = re.findall(r"([0-9.]+)(h|m|s)", duration)
    assert "".join(n + u for n, u in parts) == duration, duration
    return sum((Decimal(n) * {"h": 3600, "m": 60, "s": 1}[u] for n, u in parts), Decimal(0))


def _normalised(obj: Mapping[str, Any]) -> dict[str, Any]:
    """`obj` with its durations and quantities as numbers (karpenter-convert spells 720h as 720h0m0s, 1000 as 1k)."""
    out = copy.deepcopy(dict(obj))
    spec = out.get("spec") or {}
    disruption = spec.get("disruption") or {}
    for key in ("expireAfter", "consolidateAfter"):
        if key in disruption:
            disruption[key] = _seconds(disruption[key])
    if "limits" in spec:
        spec["limits"] = {k: parse_quantity(str(v)) for k, v in spec["limits"].items()}
    kubelet = ((spec.get("template") or {}).get("spec") or {}).get("kubelet") or {}
    if "evictionSoftGracePeriod" in kubelet:
        kubelet["evictionSoftGracePeriod"] = {k: _seconds(v) for k, v in kubelet["evictionSoftGracePeriod"].items()}
    return out


def _crd_schema(file: str) -> dict[str, Any]:
    crd = yaml.safe_load((CRDS / file).read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v1beta1")
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def _metadata_options_default() -> dict[str, Any]:
    spec = _crd_schema("v0.32.10-karpenter.k8s.aws_ec2nodeclasses.yaml")["properties"]["spec"]
    default: dict[str, Any] = spec["properties"]["metadataOptions"]["default"]
    return default


def _as_karpenter_convert_writes(case: str, obj: dict[str, Any]) -> dict[str, Any]:
    """Our object with each known difference from karpenter-convert v0.32.10 undone — each asserted to be there."""
    out = copy.deepcopy(obj)
    spec = out["spec"]
    if out["kind"] == "NodePool":
        # budgets: Karpenter v0.34 added them; karpenter-convert v0.32.10 predates them. migrate keeps v0.31's pace.
        assert spec["disruption"].pop("budgets") == [{"nodes": "1"}]
        if case == "provisioner_kubectl_output.yaml":
            # No consolidation and no ttlSecondsAfterEmpty: v0.31 never removed such nodes. karpenter-convert
            # wrote no policy, so v1beta1's default WhenUnderutilized consolidates them; migrate keeps v0.31's.
            assert spec["disruption"].pop("consolidationPolicy") == "WhenEmpty"
            assert spec["disruption"].pop("consolidateAfter") == "Never"
        if case == "provisioner_no_defaults.yaml":
            assert spec["template"]["spec"]["requirements"] == V031_DEFAULTS
            spec["template"]["spec"]["requirements"] = None
    else:
        # v1alpha5's metadata options, written out: the same values as v1beta1's default.
        assert spec.pop("metadataOptions") == _metadata_options_default() or case == "provisioner_provider.yaml"
        if case == "provisioner_provider.yaml":
            # v1beta1 has instanceProfile; karpenter-convert replaced it with its role placeholder.
            assert spec.pop("instanceProfile") == "KarpenterInstanceProfile-karpenter-demo"
            spec["role"] = ROLE
            spec["metadataOptions"] = obj["spec"]["metadataOptions"]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_output_is_karpenter_converts_but_for_the_named_differences(
    name: str, catalog: Catalog, tmp_path: Path
) -> None:
    exit_code, output, ours = _migrate(name, tmp_path, catalog, node_role=ROLE)

    assert exit_code == 0, output
    theirs = [d for d in yaml.safe_load_all((EXPECTED / CASES[name]).read_text()) if d]
    for expected in theirs:
        identity = (expected["kind"], expected["metadata"]["name"])
        mine = [o for o in ours if (o["kind"], o["metadata"]["name"]) == identity]
        assert len(mine) == 1, (expected["kind"], [o["kind"] for o in ours])
        got = _normalised(_as_karpenter_convert_writes(name, mine[0]))
        if expected["kind"] == "NodePool" and got["spec"]["template"]["spec"]["requirements"] is not None:
            key = lambda r: (r["key"], r["operator"])  # noqa: E731 - order is not meaning
            got["spec"]["template"]["spec"]["requirements"].sort(key=key)
            expected["spec"]["template"]["spec"]["requirements"].sort(key=key)
        assert got == _normalised(expected)


def _strict(schema: Any) -> Any:
    """The schema with unknown fields refused wherever it lists the known ones (the API server prunes them)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


def _schema_errors(obj: Mapping[str, Any], version: str) -> list[str]:
    file = "karpenter.sh_nodepools.yaml" if obj["kind"] == "NodePool" else "karpenter.k8s.aws_ec2nodeclasses.yaml"
    validator = jsonschema.Draft7Validator(_strict(_crd_schema(f"{version}-{file}")))
    return sorted(f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj))


def _disruption_cel(disruption: Mapping[str, Any]) -> list[str]:
    """The two CEL rules of v1beta1's spec.disruption (karpenter.sh_nodepools.yaml, v0.32.10 and v0.37.8)."""
    broken = []
    policy = disruption.get("consolidationPolicy", "WhenUnderutilized")
    if "consolidateAfter" in disruption and policy == "WhenUnderutilized" and disruption["consolidateAfter"] != "Never":
        broken.append("consolidateAfter cannot be combined with consolidationPolicy=WhenUnderutilized")
    if policy == "WhenEmpty" and "consolidateAfter" not in disruption:
        broken.append("consolidateAfter must be specified with consolidationPolicy=WhenEmpty")
    return broken


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_output_passes_the_v1beta1_crds_schemas(name: str, catalog: Catalog, tmp_path: Path) -> None:
    exit_code, output, ours = _migrate(name, tmp_path, catalog, default_instance_profile="KarpenterNodeInstanceProfile")

    assert exit_code == 0, output
    assert {o["apiVersion"] for o in ours} <= {"karpenter.sh/v1beta1", "karpenter.k8s.aws/v1beta1"}
    for obj in ours:
        assert _schema_errors(obj, "v0.37.8") == []
        # v0.32.10 knows every field but budgets (added in v0.34), which it prunes
        budgets = ["spec.disruption: Additional properties are not allowed ('budgets' was unexpected)"]
        assert _schema_errors(obj, "v0.32.10") == (budgets if obj["kind"] == "NodePool" else [])
        if obj["kind"] == "NodePool":
            assert _disruption_cel(obj["spec"]["disruption"]) == []


def test_consolidation_is_when_underutilized_without_consolidate_after(catalog: Catalog, tmp_path: Path) -> None:
    exit_code, output, ours = _migrate("provisioner_provider.yaml", tmp_path, catalog)

    assert exit_code == 0, output
    pool = next(o for o in ours if o["kind"] == "NodePool")
    assert pool["spec"]["disruption"] == {
        "consolidationPolicy": "WhenUnderutilized",
        "expireAfter": "Never",
        "budgets": [{"nodes": "1"}],
    }
    assert "Provisioner default → NodePool default: proven equivalent" in output


def test_kubelet_stays_on_the_nodepool_and_one_class_serves_every_provisioner(
    catalog: Catalog, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(INPUTS / TEMPLATE, source / TEMPLATE)
    text = (INPUTS / "provisioner.yaml").read_text()
    (source / "a.yaml").write_text(text)
    other = text.replace("name: default\nspec:", "name: other\nspec:").replace("maxPods: 20", "maxPods: 30")
    (source / "b.yaml").write_text(other)
    out = tmp_path / "out"

    result = migrate_command(
        [str(source)], MigrateOptions(to="v1beta1", out=str(out), node_role="KarpenterNodeRole"), catalog
    )

    assert result.exit_code == 0, result.stdout + result.stderr
    objects = [d for f in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    classes = [o for o in objects if o["kind"] == "EC2NodeClass"]
    pools = {o["metadata"]["name"]: o["spec"]["template"]["spec"] for o in objects if o["kind"] == "NodePool"}
    assert [c["metadata"]["name"] for c in classes] == ["default"] and "kubelet" not in classes[0]["spec"]
    assert {n: (s["nodeClassRef"], s["kubelet"]["maxPods"]) for n, s in pools.items()} == {
        "default": ({"name": "default"}, 20),
        "other": ({"name": "default"}, 30),
    }
    assert "[migration-kubelet]" not in result.stdout


def test_an_ubuntu_node_template_keeps_its_family(catalog: Catalog, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    ubuntu = (INPUTS / TEMPLATE).read_text().replace("spec:\n", "spec:\n  amiFamily: Ubuntu\n", 1)
    (source / TEMPLATE).write_text(ubuntu)

    result = migrate_command(
        [str(source)], MigrateOptions(to="v1beta1", out=str(tmp_path / "out"), node_role="R"), catalog
    )

    assert result.exit_code == 0, result.stdout
    (node_class,) = [d for d in yaml.safe_load_all((tmp_path / "out" / TEMPLATE).read_text()) if d]
    assert node_class["spec"]["amiFamily"] == "Ubuntu" and "amiSelectorTerms" not in node_class["spec"]


def test_the_notes_say_what_v1beta1_does(catalog: Catalog, tmp_path: Path) -> None:
    exit_code, output, _ = _migrate("provisioner.yaml", tmp_path, catalog, node_role="R")

    assert exit_code == 0
    assert "which Karpenter reads from v0.34: v0.32 and v0.33 have no budgets" in output
    assert "becomes disruption.expireAfter: 720h, a graceful disruption in v1beta1" in output
    assert "off by default in v0.32, on from v0.33" in output
    assert "forceful in v1:" not in output


def test_validate_still_refuses_v1beta1_objects(catalog: Catalog, tmp_path: Path) -> None:
    _migrate("provisioner.yaml", tmp_path, catalog, node_role="R")

    report = validate_paths([str(tmp_path / "out")])

    errors = [f.message for f in report.findings if f.severity == "error"]
    assert errors and all("v1beta1 was served by Karpenter v0.32 to v1.0 only" in m for m in errors)


def test_workloads_are_renamed_and_placed_again_then_everything_is_written(catalog: Catalog, tmp_path: Path) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    for name in ("provisioner_provider.yaml",):
        shutil.copy(INPUTS / name, policies / name)
    apps = tmp_path / "apps"
    apps.mkdir()
    job = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: nightly\nspec:\n  template:\n    spec:\n"
        "      nodeSelector:\n        karpenter.sh/provisioner-name: default  # our pool\n"
        "      tolerations: [{key: example.com/special-taint, operator: Exists}]\n"
        "      containers: [{name: c, image: busybox}]\n"
    )
    (apps / "job.yaml").write_text(job)

    result = migrate_command(
        [str(policies)], MigrateOptions(to="v1beta1", write=True, workloads=(str(apps),)), catalog
    )

    assert result.exit_code == 0, result.stdout + result.stderr
    assert "workloads: 1 workload lands where it did (placed again on the migrated files)" in result.stdout
    assert (apps / "job.yaml").read_text() == job.replace("karpenter.sh/provisioner-name", "karpenter.sh/nodepool")
    written = [d for d in yaml.safe_load_all((policies / "provisioner_provider.yaml").read_text()) if d]
    assert sorted(d["apiVersion"] for d in written) == ["karpenter.k8s.aws/v1beta1", "karpenter.sh/v1beta1"]


@pytest.mark.parametrize("example", fast_first(sorted(p.name for p in EXAMPLES.glob("*.yaml")), fast=2))
def test_each_v0315_example_is_proven_and_schema_valid_or_refused(
    example: str, catalog: Catalog, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    options = MigrateOptions(to="v1beta1", out=str(out), default_instance_profile="KarpenterNodeInstanceProfile")

    result = migrate_command([str(EXAMPLES / example)], options, catalog)

    written = (out / example).read_text()
    if example in REFUSED_EXAMPLES:
        assert result.exit_code == 1 and "'ami456' is not an id" in result.stdout
        assert written == (EXAMPLES / example).read_text()
        return
    assert result.exit_code == 0, result.stdout + result.stderr
    provisioners = len(re.findall(r"^kind: Provisioner", (EXAMPLES / example).read_text(), re.MULTILINE))
    assert result.stdout.count("proven equivalent") == provisioners >= 1
    objects = [d for d in yaml.safe_load_all(written) if d]
    assert sum(o["kind"] == "NodePool" for o in objects) == provisioners
    for obj in objects:
        assert _schema_errors(obj, "v0.37.8") == [], obj
        if obj["kind"] == "NodePool":
            assert _disruption_cel(obj["spec"]["disruption"]) == []
    if example == "ubuntu-kubelet-log-query.yaml":
        assert [o["spec"]["amiFamily"] for o in objects if o["kind"] == "EC2NodeClass"] == ["Ubuntu"]
