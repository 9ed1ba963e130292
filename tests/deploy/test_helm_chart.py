"""The Helm chart (deploy/helm/karpenter-policy) through Helm's own engine, and the CloudFormation snippet.

Helm's Go SDK (helm.sh/helm/v4, through the `helm-python-sdk` wheel: no helm binary in the package registries) lints
the chart (`helm lint --strict`) and renders it (`helm template`); the rendered manifests are validated against
Kubernetes' OpenAPI schemas (`kubernetes-validate`); the flags the chart passes are the ones the CLI accepts; the
controller's RBAC grants exactly the API calls it makes. The CloudFormation template goes through cfn-lint.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from karpenter_policy.cli import main

from .chart import CHART, REQUIRED, helm_chart, merged, of_kind, render
from .support import ROOT

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")

CLOUDFORMATION = ROOT / "deploy" / "cloudformation" / "interruption-queue.yaml"
KUBERNETES_VERSION = "1.29.0"
#: Custom resources the Kubernetes schemas do not cover (cert-manager, Prometheus Operator).
CUSTOM_KINDS = {("cert-manager.io/v1", "Certificate"), ("cert-manager.io/v1", "Issuer"),
                ("monitoring.coreos.com/v1", "ServiceMonitor")}


def test_helm_lint_strict_finds_nothing() -> None:
    report = helm_chart.lint(str(CHART), dict(REQUIRED), strict=True, kube_version=f"v{KUBERNETES_VERSION}")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_the_cluster_values_are_required_with_a_message() -> None:
    with pytest.raises(Exception, match=r"cluster.name \(or Karpenter's settings.clusterName\) is required"):
        render({"image": REQUIRED["image"]})


def test_the_image_is_required_with_a_message() -> None:
    """No registry of someone else's in the defaults: the image is the one users name."""
    with pytest.raises(Exception, match="image.repository is required: the image the release workflow publishes"):
        render({"cluster": REQUIRED["cluster"]})
    images = {c["image"] for d in of_kind(render(REQUIRED), "Deployment")
              for c in d["spec"]["template"]["spec"]["containers"]}
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert images == {f"ghcr.io/acme/karpenter-policy:{chart['appVersion']}"}


def test_values_schema_refuses_unknown_keys() -> None:
    chart = helm_chart.Chart.load(str(CHART))
    with pytest.raises(Exception, match="replicass|additional"):
        chart.validate_schema(merged(REQUIRED, {"controller": {"replicass": 3}}))


@pytest.mark.parametrize("extra", [
    {},
    {"controller": {"serviceAccount": {"roleArn": "arn:aws:iam::123456789012:role/kp"}}},
    {"webhook": {"certManager": {"enabled": False}, "tls": {"secretName": "kp-tls", "caBundle": "Y2E="},
                 "pinning": {"rules": {"spark.yaml": "apiVersion: karpenter-policy.dev/v1alpha1\n"}}}},
    {"controller": {"enabled": False}},
    {"webhook": {"enabled": False}},
], ids=["defaults", "irsa", "own-tls-and-pinning", "webhook-only", "controller-only"])
@pytest.mark.slow
def test_rendered_manifests_match_the_kubernetes_schemas(extra: dict[str, Any]) -> None:
    documents = render(merged(REQUIRED, extra))
    assert documents
    for doc in documents:
        if (doc["apiVersion"], doc["kind"]) in CUSTOM_KINDS:
            assert doc["metadata"]["name"] and doc["spec"], doc
            continue
        # Raises ValidationError (unknown or mistyped fields, strict) or SchemaNotFoundError (an unknown kind).
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_a_service_monitor_needs_the_prometheus_operator() -> None:
    # helm template without the cluster's API versions: refused with what to do, rather than a manifest that
    # Argo CD or helm install could not apply.
    with pytest.raises(Exception, match="does not serve monitoring.coreos.com/v1 ServiceMonitor"):
        render(merged(REQUIRED, {"serviceMonitor": {"enabled": True}}))


def test_irsa_role_is_the_service_account_annotation() -> None:
    role = "arn:aws:iam::123456789012:role/kp"
    documents = render(merged(REQUIRED, {"controller": {"serviceAccount": {"roleArn": role}}}))
    account = next(d for d in of_kind(documents, "ServiceAccount") if "controller" in d["metadata"]["name"])
    assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == role


def test_both_components_install_together_with_their_budgets() -> None:
    documents = render(REQUIRED)
    deployments = {doc["metadata"]["name"]: doc for doc in of_kind(documents, "Deployment")}
    assert sorted(deployments) == ["kp-karpenter-policy-controller", "kp-karpenter-policy-webhook"]
    assert all(d["spec"]["replicas"] == 2 for d in deployments.values())
    assert len(list(of_kind(documents, "PodDisruptionBudget"))) == 2
    webhooks = [*of_kind(documents, "ValidatingWebhookConfiguration"),
                *of_kind(documents, "MutatingWebhookConfiguration")]
    assert webhooks
    configmap = next(
        v for v in deployments["kp-karpenter-policy-webhook"]["spec"]["template"]["spec"]["volumes"] if "configMap" in v
    )
    assert configmap["configMap"]["name"] == "karpenter-policy-constraints"  # what compile emits, what GitOps syncs


def _flags(command: click.Command) -> set[str]:
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")}


OPTIONAL_FLAGS = {"controller": {"defaultInstanceProfile": "kp", "strategy": "karpenter",
                                 "interruptionQueue": "blue-karpenter-policy"},
                  "cluster": {"region": "eu-west-1", "caBundle": "Y2E=", "dnsClusterIP": "10.0.0.10"}}


@pytest.mark.parametrize("extra", [{}, OPTIONAL_FLAGS])
def test_every_flag_the_chart_passes_is_one_the_cli_accepts(extra: dict[str, Any]) -> None:
    assert isinstance(main, click.Group)
    for doc in of_kind(render(merged(REQUIRED, extra)), "Deployment"):
        container = doc["spec"]["template"]["spec"]["containers"][0]
        subcommand, *args = container["args"]
        accepted = _flags(main.commands[subcommand])
        for arg in args:
            assert arg.split("=", 1)[0] in accepted, (subcommand, arg)


def test_the_registration_ttl_is_a_value_of_the_chart() -> None:
    def controller_args(values: dict[str, Any]) -> list[str]:
        (doc,) = (d for d in of_kind(render(values), "Deployment") if "controller" in d["metadata"]["name"])
        arguments: list[str] = doc["spec"]["template"]["spec"]["containers"][0]["args"]
        return arguments

    assert "--registration-ttl=15m" in controller_args(dict(REQUIRED)), "Karpenter's 15 minutes by default"
    assert "--registration-ttl=30m" in controller_args(merged(REQUIRED, {"controller": {"registrationTTL": "30m"}}))
    with pytest.raises(Exception, match="registrationTTL|does not match"):
        helm_chart.Chart.load(str(CHART)).validate_schema(merged(REQUIRED, {"controller": {"registrationTTL": "1x"}}))


#: Every Kubernetes API call of `karpenter-policy reconcile` (kube/ and reconcile/): (API group, resource, verb).
CONTROLLER_CALLS = {
    ("", "pods", "list"), ("", "pods", "watch"),                      # informer
    ("", "pods/binding", "create"),                                   # binder
    ("", "pods/eviction", "create"),                                  # termination drains through evictions
    ("", "nodes", "get"), ("", "nodes", "list"), ("", "nodes", "watch"),
    ("", "nodes", "create"), ("", "nodes", "patch"), ("", "nodes", "update"), ("", "nodes", "delete"),
    ("", "namespaces", "list"), ("", "namespaces", "watch"),          # namespaceSelector of affinity terms
    ("karpenter.sh", "nodeclaims", "get"), ("karpenter.sh", "nodeclaims", "create"),  # a NodePool's NodeClaims
    ("karpenter.sh", "nodeclaims", "list"), ("karpenter.sh", "nodeclaims", "watch"),  # a claim deleted by hand
    ("karpenter.sh", "nodeclaims", "patch"), ("karpenter.sh", "nodeclaims", "delete"),
    ("karpenter.sh", "nodeclaims/status", "update"), ("karpenter.sh", "nodepools", "get"),  # the claim's owner
    ("karpenter.sh", "nodepools/status", "update"), ("karpenter.k8s.aws", "ec2nodeclasses", "get"),  # registration
    ("karpenter.sh", "nodepools", "list"), ("karpenter.sh", "nodepools", "watch"),  # readiness: their changes
    ("karpenter.sh", "nodepools", "patch"),  # the nodepool-hash annotation
    ("karpenter.k8s.aws", "ec2nodeclasses", "list"), ("karpenter.k8s.aws", "ec2nodeclasses", "watch"),
    ("karpenter.k8s.aws", "ec2nodeclasses", "patch"),  # the ec2nodeclass-hash annotation
    ("storage.k8s.io", "volumeattachments", "list"),  # a NodePool's node waits for its attachments' deletion
    ("storage.k8s.io", "volumeattachments", "watch"),  # …read from an informer indexed by node
    ("", "persistentvolumeclaims", "get"),  # …less those of the pods its drain leaves
    ("", "persistentvolumeclaims", "list"), ("", "persistentvolumeclaims", "watch"),  # a pending pod's claims,
    ("", "persistentvolumes", "list"), ("", "persistentvolumes", "watch"),  # their volumes' zones
    ("storage.k8s.io", "storageclasses", "list"), ("storage.k8s.io", "storageclasses", "watch"),  # and classes
    ("apps", "daemonsets", "list"), ("apps", "daemonsets", "watch"),  # DaemonSet overhead
    ("policy", "poddisruptionbudgets", "list"), ("policy", "poddisruptionbudgets", "watch"),
    ("", "events", "create"), ("", "events", "get"), ("", "events", "patch"),
    ("coordination.k8s.io", "leases", "create"), ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "update"),
    ("", "configmaps", "get"), ("", "configmaps", "list"), ("", "configmaps", "watch"),  # the constraint sets
}


def _granted(roles: Iterator[dict[str, Any]]) -> set[tuple[str, str, str]]:
    granted = set()
    for role in roles:
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        assert "*" not in (group, resource, verb), rule
                        granted.add((group, resource, verb))
    return granted


def test_the_controller_is_granted_its_calls_and_nothing_else() -> None:
    documents = render(REQUIRED)
    controller_roles = [
        doc for doc in documents
        if doc["kind"] in ("ClusterRole", "Role")
        and doc["metadata"]["name"].startswith("kp-karpenter-policy-controller")
    ]
    assert _granted(iter(controller_roles)) == CONTROLLER_CALLS
    named = {rule.get("resourceNames", [None])[0] for role in controller_roles for rule in role["rules"]
             if rule["resources"] in (["configmaps"], ["leases"]) and "create" not in rule["verbs"]}
    assert named == {"karpenter-policy-constraints", "karpenter-policy-reconcile"}  # by name, not every one


def test_the_webhook_calls_no_api() -> None:
    documents = render(REQUIRED)
    webhook_roles = [doc for doc in documents if doc["kind"] in ("ClusterRole", "Role")
                     and "webhook" in doc["metadata"]["name"]]
    assert webhook_roles == []
    account = next(d for d in of_kind(documents, "ServiceAccount") if "webhook" in d["metadata"]["name"])
    assert account.get("automountServiceAccountToken") is False


@pytest.mark.slow
def test_the_interruption_queue_template_passes_cfn_lint(tmp_path: Path) -> None:
    cfn_lint = shutil.which("cfn-lint") or str(Path(sys.executable).parent / "cfn-lint")
    run = subprocess.run([cfn_lint, str(CLOUDFORMATION)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    template = yaml.load(CLOUDFORMATION.read_text(), Loader=_CfnLoader)
    rules = [r for r in template["Resources"].values() if r["Type"] == "AWS::Events::Rule"]
    patterns = [r["Properties"]["EventPattern"] for r in rules]
    assert sorted(p["detail-type"][0] for p in patterns) == [
        "AWS Health Event", "EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification",
        "EC2 Spot Instance Interruption Warning"]
    # The check can fail: a misspelt property is an error.
    broken = tmp_path / "broken.yaml"
    broken.write_text(CLOUDFORMATION.read_text().replace("MessageRetentionPeriod", "MessageRetentionPeriode"))
    assert subprocess.run([cfn_lint, str(broken)], capture_output=True, timeout=300).returncode != 0


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short-form intrinsic functions (!Ref, !Sub, !GetAtt) kept as plain values."""


_CfnLoader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node)
                                 if isinstance(node, yaml.ScalarNode) else None)


def test_the_webhook_configurations_name_every_route_the_server_has() -> None:
    """Every path the chart's webhooks call is a route of the server, and every validating route of the server is
    called (a v1 NodePool or EC2NodeClass is validated unless `webhook.v1.enabled` is false)."""
    from karpenter_policy.webhook.handlers import MUTATE_PODS, MUTATE_PROVISIONERS, Handlers

    def paths(values: dict[str, Any]) -> dict[str, dict[str, Any]]:
        documents = render(merged(REQUIRED, values))
        return {
            hook["clientConfig"]["service"]["path"]: hook
            for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
            for configuration in of_kind(documents, kind)
            for hook in configuration["webhooks"]
        }

    routes = set(Handlers.__new__(Handlers).routes())
    called = paths({})
    assert set(called) == routes
    assert called["/validate/nodepools"]["rules"][0]["resources"] == ["nodepools"]
    assert called["/validate/ec2nodeclasses"]["rules"][0]["apiGroups"] == ["karpenter.k8s.aws"]
    without_v1 = paths({"webhook": {"v1": {"enabled": False}}})
    assert set(without_v1) == {MUTATE_PODS, MUTATE_PROVISIONERS, "/validate/provisioners"}
