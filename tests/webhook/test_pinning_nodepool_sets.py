"""`/mutate/pods` over HTTPS with `--constraints` holding Karpenter v1 NodePools' sets beside a Provisioner's
(`compile examples/v1/mixed/policies`): a rule naming a `nodePool` pins `karpenter.sh/nodepool` and tolerates the
NodePool's template taints, read from its compiled set, exactly as the same rules bound from the policy repository
(`--policies`) pin; a rule naming the Provisioner of the same name still pins `karpenter.sh/provisioner-name`; the
ConfigMap mounted as a directory gives the same; a NodePool set Karpenter would refuse keeps the webhook from
starting, naming the set and field."""

from __future__ import annotations

import json
import shutil
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.commands.compile.compiler import compile_command
from karpenter_policy.commands.flags import CompileFlags
from karpenter_policy.webhook.command import Webhook, WebhookOptions
from karpenter_policy.webhook.context import ContextError, ContextSource, load_constraints

from .support import ROOT, Client
from .test_pinning import pinned

MIXED = ROOT / "examples" / "v1" / "mixed" / "policies"
PINNING = """\
    apiVersion: karpenter-policy.dev/v1alpha1
    kind: PinningPolicy
    metadata:
      name: mixed
    spec:
      rules:
        - name: reports-on-batch
          match:
            namespaces: [analytics]
            kinds: [Job]
          nodePool: batch
        - name: web-on-the-provisioner
          match:
            namespaces: [web]
          provisioner: default
        - name: api-on-the-nodepool
          match:
            namespaces: [api]
          nodePool: default
    """
BATCH_TOLERATION = {"key": "example.com/batch", "operator": "Exists", "effect": "NoSchedule"}


@pytest.fixture(scope="module")
def pinning_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pinning") / "pinning.yaml"
    path.write_text(textwrap.dedent(PINNING))
    return path


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("compiled") / "out"
    result = compile_command(CompileFlags(paths=(str(MIXED),), out=str(out)))
    assert result.exit_code == 0, result
    return out


@pytest.fixture(scope="module")
def server(compiled: Path, pinning_file: Path, cert_dir: Path) -> Iterator[Webhook]:
    options = WebhookOptions(
        self_signed=str(cert_dir),
        address="127.0.0.1",
        port=0,
        constraints=str(compiled),
        pinning=[str(pinning_file)],
    )
    webhook = Webhook(options)
    webhook.start()
    yield webhook
    webhook.stop()


def _pod(name: str, owner: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if owner is not None:
        metadata["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": owner, "name": "o", "uid": "u", "controller": True}
        ]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [{"name": "c"}]}}


def test_nodepool_and_provisioner_sets_pin_side_by_side(server: Webhook, cert_dir: Path) -> None:
    client = Client(server.port, cert_dir / "ca.crt")
    _, job = pinned(client, _pod("report-x", owner="Job"), namespace="analytics")
    assert job["spec"]["nodeSelector"] == {"karpenter.sh/nodepool": "batch"}
    assert job["spec"]["tolerations"] == [BATCH_TOLERATION]
    _, web = pinned(client, _pod("web-x"), namespace="web")
    assert web["spec"] == {"containers": [{"name": "c"}], "nodeSelector": {"karpenter.sh/provisioner-name": "default"}}
    _, api = pinned(client, _pod("api-x"), namespace="api")
    assert api["spec"] == {"containers": [{"name": "c"}], "nodeSelector": {"karpenter.sh/nodepool": "default"}}
    unmatched = client.review("/mutate/pods", _pod("report-y"), namespace="analytics")  # a bare pod: no rule
    assert unmatched["allowed"] is True and "patch" not in unmatched
    client.close()


def test_the_compiled_sets_bind_the_rules_as_the_policy_repository_does(server: Webhook, pinning_file: Path) -> None:
    _, from_policies = ContextSource(policies=[str(MIXED)], pinning=[str(pinning_file)]).load()
    assert server.pinner.rules == from_policies.rules
    assert [rule.node_selector for rule in server.pinner.rules] == [
        {"karpenter.sh/nodepool": "batch"},
        {"karpenter.sh/provisioner-name": "default"},
        {"karpenter.sh/nodepool": "default"},
    ]


def test_the_configmap_mounted_as_a_directory_gives_the_nodepools(compiled: Path, tmp_path: Path) -> None:
    (configmap,) = (compiled / "manifests").glob("configmap-*.yaml")
    mounted = tmp_path / "mounted"
    mounted.mkdir()
    for key, value in yaml.safe_load(configmap.read_text())["data"].items():
        (mounted / key).write_text(value)
    context = load_constraints(str(mounted), "us-east-1")
    assert {name: [str(t) for t in taints] for name, taints in context.nodepool_taints.items()} == {
        "batch": ["example.com/batch:NoSchedule"],
        "default": [],
    }
    assert list(context.provisioner_taints) == ["default"] and list(context.node_templates) == ["default"]


def test_a_rule_naming_a_nodepool_the_sets_lack_is_refused(compiled: Path, tmp_path: Path) -> None:
    rules = tmp_path / "pinning.yaml"
    rules.write_text(textwrap.dedent(PINNING).replace("nodePool: batch", "nodePool: gpu"))
    with pytest.raises(ContextError, match=r"names NodePool 'gpu', which the policies do not define \(known: batch, "):
        ContextSource(constraints=str(compiled), pinning=[str(rules)]).load()


def test_a_nodepool_set_karpenter_would_refuse_keeps_the_webhook_from_starting(
    compiled: Path, pinning_file: Path, tmp_path: Path
) -> None:
    build = tmp_path / "build"
    shutil.copytree(compiled, build)
    path = build / "constraintsets" / "nodepool.batch.json"
    document = json.loads(path.read_text())
    document["taints"] = [{"key": "example.com/batch", "effect": "Sometimes"}]
    path.write_text(json.dumps(document))  # the hash no longer matches either: the content is checked first
    with pytest.raises(ContextError) as refused:
        ContextSource(constraints=str(build), pinning=[str(pinning_file)]).load()
    assert str(refused.value).startswith(f'{path}: taints[0].effect: Unsupported value: "Sometimes"')
