"""The simulation reports as a person sees them: `simulate --report` and `benchmarks/soak.py --report F` rendered in
headless Chromium at a laptop's 1366 × 768, a screenshot taken, the charts' SVG elements (and the soak's
comparison table) within the first screen, above the step list; soak writes F alone — every variant and their
comparison (what each saved against the static group) — the same bytes for the same seed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from browser import CHROMIUM, LAPTOP, look_at, png_size
from click.testing import CliRunner

from karpenter_policy.cli import main

ROOT = Path(__file__).resolve().parents[2]
APPS = ROOT / "examples" / "workloads" / "apps"
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")


@needs_chromium
def test_the_simulate_report_opens_with_its_charts(compiled: Path, tmp_path: Path) -> None:
    report = tmp_path / "simulate.html"
    result = CliRunner().invoke(main, ["simulate", "--constraints", str(compiled), "--workloads",
                                       str(APPS / "inflate.yaml"), "--scale", "deployment/inflate=5", "--scale",
                                       "deployment/inflate=10", "--report", str(report)])
    assert result.exit_code == 0, result.output
    look = look_at(report, tmp_path / "simulate.png", ["svg.chart", "ol", "h1"])
    assert png_size(look.screenshot) == LAPTOP and look.errors == []
    charts = look.boxes["svg.chart"]
    assert len(charts) == 4 and look.within_first_screen("svg.chart"), charts
    (steps,) = look.boxes["ol"]
    assert all(chart.bottom < steps.top for chart in charts), "the charts above the step list"
    assert look.scroll_width <= look.width, "nothing sticks out sideways"


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Six simulated minutes of the soak, both variants, with `--report`."""
    report = tmp_path_factory.mktemp("soak") / "soak.html"
    ran = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--hours", "0.1", "--report",
                          str(report)], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    return report, ran.stdout


@pytest.mark.slow
def test_soak_writes_one_report_with_every_variant_and_what_each_saved(soak: tuple[Path, str]) -> None:
    report, stdout = soak
    assert [p.name for p in report.parent.iterdir()] == ["soak.html"], "F, and no F-ttl.html or F-consolidation.html"
    assert stdout.splitlines()[-1] == f"report: {report}"
    html = report.read_text()
    (saved,) = [line for line in stdout.splitlines() if line.startswith("saved ")]
    cells = re.findall(r"\$\d+\.\d\d \(\d+% of the static group\)", saved)
    assert len(cells) == 2
    assert f"<tr><th>saved</th><td>{cells[0]}</td><td>{cells[1]}</td></tr>" in html
    assert '<th>ttl: ttlSecondsAfterEmpty (the examples)</th><th>consolidation: consolidation.enabled</th>' in html
    assert 'id="run-ttl"' in html and 'id="run-consolidation"' in html
    assert "wall time" not in html, "another run, another wall time: not in the page"


@needs_chromium
@pytest.mark.slow
def test_the_soak_report_opens_with_the_comparison(soak: tuple[Path, str], tmp_path: Path) -> None:
    report, _ = soak
    look = look_at(report, tmp_path / "soak.png", ["table.comparison", "svg.chart", "h2"])
    assert png_size(look.screenshot) == LAPTOP and look.errors == []
    assert look.within_first_screen("table.comparison")
    charts = look.boxes["svg.chart"]
    assert len(charts) == 3 + 2 * 4, "the comparison's three, then each variant's four"
    comparison = charts[:3]
    assert all(chart.within(look.width, look.height) for chart in comparison), comparison
    ttl = next(h for h in look.boxes["h2"] if h.text.startswith("ttl:"))
    assert all(chart.top > ttl.bottom for chart in charts[3:]), "each variant's report below the comparison"
    assert look.scroll_width <= look.width


@pytest.mark.slow
def test_the_same_seed_writes_the_same_report(soak: tuple[Path, str], tmp_path: Path) -> None:
    report, _ = soak
    again = tmp_path / "again.html"
    ran = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "soak.py"), "--hours", "0.1", "--report",
                          str(again)], cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert again.read_bytes() == report.read_bytes()
