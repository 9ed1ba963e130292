"""`diff --equivalent BASE HEAD --workloads APPS`: a refactor of the pools is proven to change no workload's landing
set (instance type × zone × capacity type, with the node's labels and taints), whatever the pools are named and
wherever their files are; otherwise each workload that changes gets a counter-example node at file:line.

The repository: four teams, each a Deployment selecting `team: <t>`. BASE has twelve Provisioners (a team × a zone
each); the refactors merge them into four (a team each, all three zones), lose a zone, rename and move, or migrate
to v1 NodePools."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest
from clirun import run_cli
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.commands.equivalent import equivalent_command
from karpenter_policy.commands.flags import DiffFlags
from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command

ROOT = Path(__file__).resolve().parents[2]
TEAMS = "abcd"
ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")
TEMPLATE = """apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector:
    karpenter.sh/discovery: demo
  securityGroupSelector:
    karpenter.sh/discovery: demo
"""


def _provisioner(
    name: str, team: str, zones: tuple[str, ...], extra_label: str = "", families: tuple[str, ...] = ("m5",)
) -> str:
    return f"""apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: {name}
spec:
  providerRef:
    name: default
  labels:
    team: {team}{extra_label}
  requirements:
    - key: topology.kubernetes.io/zone
      operator: In
      values: [{", ".join(zones)}]
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: [{", ".join(families)}]
    - key: karpenter.sh/capacity-type
      operator: In
      values: [on-demand]
"""


def _app(team: str) -> str:
    return f"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{team}
  namespace: default
spec:
  replicas: 2
  selector:
    matchLabels: {{app: {team}}}
  template:
    metadata:
      labels: {{app: {team}}}
    spec:
      nodeSelector:
        team: {team}
      containers:
        - name: c
          image: nginx
          resources:
            requests: {{cpu: 500m, memory: 512Mi}}
"""


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """BASE (twelve pools), HEAD (the same teams merged into four) and the apps."""
    for side in ("base", "head"):
        (tmp_path / side / "policies").mkdir(parents=True)
        (tmp_path / side / "policies" / "nodetemplate.yaml").write_text(TEMPLATE)
    (tmp_path / "apps").mkdir()
    for team in TEAMS:
        for zone in ZONES:
            text = _provisioner(f"team-{team}-{zone[-2:]}", team, (zone,))
            (tmp_path / "base" / "policies" / f"{team}-{zone[-2:]}.yaml").write_text(text)
        (tmp_path / "head" / "policies" / f"{team}.yaml").write_text(_provisioner(f"team-{team}", team, ZONES))
        (tmp_path / "apps" / f"{team}.yaml").write_text(_app(team))
    return tmp_path


def run_equivalent(repo: Path, catalog: Catalog, head: str = "head", output: str = "text") -> CommandOutput:
    flags = DiffFlags(
        base=str(repo / "base"),
        head=str(repo / head),
        paths=("policies",),
        workload_paths=(str(repo / "apps"),),
        output=output,
        equivalent=True,
    )
    return equivalent_command(flags, catalog)


def test_twelve_pools_merged_into_four_are_equivalent(repo: Path, catalog: Catalog) -> None:
    result = run_equivalent(repo, catalog)

    assert result.exit_code == 0, result.stdout
    assert result.stdout == f"equivalent: 4 workloads land on the same nodes in {repo / 'head'} as in {repo / 'base'}\n"


def test_a_merge_that_loses_a_zone_gives_the_lost_node_at_file_and_line(repo: Path, catalog: Catalog) -> None:
    (repo / "head" / "policies" / "a.yaml").write_text(_provisioner("team-a", "a", ZONES[:2]))

    result = run_equivalent(repo, catalog, output="json")

    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["equivalent"] is False and data["workloads"] == 4
    (changed,) = data["changed"]
    assert changed["workload"] == "Deployment/app-a"
    assert (changed["file"], changed["line"]) == (str(repo / "apps" / "a.yaml"), 10)
    assert changed["admitted_by"] == str(repo / "base")
    assert changed["node"] == "m5.large on-demand in us-east-1c (labels team=a)"
    assert changed["pool"] == "Provisioner/team-a-1c (policies/a-1c.yaml:4)"
    assert changed["proven"] is True  # Z3: team-a-1c's requirements admit m5.large on-demand in us-east-1c


def test_a_rename_and_a_move_are_equivalent(repo: Path, catalog: Catalog) -> None:
    renamed = repo / "renamed" / "policies" / "teams"
    renamed.mkdir(parents=True)
    (renamed.parent / "nodetemplate.yaml").write_text(TEMPLATE)
    for path in sorted((repo / "base" / "policies").glob("?-1?.yaml")):
        text = path.read_text().replace("name: team-", "name: pool-")
        (renamed / f"pool-{path.name}").write_text(text)

    result = run_equivalent(repo, catalog, head="renamed")

    assert result.exit_code == 0, result.stdout
    assert result.stdout.startswith("equivalent: 4 workloads land on the same nodes")


def test_a_node_label_added_in_a_merge_is_a_difference(repo: Path, catalog: Catalog) -> None:
    (repo / "head" / "policies" / "b.yaml").write_text(_provisioner("team-b", "b", ZONES, "\n    tier: gold"))

    result = run_equivalent(repo, catalog, output="markdown")

    assert result.exit_code == 1
    assert result.stdout.startswith("**NOT equivalent: 1 of 4 workloads land elsewhere in")
    assert "| `Deployment/app-b` |" in result.stdout
    assert "lets it land on m5.large on-demand in us-east-1a (labels team=b) (through Provisioner/team-b-1a" in (
        result.stdout
    )
    assert "head's node there is m5.large on-demand in us-east-1a (labels team=b, tier=gold) |" in result.stdout


def test_provisioners_migrated_to_v1_nodepools_are_equivalent(repo: Path, catalog: Catalog) -> None:
    migrated = repo / "v1"
    options = MigrateOptions(out=str(migrated / "policies"), default_instance_profile="KarpenterNodeInstanceProfile")
    done = migrate_command([str(repo / "base" / "policies")], options, catalog)
    assert done.exit_code == 0, done.stdout
    assert "kind: NodePool" in (migrated / "policies" / "a-1a.yaml").read_text()

    result = run_equivalent(repo, catalog, head="v1")

    assert result.exit_code == 0, result.stdout
    assert result.stdout.startswith("equivalent: 4 workloads land on the same nodes")


def test_without_workloads_it_says_what_it_needs(repo: Path, catalog: Catalog) -> None:
    flags = DiffFlags(base=str(repo / "base"), head=str(repo / "head"), equivalent=True)

    result = equivalent_command(flags, catalog)

    assert result.exit_code == 2 and "needs --workloads APPS" in result.stderr


def test_the_command_line_exits_1_with_the_counter_example(repo: Path) -> None:
    (repo / "head" / "policies" / "c.yaml").write_text(_provisioner("team-c", "c", ZONES[1:]))

    done = run_cli("diff", "base", "head", "policies", "--equivalent", "--workloads", repo / "apps", cwd=repo)

    assert done.returncode == 1, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"{repo / 'apps' / 'c.yaml'}:10:3: Deployment/app-c: base lets it land on ")
    through = "in us-east-1a (labels team=c) (through Provisioner/team-c-1a (policies/c-1a.yaml:4)); head does not"
    assert through in first
    assert done.stdout.endswith("NOT equivalent: 1 of 4 workloads land elsewhere in head\n")


def test_helm_output_replaced_by_one_kustomize_stream_is_equivalent(repo: Path, catalog: Catalog) -> None:
    stream = repo / "kustomized" / "policies"
    stream.mkdir(parents=True)
    documents = [TEMPLATE, *(p.read_text() for p in sorted((repo / "base" / "policies").glob("?-1?.yaml")))]
    (stream / "all.yaml").write_text("---\n".join(documents))

    result = run_equivalent(repo, catalog, head="kustomized")

    assert result.exit_code == 0, result.stdout
    assert result.stdout.startswith("equivalent: 4 workloads land on the same nodes")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)


def test_two_git_revisions_are_read_as_of_each_commit(tmp_path: Path, repo: Path) -> None:
    work = tmp_path / "work"
    (work / "apps").mkdir(parents=True)
    for team in TEAMS:
        (work / "apps" / f"{team}.yaml").write_text(_app(team))
    (work / "policies").mkdir()
    for path in (repo / "base" / "policies").iterdir():
        (work / "policies" / path.name).write_text(path.read_text())
    _git(work, "init", "-q")
    _git(work, "add", "-A")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "twelve pools")
    for path in (work / "policies").glob("?-1?.yaml"):
        path.unlink()
    for team in TEAMS:
        zones = ZONES if team != "d" else ZONES[:2]
        (work / "policies" / f"{team}.yaml").write_text(_provisioner(f"team-{team}", team, zones))
    _git(work, "add", "-A")
    _git(work, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "four pools, d loses a zone")

    done = run_cli("diff", "HEAD~1", "HEAD", "--equivalent", "--workloads", "apps/", "--output", "json", cwd=work)

    assert done.returncode == 1, done.stdout + done.stderr
    (changed,) = json.loads(done.stdout)["changed"]
    where = (changed["workload"], changed["file"], changed["admitted_by"])
    assert where == ("Deployment/app-d", "apps/d.yaml", "HEAD~1")
    assert changed["pool"] == "Provisioner/team-d-1c (policies/d-1c.yaml:4)" and changed["proven"] is True


_POOLS = st.lists(
    st.tuples(
        st.sets(st.sampled_from(ZONES), min_size=1).map(lambda z: tuple(sorted(z))),
        st.sets(st.sampled_from(("m5", "c5")), min_size=1).map(lambda f: tuple(sorted(f))),
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.slow
@deterministic(12)
@given(pools=_POOLS)
def test_any_merge_is_equivalent_exactly_when_it_covers_the_same_zones_and_families(
    pools: list[tuple[tuple[str, ...], tuple[str, ...]]],
) -> None:
    catalog = load_catalog()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        for side in ("base", "head"):
            (root / side / "policies").mkdir(parents=True)
            (root / side / "policies" / "nodetemplate.yaml").write_text(TEMPLATE)
        (root / "apps").mkdir()
        (root / "apps" / "a.yaml").write_text(_app("a"))
        for zone in ZONES:
            (root / "base" / "policies" / f"{zone}.yaml").write_text(_provisioner(f"a-{zone}", "a", (zone,)))
        for k, (zones, families) in enumerate(pools):
            text = _provisioner(f"merged-{k}", "a", zones, families=families)
            (root / "head" / "policies" / f"{k}.yaml").write_text(text)

        result = run_equivalent(root, catalog)

    covered = {(z, f) for zones, families in pools for z in zones for f in families}
    assert (result.exit_code == 0) == (covered == {(z, "m5") for z in ZONES}), (pools, result.stdout)


def test_one_object_in_two_files_is_compared_twice_not_once(repo: Path, catalog: Catalog) -> None:
    (repo / "apps" / "copy").mkdir()
    (repo / "apps" / "copy" / "a.yaml").write_text(_app("a").replace("team: a", "team: b"))
    (repo / "head" / "policies" / "b.yaml").write_text(_provisioner("team-b", "b", ZONES[:1]))

    result = run_equivalent(repo, catalog, output="json")

    data = json.loads(result.stdout)
    assert result.exit_code == 1 and data["workloads"] == 5
    assert sorted(c["workload"] for c in data["changed"]) == [
        f"Deployment/app-a ({repo / 'apps' / 'copy' / 'a.yaml'})",
        "Deployment/app-b",
    ]
