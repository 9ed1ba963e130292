"""Acceptance: `check --workloads` on examples/v1/overlap/ — two NodePools of one weight that both take `api`.
Karpenter v1.14.1 launches from the one whose name is later in the alphabet (pkg/utils/nodepool/nodepool.go:161
`OrderByWeight`), so the check places `api` there, says so in its `overlap` warning, and follows a rename."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from karpenter_policy.cli import main
from tests.acceptance.test_v1_examples import V1_DIR

OVERLAP = V1_DIR / "overlap"


def check(policies: Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["check", str(policies), "--workloads", str(OVERLAP / "apps.yaml"),
                                       "--output", "json"])
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def placed(report: dict[str, Any]) -> dict[str, str]:
    return {w["object"]: w["provisioner"] for w in report["workloads"]}


def test_the_tie_goes_to_the_later_name_and_the_warning_says_which() -> None:
    report = check(OVERLAP / "nodepools.yaml")

    assert placed(report) == {"Deployment/api": "NodePool/spot", "Deployment/ledger": "NodePool/general"}
    warnings = [f for f in report["findings"] if f["severity"] == "warning"]
    assert [(f["rule"], f["object"], f["line"]) for f in warnings] == [("overlap", "NodePool/general", 7)]
    assert "Karpenter v1.14.1 launches from NodePool/spot, the name later in the alphabet" in warnings[0]["message"]


def test_renaming_the_winner_moves_the_workload(tmp_path: Path) -> None:
    renamed = tmp_path / "nodepools.yaml"
    shutil.copyfile(OVERLAP / "nodepools.yaml", renamed)
    renamed.write_text(renamed.read_text(encoding="utf-8").replace("name: spot", "name: batch"), encoding="utf-8")

    report = check(renamed)

    assert placed(report)["Deployment/api"] == "NodePool/general"
    (warning,) = [f for f in report["findings"] if f["rule"] == "overlap"]
    assert "launches from NodePool/general, the name later in the alphabet" in warning["message"]
