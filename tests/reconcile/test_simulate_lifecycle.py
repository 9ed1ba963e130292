"""The simulation's long-run features (what the soak benchmark is written with): pods that complete after their run
time and free their node, spot interruptions taken by the controller's interruption handler with the instance
reclaimed two minutes later, and the per-pod pending time, nodes launched and deleted and dollars spent — the real
controller, the in-memory cluster and moto's EC2 in the process."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from karpenter_policy.api.workloads import Workload
from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.source.workloads import read_workloads
from karpenter_policy.cli import main
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded
from karpenter_policy.simulate.driver import Simulation, SimulationError, Step
from karpenter_policy.simulate.report import render_report
from karpenter_policy.simulate.timeline import percentile
from karpenter_policy.simulate.workloads import ScenarioWorkload

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "workloads" / "policies"
INFLATE = ROOT / "examples" / "workloads" / "apps" / "inflate.yaml"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Loaded:
    out = tmp_path_factory.mktemp("lifecycle") / "seeds"
    result = CliRunner().invoke(main, ["compile", str(POLICIES), "-o", str(out)])
    assert result.exit_code == 0, result.output
    loaded = DirectorySource(str(out)).poll()
    assert isinstance(loaded, Loaded)
    return loaded


def _inflate() -> Workload:
    (found,) = read_workloads([str(INFLATE)]).workloads
    return found


def _job(run_seconds: float) -> ScenarioWorkload:
    """Pods of one vCPU (inflate's template) that complete `run_seconds` after they start."""
    inflate = _inflate()
    return ScenarioWorkload("Job", "crunch", "default", inflate.template, 0, run_seconds=run_seconds)


@pytest.mark.slow
def test_pods_with_a_run_time_complete_and_their_node_goes_after_its_empty_ttl(seeds: Loaded) -> None:
    steps = [Step("create"), Step("a job of 3 pods", start={"job/crunch": 3}, at=10.0)]
    with Simulation(seeds, [_job(300.0)], load_catalog(region="us-east-1")) as simulation:
        result = simulation.run(steps, until=600.0)

    pods = list(result.timeline.pods.values())
    assert len(pods) == 3
    for pod in pods:
        assert pod.created == 10.0
        assert pod.started is not None and pod.finished is not None
        assert pod.finished - pod.started == 300.0, "completed after its run time"
        assert pod.started - (pod.bound or 0) == 45.0, "started when its node became Ready"
    assert "starting 3 pod(s) of Job/crunch, 300 s each" in result.log
    (node,) = result.timeline.nodes.values()
    finished = max(p.finished or 0 for p in pods)
    assert node.deleted is not None and finished + 30.0 <= node.deleted <= finished + 32.0, "default's TTL is 30 s"
    assert result.nodes == () and result.end == 600.0

    figures = result.figures
    assert (figures.pods_created, figures.pods_scheduled, figures.pods_completed) == (3, 3, 3)
    assert (figures.nodes_launched, figures.nodes_deleted, figures.pods_pending_at_end) == (1, 1, 0)
    assert node.price is not None
    assert figures.dollars == pytest.approx(node.price * (node.deleted - node.launched) / 3600.0)
    assert figures.peak_cpu == 3000, "three pods of one vCPU wanted room at once"


@pytest.mark.slow
def test_a_spot_interruption_drains_the_node_and_its_pods_run_elsewhere(seeds: Loaded) -> None:
    steps = [Step("create"), Step("scale to 10", {"deployment/inflate": 10}, at=10.0),
             Step("interrupt one spot node", interrupt=1, at=200.0)]
    with Simulation(seeds, [_inflate()], load_catalog(region="us-east-1")) as simulation:
        result = simulation.run(steps, until=600.0)
        (interruption,) = result.interruptions
        instances = simulation.moto.api.call(
            "ec2", "describe_instances", InstanceIds=[interruption.instance_id]
        )["Reservations"][0]["Instances"]
        queued = simulation.spot.queue.visible()
        handled = list(simulation.spot.queue.deleted)

    assert (interruption.at, interruption.reclaim_at) == (200.0, 320.0)
    assert instances[0]["State"]["Name"] == "terminated"
    assert queued == 0 and len(handled) == 2, "the warning and the state change were both taken off the queue"
    assert "EC2 Spot Instance Interruption Warning" in handled[0] and '"terminated"' in handled[1]
    assert f"spot interruption warning for node {interruption.node}" in result.log
    assert "initiating delete from interruption message" in result.log
    # the provider logs without the controller's clock: the line still carries the virtual time of the warning
    assert (f"2024-01-01T00:03:20.000Z\tINFO\tcloud.aws.provider\toffering {interruption.instance_type} spot in "
            f"{interruption.zone} unavailable: SpotInterruptionKind") in result.log

    gone = result.timeline.nodes[interruption.node]
    assert gone.deleted is not None and 200.0 <= gone.deleted <= 205.0, "drained within seconds of the warning"
    assert "Cordoned node" in result.log, "through termination: cordon, evictions, then the instance"
    assert interruption.node not in {n.name for n in result.nodes}
    assert result.pods == 10 and result.pending == 0, "the replicas lost with the node run elsewhere"
    replaced = [p for p in result.timeline.pods.values() if 200.0 <= p.created <= gone.deleted]
    assert replaced and all(p.bound is not None for p in replaced)
    assert result.figures.pods_created == 10 + len(replaced)


def test_pending_time_is_per_pod_from_creation_to_binding(seeds: Loaded) -> None:
    steps = [Step("create"), Step("scale to 4", {"deployment/inflate": 4}, at=10.0),
             Step("scale to 8", {"deployment/inflate": 8}, at=10.5)]
    with Simulation(seeds, [_inflate()], load_catalog(region="us-east-1")) as simulation:
        result = simulation.run(steps, until=120.0)
    waits = sorted(p.pending_seconds or 0 for p in result.timeline.pods.values())
    # Karpenter's batching: the window closes 1 s after the last pod arrived (10.5 s), all eight go then
    assert waits == [1.0] * 4 + [1.5] * 4
    figures = result.figures
    assert (figures.pending_max, figures.pending_p99, figures.pending_median) == (1.5, 1.5, 1.0)
    assert percentile([], 0.99) == 0.0


@pytest.mark.slow
def test_start_and_replicas_are_for_the_right_kind_of_workload(seeds: Loaded) -> None:
    catalog = load_catalog(region="us-east-1")
    for step, message in (
        (Step("start inflate", start={"deployment/inflate": 2}), "deployment/inflate has no run time"),
        (Step("scale the job", {"job/crunch": 2}), "job/crunch completes after its run time"),
    ):
        with (
            Simulation(seeds, [_inflate(), _job(60.0)], catalog) as simulation,
            pytest.raises(SimulationError, match=message),
        ):
            simulation.run([Step("create"), step])
    with (
        Simulation(seeds, [_inflate()], catalog) as simulation,
        pytest.raises(SimulationError, match="the run ends at 5 s, before its last step"),
    ):
        simulation.run([Step("create"), Step("later", at=10.0)], until=5.0)


@pytest.mark.slow
def test_the_report_shows_the_run_figures_interruptions_and_each_pods_wait(seeds: Loaded, tmp_path: Path) -> None:
    steps = [Step("create"), Step("scale to 6", {"deployment/inflate": 6}, at=10.0),
             Step("a job", start={"job/crunch": 2}, at=100.0), Step("interrupt", interrupt=1, at=200.0)]
    with Simulation(seeds, [_inflate(), _job(120.0)], load_catalog(region="us-east-1")) as simulation:
        result = simulation.run(steps, until=500.0)
    html = render_report(result, "lifecycle")
    figures = result.figures
    assert f"<th>pods scheduled</th><td>{figures.pods_scheduled} of {figures.pods_created} created (2 completed" in html
    assert "<th>spot interruptions</th><td>1</td>" in html
    (interruption,) = result.interruptions
    assert len(re.findall(r'<line class="interruption"', html)) == 1
    assert f"200 s: spot interruption of {interruption.node}" in html
    pods_chart = html[html.index('aria-label="Pods and nodes over time"'):]
    pods_chart = pods_chart[: pods_chart.index("</svg>")]
    strokes = dict(re.findall(r'<path class="series" data-series="(\w+)" d="[^"]*" fill="none" stroke="([^"]+)"',
                              pods_chart))
    assert list(strokes) == ["pending", "starting", "running", "nodes"]
    (marker,) = re.findall(r'<line class="interruption" [^>]*stroke="([^"]+)"', pods_chart)
    assert len({*strokes.values(), marker}) == 5, "every series and the interruptions in a colour of their own"
    started = [p for p in result.timeline.pods.values() if p.started is not None]
    assert len(re.findall(r'<circle class="pod"', html)) == len(started) == figures.pods_created
    assert render_report(result, "lifecycle") == html, "the same run, the same bytes"
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium): the page was not loaded")
    page = tmp_path / "report.html"
    page.write_text(html)
    dumped = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=2000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    assert 'data-errors="0"' in dumped.stdout, "the page raised errors"
