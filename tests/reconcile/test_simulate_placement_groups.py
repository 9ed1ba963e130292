"""`simulate --placement-group`: the simulated account's placement group is the one the user declares (strategy
partition with its partition count, cluster or spread), and the controller offers what v1.14.1 offers for it —
the partitions `1` … `PartitionCount` of a partition group (aws pkg/providers/instancetype/offering/
placement_group_resolver.go `ResolveOfferings`), none for a cluster or spread group (#26)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.launchsettings import MAX_PARTITIONS
from karpenter_policy.cli import main
from karpenter_policy.simulate.declaredgroups import PARTITION, STRATEGIES, DeclaredGroup, parse

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "v1" / "placement-group"
PLACED_ROW = re.compile(
    r"^(ip-\S+)\s+(NodePool/\S+)\s+(\S+)\s+(\S+)\s+(on-demand|spot)\s+(\d+)\s+\d+%\s+\d+%\s+\S+"
    r"\s+(pg-[0-9a-f]{17})/(\S*)$",
    re.M,
)


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("placement") / "build"
    compiled = CliRunner().invoke(main, ["compile", str(EXAMPLE / "policies"), "-o", str(out)])
    assert compiled.exit_code == 0, compiled.output
    return out


def _datanodes(tmp_path: Path, replicas: int) -> Path:
    apps = tmp_path / "apps.yaml"
    text = (EXAMPLE / "apps" / "workloads.yaml").read_text()
    apps.write_text(text.replace("replicas: 3", f"replicas: {replicas}"))
    return apps


def simulate(build: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["simulate", "--constraints", str(build), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.slow
def test_a_3_partition_group_spreads_4_pods_over_its_3_partitions_one_node_shared(
    build: Path, tmp_path: Path
) -> None:
    """A partition group of 3 (`--placement-group hdfs=partition:3`): v1.14.1 offers the partitions 1, 2, 3 only, so
    four datanodes spreading over the partition key with maxSkew 1 take three nodes, one per partition, and the
    fourth shares one of them (2/1/1 is within the skew); the undeclared default, 7 partitions, gave each its own
    node in partitions 1 … 4."""
    code, stdout, err = simulate(
        build, "--workloads", str(_datanodes(tmp_path, 4)), "--placement-group", "hdfs=partition:3"
    )
    assert code == 0, err
    rows = PLACED_ROW.findall(stdout)
    assert len(rows) == 3 and "fleet: 3 node(s), 4 pod(s)" in stdout, stdout
    assert sorted(r[7] for r in rows) == ["1", "2", "3"]
    assert sorted(int(r[5]) for r in rows) == [1, 1, 2]


@pytest.mark.slow
def test_a_cluster_group_offers_no_partition_so_the_spread_over_it_stays_pending(build: Path) -> None:
    """A cluster group (`hdfs=cluster`) has no partitions: v1.14.1's offerings define no
    `placement-group-partition`, the spread over it counts no domain and the datanodes stay pending, with why
    (exit 1) — where the undeclared default placed them."""
    code, stdout, _ = simulate(
        build, "--workloads", str(EXAMPLE / "apps"), "--placement-group", "hdfs=cluster"
    )
    assert code == 1
    assert "fleet: 0 node(s), 0 pod(s)" in stdout
    assert "pending: 3 pod(s)" in stdout
    assert "unsatisfiable topology spread constraint on karpenter.k8s.aws/placement-group-partition" in stdout


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("hdfs=partition:8", "hdfs: a partition group has 1 to 7 partitions, not 8"),
        ("hdfs=partition:0", "hdfs: a partition group has 1 to 7 partitions, not 0"),
        ("hdfs=cluster:2", "hdfs: only a partition group has a partition count"),
        ("hdfs=ring", "hdfs: strategy 'ring' is none of EC2's: cluster, partition, spread"),
        ("hdfs", "'hdfs' is not NAME=STRATEGY[:PARTITIONS]"),
    ],
)
def test_a_declaration_ec2_would_refuse_is_a_usage_error_naming_the_flag(
    build: Path, value: str, said: str
) -> None:
    """Bad input: one line naming `--placement-group` and what is wrong, exit 2, nothing run (no traceback)."""
    result = CliRunner().invoke(
        main, ["simulate", "--constraints", str(build), "--workloads", str(EXAMPLE / "apps"), "--placement-group",
               value],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--placement-group" in result.stderr and said in result.stderr
    assert "Traceback" not in result.stderr


@given(st.text(max_size=30))
def test_any_declaration_parses_to_a_group_ec2_would_create_or_is_refused_with_why(value: str) -> None:
    """Whatever is written: a group EC2's CreatePlacementGroup accepts (a known strategy, a partition group's count
    1 … 7, no count otherwise), or a ValueError — never another exception."""
    try:
        name, group = parse(value)
    except ValueError as error:
        assert str(error)
        return
    assert name and group.strategy in STRATEGIES
    if group.strategy == PARTITION:
        assert 1 <= group.partition_count <= MAX_PARTITIONS
    else:
        assert group.partition_count == 0


def test_a_partition_group_without_a_count_has_ec2s_most() -> None:
    """`hdfs=partition`: 7 partitions, the group an undeclared name gets."""
    assert parse("hdfs=partition") == ("hdfs", DeclaredGroup(PARTITION, MAX_PARTITIONS))
    assert parse(" web = Spread ") == ("web", DeclaredGroup("spread", 0))


@pytest.mark.parametrize("count", ["٣", "³", "０3", "9" * 4000])
def test_a_count_ec2_cannot_read_is_refused_and_not_echoed_whole(count: str) -> None:
    """Hostile pass: Python's int() reads '٣' (Arabic-Indic three) and '³'; EC2's PartitionCount is ASCII digits, so
    these are refused; a 4,000-digit count is refused with its start shown, not echoed whole."""
    with pytest.raises(ValueError) as refused:
        parse(f"hdfs=partition:{count}")
    assert "is not a number from 1 to 7" in str(refused.value) and len(str(refused.value)) < 200
