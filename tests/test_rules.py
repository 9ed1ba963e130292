"""`karpenter-policy rules [RULE]` lists and explains the rule catalog as a user runs it, and the other readers of
the catalog — `--disable`, SARIF's rule metadata — say what the declarations say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from karpenter_policy.api.rules import RULE_IDS, RULES
from karpenter_policy.checks.findings import Report
from karpenter_policy.checks.reporters import render_sarif

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "karpenter_policy.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60, env=env)


def test_rules_lists_every_rule_with_its_severity_and_whether_it_can_be_silenced() -> None:
    done = run("rules")

    assert done.returncode == 0 and done.stderr == ""
    rows = {line.split()[0]: line.split()[1:3] for line in done.stdout.splitlines()[1:] if line and line[0] != " "}
    listed = {rule: row for rule, row in rows.items() if rule in RULE_IDS}
    assert sorted(listed) == sorted(RULE_IDS)
    assert listed["dead-value"] == ["warning", "yes"]
    assert listed["schema"] == ["error", "no"]
    assert listed["unknown-instance-type"] == ["error*", "yes"]  # varies with the finding


def test_rules_explains_one_rule_in_full() -> None:
    done = run("rules", "volume-zones-conflict")

    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert text.startswith("volume-zones-conflict: A pod's volumes")
    assert "Severity: error" in text
    assert "Can be silenced: --disable volume-zones-conflict" in text
    assert ("Follows Karpenter: kubernetes-sigs/karpenter v0.31.1 "
            "pkg/controllers/provisioning/scheduling/volumetopology.go: VolumeTopology.Inject") in text
    assert "Page: docs/rules/volume-zones-conflict.md" in text
    assert "Karpenter v0.31 adds each of a pod's volumes' topology" in text


def test_rules_says_when_a_severity_varies_and_when_a_rule_cannot_be_silenced() -> None:
    placeholder = " ".join(run("rules", "placeholder").stdout.split())
    restricted = " ".join(run("rules", "restricted-label").stdout.split())

    assert "Severity: warning (an error under compile" in placeholder
    assert "Can be silenced: no" in restricted


def test_rules_as_json_is_the_catalog() -> None:
    every = json.loads(run("rules", "--output", "json").stdout)
    one = json.loads(run("rules", "ttl-churn", "--output", "json").stdout)

    assert [r["id"] for r in every] == list(RULE_IDS)
    assert one == next(r for r in every if r["id"] == "ttl-churn")
    assert one["severity"] == "warning" and one["silenceable"] is True and one["page"] == "docs/rules/ttl-churn.md"
    assert one["karpenter"].endswith("provisioner_validation.go: ProvisionerSpec.validateTTLSecondsUntilExpired")


def test_rules_links_the_page_when_the_docs_address_is_known() -> None:
    env = {**os.environ, "KARPENTER_POLICY_DOCS_URL": "https://docs.test/kp/docs/"}
    done = run("rules", "limits", env=env)

    assert "Page: https://docs.test/kp/docs/rules/limits.md" in done.stdout


def test_an_unknown_rule_exits_2_with_the_rule_meant() -> None:
    near = run("rules", "dead-valeu")
    far = run("rules", "no-such-thing-at-all")

    assert near.returncode == 2 and near.stdout == ""
    assert near.stderr == "karpenter-policy rules: unknown rule 'dead-valeu'; did you mean dead-value?\n"
    assert far.returncode == 2 and "rules: aws-id-shape, " in far.stderr


def test_disable_takes_only_declared_rules_that_can_be_silenced() -> None:
    unknown = run("validate", "examples/positive", "--disable", "dead-valeu")
    unsilenceable = run("validate", "examples/positive", "--disable", "invalid-spec")
    silenced = run("validate", "examples/positive", "--disable", "dead-value")

    assert unknown.returncode == 2 and "unknown rule 'dead-valeu'; did you mean dead-value?" in unknown.stderr
    assert unsilenceable.returncode == 2 and "invalid-spec cannot be disabled" in unsilenceable.stderr
    assert silenced.returncode == 0, silenced.stderr


def test_sarif_rule_metadata_is_the_catalog_s() -> None:
    sarif = json.loads(render_sarif(Report()))
    descriptors = {d["id"]: d for d in sarif["runs"][0]["tool"]["driver"]["rules"]}

    assert sorted(descriptors) == sorted(RULE_IDS)
    for rule in RULES:
        descriptor = descriptors[rule.id]
        assert descriptor["shortDescription"]["text"] == rule.summary
        assert descriptor["fullDescription"]["text"] == rule.description
        assert descriptor["defaultConfiguration"] == {"level": rule.severity}
        assert rule.page in descriptor["help"]["text"]
        assert (f"disable={rule.id}" in descriptor["help"]["text"]) is rule.silenceable
    assert "cannot be silenced" in descriptors["parse-error"]["help"]["text"]
