"""Rendering deploy/helm/karpenter-policy with Helm's own engine (helm-python-sdk: Helm's Go SDK behind a C ABI; no
helm binary is on the package registries), for the chart's tests."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from .support import ROOT

helm_chart = pytest.importorskip("helm_python.chart", reason="helm-python-sdk (Helm's Go SDK) is not installed")

#: libyaml's safe loader where PyYAML has it (the chart's tests parse thousands of renders)
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CHART = ROOT / "deploy" / "helm" / "karpenter-policy"
NAMESPACE = "karpenter-policy"
#: The values a release needs (the chart stops without them).
REQUIRED: dict[str, Any] = {
    "cluster": {"name": "blue", "kubernetesVersion": "1.29", "apiServerEndpoint": "https://x.eks.amazonaws.com"},
    "image": {"repository": "ghcr.io/acme/karpenter-policy"},
}


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            out[key] = merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) \
                else value
    return out


@functools.cache
def _chart() -> Any:
    return helm_chart.Chart.load(str(CHART))


def render_files(values: Mapping[str, Any]) -> dict[str, str]:
    """Each template's output (NOTES.txt included), as `helm install` renders it."""
    chart = _chart()
    rendered: dict[str, str] = chart.render(dict(values), name="kp", namespace=NAMESPACE, is_install=True)
    return rendered


def render(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The manifests, parsed."""
    manifests = render_files(values)
    documents: list[dict[str, Any]] = []
    for path in sorted(manifests):
        if path.endswith(".yaml"):
            documents.extend(doc for doc in yaml.load_all(manifests[path], Loader=_LOADER) if doc)
    return documents


def notes(values: Mapping[str, Any]) -> str:
    return render_files(values)[f"{CHART.name}/templates/NOTES.txt"]


def of_kind(documents: list[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    return (doc for doc in documents if doc["kind"] == kind)


def deployments(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The Deployments by component (controller, webhook)."""
    return {d["metadata"]["labels"]["app.kubernetes.io/component"]: d for d in of_kind(documents, "Deployment")}


def pod_spec(documents: list[dict[str, Any]], component: str) -> dict[str, Any]:
    spec: dict[str, Any] = deployments(documents)[component]["spec"]["template"]["spec"]
    return spec
