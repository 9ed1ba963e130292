"""`migrate` on karpenter-convert's own test inputs (aws/karpenter-provider-aws v0.32.10,
tools/karpenter-convert/pkg/convert/testdata, copied into tests/data/karpenter-convert-v0.32.10/ with their source
named): each Provisioner proven equivalent to its NodePool and the output valid v1, or refused with a named reason
— as the issue asks of the converter that Karpenter removed. karpenter-convert converted each file on its own; a
Provisioner here is migrated with the AWSNodeTemplate its providerRef names (`nodetemplate_kubectl_output.yaml`,
`default`), since a NodePool must name an EC2NodeClass that exists."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command

INPUTS = Path(__file__).resolve().parents[1] / "data" / "karpenter-convert-v0.32.10"
TEMPLATE = "nodetemplate_kubectl_output.yaml"  # AWSNodeTemplate default, as `kubectl get -o yaml` prints it
#: Inputs migrated, and the Provisioner each holds (None: a node template alone).
MIGRATED = {
    "provisioner.yaml": "default",
    "provisioner_defaults.yaml": "default",
    "provisioner_no_defaults.yaml": "default",
    "provisioner_kubectl_output.yaml": "provisioner1",
    "provisioner_provider.yaml": "default",  # the inline provider: no template needed
    "nodetemplate_kubectl_output.yaml": None,
    "nodetemplate_no_amifamily.yaml": None,
}
_IDS = "amiSelector: aws::ids lists ids and cannot be combined with other filters"
#: Inputs refused: the rule and the words of its finding (Karpenter v0.31.1 refuses the first four itself:
#: awsnodetemplate_validation.go validateAMISelector, `"aws::ids" filter is mutually exclusive`).
REFUSED = {
    "nodetemplate.yaml": ("invalid-spec", _IDS),
    "nodetemplate_cdl_amiSelectors_tags.yaml": ("invalid-spec", _IDS),
    "nodetemplate_cdl_securityGroupSelectors_tags.yaml": ("invalid-spec", _IDS),
    "nodetemplate_cdl_subnetSelectors_tags.yaml": ("invalid-spec", _IDS),
    "nodetemplate_launch_template_name.yaml": ("v1-conversion", "v1 has no launchTemplate"),
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def test_the_inputs_are_karpenter_converts_each_naming_its_source() -> None:
    files = sorted(p.name for p in INPUTS.glob("*.yaml"))
    assert files == sorted([*MIGRATED, *REFUSED, "unknown_kind.yaml"])
    for name in files:
        first = (INPUTS / name).read_text().splitlines()[0]
        assert first == (
            f"# aws/karpenter-provider-aws v0.32.10 tools/karpenter-convert/pkg/convert/testdata/{name} "
            "(karpenter-convert's test input)"
        )


@pytest.mark.parametrize("name", sorted(MIGRATED))
def test_each_input_is_proven_equivalent_and_valid_v1(name: str, catalog: Catalog, tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    shutil.copy(INPUTS / name, source / name)
    if name.startswith("provisioner") and name != "provisioner_provider.yaml":
        shutil.copy(INPUTS / TEMPLATE, source / TEMPLATE)
    out = tmp_path / "out"
    options = MigrateOptions(out=str(out), default_instance_profile="KarpenterNodeInstanceProfile")

    result = migrate_command([str(source)], options, catalog)

    assert result.exit_code == 0, result.stdout + result.stderr
    provisioner = MIGRATED[name]
    if provisioner is not None:
        assert f"Provisioner {provisioner} → NodePool {provisioner}: proven equivalent" in result.stdout
    kinds = sorted(str(d.data["kind"]) for f in out.glob("*.yaml") for d in parse(str(f), f.read_text()))
    assert "Provisioner" not in kinds and "AWSNodeTemplate" not in kinds
    assert kinds.count("NodePool") == (provisioner is not None) and "EC2NodeClass" in kinds
    report = validate_paths([str(out)])
    assert [f.message for f in report.findings if f.severity == "error"] == []


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_each_refused_input_names_its_reason_and_is_left_as_it_was(
    name: str, catalog: Catalog, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = migrate_command([str(INPUTS / name)], MigrateOptions(out=str(out)), catalog)

    rule, words = REFUSED[name]
    assert result.exit_code == 1
    assert re.search(rf"error: AWSNodeTemplate/default: .*{re.escape(words)}.*\[{rule}\]", result.stdout), result.stdout
    assert (out / name).read_text() == (INPUTS / name).read_text()


def test_an_unknown_kind_is_left_alone(catalog: Catalog, tmp_path: Path) -> None:
    result = migrate_command([str(INPUTS / "unknown_kind.yaml")], MigrateOptions(out=str(tmp_path)), catalog)

    assert result.exit_code == 0
    assert "checked 0 objects in 1 file; skipped 1 of other kinds (Test: 1): 0 errors, 0 warnings" in result.stdout
    assert (tmp_path / "unknown_kind.yaml").read_text() == (INPUTS / "unknown_kind.yaml").read_text()
