"""`karpenter-policy simulate` through the CLI: the seeds end to end (the controller, the in-memory cluster, EC2
served by moto in the process), the node table and $/h, determinism, bad input, and the HTML report rendered in
headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from api.tampering import Edit, tamper_directory
from click.testing import CliRunner

from karpenter_policy.cli import main

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "examples" / "workloads" / "apps"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ROW = re.compile(r"^(ip-\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(spot|on-demand)\s+(\d+)\s+(\d+)%\s+(\d+)%\s+(\S+)$", re.M)


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("simulate") / "build"
    result = CliRunner().invoke(main, ["compile", str(ROOT / "examples/workloads/policies"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


def simulate(build: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["simulate", "--constraints", str(build), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_inflate_scaled_0_5_10_lands_on_few_cheap_spot_nodes(build: Path) -> None:
    code, out, err = simulate(build, "--workloads", str(APPS / "inflate.yaml"),
                              "--scale", "deployment/inflate=5", "--scale", "deployment/inflate=10")
    assert code == 0, err
    assert "found 5 provisionable pod(s)" in out and "launched instance i-" in out  # the controller's log
    rows = ROW.findall(out)
    assert 1 <= len(rows) <= 3
    assert all(r[1] == "default" and r[4] == "spot" for r in rows)
    assert sum(int(r[5]) for r in rows) == 10, "every pod bound"
    fleet = re.search(r"fleet: (\d+) node\(s\), 10 pod\(s\), \$(\d+\.\d+)/h", out)
    assert fleet is not None and int(fleet[1]) == len(rows)
    assert abs(float(fleet[2]) - sum(float(r[8]) for r in rows)) < 1e-3 and float(fleet[2]) > 0


@pytest.mark.slow
def test_the_emr_spark_seed_puts_drivers_on_demand_and_executors_on_spot(build: Path) -> None:
    code, out, err = simulate(build, "--workloads", str(APPS / "spark-driver-pod-template.yaml"),
                              "--workloads", str(APPS / "spark-executor-4vcpu-7g.yaml"))
    assert code == 0, err
    rows = ROW.findall(out)
    assert {r[1] for r in rows} == {"kspark"}
    assert sorted(r[4] for r in rows) == ["on-demand", "spot"]
    families = {r[2].split(".")[0] for r in rows}
    assert families <= {"c5", "c5a", "c5d", "c5ad", "m5", "c6a"}, families


@pytest.mark.slow
def test_same_input_same_output_and_report(build: Path, tmp_path: Path) -> None:
    outputs = []
    for run in ("a", "b"):
        report = tmp_path / f"{run}.html"
        code, out, err = simulate(build, "--workloads", str(APPS / "inflate.yaml"), "--scale", "deployment/inflate=7",
                                  "--report", str(report))
        assert code == 0, err
        outputs.append((out.replace(str(report), "REPORT"), report.read_bytes()))
    assert outputs[0] == outputs[1]


def test_bad_input_is_one_line_and_exit_2(build: Path, tmp_path: Path) -> None:
    code, _, err = simulate(tmp_path / "missing", "--workloads", str(APPS / "inflate.yaml"))
    assert code == 2 and "not a directory of compiled constraint sets" in err and "Traceback" not in err
    code, _, err = simulate(build, "--workloads", str(APPS / "inflate.yaml"), "--scale", "deployment/nginx=3")
    assert code == 2 and "--scale deployment/nginx: no such workload" in err
    code, _, err = simulate(build, "--workloads", str(APPS / "inflate.yaml"), "--scale", "inflate")
    assert code == 2 and "KIND/NAME=N" in err


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["requirements"].__setitem__(0, {"operator": "In"}), "requirements[0]: missing required field"),
        (lambda d: d.__setitem__("taints", "x"), 'taints must be a list, not string "x"'),
        (lambda d: d.__setitem__("weight", float("inf")), "weight Infinity is out of range"),
    ],
    ids=["requirement without a key", "taints a string", "weight Infinity"],
)
def test_constraint_sets_compile_would_never_write_are_one_line_and_exit_2(
    edit: Edit, message: str, build: Path, tmp_path: Path
) -> None:
    tampered = tamper_directory(build, "default", edit, copy_to=tmp_path / "build")
    code, out, err = simulate(tampered, "--workloads", str(APPS / "inflate.yaml"), "--scale", "deployment/inflate=3")
    assert code == 2 and out == ""
    assert err.startswith(f"karpenter-policy simulate: {tampered / 'constraintsets' / 'default.json'}: ")
    assert message in err and err.count("\n") == 1 and err.endswith("\n")


def snapshot(*roots: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for root in roots for p in sorted([root, *root.rglob("*")]) if p.is_file()}


@pytest.mark.parametrize(
    ("report", "why"),
    [
        ("apps/inflate.yaml", "it is the input"),
        ("./apps/../apps/inflate.yaml", "it is the input"),
        ("link.yaml", "it is the input"),  # a symbolic link to the manifest
        ("build/constraintsets/index.json", "it is inside the input directory"),
        ("build/report.html", "it is inside the input directory"),
        ("more/report.html", "it is inside the input directory"),  # a folder of workloads
    ],
)
def test_a_report_never_overwrites_or_lands_among_the_inputs(
    report: str, why: str, build: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(build, tmp_path / "build")
    (tmp_path / "apps").mkdir()
    shutil.copy(APPS / "inflate.yaml", tmp_path / "apps" / "inflate.yaml")
    (tmp_path / "more").mkdir()
    shutil.copy(APPS / "spark-executor-4vcpu-7g.yaml", tmp_path / "more")
    (tmp_path / "link.yaml").symlink_to(tmp_path / "apps" / "inflate.yaml")
    monkeypatch.chdir(tmp_path)
    before = snapshot(tmp_path)
    code, out, err = simulate(Path("build"), "--workloads", "link.yaml", "--workloads", "more",
                              "--workloads", "apps/inflate.yaml", "--report", report)
    assert code == 2 and out == "", err
    assert "Invalid value for --report" in err and why in err
    assert snapshot(tmp_path) == before, "nothing written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apps", "build", "link.yaml", "more"]


@pytest.mark.slow
def test_pods_no_provisioner_takes_stay_pending_with_the_reason(build: Path) -> None:
    code, out, _ = simulate(build, "--workloads", str(ROOT / "examples/workloads/negative/gpu-without-toleration.yaml"))
    assert code == 1
    assert "pending: " in out and "not tolerated" in out


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian: apt-get install chromium)")
@pytest.mark.slow
def test_the_report_renders_in_headless_chromium_without_errors(build: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    code, _, err = simulate(build, "--workloads", str(APPS / "inflate.yaml"), "--scale", "deployment/inflate=5",
                            "--scale", "deployment/inflate=10", "--report", str(report))
    assert code == 0, err
    html = report.read_text()
    assert "<script src" not in html and "http://" not in html and "https://" not in html  # self-contained
    assert CHROMIUM is not None
    dumped = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=2000", "--dump-dom", report.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    assert 'data-errors="0"' in dom, "the page raised errors"  # the inline script ran and counted none
    assert len(re.findall(r'<svg class="chart"', dom)) == 4
    assert len(re.findall(r'<circle class="pod"', dom)) == 10, "a dot per pod: its time from creation to running"
    assert "<th>pods scheduled</th><td>10 of 10 created" in dom
    paths = re.findall(r'<path class="series" data-series="(\w+)" d="(M[^"]+)"', dom)
    assert {name for name, _ in paths} == {"pending", "starting", "running", "nodes", "cost"}
    assert all(d.count("L") >= 2 for _, d in paths), "every series is drawn over time"
    assert len(re.findall(r'<rect class="bar"', dom)) == 2 * len(ROW.findall(simulate(
        build, "--workloads", str(APPS / "inflate.yaml"), "--scale", "deployment/inflate=5",
        "--scale", "deployment/inflate=10")[1]))


@pytest.mark.slow
def test_scaled_back_to_zero_the_empty_nodes_go_after_their_ttl(build: Path) -> None:
    code, out, err = simulate(build, "--workloads", str(APPS / "inflate.yaml"),
                              "--scale", "deployment/inflate=10", "--scale", "deployment/inflate=0")
    assert code == 0, err
    assert "Triggering termination after 30s for empty node" in out and "Deleted node" in out
    assert "no nodes" in out and "fleet: 0 node(s), 0 pod(s), $0.0000/h" in out


def test_without_moto_one_line_that_says_what_to_install(build: Path) -> None:
    # moto made unimportable the way Python marks a missing module; the real command, in a fresh interpreter
    program = (
        "import sys; sys.modules['moto'] = None\n"
        "from karpenter_policy.cli import main\n"
        "main(['simulate', '--constraints', sys.argv[1], '--workloads', sys.argv[2]])\n"
    )
    ran = subprocess.run([sys.executable, "-c", program, str(build), str(APPS / "inflate.yaml")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert ran.returncode == 2 and ran.stdout == ""
    assert ran.stderr.count("\n") == 1 and "Traceback" not in ran.stderr
    assert "needs moto's server" in ran.stderr and "pip install 'karpenter-policy[simulate]'" in ran.stderr


@pytest.mark.slow
def test_nodepools_and_a_provisioner_side_by_side_end_to_end(tmp_path: Path) -> None:
    """examples/v1/controller: two NodePools (their EC2NodeClass boots AL2) and a Provisioner of the same name; each
    workload lands on the kind it selects, as `check --workloads` places them (the faster twin, on the in-memory
    cloud: tests/reconcile/test_v1_nodepools.py)."""
    example = ROOT / "examples" / "v1" / "controller"
    out = tmp_path / "build"
    compiled = CliRunner().invoke(main, ["compile", str(example / "policies"), "-o", str(out)])
    assert compiled.exit_code == 0, compiled.output
    code, stdout, err = simulate(out, "--workloads", str(example / "apps"))
    assert code == 0, err
    rows = {(r[1], r[5]) for r in ROW.findall(stdout)}
    assert rows == {("NodePool/batch", "3"), ("NodePool/default", "2"), ("default", "2")}
    assert "fleet: 3 node(s), 7 pod(s)" in stdout
    best_effort = CliRunner().invoke(
        main, ["simulate", "--constraints", str(out), "--workloads", str(example / "apps"),
               "--min-values-policy", "BestEffort"],
    )  # fmt: skip
    assert best_effort.exit_code == 0, best_effort.stderr


PLACED_ROW = re.compile(
    r"^(ip-\S+)\s+(NodePool/\S+)\s+(\S+)\s+(\S+)\s+(on-demand|spot)\s+(\d+)\s+\d+%\s+\d+%\s+\S+"
    r"\s+(pg-[0-9a-f]{17})/(\S+)$",
    re.M,
)


@pytest.mark.slow
def test_a_placement_group_class_runs_its_nodes_in_the_group_one_per_partition(tmp_path: Path) -> None:
    """examples/v1/placement-group (#26): its EC2NodeClass selects the placement group `hdfs`, which the simulated
    account creates (a partition group, served in front of moto: simulate/placementgroups.py); three datanodes
    spreading over `karpenter.k8s.aws/placement-group-partition` with maxSkew 1 run on three nodes, one per
    partition (v1.14.1's offerings per partition), and the report's table says each node's group and partition."""
    example = ROOT / "examples" / "v1" / "placement-group"
    out = tmp_path / "build"
    compiled = CliRunner().invoke(main, ["compile", str(example / "policies"), "-o", str(out)])
    assert compiled.exit_code == 0, compiled.output
    report = tmp_path / "report" / "report.html"
    report.parent.mkdir()
    code, stdout, err = simulate(out, "--workloads", str(example / "apps"), "--report", str(report))
    assert code == 0, err
    rows = PLACED_ROW.findall(stdout)
    assert len(rows) == 3 and "fleet: 3 node(s), 3 pod(s)" in stdout, stdout
    assert len({r[6] for r in rows}) == 1
    assert sorted(r[7] for r in rows) == ["1", "2", "3"]
    html = report.read_text()
    assert "<th>placement group</th>" in html
    assert all(f"<td>{r[6]}/{r[7]}</td>" in html for r in rows)


@pytest.mark.slow
def test_nodes_no_pod_pins_to_a_partition_register_with_the_partition_ec2_picked(tmp_path: Path) -> None:
    """cloudprovider.go:478 and placementgrouphook.go: two pods kept apart by hostname, neither pinned to a
    partition, are launched with the partition label `""` (EC2 picks); the registration hook reads each
    instance's partition from DescribeInstances and the nodes end labelled with it — never `?` in the table."""
    example = ROOT / "examples" / "v1" / "placement-group"
    out = tmp_path / "build"
    compiled = CliRunner().invoke(main, ["compile", str(example / "policies"), "-o", str(out)])
    assert compiled.exit_code == 0, compiled.output
    apps = tmp_path / "apps"
    apps.mkdir()
    (apps / "namenode.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: namenode}\nspec:\n  replicas: 2\n"
        "  selector: {matchLabels: {app: namenode}}\n  template:\n    metadata: {labels: {app: namenode}}\n"
        "    spec:\n      affinity:\n        podAntiAffinity:\n"
        "          requiredDuringSchedulingIgnoredDuringExecution:\n"
        "            - topologyKey: kubernetes.io/hostname\n"
        "              labelSelector: {matchLabels: {app: namenode}}\n"
        "      containers:\n        - name: namenode\n          image: apache/hadoop:3\n"
        "          resources: {requests: {cpu: '1'}}\n"
    )
    code, stdout, err = simulate(out, "--workloads", str(apps))
    assert code == 0, err
    rows = PLACED_ROW.findall(stdout)
    assert len(rows) == 2, stdout
    assert sorted(r[7] for r in rows) == ["1", "2"]  # the stand-in's EC2 picks the least used partition
