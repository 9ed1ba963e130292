"""Hostile values cannot change what the chart deploys: every string value of values.schema.json — each property,
array item, map value and map key, found by walking the schema — is set in turn to strings carrying a newline and
indentation that would add `hostPID: true`/`hostNetwork: true` to a pod spec, a document separator, YAML
indicators and Helm template syntax. Each time the schema refuses it (naming the key), the chart stops with its own
message, or it renders and

- the same objects come out (no document injected), every pod spec and container has no other fields than with
  plain values, no pod shares a host namespace, no container is privileged, security contexts and volumes are
  unchanged;
- the value appears only as the whole of one string (it was quoted, never evaluated as a template).

The values schema refuses the issue's example outright: controller.priorityClassName with a newline.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from profiles import fast_first

from .chart import CHART, REQUIRED, merged, render

KEY, VALUE = "<key>", "<value>"  # a map's key, a map's value, in a path
Path = tuple[str | int, ...]

INJECTION = "\n      hostPID: true\n      hostNetwork: true\n---\nkind: Pod\n{{ .Release.Name }}: '\"&*!|>%@`#- [{ ,"
#: Each also gets past a prefix a pattern may ask for (a flag, a URL); the last one on one line (patterns refuse
#: newlines in most values), where unquoted it would be a mapping, a comment, an alias, a flow sequence...
HOSTILE = ["x" + INJECTION, "--flag=x" + INJECTION, "https://x" + INJECTION,
           "--flag=x: y {{ .Release.Name }} '\"&*!|>%@`- [{ , #hostPID: true"]
MARK = "hostPID: true"

#: Every optional string in use, with our own keys: the paths not under Karpenter's keys are set in this.
OURS: dict[str, Any] = merged(REQUIRED, {
    "nameOverride": "kp", "imagePullSecrets": [{"name": "regcred"}], "image": {"tag": "1.0.0"},
    "cluster": {"caBundle": "Y2E=", "dnsClusterIP": "10.0.0.10", "region": "eu-west-1"},
    "controller": {
        "serviceAccount": {"name": "kp-controller", "roleArn": "arn:aws:iam::123456789012:role/kp",
                           "annotations": {"example.com/a": "b"}},
        "defaultInstanceProfile": "kp", "interruptionQueue": "kp", "extraArgs": ["--log-format=json"],
        "env": [{"name": "A", "value": "b"}], "podAnnotations": {"example.com/a": "b"},
        "podLabels": {"example.com/a": "b"}, "nodeSelector": {"example.com/a": "b"},
        "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}},
    },
    "webhook": {
        "extraArgs": ["--log-format=json"], "env": [{"name": "A", "value": "b"}],
        "podAnnotations": {"example.com/a": "b"}, "podLabels": {"example.com/a": "b"},
        "nodeSelector": {"example.com/a": "b"}, "resources": {"requests": {"cpu": "1"}},
        "reloadOnConfigMapChange": True, "pinning": {"rules": {"spark.yaml": "kind: PinningPolicy\n"}},
        "certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "ca", "group": "cert-manager.io"}},
    },
})
for _component in ("controller", "webhook"):
    OURS[_component]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                      "whenUnsatisfiable": "DoNotSchedule",
                                                      "matchLabelKeys": ["pod-template-hash"]}]
#: Webhook TLS from a Secret of the user's instead of cert-manager: the paths under webhook.tls.
OWN_TLS = merged(OURS, {"webhook": {"certManager": {"enabled": False},
                                    "tls": {"secretName": "kp-tls", "caBundle": "Y2E="}}})
#: Karpenter's keys, all given: the paths under them.
KARPENTER: dict[str, Any] = merged(REQUIRED, {
    "replicas": 2, "priorityClassName": "critical", "dnsPolicy": "Default",
    "podDisruptionBudget": {"name": "kp", "maxUnavailable": 1},
    "serviceAccount": {"create": True, "name": "kp", "annotations": {"example.com/a": "b"}},
    "tolerations": [{"key": "a", "operator": "Equal", "value": "b", "effect": "NoSchedule"}],
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                   "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": ["pod-template-hash"]}],
    "settings": {"clusterName": "blue", "clusterEndpoint": "https://x.eks.amazonaws.com", "interruptionQueue": "q",
                 "batchMaxDuration": "10s", "batchIdleDuration": "1s",
                 "aws": {"clusterName": "blue", "clusterEndpoint": "https://x.eks.amazonaws.com",
                         "clusterCABundle": "Y2E=", "interruptionQueueName": "q", "defaultInstanceProfile": "kp"}},
})
KARPENTER_KEYS = {"replicas", "priorityClassName", "dnsPolicy", "podDisruptionBudget", "serviceAccount",
                  "tolerations", "topologySpreadConstraints", "settings"}
#: Paths whose value no template renders with these bases, and why.
NOT_RENDERED = {
    ("serviceMonitor", "interval"): "ServiceMonitors render only where the cluster serves their API",
    ("serviceMonitor", "scrapeTimeout"): "ServiceMonitors render only where the cluster serves their API",
    ("serviceMonitor", "labels", KEY): "ServiceMonitors render only where the cluster serves their API",
    ("serviceMonitor", "labels", VALUE): "ServiceMonitors render only where the cluster serves their API",
    ("webhook", "pinning", "existingConfigMap"): "set in the test below: it replaces the chart's ConfigMap",
    ("constraints", "configMap", "namespace"): "refused by the schema before anything",
}


def schema() -> dict[str, Any]:
    loaded = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def _resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = root
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _is_string(node: dict[str, Any], root: dict[str, Any]) -> bool:
    if node.get("type") == "string" or any(isinstance(v, str) for v in node.get("enum", [])):
        return True
    return any(_is_string(_resolve(n, root), root) for n in (*node.get("anyOf", []), *node.get("oneOf", [])))


def string_paths(node: dict[str, Any], root: dict[str, Any], path: Path = ()) -> Iterator[Path]:
    node = _resolve(node, root)
    if _is_string(node, root):
        yield path
    for name, child in node.get("properties", {}).items():
        yield from string_paths(child, root, (*path, name))
    if isinstance(node.get("items"), dict):
        yield from string_paths(node["items"], root, (*path, 0))
    if "propertyNames" in node:
        yield (*path, KEY)
    if isinstance(node.get("additionalProperties"), dict):
        yield from string_paths(node["additionalProperties"], root, (*path, VALUE))


def with_value(base: dict[str, Any], path: Path, value: str) -> dict[str, Any]:
    """`base` with the string at `path` set to `value` (a list's first item, a map's only entry)."""
    values = copy.deepcopy(base)
    node: Any = values
    for position, step in enumerate(path[:-1]):
        following = path[position + 1]
        if step in (KEY, VALUE):
            raise AssertionError(f"a map key or value inside {path}")
        empty: Any = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            if not node:
                node.append(empty)
            node = node[0]
            continue
        if following in (KEY, VALUE):
            node[step] = {}  # a map of its own: the one entry below
        node = node.setdefault(step, empty)
    last = path[-1]
    if last == KEY:
        node[value] = "v"
    elif last == VALUE:
        node["hostile.yaml" if path[-2] == "rules" else "example.com/hostile"] = value
    elif isinstance(last, int):
        node[:] = [value]
    else:
        node[last] = value
    return values


def base_for(path: Path) -> dict[str, Any]:
    if path[0] in KARPENTER_KEYS:
        return KARPENTER
    if path[:2] == ("webhook", "tls"):
        return OWN_TLS
    return OURS


def pointer(path: Path) -> str:
    return "/" + "/".join(str(step) for step in path if step not in (KEY, VALUE))


def scalars(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from scalars(value)
    elif isinstance(node, list):
        for item in node:
            yield from scalars(item)
    else:
        yield str(node)


def keys(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield str(key)
            yield from keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from keys(item)


def pods(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["labels"]["app.kubernetes.io/component"]: d["spec"]["template"]["spec"]
            for d in documents if d["kind"] == "Deployment"}


def assert_unchanged_structure(documents: list[dict[str, Any]], plain: list[dict[str, Any]], hostile: str) -> None:
    assert sorted(d["kind"] for d in documents) == sorted(d["kind"] for d in plain), "an object was added"
    assert "hostPID" not in set(keys(documents)) and "hostNetwork" not in set(keys(documents))
    for component, spec in pods(documents).items():
        reference = pods(plain)[component]
        assert set(spec) <= set(reference), f"{component}: fields {set(spec) - set(reference)}"
        assert not spec.get("hostPID") and not spec.get("hostNetwork") and not spec.get("hostIPC")
        assert spec["securityContext"] == reference["securityContext"]
        assert spec["volumes"] == reference["volumes"]
        for container, before in zip(spec["containers"], reference["containers"], strict=True):
            assert set(container) <= set(before), f"{component}: container fields {set(container) - set(before)}"
            assert container["securityContext"] == before["securityContext"]
            assert container["volumeMounts"] == before["volumeMounts"]
    # the value is one string, whole: quoted, and never evaluated as a template
    for text in scalars(documents):
        if MARK in text:
            assert hostile in text, f"the value was split or changed: {text!r}"


PATHS = sorted({p for p in string_paths(schema(), schema())}, key=lambda p: tuple(map(str, p)))


def test_every_string_value_is_covered() -> None:
    """The walk finds the values this test is about (and so every string value the schema admits)."""
    names = {pointer(p) for p in PATHS}
    assert {"/controller/priorityClassName", "/webhook/priorityClassName", "/priorityClassName",
            "/controller/serviceAccount/annotations", "/settings/aws/clusterName", "/cluster/name",
            "/controller/extraArgs/0", "/tolerations/0/key", "/webhook/pinning/rules"} <= names
    assert len(PATHS) > 80


@pytest.mark.parametrize(
    "path",
    fast_first(PATHS, fast=3),
    ids=lambda p: "".join(f"[{s}]" if isinstance(s, int) else f".{s}" for s in p).lstrip("."),
)
def test_a_hostile_string_value_cannot_change_the_pods(path: Path) -> None:
    base = base_for(path)
    plain = render(base)
    rendered_somewhere = False
    for hostile in HOSTILE:
        values = with_value(base, path, hostile)
        try:
            documents = render(values)
        except Exception as error:  # noqa: BLE001 - Helm's errors: which one is checked below
            message = str(error)
            if "don't meet the specifications of the schema" in message:
                named = pointer(path) in message or (path[-1] == KEY and "invalid propertyName" in message)
                assert named, message
                continue
            assert "execution error at" in message, message  # the chart's own fail(), nothing else
            continue
        assert_unchanged_structure(documents, plain, hostile)
        rendered_somewhere |= any(MARK in text for text in scalars(documents))
    if path in NOT_RENDERED:
        assert not rendered_somewhere
    # else: refused everywhere, or rendered as a whole string: both are fine


def test_free_text_values_render_as_one_string() -> None:
    """Values the schema cannot restrict (annotations, env values, pinning rules; extra args on one line) reach
    the output, quoted: the walk above is not vacuous."""
    rendered = set()
    for path in PATHS:
        try:
            documents = render(with_value(base_for(path), path, HOSTILE[-1]))
        except Exception:  # noqa: BLE001, S112 - refused: not free text
            continue
        if any(MARK in text for text in scalars(documents)):
            rendered.add(pointer(path))
    assert {"/controller/podAnnotations", "/webhook/podAnnotations", "/controller/serviceAccount/annotations",
            "/serviceAccount/annotations", "/controller/extraArgs/0", "/webhook/extraArgs/0",
            "/controller/env/0/value", "/webhook/pinning/rules"} <= rendered


def test_the_existing_pinning_configmap_name_is_a_name() -> None:
    with pytest.raises(Exception, match="/webhook/pinning/existingConfigMap"):
        render(with_value(OURS, ("webhook", "pinning", "existingConfigMap"), HOSTILE[0]))


def test_the_issues_example_is_refused_by_the_schema() -> None:
    """controller.priorityClassName: "x\\n      hostPID: true\\n      hostNetwork: true" rendered host namespaces
    into the pods."""
    with pytest.raises(Exception, match="at '/controller/priorityClassName'"):
        render(merged(REQUIRED, {"controller": {"priorityClassName": "x\n      hostPID: true\n      hostNetwork: "
                                                                     "true"}}))
