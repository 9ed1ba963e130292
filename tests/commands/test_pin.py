"""`pin`: splices pins into manifests; every line that no rule changes stays byte-identical."""

from __future__ import annotations

import difflib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.checks.pinning import Rule, rules_of
from karpenter_policy.checks.source.loader import parse
from karpenter_policy.commands.filestaging import NotWritable, stage
from karpenter_policy.commands.pin import (
    UnsafeEdit,
    pin_paths,
    pin_text,
    render_scalar,
    write_atomically,
    write_plans,
)
from tests.unprivileged import Unprivileged, unprivileged  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[2]

SPARK_POLICY: dict[str, Any] = {
    "apiVersion": "karpenter-policy.dev/v1alpha1",
    "kind": "PinningPolicy",
    "metadata": {"name": "emr-spark"},
    "spec": {
        "rules": [
            {
                "name": "drivers",
                "match": {"sparkRole": "driver"},
                "nodeSelector": {"app": "kspark", "karpenter.sh/capacity-type": "on-demand"},
            },
            {
                "name": "executors",
                "match": {"sparkRole": "executor"},
                "nodeSelector": {"app": "kspark", "karpenter.sh/capacity-type": "spot"},
                "tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}],
            },
        ]
    },
}
RULES = rules_of(SPARK_POLICY)
GPU_RULES = rules_of(
    {
        "metadata": {"name": "gpu"},
        "spec": {
            "rules": [
                {
                    "name": "trainers",
                    "match": {"labels": {"team": "ml"}},
                    "nodeSelector": {"accelerator": "nvidia"},
                    "tolerations": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}],
                }
            ]
        },
    }
)

# The executor template of seeds/004 with comments everywhere, odd quoting and indentation, a wrong value.
ODD = """\
# // Copyright Amazon.com, Inc. or its affiliates. All Rights Reserved.
# // SPDX-License-Identifier: MIT-0
apiVersion: "v1"   # quoted for no reason
kind: 'Pod'
metadata: {labels: {"spark-role": executor}}
spec:
    # where it runs
    nodeSelector:
        'karpenter.sh/capacity-type': 'on-demand'   # <- wrong: the rule says spot
        "topology.kubernetes.io/zone": us-east-1a
    containers:
        -   name: "spark-kubernetes-executor"    # Spark's name
            command: ['sh', '-c', 'echo "hi"; exit 0']
            env:
              - {name: A, value: "yes"}
            volumeMounts:
                -   {name: spark-local-dir-1, mountPath: /data1}
    volumes:
        -   name: spark-local-dir-1
            hostPath: {path: /local1}   # trailing comment
    # a comment after the last entry of the spec
"""


def pin(text: str, rules: list[Rule] = RULES, file: str = "t.yaml") -> str:
    plan, findings = pin_text(file, text, rules)
    assert not findings
    return plan.updated


def data_of(text: str) -> list[Any]:
    return [d.data for d in parse("t.yaml", text)]


def removed_and_added(before: str, after: str) -> tuple[list[str], list[str]]:
    """The lines of `before` that are not in `after` byte for byte (in order), and the lines added."""
    diff = list(difflib.ndiff(before.splitlines(keepends=True), after.splitlines(keepends=True)))
    removed = [line[2:] for line in diff if line.startswith("- ")]
    added = [line[2:] for line in diff if line.startswith("+ ")]
    return removed, added


def test_every_line_not_changed_by_a_rule_is_byte_identical() -> None:
    after = pin(ODD)
    removed, added = removed_and_added(ODD, after)
    assert removed == ["        'karpenter.sh/capacity-type': 'on-demand'   # <- wrong: the rule says spot\n"]
    assert added == [
        "        'karpenter.sh/capacity-type': 'spot'   # <- wrong: the rule says spot\n",
        "        'app': 'kspark'\n",  # in the quoting of the entries before it
        "    tolerations:\n",
        "        -   key: spot\n",
        "            operator: Exists\n",
        "            effect: NoSchedule\n",
    ]
    # Everything else, comments and odd quoting included, is there byte for byte and in order.
    kept = [line for line in ODD.splitlines(keepends=True) if line not in removed]
    assert [line for line in after.splitlines(keepends=True) if line in kept] == kept
    expected = data_of(ODD)[0]
    expected["spec"]["nodeSelector"] = {
        "karpenter.sh/capacity-type": "spot",
        "topology.kubernetes.io/zone": "us-east-1a",
        "app": "kspark",
    }
    expected["spec"]["tolerations"] = [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]
    assert data_of(after) == [expected]


def test_pinning_is_idempotent() -> None:
    once = pin(ODD)
    assert pin(once) == once


def test_the_pod_template_of_the_emr_example() -> None:
    before = (ROOT / "examples/pinning/apps/karpenter-driver-pod-template.yaml").read_text()
    after = pin(before)
    removed, added = removed_and_added(before, after)
    assert removed == []
    assert added == ["  nodeSelector:\n", "    app: kspark\n", "    karpenter.sh/capacity-type: on-demand\n"]
    assert after.startswith(before.rstrip("\n"))


DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer
  namespace: ml
spec:
  replicas: 2
  template:
    metadata:
      labels:
        team: ml
    spec:
      containers:
      - name: train
        image: trainer:1
        args:
        - --epochs=3
      tolerations:
      - key: other
        operator: Exists
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {team: ml}}
        spec:
          restartPolicy: Never
          containers:
            - name: job
              image: job:1
              command:
                - |
                  echo multi
                  echo line
"""


def test_controllers_and_cronjobs_in_one_stream() -> None:
    after = pin(DEPLOYMENT, GPU_RULES)
    removed, added = removed_and_added(DEPLOYMENT, after)
    assert removed == []
    assert added == [
        "      - key: nvidia.com/gpu\n",
        "        operator: Equal\n",
        '        value: "true"\n',
        "        effect: NoSchedule\n",
        "      nodeSelector:\n",
        "        accelerator: nvidia\n",
        # The CronJob's spec ends in a block scalar: the new keys go after it, at the spec's indentation.
        "          nodeSelector:\n",
        "            accelerator: nvidia\n",
        "          tolerations:\n",
        "            - key: nvidia.com/gpu\n",
        "              operator: Equal\n",
        '              value: "true"\n',
        "              effect: NoSchedule\n",
    ]
    deployment, cronjob = data_of(after)
    spec = deployment["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"accelerator": "nvidia"}
    assert spec["tolerations"][-1] == {
        "key": "nvidia.com/gpu",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    }
    job_spec = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job_spec["containers"][0]["command"] == ["echo multi\necho line\n"]
    assert job_spec["nodeSelector"] == {"accelerator": "nvidia"}


POD = "kind: Pod\nmetadata: {labels: {team: ml}}\nspec:\n"


@pytest.mark.parametrize(
    ("name", "before"),
    [
        (
            "flow spec",
            "kind: Pod\napiVersion: v1\nmetadata: {name: p, labels: {team: ml}}\nspec: {containers: [{name: c}]}\n",
        ),
        (
            "flow nodeSelector and flow tolerations",
            POD + "  nodeSelector: {a: b}\n  tolerations: [{key: x, operator: Exists}]\n  containers: [{name: c}]\n",
        ),
        (
            "empty flow collections",
            POD + "  nodeSelector: {}\n  tolerations: []\n  containers: [{name: c}]\n",
        ),
        (
            "null values",
            POD + "  nodeSelector: null\n  tolerations: ~\n  containers: [{name: c}]\n",
        ),
        (
            "keys with nothing after them",
            POD + "  nodeSelector:\n  tolerations:\n  containers: [{name: c}]\n",
        ),
        (
            "CRLF line ends",
            "kind: Pod\r\nmetadata:\r\n  labels:\r\n    team: ml\r\nspec:\r\n  containers:\r\n  - name: c # x\r\n",
        ),
        (
            "no newline at the end",
            "kind: Pod\nmetadata:\n  labels:\n    team: ml\nspec:\n    containers:\n    - name: c",
        ),
        (
            "a kind: List",
            "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {labels: {team: ml}}\n  spec:\n"
            "    containers:\n    - name: c\n",
        ),
        (
            "quoted values are rewritten in their quoting",
            'kind: Pod\nmetadata: {labels: {team: ml}}\nspec:\n  nodeSelector:\n    "accelerator": "amd"  # no\n'
            "  containers: [{name: c}]\n",
        ),
    ],
)
def test_layouts(name: str, before: str) -> None:
    after = pin(before, GPU_RULES)
    removed, _ = removed_and_added(before, after)
    after_lines = {line.rstrip("\r\n") for line in after.splitlines()}
    for line in removed:  # only lines that hold what the rule changes; elsewhere at most a line end was added
        touched = ("nodeSelector", "tolerations", "accelerator", "spec: {")
        assert any(t in line for t in touched) or line.rstrip("\r\n") in after_lines, (name, line)
    if name == "quoted values are rewritten in their quoting":
        assert '    "accelerator": "nvidia"  # no\n' in after
    data = data_of(after)
    pod = data[0]["items"][0] if data[0].get("kind") == "List" else data[0]
    assert pod["spec"]["nodeSelector"]["accelerator"] == "nvidia"
    assert {"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"} in pod["spec"][
        "tolerations"
    ]
    assert pin(after, GPU_RULES) == after  # idempotent in every layout
    if "\r\n" in before:
        assert "\n" not in after.replace("\r\n", "")


def test_a_broader_toleration_is_enough() -> None:
    before = "kind: Pod\nmetadata: {labels: {team: ml}}\nspec:\n  nodeSelector: {accelerator: nvidia}\n"
    before += "  tolerations:\n  - operator: Exists\n  containers: [{name: c}]\n"
    assert pin(before, GPU_RULES) == before


def test_non_string_value_is_quoted() -> None:
    rules = rules_of(
        {"metadata": {"name": "x"}, "spec": {"rules": [{"match": {}, "nodeSelector": {"enabled": "true", "n": "1"}}]}}
    )
    before = "kind: Pod\nspec:\n  nodeSelector:\n    enabled: true\n  containers: [{name: c}]\n"
    after = pin(before, rules)
    assert '    enabled: "true"\n' in after and '    "n": "1"\n' in after  # n: a YAML 1.1 boolean to kubectl
    assert data_of(after)[0]["spec"]["nodeSelector"] == {"enabled": "true", "n": "1"}


def test_an_alias_at_the_end_of_the_spec_is_fine() -> None:
    before = "kind: Pod\nmetadata: {labels: {team: ml}}\nspec:\n  containers: &c [{name: c}]\n  initContainers: *c\n"
    after = pin(before, GPU_RULES)
    assert data_of(after)[0]["spec"]["initContainers"] == [{"name": "c"}]
    assert removed_and_added(before, after)[0] == []


def test_a_spec_shared_through_an_alias_is_refused() -> None:
    before = "kind: Pod\nmetadata: {labels: {team: ml}}\nx-shared: &s\n  containers: [{name: c}]\nspec: *s\n"
    with pytest.raises(UnsafeEdit):
        pin_text("t.yaml", before, GPU_RULES)


def test_workloads_no_rule_matches_are_left_alone() -> None:
    before = "kind: Pod\nmetadata: {labels: {team: web}}\nspec:\n  containers: [{name: c}]\n"
    plan, _ = pin_text("t.yaml", before, GPU_RULES)
    assert not plan.changed and plan.unified_diff() == ""


def test_render_scalar() -> None:
    assert render_scalar("on-demand") == "on-demand"
    assert render_scalar("spot", "'") == "'spot'"
    assert render_scalar("it's", "'") == "'it''s'"
    for special in ("true", "yes", "on", "1", "1.5", "0x1f", "null", "~", "12:30", "a: b", "#x", ""):
        rendered = render_scalar(special)
        assert yaml.safe_load(f"k: {rendered}")["k"] == special, special


def test_write_atomically_keeps_mode_and_bom(tmp_path: Path) -> None:
    target = tmp_path / "real.yaml"
    target.write_bytes(b"\xef\xbb\xbfkind: Pod\n")
    os.chmod(target, 0o640)
    write_atomically(str(target), "kind: Pod\nspec: {}\n")
    assert target.read_bytes() == b"\xef\xbb\xbfkind: Pod\nspec: {}\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real.yaml"]  # no temporary file left


def test_write_atomically_never_writes_through_a_symbolic_link(tmp_path: Path) -> None:
    """A link in the repository may lead anywhere (`apps/x.yaml -> ~/.bashrc`): it is refused, and neither the
    link nor what it points to changes."""
    target = tmp_path / "elsewhere.yaml"
    target.write_text("kind: Pod\n")
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    with pytest.raises(NotWritable, match="it is a symbolic link: pin never writes through one"):
        write_atomically(str(link), "kind: Pod\nspec: {}\n")
    assert link.is_symlink() and target.read_text() == "kind: Pod\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere.yaml", "link.yaml"]


def test_an_edit_made_between_reading_and_writing_is_kept(tmp_path: Path) -> None:
    """Planning (and proving) takes a while; a file edited meanwhile must not be overwritten with the pins of its
    old text — and then nothing is written, the other files included."""
    for name in ("driver.yaml", "executor.yaml"):
        shutil.copy(ROOT / "examples/pinning/apps" / f"karpenter-{name.replace('.yaml', '')}-pod-template.yaml",
                    tmp_path / name)
    planned = pin_paths([str(tmp_path)], RULES)
    assert len(planned.changed) == 2
    (tmp_path / "executor.yaml").write_text("# edited in the meantime\n")

    outcome = write_plans(planned.changed)

    assert outcome.written == [] and outcome.untouched == [str(tmp_path / "driver.yaml")]
    assert outcome.failed == [(str(tmp_path / "executor.yaml"), "it changed since it was read; run pin again")]
    assert (tmp_path / "executor.yaml").read_text() == "# edited in the meantime\n"
    assert (tmp_path / "driver.yaml").read_text() == planned.changed[0].original


# --- through the real CLI -----------------------------------------------------------------------------------


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_cli_check_mode_then_write_then_clean(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "apps").mkdir()
    for name in ("spark-pinning.yaml", "kspark-provisioner.yaml"):
        (tmp_path / "policies" / name).write_text((ROOT / "examples/pinning/policies" / name).read_text())
    for source in (ROOT / "examples/pinning/apps").iterdir():
        (tmp_path / "apps" / source.name).write_text(source.read_text())
    (tmp_path / "apps" / "odd.yaml").write_text(ODD)
    originals = {p.name: p.read_text() for p in (tmp_path / "apps").iterdir()}

    checked = cli("pin", "apps/", cwd=tmp_path)
    assert checked.returncode == 1, checked.stderr
    assert "--- a/apps/odd.yaml" in checked.stdout and "+    tolerations:" not in checked.stdout  # ODD: no toleration
    assert "+        'karpenter.sh/capacity-type': 'spot'   # <- wrong: the rule says spot" in checked.stdout
    assert "would be pinned (run with --write)" in checked.stderr
    assert {p.name: p.read_text() for p in (tmp_path / "apps").iterdir()} == originals  # nothing written

    written = cli("pin", "apps/", "--write", cwd=tmp_path)
    assert written.returncode == 0, written.stderr
    assert "pinned 3 workloads in 3 files" in written.stderr
    odd = (tmp_path / "apps" / "odd.yaml").read_text()
    removed, _ = removed_and_added(ODD, odd)
    assert removed == ["        'karpenter.sh/capacity-type': 'on-demand'   # <- wrong: the rule says spot\n"]

    again = cli("pin", "apps/", cwd=tmp_path)
    assert (again.returncode, again.stdout) == (0, ""), again.stderr
    assert "every workload is pinned" in again.stderr

    as_json = cli("pin", "apps/", "--output", "json", cwd=tmp_path)
    assert as_json.returncode == 0
    assert '"pinned_workloads": 0' in as_json.stdout


def test_cli_conflicting_rules_write_nothing(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.yaml").write_text(
        "apiVersion: karpenter-policy.dev/v1alpha1\nkind: PinningPolicy\nmetadata: {name: p}\nspec:\n  rules:\n"
        "  - {name: a, match: {}, nodeSelector: {tier: one}}\n"
        "  - {name: b, match: {kinds: [Pod]}, nodeSelector: {tier: two}}\n"
    )
    pod = tmp_path / "pod.yaml"
    pod.write_text("kind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n")
    result = cli("pin", "pod.yaml", "--write", "--no-prove", cwd=tmp_path)
    assert result.returncode == 1
    assert "pinning-conflict" in result.stderr and "nothing written" in result.stderr
    assert pod.read_text() == "kind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n"


def test_cli_invalid_policy_is_reported(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.yaml").write_text(
        "apiVersion: karpenter-policy.dev/v1alpha1\nkind: PinningPolicy\nmetadata: {name: p}\nspec:\n  rules:\n"
        "  - {match: {sparkRole: coordinator}, nodeSelector: {a: b}}\n"
    )
    (tmp_path / "pod.yaml").write_text("kind: Pod\nspec: {containers: [{name: c}]}\n")
    result = cli("pin", "pod.yaml", "--no-prove", cwd=tmp_path)
    assert result.returncode == 1
    assert "policies/p.yaml:6" in result.stderr and "[schema]" in result.stderr


def _pinning_repo(directory: Path) -> None:
    (directory / "policies").mkdir()
    for name in ("spark-pinning.yaml", "kspark-provisioner.yaml"):
        shutil.copy(ROOT / "examples/pinning/policies" / name, directory / "policies")
    (directory / "apps" / "z-team").mkdir(parents=True)
    shutil.copy(ROOT / "examples/pinning/apps/karpenter-driver-pod-template.yaml", directory / "apps" / "driver.yaml")
    shutil.copy(ROOT / "examples/pinning/apps/karpenter-executor-pod-template.yaml",
                directory / "apps" / "z-team" / "executor.yaml")


@pytest.mark.slow
def test_cli_write_is_all_or_nothing(unprivileged: Unprivileged) -> None:  # noqa: F811
    """The second file's directory is not writable for the user: the first file used to be rewritten already
    when the run died with "internal error: PermissionError", saying nothing of what it had changed."""
    home = unprivileged.directory
    _pinning_repo(home)
    unprivileged.give(home / "apps")
    (home / "apps" / "z-team").chmod(0o555)  # the file is the user's, its directory not writable
    before = {p: p.read_bytes() for p in (home / "apps").rglob("*.yaml")}

    result = unprivileged.run("pin", "apps/", "--write", "--no-prove")

    assert result.returncode == 2, result.stderr
    assert "internal error" not in result.stderr
    assert (
        "apps/z-team/executor.yaml: error: not written: you cannot create files in its directory" in result.stderr
    ), result.stderr
    assert "nothing written: all 2 files are as they were" in result.stderr
    assert {p: p.read_bytes() for p in (home / "apps").rglob("*.yaml")} == before
    as_json = json.loads(unprivileged.run("pin", "apps/", "--write", "--no-prove", "--output", "json").stdout)
    assert [e["file"] for e in as_json["write_errors"]] == ["apps/z-team/executor.yaml"]
    assert as_json["summary"]["written"] is False and not any(f["written"] for f in as_json["files"])


def test_cli_write_keeps_owner_group_and_mode(tmp_path: Path) -> None:
    _pinning_repo(tmp_path)
    driver = tmp_path / "apps" / "driver.yaml"
    owner = (65534, 65534) if os.geteuid() == 0 else (os.geteuid(), os.getegid())
    os.chown(driver, *owner)
    driver.chmod(0o640)

    result = cli("pin", "apps/", "--write", "--no-prove", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert "spot" in driver.read_text() or "on-demand" in driver.read_text()
    info = driver.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (*owner, 0o640)


def test_cli_write_refuses_a_link_out_of_the_repository_and_removes_leftovers(tmp_path: Path) -> None:
    """`apps/evil.yaml -> ../outside.yaml`: reading it is refused (a finding naming the link, nothing of the
    content printed) and nothing is written, the file outside included; the temporary file a killed
    `pin --write` left next to a manifest is removed, other hidden files are not."""
    (tmp_path / "policies").mkdir()
    (tmp_path / "repo" / "apps").mkdir(parents=True)
    for name in ("spark-pinning.yaml", "kspark-provisioner.yaml"):
        shutil.copy(ROOT / "examples/pinning/policies" / name, tmp_path / "policies" / name)
    driver = "karpenter-driver-pod-template.yaml"
    shutil.copy(ROOT / "examples/pinning/apps" / driver, tmp_path / "outside.yaml")
    outside = (tmp_path / "outside.yaml").read_text()
    (tmp_path / "repo" / "apps" / "evil.yaml").symlink_to(tmp_path / "outside.yaml")
    shutil.copy(ROOT / "examples/pinning/apps" / driver, tmp_path / "repo" / "apps" / driver)
    leftover = stage(str(tmp_path / "repo" / "apps" / driver), b"half", 0o644).temporary  # as a killed run left it
    other = tmp_path / "repo" / "apps" / f".{driver}.notours.tmp"
    other.write_text("keep")

    refused = cli("pin", "repo/apps", "--policies", "policies", "--write", cwd=tmp_path)

    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "repo/apps/evil.yaml: error: not read: a symbolic link to a file outside the repository" in refused.stderr
    assert "spark" not in refused.stdout + refused.stderr.split("evil.yaml")[1]  # nothing of its content
    assert (tmp_path / "outside.yaml").read_text() == outside
    assert not os.path.exists(leftover) and other.read_text() == "keep"
    assert f"{Path(leftover).relative_to(tmp_path)}: removed: a temporary file" in refused.stderr
