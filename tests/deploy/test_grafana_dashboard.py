"""deploy/grafana/karpenter-policy.json works with the controller's metrics: loaded as Grafana loads it, every query
of every panel (and of the template variables) selects only metrics that a scrape of a simulation — `karpenter-policy
simulate`'s engine: the real controller, an in-memory cluster and moto's EC2, in virtual time, with a spot
interruption and nodes emptied, or on Karpenter v1 NodePools — exposes over the controller's /metrics endpoint, with
series matching each literal label matcher: no panel would show nothing."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from promscrape import Scrape, scrape, serving

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.source.workloads import read_workloads
from karpenter_policy.reconcile.constraints import DirectorySource, Loaded
from karpenter_policy.simulate.driver import Simulation, Step
from karpenter_policy.testing import compile_policies

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "karpenter-policy.json"
KEY = "deployment/inflate"

#: PromQL words that are not metric names.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless",
            "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!=|!~|=)\s*"((?:[^"\\]|\\.)*)"')
_NAME = re.compile(r"(?<![\w:.$])([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (Grafana's `label_values(metric, label)` included): its
    identifiers that are not functions, keywords, grouping labels, label matchers, ranges or variables."""
    if expr.startswith("label_values("):
        inner = expr[len("label_values("):-1]
        return {inner.split(",")[0].strip()} if "," in inner else set()
    text = _GROUPING.sub(" ", expr)
    text = re.sub(r"\{[^}]*\}", " ", _STRING.sub('""', text))  # label matchers (their strings first)
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    return {name for name in _NAME.findall(text) if name.lower() not in KEYWORDS}


def literal_matchers(expr: str) -> Iterator[tuple[str, dict[str, str]]]:
    """Each selector's metric name and its `label="value"` matchers without a variable."""
    for name, body in _SELECTOR.findall(expr):
        yield name, {k: v for k, op, v in _MATCHER.findall(body) if op == "=" and "$" not in v}


def test_metric_names_are_read_from_promql_as_prometheus_reads_them() -> None:
    """The extractor the dashboard test relies on finds metric names, and only them."""
    assert metric_names(
        'histogram_quantile(0.99, sum by (le, controller) (rate(x_seconds_bucket{a="b", c=~"$d"}[$__rate_interval])))'
    ) == {"x_seconds_bucket"}
    assert metric_names("sum(a{x=\"1\"}) * on (t, c) group_left max by (t, c) (b_total) / c") == {"a", "b_total", "c"}
    assert metric_names("label_values(karpenter_provisioner_limit, provisioner)") == {"karpenter_provisioner_limit"}
    assert list(literal_matchers('a{x="1", y=~"$v", z="2"}')) == [("a", {"x": "1", "z": "2"})]


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, PromQL) of every panel target and query variable."""
    for panel in panels(dashboard):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r} {target['refId']}", target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]
            yield f"variable {variable['name']}", query["query"] if isinstance(query, dict) else query


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Scrape:
    """The controller's /metrics over HTTP after a simulation on the example policies: `web` (cpu and memory) on a
    node of its own, `inflate` scaled to 10 on another, then to 0 (that node emptied and deleted), and a spot
    interruption of web's node (its pod moves to a new one, up when it is scraped)."""
    pytest.importorskip("moto", reason="the simulation serves EC2 with moto")
    built = compile_policies(ROOT / "examples" / "workloads" / "policies", tmp_path_factory.mktemp("sim") / "build")
    loaded = DirectorySource(str(built)).poll()
    assert isinstance(loaded, Loaded)
    apps = ROOT / "examples" / "workloads" / "apps"
    found = read_workloads([str(apps / "inflate.yaml"), str(apps / "web-preferred-arm64.yaml")])
    with Simulation(loaded, found.workloads, load_catalog(region="us-east-1")) as simulation:
        result = simulation.run([
            Step("create"), Step("scale to 10", {KEY: 10}), Step("scale to 0", {KEY: 0}),
            Step("interruption", interrupt=1),
        ])
        assert result.nodes and not result.unschedulable and result.interruptions
        with serving(simulation.controller) as port:
            return scrape(port)


@pytest.fixture(scope="module")
def simulated_v1(tmp_path_factory: pytest.TempPathFactory) -> Scrape:
    """The same after a simulation on Karpenter v1 NodePools beside a Provisioner (examples/v1/mixed): its workloads
    placed, then `web` and `report` scaled to 0 — their NodePools' nodes emptied, consolidated and terminated."""
    pytest.importorskip("moto", reason="the simulation serves EC2 with moto")
    example = ROOT / "examples" / "v1" / "mixed"
    built = compile_policies(example / "policies", tmp_path_factory.mktemp("simv1") / "build")
    loaded = DirectorySource(str(built)).poll()
    assert isinstance(loaded, Loaded)
    found = read_workloads([str(example / "apps" / "workloads.yaml")])
    with Simulation(loaded, found.workloads, load_catalog(region="us-east-1")) as simulation:
        result = simulation.run([Step("create"), Step("scale to 0", {"deployment/web": 0, "deployment/report": 0})])
        assert result.nodes and not result.unschedulable
        with serving(simulation.controller) as port:
            return scrape(port)


def test_the_dashboard_loads_as_grafana_reads_it() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "karpenter-policy" and dashboard["schemaVersion"] >= 36
    found = list(panels(dashboard))
    assert len({p["id"] for p in found}) == len(found), "panel ids are unique"
    for panel in found:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and all(t.get("expr") for t in panel["targets"]), panel["title"]
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24 and position["h"] > 0, panel["title"]
    names = [v["name"] for v in dashboard["templating"]["list"]]
    assert names == ["datasource", "provisioner"]


def test_every_query_selects_metrics_a_simulation_exposes(simulated: Scrape, simulated_v1: Scrape) -> None:
    """Each query against the scrape of one simulation: a Provisioners' one, or a NodePools' one (v1.14.1's names,
    which only a NodePool's nodes are counted under)."""
    dashboard = json.loads(DASHBOARD.read_text())
    checked = 0
    for where, expr in queries(dashboard):
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr}"
        found = [s for s in (simulated, simulated_v1) if names <= s.names()]
        assert found, f"{where}: {sorted(names)} not all in a scrape of a simulation"
        for name, labels in literal_matchers(expr):
            assert any(s.of(name, **labels) for s in found), f"{where}: no series of {name} with {labels}"
        checked += 1
    assert checked >= 34


def test_the_nodepool_panels_show_v1s_node_terminations(simulated_v1: Scrape) -> None:
    """The panels for a NodePool's nodes read v1.14.1's `karpenter_nodes_terminated_total` and
    `karpenter_nodes_termination_duration_seconds`, which the NodePools' simulation counts under each NodePool."""
    dashboard = json.loads(DASHBOARD.read_text())
    selected = set().union(*(metric_names(expr) for _, expr in queries(dashboard)))
    assert {"karpenter_nodes_created_total", "karpenter_nodes_terminated_total",
            "karpenter_nodes_termination_duration_seconds"} <= selected
    assert {s.labels["nodepool"] for s in simulated_v1.of("karpenter_nodes_terminated_total")} & {"default", "batch"}
    assert simulated_v1.of("karpenter_nodes_termination_duration_seconds", quantile="1")
