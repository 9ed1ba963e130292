"""`karpenter-policy fmt` through the CLI: Karpenter's defaults made explicit, canonical key order, comments and
quoting kept, other documents untouched, idempotent to the byte, templates refused, nothing half-written."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from karpenter_policy.api.defaults import default_provisioner
from karpenter_policy.commands.filestaging import stage

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


UNFORMATTED = """\
# Batch capacity (the team's own comment)
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  annotations:
    owner: 'batch-team'
  name: batch  # the name Argo CD shows
spec:
  weight: 10
  # on spot, arm64 or amd64
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: ['spot']   # cheaper
    - operator: In
      key: kubernetes.io/arch
      values: ['arm64', 'amd64']
  # where nodes come from
  providerRef:
    name: default
  ttlSecondsAfterEmpty: 30
---
# not a policy: left exactly as written
apiVersion: v1
kind: ConfigMap
metadata: {name: settings,   namespace: kube-system}
data:
    weird:     "spacing"
"""

FORMATTED = """\
# Batch capacity (the team's own comment)
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: batch  # the name Argo CD shows
  annotations:
    owner: 'batch-team'
spec:
  # where nodes come from
  providerRef:
    name: default
  # on spot, arm64 or amd64
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: ['spot']   # cheaper
    - key: kubernetes.io/arch
      operator: In
      values: ['arm64', 'amd64']
    - key: kubernetes.io/os
      operator: In
      values: ['linux']
    - key: karpenter.k8s.aws/instance-category
      operator: In
      values: ['c', 'm', 'r']
    - key: karpenter.k8s.aws/instance-generation
      operator: Gt
      values: ['2']
  ttlSecondsAfterEmpty: 30
  weight: 10
---
# not a policy: left exactly as written
apiVersion: v1
kind: ConfigMap
metadata: {name: settings,   namespace: kube-system}
data:
    weird:     "spacing"
"""


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "batch.yaml").write_text(UNFORMATTED)
    return tmp_path


def test_write_makes_defaults_explicit_in_canonical_order_keeping_comments_and_quoting(repo: Path) -> None:
    done = run("fmt", "policies", "--write", cwd=repo)

    assert done.returncode == 0, done.stderr
    assert (repo / "policies" / "batch.yaml").read_text() == FORMATTED
    assert "policies/batch.yaml: formatted: Provisioner/batch: Karpenter's default kubernetes.io/os In [linux]" in (
        done.stderr)


def test_the_formatted_policy_means_what_the_original_meant(repo: Path) -> None:
    original = yaml.safe_load_all(UNFORMATTED)
    run("fmt", "policies", "--write", cwd=repo)
    formatted = list(yaml.safe_load_all((repo / "policies" / "batch.yaml").read_text()))

    provisioner, configmap = original
    assert formatted == [default_provisioner(provisioner), configmap]


def test_formatting_twice_is_formatting_once_to_the_byte(repo: Path) -> None:
    run("fmt", "policies", "--write", cwd=repo)
    once = (repo / "policies" / "batch.yaml").read_bytes()

    again = run("fmt", "policies", "--write", "--check", cwd=repo)

    assert again.returncode == 0, again.stderr
    assert (repo / "policies" / "batch.yaml").read_bytes() == once
    assert "formatted 0 files, 1 file left unchanged" not in again.stderr  # nothing to rewrite at all
    assert "0 files would be formatted" in again.stderr


def test_without_write_it_prints_a_diff_and_check_fails(repo: Path) -> None:
    shown = run("fmt", "policies", cwd=repo)
    checked = run("fmt", "policies", "--check", cwd=repo)

    assert shown.returncode == 0 and checked.returncode == 1
    assert shown.stdout == checked.stdout
    assert shown.stdout.startswith("--- a/policies/batch.yaml\n+++ b/policies/batch.yaml\n")
    assert "+    - key: kubernetes.io/os\n" in shown.stdout
    assert (repo / "policies" / "batch.yaml").read_text() == UNFORMATTED


def test_check_after_write_fails_when_something_was_rewritten(repo: Path) -> None:
    done = run("fmt", "policies", "--write", "--check", cwd=repo)

    assert done.returncode == 1
    assert (repo / "policies" / "batch.yaml").read_text() == FORMATTED


@pytest.mark.slow
def test_the_repositorys_policies_compile_to_the_same_bytes_once_formatted(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "policies", tmp_path / "policies")
    before = run("compile", "policies", "-o", "-", "--policy-version", "v1", cwd=tmp_path)

    formatted = run("fmt", "policies", "--write", cwd=tmp_path)
    after = run("compile", "policies", "-o", "-", "--policy-version", "v1", cwd=tmp_path)

    assert formatted.returncode == 0, formatted.stderr
    assert "formatted 5 files" in formatted.stderr
    assert before.returncode == after.returncode == 0, after.stderr
    assert after.stdout == before.stdout


def test_templates_are_refused_when_named_and_skipped_in_a_directory(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "templates", tmp_path / "templates")
    template = "templates/policies/platform.yaml.j2"

    named = run("fmt", template, "--write", cwd=tmp_path)
    found = run("fmt", "templates/policies", cwd=tmp_path)

    assert named.returncode == 2
    assert f"{template}: error: fmt does not format templates" in named.stderr
    assert found.returncode == 0, found.stderr
    assert f"{template}: skipped: a template" in found.stderr
    assert (tmp_path / template).read_bytes() == (ROOT / "examples" / "templates" / "policies" /
                                                  "platform.yaml.j2").read_bytes()


def test_a_policy_that_does_not_match_its_schema_is_left_alone(repo: Path) -> None:
    broken = UNFORMATTED.replace("  ttlSecondsAfterEmpty: 30\n", "  ttlSecondAfterEmpty: 30\n")
    (repo / "policies" / "batch.yaml").write_text(broken)

    done = run("fmt", "policies", "--write", "--check", cwd=repo)

    assert done.returncode == 0, done.stderr
    assert (repo / "policies" / "batch.yaml").read_text() == broken
    assert "policies/batch.yaml:21:3: Provisioner/batch not formatted: it does not match its schema:" in done.stderr


@pytest.mark.parametrize(
    ("metadata", "at", "reason"),
    [
        ("metadata: [batch, team]", "3:11", 'metadata must be a mapping, not list ["batch", "team"]'),
        ("metadata: batch", "3:11", 'metadata must be a mapping, not string "batch"'),
        ("metadata: {name: [batch]}", "3:18", 'metadata.name must be a string, not list ["batch"]'),
    ],
)
def test_malformed_metadata_is_reported_at_its_line_and_the_other_files_are_formatted(
    repo: Path, metadata: str, at: str, reason: str
) -> None:
    """metadata as a list used to end fmt with `internal error: AttributeError: 'list' object has no attribute
    'get'`, formatting nothing: now the document is left as it is, with the schema's reason at its line."""
    broken = "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\n" + metadata + "\nspec:\n  providerRef: {name: d}\n"
    (repo / "policies" / "broken.yaml").write_text(broken)

    done = run("fmt", "policies", "--write", cwd=repo)

    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert f"policies/broken.yaml:{at}: Provisioner/? not formatted: it does not match its schema: {reason}" in (
        done.stderr
    )
    assert (repo / "policies" / "broken.yaml").read_text() == broken
    assert (repo / "policies" / "batch.yaml").read_text() == FORMATTED


def test_a_file_that_is_not_yaml_is_reported_and_the_others_are_formatted(repo: Path) -> None:
    (repo / "policies" / "broken.yaml").write_text("apiVersion: v1\nkind: [\n")

    done = run("fmt", "policies", "--write", cwd=repo)

    assert done.returncode == 1
    assert "policies/broken.yaml:2:1: error: invalid YAML" in done.stderr and "[parse-error]" in done.stderr
    assert (repo / "policies" / "batch.yaml").read_text() == FORMATTED
    assert (repo / "policies" / "broken.yaml").read_text() == "apiVersion: v1\nkind: [\n"


def test_exclude_and_a_missing_path(repo: Path) -> None:
    excluded = run("fmt", "policies", "--exclude", "batch.yaml", "--check", cwd=repo)
    missing = run("fmt", "nope", cwd=repo)

    assert excluded.returncode == 0 and "0 files would be formatted" in excluded.stderr
    assert missing.returncode == 2 and "nope: error: no such file or directory" in missing.stderr


# --- line endings (issue #19) -------------------------------------------------------------------------------

SECOND_PROVISIONER = """\
---
# the second Provisioner of the file
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: spot  # the team's spot capacity
spec:
  providerRef:
    name: default
"""


def crlf(text: str) -> bytes:
    return text.replace("\n", "\r\n").encode()


@pytest.mark.slow
def test_a_crlf_file_is_formatted_in_crlf_every_line_and_every_document(repo: Path) -> None:
    """A CRLF file was rewritten in LF except on comment lines (a stray CR left there), and in a CRLF file of
    several documents the Provisioners were not formatted at all while --check passed."""
    file = repo / "policies" / "batch.yaml"
    file.write_bytes(crlf(UNFORMATTED + SECOND_PROVISIONER))
    _, formatted_second, _ = run_lf(repo, UNFORMATTED + SECOND_PROVISIONER)

    checked = run("fmt", "policies", "--check", cwd=repo)
    written = run("fmt", "policies", "--write", cwd=repo)

    assert checked.returncode == 1, checked.stderr
    assert written.returncode == 0, written.stderr
    assert "Provisioner/batch: Karpenter's default" in written.stderr
    assert "Provisioner/spot: Karpenter's default" in written.stderr
    content = file.read_bytes()
    assert content == crlf(formatted_second)  # exactly the LF result, in CRLF
    assert content.count(b"\n") == content.count(b"\r\n")  # no line left in LF, no stray CR
    assert run("fmt", "policies", "--check", cwd=repo).returncode == 0


def run_lf(repo: Path, text: str) -> tuple[int, str, str]:
    """The same text formatted as an LF file, next door."""
    other = repo / "lf"
    other.mkdir(exist_ok=True)
    (other / "p.yaml").write_text(text)
    done = run("fmt", "lf", "--write", cwd=repo)
    return done.returncode, (other / "p.yaml").read_text(), done.stderr


def test_crlf_documents_fmt_leaves_alone_stay_byte_identical(repo: Path) -> None:
    formatted_crlf = crlf(FORMATTED)
    file = repo / "policies" / "batch.yaml"
    file.write_bytes(formatted_crlf)

    done = run("fmt", "policies", "--write", "--check", cwd=repo)

    assert done.returncode == 0, done.stderr
    assert file.read_bytes() == formatted_crlf


def test_a_carriage_return_that_ends_no_line_is_left_alone_with_a_note(repo: Path) -> None:
    text = crlf(UNFORMATTED).replace(b"# on spot, arm64 or amd64\r\n", b"# on spot,\r# arm64 or amd64\r\n")
    file = repo / "policies" / "batch.yaml"
    file.write_bytes(text)

    done = run("fmt", "policies", "--write", cwd=repo)

    assert done.returncode == 0, done.stderr
    assert file.read_bytes() == text
    assert "policies/batch.yaml:10: not formatted: a carriage return that does not end a line" in done.stderr


def test_write_never_follows_a_link_out_of_the_repository(repo: Path) -> None:
    """`policies/evil.yaml -> ../../outside.yaml` used to be formatted in place, rewriting a file outside the
    repository: now its reading is refused (naming the link, never printing the content) and nothing is
    written."""
    outside = repo.parent / f"{repo.name}-outside.yaml"
    outside.write_text(UNFORMATTED.replace("batch-team", "secret-team"))
    (repo / "policies" / "evil.yaml").symlink_to(outside)

    done = run("fmt", "policies", "--write", cwd=repo)

    assert done.returncode == 2, done.stderr
    assert "policies/evil.yaml: error: not read: a symbolic link to a file outside the repository" in done.stderr
    assert "secret-team" not in done.stdout + done.stderr
    assert outside.read_text() == UNFORMATTED.replace("batch-team", "secret-team")
    assert (repo / "policies" / "batch.yaml").read_text() == UNFORMATTED


def test_write_refuses_a_link_inside_the_repository_too(repo: Path) -> None:
    """A writer never writes through a link, even one that stays inside: all or nothing, so nothing is written,
    and the message says how to go on. (In git, the repository is the work tree: the link may lead to another
    directory of it.)"""
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / "shared").mkdir()
    (repo / "shared" / "base.yaml").write_text(UNFORMATTED)
    (repo / "policies" / "base.yaml").symlink_to(repo / "shared" / "base.yaml")

    done = run("fmt", "policies", "--write", cwd=repo)

    assert done.returncode == 2, done.stderr
    assert "policies/base.yaml: error: not written: it is a symbolic link: fmt never writes through one" in done.stderr
    assert "--exclude the link" in done.stderr
    assert (repo / "shared" / "base.yaml").read_text() == UNFORMATTED
    assert (repo / "policies" / "batch.yaml").read_text() == UNFORMATTED
    assert run("fmt", "policies", "--write", "--exclude", "policies/base.yaml", cwd=repo).returncode == 0
    assert (repo / "policies" / "batch.yaml").read_text() == FORMATTED


def test_write_removes_the_temporary_files_a_killed_run_left(repo: Path) -> None:
    """A `fmt --write` killed between staging and renaming leaves `.batch.yaml.XXXXXXXX.tmp` next to the file: the
    next `fmt --write` removes it, and only what matches the writer's own pattern for a file it formats."""
    leftover = stage(str(repo / "policies" / "batch.yaml"), b"half written", 0o644).temporary
    kept = [repo / "policies" / ".batch.yaml.tmp", repo / "policies" / ".other.yaml.abcdefgh.tmp",
            repo / "policies" / ".batch.yaml.abcdefgh.bak"]
    for path in kept:
        path.write_text("not ours")

    done = run("fmt", "policies", "--write", cwd=repo)

    assert done.returncode == 0, done.stderr
    assert not Path(leftover).exists()
    assert f"{Path(leftover).relative_to(repo)}: removed: a temporary file an earlier run left" in done.stderr
    assert all(path.read_text() == "not ours" for path in kept)
    assert (repo / "policies" / "batch.yaml").read_text() == FORMATTED
