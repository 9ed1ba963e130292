"""`check` and `diff` proving v1 NodePools on the instance labels Karpenter v1.14.1 added, through the real command
line (issue #25): a requirement on `karpenter.k8s.aws/instance-cpu-manufacturer` (or the clock speed, EBS bandwidth,
flex, tenancy) is read against each type's value, as aws/karpenter-provider-aws v1.14.1
pkg/providers/instancetype/types.go `computeRequirements` sets it, where before it was a custom label any node could
be given: a conflict with its minimal core at file:line, a requirement no type meets, a witness showing the labels,
a diff in them with a witness the solver proves on both sides. A v1alpha5 Provisioner knows none of them (v0.31.1
had none): its outputs do not change."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from textwrap import dedent

from tests.clirun import run_cli
from tests.v1documents import EC2_NODE_CLASS


def nodepool(name: str, *requirements: tuple[str, str, list[str]]) -> str:
    lines = [
        "apiVersion: karpenter.sh/v1", "kind: NodePool", "metadata:", f"  name: {name}", "spec:", "  template:",
        "    spec:", "      requirements:",
    ]
    for key, operator, values in requirements:
        lines += [f"        - key: {key}", f"          operator: {operator}"]
        if values:
            lines.append(f"          values: {json.dumps(values)}")
    lines += ["      nodeClassRef:", "        group: karpenter.k8s.aws", "        kind: EC2NodeClass",
              "        name: default"]
    return "\n".join(lines) + "\n" + EC2_NODE_CLASS


MAKER = "karpenter.k8s.aws/instance-cpu-manufacturer"
FAMILY = "karpenter.k8s.aws/instance-family"
TENANCY = "karpenter.k8s.aws/instance-tenancy"
CLOCK = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"


def check(tmp_path: Path, text: str, *options: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "pools.yaml"
    path.write_text(text)
    return run_cli("check", path, *options)


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def test_amd_on_intels_c5_is_a_proven_conflict_with_its_minimal_core_at_file_and_line(tmp_path: Path) -> None:
    done = check(tmp_path, nodepool("amd-c5", (FAMILY, "In", ["c5"]), (MAKER, "In", ["amd"])), "--output", "json")
    assert done.returncode == 1, done.stdout + done.stderr
    path = tmp_path / "pools.yaml"
    [conflict] = [f for f in json.loads(done.stdout)["findings"] if f["severity"] == "error"]
    assert conflict["rule"] == "requirements-conflict" and conflict["object"] == "NodePool/amd-c5"
    assert conflict["line"] == line_of(path, f"key: {FAMILY}")
    assert [r["line"] for r in conflict["related"]] == [line_of(path, f"key: {MAKER}")]
    assert conflict["message"] == (
        f"{FAMILY} In [c5] conflicts with {MAKER} In [amd]: no c5 instance type has a CPU by amd"
    )


def test_a_clock_speed_no_type_reaches_is_no_instance_type(tmp_path: Path) -> None:
    done = check(tmp_path, nodepool("fast", (CLOCK, "Gt", ["9000"])))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: " in done.stdout and "[no-instance-type]" in done.stdout
    assert (
        f"{CLOCK} Gt 9000: no instance type in us-east-1 has more than 9000 MHz of sustained CPU clock speed "
        "(the most is 5000) [no-instance-type]"
    ) in done.stdout


def test_the_witness_shows_the_v1_labels_the_nodepool_requires(tmp_path: Path) -> None:
    text = nodepool("amd", (FAMILY, "In", ["c5a", "c5"]), (MAKER, "In", ["amd"]), (TENANCY, "In", ["dedicated"]))
    done = check(tmp_path, text)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = next(line for line in done.stdout.splitlines() if "info: NodePool/amd:" in line)
    assert "info: NodePool/amd: 8 instance types, e.g. c5a.large (" in summary
    assert summary.endswith(f"; {MAKER}=amd, {TENANCY}=dedicated)")
    data = json.loads(check(tmp_path, text, "--output", "json").stdout)
    [proven] = data["provisioners"]
    assert proven["witness"]["instance_type"] == "c5a.large"
    assert proven["witness"]["labels"] == {MAKER: "amd", TENANCY: "dedicated"}
    assert all(name.startswith("c5a.") for name in proven["instance_types"])


def test_a_provisioners_output_is_what_it_was(tmp_path: Path) -> None:
    """A v1alpha5 Provisioner's proofs read v0.31's labels only: the same summary, JSON without labels."""
    text = dedent("""\
        apiVersion: karpenter.sh/v1alpha5
        kind: Provisioner
        metadata:
          name: c5
        spec:
          providerRef:
            name: default
          requirements:
            - key: karpenter.k8s.aws/instance-family
              operator: In
              values: ["c5"]
        """)
    done = check(tmp_path, text, "--output", "json")
    [proven] = json.loads(done.stdout)["provisioners"]
    assert "labels" not in proven["witness"]
    assert proven["witness"]["instance_type"] == "c5.large"


def diff(tmp_path: Path, before: str, after: str, *options: str) -> subprocess.CompletedProcess[str]:
    for side, text in (("base", before), ("head", after)):
        (tmp_path / side).mkdir()
        (tmp_path / side / "pools.yaml").write_text(text)
    return run_cli("diff", tmp_path / "base", tmp_path / "head", *options)


def test_diff_reports_a_change_in_the_cpu_manufacturer_with_a_proven_witness(tmp_path: Path) -> None:
    families = (FAMILY, "In", ["c5", "c5a"])
    done = diff(tmp_path, nodepool("general", families, (MAKER, "In", ["intel"])),
                nodepool("general", families, (MAKER, "In", ["intel", "amd"])))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "NodePool general (pools.yaml:4): changed" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.lstrip().startswith(MAKER))
    assert row.split()[1] == "+amd;"
    assert row.rstrip(" —").endswith(f"e.g. c5a.large (us-east-1a, on-demand, $0.0770/h; {MAKER}=amd)")
    assert "instance types" in done.stdout and "node labels" not in done.stdout
    assert "(unconfirmed)" not in done.stdout  # Z3 proved HEAD admits it and BASE does not


def test_diff_reports_a_tenancy_change_though_the_offerings_are_the_same(tmp_path: Path) -> None:
    families = (FAMILY, "In", ["c5"])
    done = diff(tmp_path, nodepool("general", families, (TENANCY, "In", ["default"])),
                nodepool("general", families, (TENANCY, "In", ["default", "dedicated"])), "--output", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    [pool] = json.loads(done.stdout)["provisioners"]
    assert pool["status"] == "changed"
    [change] = pool["changes"]
    assert (change["dimension"], change["added"], change["removed"]) == (TENANCY, ["dedicated"], [])
    assert change["added_witness"]["labels"] == {TENANCY: "dedicated"}
    assert change["added_witness"]["proven"] is True


def test_compile_admits_only_the_types_the_nodepools_v1_labels_allow(tmp_path: Path) -> None:
    """The constraint set lists what the proof admitted (the controller launches nothing else): c5a's AMD types,
    not c5's Intel ones, as Karpenter v1.14.1 would launch."""
    path = tmp_path / "pools.yaml"
    path.write_text(nodepool("amd", (FAMILY, "In", ["c5", "c5a"]), (MAKER, "In", ["amd"])))
    done = run_cli("compile", path, "-o", tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    admitted = json.loads((tmp_path / "out" / "constraintsets" / "nodepool.amd.json").read_text())["admitted"]
    assert admitted and all(name.startswith("c5a.") for name in admitted)
    assert admitted == json.loads(check(tmp_path, path.read_text(), "--output", "json").stdout)[
        "provisioners"][0]["instance_types"]
