"""A NodePool whose nodeClassRef is not karpenter.k8s.aws/EC2NodeClass (`foreign-node-class`): Karpenter's AWS
provider v1.14.1 never manages it (core pkg/utils/nodepool/nodepool.go `IsManaged`, aws `GetSupportedNodeClasses`),
so `validate`, `check` and `compile` report an error at the reference, check nothing more of the NodePool, and
compile writes nothing — never a pool checked as if it were the AWS provider's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from karpenter_policy.api.v1.managed import not_managed

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "overlap" / "nodepools.yaml"
EC2 = "        group: karpenter.k8s.aws\n        kind: EC2NodeClass\n"
#: The first NodePool (`general`) of the example, its nodeClassRef's group at line 13 and kind at line 14.
AKS = "        group: karpenter.azure.com\n        kind: AKSNodeClass\n"
MESSAGE = (
    "error: NodePool/general: spec.template.spec.nodeClassRef.{field}: names {ref}, not "
    "karpenter.k8s.aws/EC2NodeClass: Karpenter's AWS provider manages only NodePools whose nodeClassRef is "
    "karpenter.k8s.aws/EC2NodeClass, so it launches nothing for this NodePool, and this tool checks nothing more of "
    "it; point nodeClassRef at an EC2NodeClass (group: karpenter.k8s.aws, kind: EC2NodeClass), or keep the NodePool "
    "out of the files this tool checks (--exclude) [foreign-node-class]"
)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def _policies(tmp_path: Path, ref: str = AKS) -> Path:
    text = EXAMPLE.read_text()
    assert text.count(EC2) >= 1
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "nodepools.yaml").write_text(text.replace(EC2, ref, 1))
    return policies


@pytest.mark.parametrize("command", ["validate", "check"])
def test_a_foreign_node_class_is_an_error_at_its_group(tmp_path: Path, command: str) -> None:
    policies = _policies(tmp_path)
    done = run(command, str(policies))

    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert errors == [
        f"{policies}/nodepools.yaml:13:16: "
        + MESSAGE.format(field="group", ref="karpenter.azure.com/AKSNodeClass")
    ]


def test_check_proves_nothing_of_the_foreign_nodepool_and_still_proves_the_others(tmp_path: Path) -> None:
    done = run("check", str(_policies(tmp_path)))

    proven = [line for line in done.stdout.splitlines() if " instance types" in line]
    assert proven and all("NodePool/spot" in line for line in proven)
    assert "NodePool/general: " not in done.stdout.replace("NodePool/general: spec.template.spec.nodeClassRef", "")


def test_a_misspelt_kind_of_the_aws_group_is_reported_at_the_kind(tmp_path: Path) -> None:
    policies = _policies(tmp_path, "        group: karpenter.k8s.aws\n        kind: EC2NodeClas\n")
    done = run("validate", str(policies))

    assert done.returncode == 1
    assert (f"{policies}/nodepools.yaml:14:15: "
            + MESSAGE.format(field="kind", ref="karpenter.k8s.aws/EC2NodeClas")) in done.stdout.splitlines()


def test_compile_refuses_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = run("compile", str(_policies(tmp_path)), "-o", str(out))

    assert done.returncode == 1
    assert "[foreign-node-class]" in done.stdout
    assert "nothing written: 1 error" in done.stderr
    assert not out.exists()


def test_it_cannot_be_silenced(tmp_path: Path) -> None:
    done = run("validate", str(_policies(tmp_path)), "--disable", "foreign-node-class")

    assert done.returncode == 2 and "foreign-node-class cannot be disabled" in done.stderr


def test_only_an_ec2_node_class_is_managed() -> None:
    def pool(group: str, kind: str) -> dict[str, object]:
        ref = {"group": group, "kind": kind, "name": "default"}
        return {"spec": {"template": {"spec": {"nodeClassRef": ref}}}}

    assert not_managed(pool("karpenter.k8s.aws", "EC2NodeClass")) is None
    assert not_managed({"spec": {}}) is None
    assert not_managed(pool("karpenter.azure.com", "AKSNodeClass")) == (
        "its nodeClassRef is karpenter.azure.com/AKSNodeClass, not karpenter.k8s.aws/EC2NodeClass: Karpenter's AWS "
        "provider does not manage it (IsManaged)"
    )


def test_a_group_of_thousands_of_characters_is_named_cut(tmp_path: Path) -> None:
    """A hostile group (the CRD bounds only its characters): the error names it cut, never printed whole."""
    huge = "x" * 4000
    policies = _policies(tmp_path, f"        group: {huge}\n        kind: AKSNodeClass\n")
    done = run("validate", str(policies))

    assert done.returncode == 1
    (error,) = [line for line in done.stdout.splitlines() if ": error: " in line]
    assert "(4000 characters)/AKSNodeClass" in error and huge not in error
