"""`plan` pairs a Node with its NodeClaim (or v1alpha5 Machine) by providerID (`commands/plan/pairing.py`), as
Karpenter v1.14.1's and v0.31.1's cluster state does (`state.Cluster.UpdateNodeClaim`/`UpdateNode` keyed by
`status.providerID`/`spec.providerID`): a claim's stale `status.nodeName` pairs nothing, two NodeClaims, two
Machines or two Nodes with one providerID refuse the snapshot (exit 2, the objects and the providerID named), a
NodePool's Node without a providerID is a warning and pairs with no claim, a providerID that is no string is a
snapshot error, and `--redact` hashes the providerIDs alike so the pairing — and the plan — survive it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from karpenter_policy.catalog import load_catalog
from karpenter_policy.commands.plan.command import plan_command
from karpenter_policy.commands.plan.options import PlanOptions
from karpenter_policy.commands.plan.redact import hashed
from karpenter_policy.commands.plan.snapshot import read_snapshot
from tests.plan.snapshots import HASH, listing, node, pod, policies, provider_id, provisioner, write
from tests.plan.v1snapshots import claim, nodepool, pool_node, v1_policies

START = "2026-11-30T09:00:00Z"
ROOT = Path(__file__).resolve().parents[2]


def sides(root: Path) -> tuple[str, str]:
    """BASE and HEAD: one NodePool `default`, unchanged (only expiry and a claim's Drifted condition act)."""
    return v1_policies(root / "base", nodepool()), v1_policies(root / "head", nodepool())


def plan(tmp_path: Path, *items: dict[str, Any], output: str = "json") -> tuple[int, str, str]:
    base, head = sides(tmp_path)
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, output=output, base=base, head=head),
                          load_catalog())
    return result.exit_code, result.stdout, result.stderr


def stale_snapshot() -> list[dict[str, Any]]:
    """n1's NodeClaim expired long ago (24h after 2026-11-20) but its `status.nodeName` still names n2; n2's own
    NodeClaim never expires and comes first (a nodeName pairing gives n2 the expired claim, n1 none)."""
    expired = claim("n1", name="default-old", expire_after="24h")
    expired["status"]["nodeName"] = "n2"
    return [pool_node("n1"), pool_node("n2"), claim("n2", expire_after="Never"), expired,
            pod("web-1", "n1", "web"), pod("web-2", "n2", "web")]


def by_node(doc: dict[str, Any]) -> dict[str, tuple[bool, bool, int | None]]:
    """Node → (drifted, expires, wave) as the JSON plan shows them."""
    return {n["name"]: (n["drifted"], n["expires"], n["wave"]) for n in doc["nodes"]}


def test_a_claim_whose_stale_node_name_names_another_node_is_paired_by_its_provider_id(tmp_path: Path) -> None:
    code, out, err = plan(tmp_path, *stale_snapshot())

    assert (code, err) == (0, "")
    doc = json.loads(out)
    shown = by_node(doc)
    assert shown["n1"][1] is True and shown["n2"][1] is False  # the expired claim is n1's, whatever its nodeName
    assert [(w["method"], w["nodes"]) for w in doc["waves"]] == [("expiration", ["n1"])]


def test_a_drifted_condition_lands_on_the_node_of_the_claims_provider_id(tmp_path: Path) -> None:
    drifted = claim("n1", drifted=True)
    drifted["status"]["nodeName"] = "n2"  # stale: n2 is another instance
    code, out, _ = plan(tmp_path, pool_node("n1"), pool_node("n2"), claim("n2"), drifted,
                        pod("web-1", "n1", "web"), pod("web-2", "n2", "web"))

    assert code == 0
    shown = by_node(json.loads(out))
    assert shown["n1"][0] is True and shown["n2"][0] is False


def test_two_nodeclaims_with_one_provider_id_refuse_the_snapshot_naming_them(tmp_path: Path) -> None:
    twin = claim("n2", name="default-twin")
    twin["status"]["providerID"] = provider_id("n1")

    code, out, err = plan(tmp_path, pool_node("n1"), pool_node("n2"), claim("n1"), twin)

    assert (code, out) == (2, "")
    assert (f"error: NodeClaim default-n1, NodeClaim default-twin have one status.providerID {provider_id('n1')}: "
            "Karpenter keeps one node per providerID in its cluster state") in err
    assert err.endswith("karpenter-policy plan: the snapshot cannot be trusted: no plan\n")
    assert "Traceback" not in err


def test_two_nodes_with_one_provider_id_refuse_the_snapshot_naming_them(tmp_path: Path) -> None:
    copy = pool_node("n2")
    copy["spec"]["providerID"] = provider_id("n1")

    code, out, err = plan(tmp_path, pool_node("n1"), copy, claim("n1"))

    assert (code, out) == (2, "")
    assert f"error: Node n1, Node n2 have one spec.providerID {provider_id('n1')}:" in err


def test_the_refusal_is_the_clis_exit_2_and_no_traceback(tmp_path: Path) -> None:
    base, head = sides(tmp_path)
    twin = claim("n1", name="default-twin")
    file = write(tmp_path / "snapshot.json", pool_node("n1"), claim("n1"), twin)

    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "plan", base, head, "--snapshot", file,
                           "--start", START], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT)})

    assert (done.returncode, done.stdout) == (2, "")
    assert "NodeClaim default-n1, NodeClaim default-twin have one status.providerID" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_provider_id_that_is_no_string_is_a_snapshot_error_naming_the_field() -> None:
    bad_node, bad_claim = pool_node("n1"), claim("n1")
    bad_node["spec"]["providerID"], bad_claim["status"]["providerID"] = 7, ["i-n1"]

    snapshot = read_snapshot(json.dumps(listing(bad_node, bad_claim)).encode(), "s.json")

    assert [p.message for p in snapshot.errors] == ["Node n1: spec.providerID is not a string: 7",
                                                    "NodeClaim default-n1: status.providerID is not a string: ['i-n1']"]


def machine(name: str, node_name: str, provider: str, annotations: dict[str, str]) -> dict[str, Any]:
    """A v1alpha5 Machine (Karpenter v0.31) whose `status.nodeName` is `node_name` and providerID `provider`."""
    return {"apiVersion": "karpenter.sh/v1alpha5", "kind": "Machine",
            "metadata": {"name": name, "annotations": annotations, "creationTimestamp": "2026-11-20T08:00:00Z"},
            "spec": {}, "status": {"nodeName": node_name, "providerID": provider}}


def v031_plan(tmp_path: Path, *items: dict[str, Any]) -> tuple[int, str, str]:
    """BASE: Provisioner `default`; HEAD: relabelled (a node carrying the hash drifts)."""
    base = policies(tmp_path / "base", provisioner())
    head = policies(tmp_path / "head", provisioner(labels="team: platform"))
    file = write(tmp_path / "snapshot.json", *items)
    result = plan_command(PlanOptions(snapshot=(file,), start=START, output="json", base=base, head=head),
                          load_catalog())
    return result.exit_code, result.stdout, result.stderr


def test_a_machines_annotations_go_to_the_node_of_its_provider_id_as_karpenter_v031_pairs_them(
        tmp_path: Path) -> None:
    # only the Machine carries the provisioner hash (v0.31 copies it to the Node at registration; not yet here)
    stale = machine("default-m1", "n2", provider_id("n1"), HASH)

    code, out, err = v031_plan(tmp_path, node("n1", annotations={}), node("n2", annotations={}), stale,
                               pod("web-1", "n1", "web"), pod("web-2", "n2", "web"))

    assert (code, err) == (0, "")
    shown = by_node(json.loads(out))
    assert shown["n1"][0] is True and shown["n2"][0] is False


def test_two_machines_with_one_provider_id_refuse_the_snapshot(tmp_path: Path) -> None:
    code, out, err = v031_plan(tmp_path, node("n1"), machine("m1", "n1", provider_id("n1"), HASH),
                               machine("m2", "n1", provider_id("n1"), HASH))

    assert (code, out) == (2, "")
    assert f"error: Machine m1, Machine m2 have one status.providerID {provider_id('n1')}:" in err


def _without_provider_id() -> list[dict[str, Any]]:
    bare = pool_node("n1")
    del bare["spec"]["providerID"]
    return [bare, claim("n1", expire_after="24h"), pod("web-1", "n1", "web")]


WARNING = ("warning: Node n1 of NodePool default has no spec.providerID: Karpenter leaves it out of its cluster "
           "state until the cloud provider sets one, so the plan pairs it with no NodeClaim")


def test_a_nodepools_node_without_a_provider_id_is_warned_of_and_paired_with_no_claim(tmp_path: Path) -> None:
    code, out, _ = plan(tmp_path, *_without_provider_id())

    doc = json.loads(out)
    assert code == 0
    assert any(WARNING in note for note in doc["notes"])
    assert by_node(doc)["n1"][1] is False  # its NodeClaim (nodeName n1, expired) is not its: no expiry


def test_the_warning_is_in_the_text_and_markdown_plans_too(tmp_path: Path) -> None:
    _, text, _ = plan(tmp_path, *_without_provider_id(), output="text")
    _, markdown, _ = plan(tmp_path, *_without_provider_id(), output="markdown")

    assert WARNING in text
    assert "has no spec.providerID" in markdown


def _cli_json(tmp_path: Path, file: str, *extra: str) -> dict[str, Any]:
    base, head = sides(tmp_path)
    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "plan", base, head, "--snapshot", file,
                           "--start", START, "--output", "json", *extra], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env={"PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def test_redaction_keeps_the_pairing_and_the_plan_is_the_same_but_for_hashed_names(tmp_path: Path) -> None:
    file = write(tmp_path / "snapshot.json", *stale_snapshot())

    plain, redacted = _cli_json(tmp_path, file), _cli_json(tmp_path, file, "--redact")

    names = {hashed("node", n): n for n in ("n1", "n2")}
    assert {names[k]: v for k, v in by_node(redacted).items()} == by_node(plain)
    assert by_node(redacted)[hashed("node", "n1")][1] is True
    assert [(w["method"], [names[n] for n in w["nodes"]], w["start"], w["seconds"]) for w in redacted["waves"]] == [
        (w["method"], w["nodes"], w["start"], w["seconds"]) for w in plain["waves"]]
    assert (redacted["drift"], redacted["finishes"], redacted["cost"]["before_monthly"]) == (
        plain["drift"], plain["finishes"], plain["cost"]["before_monthly"])
    assert "i-n1" not in json.dumps(redacted)  # the providerIDs are hashed, not shown


def test_a_redacted_refusal_names_the_provider_id_by_its_hash(tmp_path: Path) -> None:
    base, head = sides(tmp_path)
    file = write(tmp_path / "snapshot.json", pool_node("n1"), claim("n1"), claim("n1", name="default-twin"))

    done = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "plan", base, head, "--snapshot", file,
                           "--start", START, "--redact"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(ROOT)})

    assert done.returncode == 2
    assert (f"NodeClaim {hashed('claim', 'default-n1')}, NodeClaim {hashed('claim', 'default-twin')} have one "
            f"status.providerID {hashed('provider', provider_id('n1'))}") in done.stderr
    assert "i-n1" not in done.stderr


def test_a_providerid_of_thousands_of_characters_is_named_cut_in_the_refusal(tmp_path: Path) -> None:
    """A hostile snapshot: two Nodes sharing a 4,000-character providerID are refused naming it cut (its first and
    last characters, its length), never printed whole."""
    huge = "aws:///us-east-1a/i-" + "9" * 4000
    first, second = pool_node("n1"), pool_node("n2")
    first["spec"]["providerID"] = second["spec"]["providerID"] = huge

    code, out, err = plan(tmp_path, first, second, claim("n1"))

    assert (code, out) == (2, "")
    assert "(4020 characters)" in err and huge not in err
    assert len(err) < 1000
