"""deploy/webhook: the manifests say what the issue asks (2 replicas, sideEffects None, timeoutSeconds ≤ 5, a
failurePolicy on every webhook, kube-system excluded, cert-manager CA injection, no API credentials), and they
agree with the server (paths, port, flags the CLI accepts, certificate names, the pinning rules' format)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_policy.cli import main
from karpenter_policy.webhook.context import load_pinning_documents
from karpenter_policy.webhook.handlers import (
    MUTATE_PODS,
    MUTATE_PROVISIONERS,
    VALIDATE_EC2NODECLASSES,
    VALIDATE_NODEPOOLS,
    VALIDATE_PROVISIONERS,
)
from karpenter_policy.webhook.pinning import PolicyPinner

from .support import ROOT

DEPLOY = ROOT / "deploy" / "webhook"


def objects() -> Iterator[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        yield from (o for o in yaml.safe_load_all((DEPLOY / resource).read_text()) if o)


def one(kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects() if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def test_every_file_is_listed_and_parses() -> None:
    listed = set(yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"])
    assert listed == {p.name for p in DEPLOY.glob("*.yaml")} - {"kustomization.yaml"}
    assert all(o.get("apiVersion") and o.get("kind") and o["metadata"].get("name") for o in objects())


def webhooks() -> list[tuple[str, dict[str, Any]]]:
    return [
        (kind, hook)
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in one(kind)["webhooks"]
    ]


def test_webhook_configurations() -> None:
    service = one("Service", "karpenter-policy-webhook")
    paths = {}
    for kind, hook in webhooks():
        assert hook["sideEffects"] == "None"
        assert hook["timeoutSeconds"] <= 5
        assert hook["failurePolicy"] in ("Fail", "Ignore")
        assert hook["admissionReviewVersions"] == ["v1"]
        expression = hook["namespaceSelector"]["matchExpressions"][0]
        assert expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn"
        assert "kube-system" in expression["values"]
        client = hook["clientConfig"]["service"]
        assert (client["name"], client["namespace"], client["port"]) == (
            "karpenter-policy-webhook",
            "karpenter-policy",
            443,
        )
        paths[client["path"]] = (kind, hook)
    assert set(paths) == {
        MUTATE_PROVISIONERS, VALIDATE_PROVISIONERS, MUTATE_PODS, VALIDATE_NODEPOOLS, VALIDATE_EC2NODECLASSES
    }
    for path, resource in ((VALIDATE_NODEPOOLS, "nodepools"), (VALIDATE_EC2NODECLASSES, "ec2nodeclasses")):
        kind, hook = paths[path]
        assert kind == "ValidatingWebhookConfiguration" and hook["failurePolicy"] == "Fail"
        assert [(r["resources"], r["apiVersions"]) for r in hook["rules"]] == [([resource], ["v1"])]
    assert paths[MUTATE_PROVISIONERS][1]["failurePolicy"] == "Fail"
    assert paths[VALIDATE_PROVISIONERS][1]["failurePolicy"] == "Fail"
    assert paths[MUTATE_PODS][1]["failurePolicy"] == "Ignore"
    assert "karpenter-policy" in paths[MUTATE_PODS][1]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert paths[MUTATE_PROVISIONERS][1]["reinvocationPolicy"] == "IfNeeded"
    assert paths[VALIDATE_PROVISIONERS][0] == "ValidatingWebhookConfiguration"
    assert service["spec"]["ports"][0]["port"] == 443


def test_ca_injection_and_certificate() -> None:
    certificate = one("Certificate", "karpenter-policy-webhook")
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotation = one(kind)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert annotation == f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    assert "karpenter-policy-webhook.karpenter-policy.svc" in certificate["spec"]["dnsNames"]
    issuer = one("Issuer", certificate["spec"]["issuerRef"]["name"])
    ca = one("Certificate", "karpenter-policy-webhook-ca")
    assert issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"] and ca["spec"]["isCA"] is True
    volumes = {v["name"]: v for v in one("Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == certificate["spec"]["secretName"]


def test_deployment() -> None:
    deployment = one("Deployment", "karpenter-policy-webhook")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert one("ServiceAccount", pod["serviceAccountName"])["automountServiceAccountToken"] is False
    assert not [o for o in objects() if o["kind"] in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["ports"][0]["containerPort"] == 8443 and "--port=8443" in container["args"]
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz"), ("startupProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    context = main.commands["webhook"].make_context("webhook", list(container["args"]))  # the CLI accepts the flags
    assert context.params["constraints"] == "/constraints" and context.params["pinning"] == ("/pinning",)
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/tls", "/constraints", "/pinning"} <= mounts
    budget = one("PodDisruptionBudget")
    assert budget["spec"]["minAvailable"] == 1


def test_the_pinning_configmap_holds_valid_rules(tmp_path: Path) -> None:
    configmap = one("ConfigMap", "karpenter-policy-pinning")
    for name, text in configmap["data"].items():
        (tmp_path / name).write_text(text)
    documents = load_pinning_documents([str(tmp_path)])
    assert len(PolicyPinner.from_documents(documents, {})) == 2
    example = yaml.safe_load((ROOT / "examples/pinning/policies/spark-pinning.yaml").read_text())
    shipped = yaml.safe_load(next(iter(configmap["data"].values())))
    strip = [{k: v for k, v in rule.items() if k != "description"} for rule in example["spec"]["rules"]]
    assert shipped["spec"]["rules"] == strip


@pytest.mark.parametrize("file", ["Dockerfile"])
def test_the_image_runs_the_webhook(file: str) -> None:
    text = (DEPLOY / file).read_text()
    assert 'ENTRYPOINT ["karpenter-policy", "webhook"]' in text and "USER 65532" in text


def _rendered_images(kubectl: str, directory: Path) -> set[str]:
    import subprocess

    built = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120,
                           check=False)
    assert built.returncode == 0, built.stderr
    return {c["image"] for o in yaml.safe_load_all(built.stdout) if o and o["kind"] == "Deployment"
            for c in o["spec"]["template"]["spec"]["containers"]}


def test_the_image_is_the_one_the_kustomization_names(kubectl: str, tmp_path: Path) -> None:
    """No registry of someone else's: until users name theirs the image is not a valid reference (the kubelet
    refuses it rather than pulling anything), and the name they set is what runs."""
    import re
    import shutil

    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    (entry,) = kustomization["images"]
    (container,) = one("Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == entry["name"]
    # image references are lower case (the distribution spec); the placeholder is not one
    assert not re.fullmatch(r"[a-z0-9]+([._/-][a-z0-9]+)*", entry["newName"]), entry["newName"]
    assert _rendered_images(kubectl, DEPLOY) == {f"{entry['newName']}:{entry['newTag']}"}

    copy = tmp_path / "webhook"
    shutil.copytree(DEPLOY, copy)
    kustomization["images"] = [{**entry, "newName": "ghcr.io/acme/karpenter-policy"}]
    (copy / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    assert _rendered_images(kubectl, copy) == {f"ghcr.io/acme/karpenter-policy:{entry['newTag']}"}
