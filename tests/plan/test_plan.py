"""`plan` end to end on two policy directories and a snapshot: the waves Karpenter v0.31 would run (one drifted
node at a time, replace before delete, PDBs and do-not-evict honoured, empty nodes at once, expiry before drift,
a removed provisioner's nodes at once), the pods left pending, the cost, the outputs and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from tests.plan.snapshots import FULL, daemon_set, node, pdb, pod, policies, provisioner, write

START = "2026-11-30T09:00:00Z"
M5_LARGE_MONTHLY = 0.096 * 730


@pytest.fixture(scope="module")
def sides(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """BASE: default (team: web) and old; HEAD: default relabelled (team: platform), old removed."""
    root = tmp_path_factory.mktemp("sides")
    base = policies(root / "base", provisioner(), provisioner("old", family="[t3]", labels="tier: old"))
    head = policies(root / "head", provisioner(labels="team: platform"))
    return base, head


def plan(sides: tuple[str, str], tmp_path: Path, *items: dict[str, Any], **options: Any) -> tuple[int, Any, str]:
    file = write(tmp_path / "snapshot.json", *items)
    output = options.pop("output", "json")
    result = plan_command(
        PlanOptions(snapshot=(file,), start=START, output=output, base=sides[0], head=sides[1], **options),
        load_catalog(),
    )
    return result.exit_code, json.loads(result.stdout) if output == "json" and result.stdout else result.stdout, (
        result.stderr)


def test_drifted_nodes_go_one_at_a_time_replacement_first_and_the_json_has_the_issues_fields(
    sides: tuple[str, str], tmp_path: Path
) -> None:
    code, doc, _ = plan(sides, tmp_path, node("a", created="2026-11-20T08:00:00Z"),
                        node("b", created="2026-11-20T09:00:00Z"), pod("web-1", "a", "web", cpu=FULL),
                        pod("web-2", "b", "web", cpu=FULL), node("c", annotations={}), pod("api-1", "c", "api"))

    assert code == 0
    keys = ("name", "provisioner", "drifted", "reasons", "expires", "wave")
    assert [tuple(n[k] for k in keys) for n in doc["nodes"]] == [
        ("a", "default", True, ["spec.labels.team changed (provisioner default)"], False, 0),
        ("b", "default", True, ["spec.labels.team changed (provisioner default)"], False, 1),
        ("c", "default", False, [], False, None),
    ]
    assert [(w["start"], w["nodes"], w["evicted_pods"], w["evicted"]) for w in doc["waves"]] == [
        ("2026-11-30T09:00:10Z", ["a"], 1, {"default/Deployment/web": 1}),
        # 10 s + 60 s startup + 15 s drain, then at once (v0.31.1 controller.go:134, `RequeueAfter: immediately`)
        ("2026-11-30T09:01:25Z", ["b"], 1, {"default/Deployment/web": 1}),
    ]
    assert [r["instance_type"] for w in doc["waves"] for r in w["replacements"]] == ["m5.large", "m5.large"]
    assert doc["drift"] == [{"field": "spec.labels.team changed (provisioner default)", "nodes": 2}]
    assert doc["blocked"] == [] and doc["pending"] == [] and doc["finishes"] and doc["drift_enabled"]
    cost = doc["cost"]
    assert cost["before_monthly"] == pytest.approx(3 * M5_LARGE_MONTHLY, abs=0.01)
    assert cost["peak_monthly"] == pytest.approx(4 * M5_LARGE_MONTHLY, abs=0.01)
    assert cost["after_monthly"] == pytest.approx(3 * M5_LARGE_MONTHLY, abs=0.01)


def test_a_pdb_that_lets_one_go_at_a_time_slows_the_drain(sides: tuple[str, str], tmp_path: Path) -> None:
    _, doc, _ = plan(sides, tmp_path, node("a"), *(pod(f"web-{i}", "a", "web") for i in range(3)),
                     node("b", annotations={}), pod("web-3", "b", "web"),
                     pdb("web", "web", maxUnavailable=1), pod_startup=20.0)

    (wave,) = doc["waves"]
    assert wave["drain_seconds"] == 60.0 and wave["slowed_by"] == {"default/web": 60.0}
    assert wave["evicted"] == {"default/Deployment/web": 3}


@pytest.mark.parametrize(
    ("extra", "by", "forever"),
    [
        ([pdb("db", "db", minAvailable=1)], "PodDisruptionBudget/default/db", True),
        ([pdb("db", "db", maxUnavailable=0)], "PodDisruptionBudget/default/db", True),
        ([pdb("db", "db", minAvailable=1), pod("db-1", "b", "db", ready=False)], "PodDisruptionBudget/default/db",
         False),
    ],
)
def test_a_pdb_that_allows_no_eviction_blocks_the_node(
    sides: tuple[str, str], tmp_path: Path, extra: list[dict[str, Any]], by: str, forever: bool
) -> None:
    code, doc, _ = plan(sides, tmp_path, node("a"), pod("db-0", "a", "db", owner=("StatefulSet", "db")),
                        node("b", annotations={}), *extra)

    assert [(b["node"], b["by"], b["forever"]) for b in doc["blocked"]] == [("a", by, forever)]
    assert doc["waves"] == [] and doc["nodes"][0]["wave"] is None
    assert (code, doc["finishes"]) == ((1, False) if forever else (0, True))


def test_do_not_evict_and_do_not_disrupt_block_forever_and_allow_stranded_exits_0(
    sides: tuple[str, str], tmp_path: Path
) -> None:
    items = [node("a"), pod("job", "a", "job", annotations={"karpenter.sh/do-not-evict": "true"}),
             node("b", annotations={**{"karpenter.sh/provisioner-hash": "1"}, "karpenter.sh/do-not-disrupt": ""}),
             pod("web", "b", "web")]
    code, doc, _ = plan(sides, tmp_path, *items)
    allowed, _, _ = plan(sides, tmp_path, *items, allow_stranded=True)

    assert [(b["node"], b["reason"]) for b in doc["blocked"]] == [
        ("a", "pod default/job has do-not-evict"), ("b", "the node has the karpenter.sh/do-not-disrupt annotation")]
    assert (code, allowed) == (1, 0)


def test_empty_nodes_go_together_in_one_wave_without_replacements(sides: tuple[str, str], tmp_path: Path) -> None:
    _, doc, _ = plan(sides, tmp_path, node("a"), node("b"), daemon_set("proxy"),
                     pod("proxy-a", "a", "proxy", owner=("DaemonSet", "proxy"), namespace="kube-system"),
                     node("c"), pod("web", "c", "web"))

    assert [(w["nodes"], w["replacements"], w["evicted_pods"]) for w in doc["waves"]] == [
        (["a", "b"], [], 0), (["c"], doc["waves"][1]["replacements"], 1)]
    assert doc["cost"]["after_monthly"] == pytest.approx(M5_LARGE_MONTHLY, abs=0.01)


def test_a_pod_no_head_provisioner_takes_is_pending_and_its_node_is_kept(
    sides: tuple[str, str], tmp_path: Path
) -> None:
    code, doc, _ = plan(sides, tmp_path, node("a", labels={"team": "web"}),
                        pod("web", "a", "web", node_selector={"team": "web"}))

    assert code == 1
    assert [(p["pod"], p["workload"], p["node"], p["held"]) for p in doc["pending"]] == [
        ("default/web", "default/Deployment/web", "a", True)]
    assert "team" in doc["pending"][0]["reason"]
    assert doc["blocked"][0]["node"] == "a" and doc["blocked"][0]["forever"]


def test_a_removed_provisioners_nodes_go_at_once_and_their_pods_find_new_nodes(
    sides: tuple[str, str], tmp_path: Path
) -> None:
    code, doc, _ = plan(sides, tmp_path, node("o1", provisioner="old", instance_type="t3.medium"),
                        node("o2", provisioner="old", instance_type="t3.medium"), pod("cache", "o1", "cache"),
                        node("keep", annotations={}), pod("filler", "keep", "filler", cpu=FULL), drift_disabled=True)

    (wave,) = doc["waves"]
    assert code == 0 and (wave["method"], wave["start"], wave["nodes"]) == ("removed", START, ["o1", "o2"])
    assert [r["provisioner"] for r in wave["replacements"]] == ["default"]
    rows = {r["provisioner"]: r for r in doc["cost"]["provisioners"]}
    assert rows["old"]["after_monthly"] == 0 and rows["old"]["peak_monthly"] == rows["old"]["before_monthly"]
    assert doc["drift_enabled"] is False


def test_expired_nodes_go_before_drifted_ones_the_most_expired_first(tmp_path: Path) -> None:
    base = policies(tmp_path / "b", provisioner())
    head = policies(tmp_path / "h", provisioner(labels="team: platform", extra="  ttlSecondsUntilExpired: 604800\n"))

    _, doc, _ = plan((base, head), tmp_path, node("young", created="2026-11-29T00:00:00Z"),
                     node("old", created="2026-11-01T00:00:00Z"), node("older", created="2026-10-01T00:00:00Z"),
                     *(pod(f"p{i}", n, "web") for i, n in enumerate(["young", "old", "older"])))

    assert [(w["method"], w["nodes"]) for w in doc["waves"]] == [
        ("expiration", ["older"]), ("expiration", ["old"]), ("drift", ["young"])]


def test_text_and_markdown_say_the_same(sides: tuple[str, str], tmp_path: Path) -> None:
    items = [node("a"), pod("web-1", "a", "web"), node("b"), pod("db", "b", "db"), pdb("db", "db", minAvailable=1)]
    _, text, _ = plan(sides, tmp_path, *items, output="text")
    _, markdown, _ = plan(sides, tmp_path, *items, output="markdown")

    assert "spec.labels.team changed (provisioner default) → 2 nodes drift" in text
    assert "drift modelled on" in text and "b: PDB default/db allows no disruption" in text
    assert markdown.startswith("### karpenter-policy plan: ⛔ the rollout never finishes\n")
    assert "| `spec.labels.team changed (provisioner default)` | 2 |" in markdown
    assert "<details><summary>Waves</summary>" in markdown


def test_it_cannot_run_on_a_bad_snapshot_or_start(sides: tuple[str, str], tmp_path: Path) -> None:
    bad = pod("web", "a", "web")
    bad["metadata"]["labels"] = {"app": 7}
    code, _, stderr = plan(sides, tmp_path, node("a"), bad)
    start = plan_command(PlanOptions(snapshot=(write(tmp_path / "s.json", node("a")),), start="monday",
                                     base=sides[0], head=sides[1]), load_catalog())

    assert code == 2 and "snapshot.json: item 1: error: " in stderr and "no plan" in stderr
    assert (start.exit_code, start.stderr) == (2, "karpenter-policy plan: --start \"monday\" is not an RFC 3339 time\n")


def test_head_with_an_error_exits_1_without_a_plan(tmp_path: Path) -> None:
    base = policies(tmp_path / "b", provisioner())
    head = policies(tmp_path / "h", provisioner().replace("operator: In, values: [on-demand]",
                                                          "operator: Sometimes, values: [on-demand]"))

    code, stdout, stderr = plan((base, head), tmp_path, node("a"), output="text")

    assert code == 1 and stdout == "" and "has 1 error(s)" in stderr



def test_the_same_snapshot_twice_plans_the_same_with_its_warnings_capped(
    sides: tuple[str, str], tmp_path: Path
) -> None:
    items = [node(f"n{i}", provisioner=None) for i in range(30)]
    file = write(tmp_path / "s.json", *items)
    once = plan_command(PlanOptions(snapshot=(file,), start=START, base=sides[0], head=sides[1]), load_catalog())
    twice = plan_command(PlanOptions(snapshot=(file, file), start=START, base=sides[0], head=sides[1]), load_catalog())
    as_json = plan_command(PlanOptions(snapshot=(file, file), start=START, output="json", base=sides[0],
                                       head=sides[1]), load_catalog())

    assert twice.exit_code == 0
    assert twice.stdout.count("note: ") == 21 and "note: … 10 more (--output json lists them all)" in twice.stdout
    assert len(json.loads(as_json.stdout)["notes"]) == 30
    assert twice.stdout.split("note:")[0] == once.stdout


def test_a_creation_time_without_a_zone_is_utc(sides: tuple[str, str], tmp_path: Path) -> None:
    base = policies(tmp_path / "b", provisioner())
    head = policies(tmp_path / "h", provisioner(extra="  ttlSecondsUntilExpired: 86400\n"))

    _, doc, _ = plan((base, head), tmp_path, node("a", created="2026-11-29T08:59:59", annotations={}))

    assert doc["nodes"][0]["expires"] and doc["nodes"][0]["expires_at"] == "2026-11-30T08:59:59Z"


def test_a_node_or_pod_being_deleted_already_is_not_planned_again(sides: tuple[str, str], tmp_path: Path) -> None:
    going = node("a")
    going["metadata"]["deletionTimestamp"] = "2026-11-30T08:59:00Z"
    leaving = pod("old", "b", "web")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-30T08:59:00Z"

    _, doc, _ = plan(sides, tmp_path, going, pod("web", "a", "web"), node("b"), leaving)

    assert [(w["nodes"], w["evicted_pods"]) for w in doc["waves"]] == [(["b"], 0)]  # empty once its pod is gone


def test_nodes_without_the_hash_annotation_are_said_not_to_drift(sides: tuple[str, str], tmp_path: Path) -> None:
    _, doc, _ = plan(sides, tmp_path, node("a", annotations={}), node("b", annotations={}), node("c"))

    assert doc["notes"] == ["2 nodes of provisioner default carry no karpenter.sh/provisioner-hash annotation: "
                            "Karpenter does not drift them for spec.labels.team changed"]


def test_an_empty_node_with_do_not_disrupt_is_held_too(sides: tuple[str, str], tmp_path: Path) -> None:
    held = node("a", annotations={"karpenter.sh/provisioner-hash": "1", "karpenter.sh/do-not-disrupt": "true"})

    code, doc, _ = plan(sides, tmp_path, held, node("b"))

    assert [w["nodes"] for w in doc["waves"]] == [["b"]]
    assert [(b["node"], b["forever"]) for b in doc["blocked"]] == [("a", True)] and code == 1


def test_spot_prices_price_the_spot_nodes_and_a_bad_file_is_refused(sides: tuple[str, str], tmp_path: Path) -> None:
    prices = tmp_path / "spot.json"
    prices.write_text(json.dumps({"SpotPriceHistory": [
        {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.0400",
         "Timestamp": "2026-11-29T00:00:00Z"}]}))
    (tmp_path / "bad.json").write_text("[1")
    spot = node("a", capacity_type="spot", annotations={})

    _, estimated, _ = plan(sides, tmp_path, spot)
    _, priced, _ = plan(sides, tmp_path, spot, spot_prices_file=str(prices))
    code, _, stderr = plan(sides, tmp_path, spot, spot_prices_file=str(tmp_path / "bad.json"))

    assert estimated["cost"]["before_monthly"] == pytest.approx(M5_LARGE_MONTHLY, abs=0.01)
    assert estimated["notes"][0] == "spot nodes priced at the on-demand price (no --spot-prices): an estimate"
    assert priced["cost"]["before_monthly"] == pytest.approx(0.04 * 730, abs=0.01)
    assert priced["notes"][0].startswith(f"priced with spot prices from {prices} (6489 spot offerings without a price")
    assert code == 2 and "not JSON" in stderr


def test_evicted_pods_go_onto_nodes_with_room_before_any_new_node(sides: tuple[str, str], tmp_path: Path) -> None:
    """Karpenter's `simulateScheduling` offers every other node first: a's pod fits beside b's, so a goes without a
    replacement; b then carries both, which fill more than room elsewhere holds, so b's wave launches one node for
    the two — and a pod moved onto a drifted node moves again with it."""
    code, doc, _ = plan(sides, tmp_path, node("a", created="2026-11-20T08:00:00Z"),
                        node("b", created="2026-11-20T09:00:00Z"), pod("web-1", "a", "web"), pod("web-2", "b", "web"),
                        node("c", annotations={}), pod("api-1", "c", "api", cpu=FULL))

    assert code == 0
    assert [(w["nodes"], len(w["replacements"]), w["evicted"]) for w in doc["waves"]] == [
        (["a"], 0, {"default/Deployment/web": 1}),
        (["b"], 1, {"default/Deployment/web": 2}),
    ]
    assert doc["waves"][0]["seconds"] == 15  # no node to wait for: the drain alone
    assert doc["cost"]["after_monthly"] == pytest.approx(2 * M5_LARGE_MONTHLY, abs=0.01)


def test_a_removed_provisioners_pods_go_onto_a_node_with_room(sides: tuple[str, str], tmp_path: Path) -> None:
    code, doc, _ = plan(sides, tmp_path, node("o1", provisioner="old", instance_type="t3.medium"),
                        pod("cache", "o1", "cache"), node("keep", annotations={}), drift_disabled=True)

    (wave,) = doc["waves"]
    assert code == 0 and (wave["method"], wave["nodes"], wave["replacements"]) == ("removed", ["o1"], [])
    assert doc["pending"] == [] and [r["provisioner"] for r in doc["cost"]["provisioners"]] == ["default", "old"]


def test_a_node_of_a_type_no_template_knows_still_has_its_pods_moved(sides: tuple[str, str], tmp_path: Path) -> None:
    """A drifted node without `status.allocatable` whose instance type no HEAD template knows offers no room, but
    its pods are still the command's to move (`simulateScheduling` takes the candidate's pods whatever its type):
    they were dropped from its wave, which evicted nothing and launched nothing."""
    code, doc, _ = plan(sides, tmp_path, node("odd", instance_type="m99.large"), pod("web-1", "odd", "web"))

    (wave,) = doc["waves"]
    assert (wave["nodes"], wave["evicted_pods"], wave["evicted"]) == (["odd"], 1, {"default/Deployment/web": 1})
    assert [r["instance_type"] for r in wave["replacements"]] == ["m5.large"]
    assert code == 0 and doc["pending"] == []
