"""`karpenter-policy migrate`: Karpenter v0.31.5's 16 Provisioner examples each proven equivalent or refused with a
named reason, the output valid v1 (`validate`), the files rewritten with their comments and other documents kept,
written atomically and never over what is there, and what v1 changes reported with its mitigation."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from clirun import run_cli

from karpenter_policy.catalog import Catalog, load_catalog
from karpenter_policy.checks.findings import CommandOutput
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.validation.policies import validate_paths
from karpenter_policy.commands.migrate.command import MigrateOptions, migrate_command

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "data" / "karpenter-v0.31.5-examples"
#: The examples v1 cannot take, and the finding that says why (rule, words of its message).
REFUSED = {
    "al2-custom-ami.yaml": ("invalid-spec", "'ami456' is not an id"),
    "custom-family.yaml": ("invalid-spec", "'ami456' is not an id"),
    "ubuntu-kubelet-log-query.yaml": ("v1-conversion", "v1 has no Ubuntu AMI family nor alias"),
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


def _migrate(paths: list[str], catalog: Catalog, **options: object) -> CommandOutput:
    defaults: dict[str, object] = {"default_instance_profile": "KarpenterNodeInstanceProfile"}
    return migrate_command(paths, MigrateOptions(**{**defaults, **options}), catalog)  # type: ignore[arg-type]


def test_the_examples_are_karpenter_v0315s_sixteen_each_naming_its_source() -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))

    assert len(files) == 16
    for file in files:
        assert re.fullmatch(
            r"# aws/karpenter-provider-aws v0\.31\.5 examples/provisioner/\S+\.yaml", file.read_text().splitlines()[0]
        )


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.glob("*.yaml")))
def test_each_example_is_proven_equivalent_or_refused_with_its_reason(
    example: str, catalog: Catalog, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    result = _migrate([str(EXAMPLES / example)], catalog, out=str(out))

    written = out / example
    migrated = [d.data for d in parse(str(written), written.read_text())]
    kinds = sorted(str(d["kind"]) for d in migrated)
    if example in REFUSED:
        rule, words = REFUSED[example]
        assert result.exit_code == 1
        assert re.search(rf"error: .*{re.escape(words)}.*\[{rule}\]", result.stdout), result.stdout
        assert "proven equivalent" not in result.stdout
        assert "Provisioner" in kinds  # left as it was, nothing lost
        assert written.read_text() == (EXAMPLES / example).read_text()
    else:
        provisioners = len(re.findall(r"^kind: Provisioner", (EXAMPLES / example).read_text(), re.MULTILINE))
        assert result.exit_code == 0, result.stdout + result.stderr
        assert result.stdout.count("proven equivalent") == provisioners >= 1
        assert "Provisioner" not in kinds and "AWSNodeTemplate" not in kinds
        assert kinds.count("NodePool") == provisioners
        report = validate_paths([str(out)])
        assert [f for f in report.findings if f.severity == "error"] == []
        assert report.kinds["NodePool"] == provisioners


def test_comments_other_documents_and_the_header_are_kept(catalog: Catalog, tmp_path: Path) -> None:
    policy = tmp_path / "policies" / "pool.yaml"
    policy.parent.mkdir()
    other = "apiVersion: v1\nkind: ConfigMap  # kept byte for byte\nmetadata:\n  name: x\n"
    policy.write_text(
        "# the team's batch pool\n"
        "apiVersion: karpenter.sh/v1alpha5\n"
        "kind: Provisioner\n"
        "metadata:\n"
        "  name: batch\n"
        "spec:\n"
        "  # expire weekly\n"
        "  ttlSecondsUntilExpired: 604800 # 7 days\n"
        "  requirements:\n"
        "    # spot first\n"
        "    - key: karpenter.sh/capacity-type\n"
        "      operator: In\n"
        "      values: [spot]\n"
        "  providerRef:\n"
        "    name: batch\n"
        "---\n" + other + "---\n"
        "apiVersion: karpenter.k8s.aws/v1alpha1\n"
        "kind: AWSNodeTemplate\n"
        "metadata:\n"
        "  name: batch\n"
        "spec:\n"
        "  subnetSelector: {karpenter.sh/discovery: prod} # the cluster's\n"
        "  securityGroupSelector: {karpenter.sh/discovery: prod}\n"
        "  userData: |\n"
        "    #!/bin/bash\n"
        "    echo '# not a comment'\n"
    )
    original = policy.read_text()

    result = _migrate([str(policy.parent)], catalog, write=True)

    text = policy.read_text()
    assert result.exit_code == 0, result.stdout + result.stderr
    assert f"{policy}: written" in result.stderr
    assert text.startswith("# the team's batch pool\napiVersion: karpenter.sh/v1\nkind: NodePool\n")
    assert "  template:\n    spec:\n      # expire weekly\n      expireAfter: 168h # 7 days\n" in text
    assert "      # spot first\n      - key: karpenter.sh/capacity-type\n" in text
    assert "  subnetSelectorTerms: # the cluster's\n  - tags:\n      karpenter.sh/discovery: prod\n" in text
    assert "---\n" + other + "---\n" in text
    assert "echo '# not a comment'\n" in text and "Comments of the v1alpha5" not in text
    assert "budgets:\n    - nodes: '1'\n" in text
    assert original != text and validate_paths([str(policy)]).errors == 0

    again = _migrate([str(policy.parent)], catalog, write=True)
    assert again.exit_code == 0 and policy.read_text() == text  # nothing left to migrate: unchanged


def test_what_v1_changes_is_reported_with_its_mitigation(catalog: Catalog) -> None:
    result = _migrate([str(EXAMPLES / "node-ttls.yaml")], catalog, budget="10%")

    lines = {re.sub(r"^.*node-ttls\.yaml:", "", line) for line in result.stdout.splitlines()}
    assert any(line.startswith("9:3: warning: ") and "budgets [{nodes: \"10%\"}]" in line for line in lines)
    assert any(line.startswith("9:3: warning: ") and "[migration-drift]" in line for line in lines)
    assert any(line.startswith("11:3: warning: ") and "terminationGracePeriod" in line for line in lines)
    assert any(line.startswith("12:3: warning: ") and "consolidateAfter: 1m" in line for line in lines)
    assert any("alias: al2@latest" in line and "[migration-ami]" in line for line in lines)
    assert result.exit_code == 0 and "+    - nodes: 10%" in result.stdout  # a diff without -o or --write


def test_provisioners_sharing_a_template_with_other_kubelet_settings_get_a_node_class_each(
    catalog: Catalog, tmp_path: Path
) -> None:
    (tmp_path / "provisioners.yaml").write_text(
        "".join(
            f"---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\n"
            f"spec:\n  providerRef:\n    name: shared\n  kubeletConfiguration:\n    maxPods: {pods}\n"
            for name, pods in (("small", 20), ("large", 110))
        )
    )
    (tmp_path / "template.yaml").write_text(
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata:\n  name: shared\nspec:\n"
        "  subnetSelector: {a: b}\n  securityGroupSelector: {a: b}\n"
    )
    out = tmp_path.parent / f"{tmp_path.name}-out"

    result = _migrate([str(tmp_path)], catalog, out=str(out))

    assert result.exit_code == 0, result.stdout
    classes = [d.data for d in parse("t", (out / "template.yaml").read_text())]
    # the template itself (no kubelet: no Provisioner shares its settings), then one class per kubelet setting
    assert [c["metadata"]["name"] for c in classes] == ["shared", "shared-large", "shared-small"]
    assert [c["spec"].get("kubelet") for c in classes] == [None, {"maxPods": 110}, {"maxPods": 20}]
    assert result.stdout.count("proven equivalent") == 2 and result.stdout.count("[migration-kubelet]") == 2
    assert validate_paths([str(out)]).errors == 0
    shutil.rmtree(out)


def test_output_is_deterministic_and_never_replaces_what_is_there(catalog: Catalog, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = _migrate([str(EXAMPLES)], catalog, out=str(out))  # all 16 at once: their names collide
    contents = {p.name: p.read_bytes() for p in out.iterdir()}
    second = _migrate([str(EXAMPLES)], catalog, out=str(out))  # the same bytes: allowed, unchanged
    (out / "spot.yaml").write_text("# mine\n")

    third = _migrate([str(EXAMPLES)], catalog, out=str(out))

    assert first.exit_code == second.exit_code == 1  # duplicate names: those objects stay
    assert len(contents) == 16 and {p.name: p.read_bytes() for p in out.iterdir() if p.name != "spot.yaml"} == {
        k: v for k, v in contents.items() if k != "spot.yaml"
    }
    assert third.exit_code == 2 and "already exist(s) with other content" in third.stderr
    assert (out / "spot.yaml").read_text() == "# mine\n"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_an_output_directory_inside_the_paths_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "spot.yaml", tmp_path / "spot.yaml")

    result = _migrate([str(tmp_path)], catalog, out=str(tmp_path / "v1"))

    assert result.exit_code == 2 and "lies inside the PATHS" in result.stderr
    assert not (tmp_path / "v1").exists()


def test_v1beta1_from_the_command_line_prints_the_diff_and_the_proof(tmp_path: Path) -> None:
    convert = ROOT / "tests" / "data" / "karpenter-convert-v0.32.10"
    for name in ("provisioner.yaml", "nodetemplate_kubectl_output.yaml"):
        shutil.copy(convert / name, tmp_path / name)
    done = run_cli("migrate", str(tmp_path), "--to", "v1beta1", "--node-role", "R", cwd=ROOT)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "+apiVersion: karpenter.sh/v1beta1" in done.stdout
    assert "+apiVersion: karpenter.k8s.aws/v1beta1" in done.stdout
    assert "Provisioner default → NodePool default: proven equivalent" in done.stdout
    assert (tmp_path / "provisioner.yaml").read_text() == (convert / "provisioner.yaml").read_text()


def test_an_unknown_target_is_refused_naming_the_supported_ones(catalog: Catalog) -> None:
    result = _migrate([str(EXAMPLES / "spot.yaml")], catalog, to="v1alpha1")

    assert result.exit_code == 2 and "--to v1alpha1: supported: v1, v1beta1" in result.stderr


def test_a_template_file_is_not_rewritten_and_says_why(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "p.yaml.j2").write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {{ name }}\n"
        "spec:\n  provider:\n    subnetSelector: {a: b}\n    securityGroupSelector: {a: b}\n"
    )

    result = migrate_command(
        [str(tmp_path)], MigrateOptions(values={"name": "web"}, default_instance_profile="p"), catalog
    )

    assert result.exit_code == 1
    assert "error: Provisioner/web: a template file (*.yaml.j2) is not rewritten" in result.stdout
    assert "[migration-not-written]" in result.stdout and "proven" not in result.stdout


def _doc_blocks() -> dict[str, str]:
    """The worked example of docs/migrate.md: each fenced block after a `<!-- migrate-example: ... -->` marker."""
    page = (ROOT / "docs" / "migrate.md").read_text(encoding="utf-8")
    found = re.findall(r"<!-- migrate-example: ([^>]+?) -->\n```[a-z]*\n(.*?)```\n", page, re.DOTALL)
    return dict(found)


def test_the_worked_example_of_the_docs_is_what_migrate_does(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks = _doc_blocks()
    assert sorted(blocks) == ["input policies/batch.yaml", "output policies-v1/batch.yaml", "report"]
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "batch.yaml").write_text(blocks["input policies/batch.yaml"])
    monkeypatch.chdir(tmp_path)

    result = migrate_command(["policies/"], MigrateOptions(out="policies-v1/"), catalog)

    assert result.exit_code == 0 and result.stderr == "wrote 1 file into policies-v1/\n"
    assert result.stdout == blocks["report"]
    assert (tmp_path / "policies-v1" / "batch.yaml").read_text() == blocks["output policies-v1/batch.yaml"]
    assert validate_paths(["policies-v1/"]).errors == 0


def test_a_single_file_can_be_migrated_into_a_directory_beside_it(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copy(EXAMPLES / "spot.yaml", tmp_path / "spot.yaml")
    monkeypatch.chdir(tmp_path)

    result = _migrate(["spot.yaml"], catalog, out="v1")

    assert result.exit_code == 0, result.stderr
    assert "kind: NodePool" in (tmp_path / "v1" / "spot.yaml").read_text()


def test_workloads_select_the_node_pool_instead_of_the_provisioner(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    shutil.copy(EXAMPLES / "spot.yaml", tmp_path / "policies" / "spot.yaml")  # Provisioner default
    apps = tmp_path / "apps"
    apps.mkdir()
    job = (
        "# the nightly job\n"
        "apiVersion: batch/v1\n"
        "kind: Job\n"
        "metadata:\n"
        "  name: nightly\n"
        "spec:\n"
        "  template:\n"
        "    spec:\n"
        "      nodeSelector:\n"
        '        "karpenter.sh/provisioner-name": default   # our pool\n'
        "      affinity:\n"
        "        nodeAffinity:\n"
        "          requiredDuringSchedulingIgnoredDuringExecution:\n"
        "            nodeSelectorTerms:\n"
        "              - matchExpressions:\n"
        "                  - {key: karpenter.sh/provisioner-name, operator: In, values: [default]}\n"
        "      containers: [{name: c, image: busybox}]\n"
    )
    (apps / "job.yaml").write_text(job)

    result = _migrate([str(tmp_path / "policies")], catalog, write=True, workloads=(str(apps),))

    assert result.exit_code == 0, result.stdout + result.stderr
    assert (apps / "job.yaml").read_text() == job.replace(
        '"karpenter.sh/provisioner-name": default', '"karpenter.sh/nodepool": default'
    ).replace("{key: karpenter.sh/provisioner-name, operator: In", "{key: karpenter.sh/nodepool, operator: In")
    assert "workloads: 1 workload lands where it did (placed again on the migrated files)" in result.stdout
    assert f"{apps / 'job.yaml'}: written" in result.stderr


def test_a_broken_file_and_an_inline_provider_beside_it(catalog: Catalog, tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("a: [\n")
    (tmp_path / "inline.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: web\nspec:\n  provider:\n"
        "    subnetSelector: {a: b}\n    securityGroupSelector: {a: b}\n    instanceProfile: p\n"
        "    amiFamily: Bottlerocket\n"
    )

    result = _migrate([str(tmp_path)], catalog, write=True)

    assert result.exit_code == 1  # the parse error; nothing raised
    assert re.search(r"broken\.yaml:1:1: error: invalid YAML.*\[parse-error\]", result.stdout)
    assert "inline.yaml:6:3: warning: Provisioner/web: the inline provider becomes EC2NodeClass web" in result.stdout
    assert "inline.yaml:10:5: warning: Provisioner/web: amiFamily Bottlerocket becomes" in result.stdout
    assert [d.data["kind"] for d in parse("x", (tmp_path / "inline.yaml").read_text())] == ["EC2NodeClass", "NodePool"]
    assert (tmp_path / "broken.yaml").read_text() == "a: [\n"


def test_a_crlf_file_stays_crlf(catalog: Catalog, tmp_path: Path) -> None:
    policy = tmp_path / "spot.yaml"
    policy.write_bytes((EXAMPLES / "spot.yaml").read_bytes().replace(b"\n", b"\r\n"))

    result = _migrate([str(policy)], catalog, write=True)

    data = policy.read_bytes()
    assert result.exit_code == 0, result.stdout
    assert b"kind: NodePool\r\n" in data and data.count(b"\n") == data.count(b"\r\n")


def test_workloads_are_placed_again_and_one_that_would_move_stops_the_write(catalog: Catalog, tmp_path: Path) -> None:
    """`--workloads` places every workload again on the migrated files. A workload that requires the
    `karpenter.sh/provisioner-name` label to exist could land on both Provisioners; after migration only the one
    that stays a Provisioner (Ubuntu: no v1 family) still labels its nodes so, and the NodePool no longer takes it:
    `migration-workload-moved` at the workload, and `--write` writes nothing."""
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(EXAMPLES / "spot.yaml", policies / "spot.yaml")  # Provisioner default: migrated
    ubuntu = (EXAMPLES / "ubuntu-kubelet-log-query.yaml").read_text()
    (policies / "ubuntu.yaml").write_text(ubuntu.replace("name: default", "name: legacy", 1))  # stays
    apps = tmp_path / "apps"
    apps.mkdir()
    pinned = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: pinned}\nspec:\n  selector: {matchLabels: {app: p}}\n"
        "  template:\n    metadata: {labels: {app: p}}\n    spec:\n"
        "      nodeSelector: {karpenter.sh/provisioner-name: default}\n"
        "      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]\n"
    )
    anywhere = pinned.replace("name: pinned", "name: anywhere").replace(
        "      nodeSelector: {karpenter.sh/provisioner-name: default}\n",
        "      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms:\n"
        "        [{matchExpressions: [{key: karpenter.sh/provisioner-name, operator: Exists}]}]}}}\n",
    )
    (apps / "pinned.yaml").write_text(pinned)
    (apps / "anywhere.yaml").write_text(anywhere)

    result = _migrate([str(policies)], catalog, write=True, workloads=(str(apps),))

    assert result.exit_code == 1, result.stdout + result.stderr
    moved = [line for line in result.stdout.splitlines() if "[migration-workload-moved]" in line]
    assert moved == [
        f"{apps / 'anywhere.yaml'}:6:3: error: Deployment/anywhere: before migration it lands on Provisioner/default "
        "(could land on: Provisioner/default, Provisioner/legacy); after, it lands on Provisioner/legacy (could land "
        "on: Provisioner/legacy) [migration-workload-moved]"
    ]
    assert "workloads: 1 of 2 would land elsewhere after migration: nothing written" in result.stdout
    assert "nothing written: a workload would land elsewhere after migration" in result.stderr
    assert (apps / "pinned.yaml").read_text() == pinned and (apps / "anywhere.yaml").read_text() == anywhere
    assert (policies / "spot.yaml").read_text() == (EXAMPLES / "spot.yaml").read_text()

    (apps / "anywhere.yaml").unlink()  # the pinned workload alone: renamed, placed again on NodePool default
    result = _migrate([str(policies)], catalog, write=True, workloads=(str(apps),))

    assert "workloads: 1 workload lands where it did (placed again on the migrated files)" in result.stdout
    assert "karpenter.sh/nodepool: default" in (apps / "pinned.yaml").read_text()
    assert "kind: NodePool" in (policies / "spot.yaml").read_text()


def test_a_file_holding_a_migrated_policy_and_a_workload_to_rename_is_refused(catalog: Catalog, tmp_path: Path) -> None:
    """Two rewrites of one file's text (the Provisioner migrated, the workload's selector renamed) would each undo
    the other: refused before anything is written."""
    mixed = (EXAMPLES / "spot.yaml").read_text() + (
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        "  nodeSelector: {karpenter.sh/provisioner-name: default}\n  containers: [{name: c, image: x}]\n"
    )
    (tmp_path / "all.yaml").write_text(mixed)

    result = _migrate([str(tmp_path)], catalog, write=True, workloads=(str(tmp_path),))

    assert result.exit_code == 2
    assert result.stderr == (
        f"karpenter-policy migrate: {tmp_path / 'all.yaml'}: holds both a migrated policy and a workload to rename: "
        "keep workloads in files of their own, or migrate without --workloads\n"
    )
    assert (tmp_path / "all.yaml").read_text() == mixed
