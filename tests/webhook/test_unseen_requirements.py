"""Provisioners whose requirements the webhook has never seen (issue #12), over HTTPS.

Every request below carries requirements no earlier one had (a team label of its own), so neither verdict cache
can answer: a satisfiable Provisioner is decided by the solver's bit masks, an unsatisfiable one by Z3, whose Z3
context is replaced every `PROBLEMS_PER_CONTEXT` problems. With one worker process, more unsatisfiable
Provisioners than that cross a replacement; each is still denied with exactly the CLI's messages, and each
satisfiable one admitted with the CLI's warnings.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from karpenter_policy.catalog import load_catalog
from karpenter_policy.checks.proof.solver import PROBLEMS_PER_CONTEXT
from karpenter_policy.webhook.command import Webhook, WebhookOptions
from karpenter_policy.webhook.review import shorten

from .support import Client, cli_verdict


@pytest.fixture(scope="module")
def one_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Webhook, Path]]:
    """A webhook whose every check runs in one worker process: one solver sees every problem."""
    certs = tmp_path_factory.mktemp("unseen-certs")
    server = Webhook(WebhookOptions(self_signed=str(certs), address="127.0.0.1", port=0, workers=1))
    server.start()
    yield server, certs / "ca.crt"
    server.stop()


def _provisioner(index: int, satisfiable: bool, arm64_families: list[str]) -> dict[str, Any]:
    team = f"team-{index}"
    requirements: list[dict[str, Any]] = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "example.com/team", "operator": "In", "values": [team]},
    ]
    if not satisfiable:  # arm64-only families on amd64 nodes; a different pair each time
        pair = [arm64_families[index % len(arm64_families)], arm64_families[(index + 1) % len(arm64_families)]]
        requirements.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": sorted(set(pair))})
    return {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": {"name": team},
        "spec": {"requirements": requirements, "labels": {"example.com/team": team}, "providerRef": {"name": "x"}},
    }


def test_never_seen_requirements_are_decided_as_the_cli_across_z3_context_replacements(
    one_worker: tuple[Webhook, Path],
) -> None:
    server, ca = one_worker
    arm64_families = sorted(
        {
            t.family
            for t in load_catalog()
            if tuple(t.architectures) == ("arm64",) and any(o.available for o in t.offerings)
        }
    )
    assert len(arm64_families) >= 2
    unsatisfiable = PROBLEMS_PER_CONTEXT + 20  # past one replacement of the worker's Z3 context
    client = Client(server.port, ca)
    try:
        for index in range(2 * unsatisfiable):
            satisfiable = index % 2 == 0
            document = _provisioner(index, satisfiable, arm64_families)
            expected = cli_verdict(document)
            response = client.review("/validate/provisioners", document)
            assert bool(expected.errors) is not satisfiable, (index, expected)  # the CLI agrees on what is satisfiable
            assert response["allowed"] is satisfiable, (index, expected, response)
            if not satisfiable:
                lines = str(response["status"]["message"]).split("\n")
                assert len(lines) == len(expected.errors), (index, lines)
                assert any(rule == "requirements-conflict" for _, rule in expected.errors)
                for (message, rule), line in zip(expected.errors, lines, strict=True):
                    assert line.endswith(f"{message} [{rule}]"), (index, line, message)
            assert response.get("warnings", []) == [shorten(f"{m} [{r}]") for m, r in expected.warnings]
    finally:
        client.close()
