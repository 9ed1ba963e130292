"""The chart in Karpenter's conventions: a Karpenter v0.31 values file (and v0.32's settings.*) works as it stands,
Karpenter's defaults where they matter, NOTES that say what is true, probes on the controller's health endpoints.

KARPENTER_VALUES is the part of a Karpenter v0.31.1 values file (charts/karpenter/values.yaml of
aws/karpenter-provider-aws at v0.31.1, keys and shapes as there) that users set for a cluster.
"""

from __future__ import annotations

from typing import Any

import pytest

from .chart import REQUIRED, deployments, merged, notes, of_kind, pod_spec, render

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is not installed")

ROLE = "arn:aws:iam::123456789012:role/karpenter-blue"
IMAGE = {"image": REQUIRED["image"], "cluster": {"kubernetesVersion": "1.29"}}
KARPENTER_VALUES: dict[str, Any] = {
    "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": ROLE}},
    "replicas": 3,
    "podDisruptionBudget": {"name": "karpenter-policy-controller", "maxUnavailable": 2},
    "priorityClassName": "platform-critical",
    "dnsPolicy": "ClusterFirst",
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}],
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "DoNotSchedule"}],
    "controller": {"resources": {"requests": {"cpu": 1, "memory": "1Gi"}, "limits": {"cpu": 1, "memory": "1Gi"}}},
    "settings": {
        "batchMaxDuration": "20s",
        "batchIdleDuration": "2s",
        "aws": {
            "clusterName": "blue",
            "clusterEndpoint": "https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
            "clusterCABundle": "Y2E=",
            "defaultInstanceProfile": "KarpenterNodeInstanceProfile-blue",
            "interruptionQueueName": "blue-karpenter",
        },
    },
}


def args(documents: list[dict[str, Any]], component: str = "controller") -> list[str]:
    container = pod_spec(documents, component)["containers"][0]
    arguments: list[str] = container["args"]
    return arguments


def test_a_karpenter_values_file_configures_the_controller() -> None:
    documents = render(merged(IMAGE, KARPENTER_VALUES))

    controller = args(documents)
    assert {"--cluster-name=blue", "--api-server-endpoint=https://ABCDEF.gr7.eu-west-1.eks.amazonaws.com",
            "--ca-bundle=Y2E=", "--default-instance-profile=KarpenterNodeInstanceProfile-blue",
            "--interruption-queue=blue-karpenter", "--batch-max-duration=20s", "--batch-idle-duration=2s",
            } <= set(controller)
    (account,) = (a for a in of_kind(documents, "ServiceAccount") if "controller" in a["metadata"]["name"])
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": ROLE}  # IRSA
    (deployment,) = (d for d in of_kind(documents, "Deployment") if "controller" in d["metadata"]["name"])
    assert deployment["spec"]["replicas"] == 3
    spec = pod_spec(documents, "controller")
    assert spec["containers"][0]["resources"] == KARPENTER_VALUES["controller"]["resources"]
    (budget,) = (b for b in of_kind(documents, "PodDisruptionBudget") if "controller" in str(b["spec"]["selector"]))
    assert budget["metadata"]["name"] == "karpenter-policy-controller"
    assert budget["spec"]["maxUnavailable"] == 2
    for document in documents:  # and it is all valid Kubernetes
        if document["apiVersion"].startswith(("cert-manager.io/", "monitoring.coreos.com/")):
            continue
        kubernetes_validate.validate(document, "1.29.0", strict=True)


@pytest.mark.parametrize("component", ["controller", "webhook"])
def test_karpenters_pod_keys_place_both_components(component: str) -> None:
    spec = pod_spec(render(merged(IMAGE, KARPENTER_VALUES)), component)

    assert spec["priorityClassName"] == "platform-critical"
    assert spec["dnsPolicy"] == "ClusterFirst"
    assert spec["tolerations"] == KARPENTER_VALUES["tolerations"]
    (spread,) = spec["topologySpreadConstraints"]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone" and spread["whenUnsatisfiable"] == "DoNotSchedule"
    # as in Karpenter's chart, a constraint without a labelSelector gets the component's pods
    assert spread["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == component


@pytest.mark.parametrize("component", ["controller", "webhook"])
@pytest.mark.parametrize("values", [REQUIRED, merged(IMAGE, KARPENTER_VALUES)], ids=["defaults", "karpenter-values"])
def test_two_replicas_never_share_a_node_whatever_spread_is_given(component: str, values: dict[str, Any]) -> None:
    """As Karpenter's chart: a required hostname anti-affinity on the component's own pods, kept when a Karpenter
    values file's zone-only topologySpreadConstraints replace the chart's spread (which once carried the hostname
    rule: a zone spread alone let both replicas land on one node)."""
    documents = render(values)
    spec = pod_spec(documents, component)
    pod_labels = deployments(documents)[component]["spec"]["template"]["metadata"]["labels"]
    (term,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    selector = term["labelSelector"]["matchLabels"]
    assert selector.items() <= pod_labels.items(), "it selects the component's own pods"
    assert selector["app.kubernetes.io/component"] == component, "and only them"
    assert spec["affinity"]["nodeAffinity"], "beside the node affinity"
    zones = [c for c in spec["topologySpreadConstraints"] if c["topologyKey"] == "topology.kubernetes.io/zone"]
    assert len(zones) == 1, "and a zone spread"


def test_a_users_own_anti_affinity_term_keeps_its_selector() -> None:
    own = {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"team": "platform"}}}
    values = merged(REQUIRED, {"controller": {"affinity": {"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [own],
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}],
    }}}})
    anti = pod_spec(render(values), "controller")["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"] == [own]
    (preferred,) = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"]["labelSelector"]["matchLabels"]["app.kubernetes.io/component"] == "controller"


@pytest.mark.parametrize(("values", "controller", "webhook"), [
    ({}, "info", "info"),
    ({"logLevel": "debug"}, "debug", "debug"),
    ({"logLevel": "debug", "controller": {"logLevel": "warn"}}, "warn", "debug"),
    ({"controller": {"logLevel": "error"}, "webhook": {"logLevel": "warn"}}, "error", "warn"),
], ids=["default", "karpenter-global", "component-wins", "ours"])
def test_the_log_level_is_passed_to_both_components(values: dict[str, Any], controller: str, webhook: str) -> None:
    """`controller.logLevel` and `webhook.logLevel` (ours, Karpenter's per-component keys), else Karpenter's global
    `logLevel`, else info; passed as `--log-level`."""
    documents = render(merged(REQUIRED, values))
    assert f"--log-level={controller}" in args(documents, "controller")
    assert f"--log-level={webhook}" in args(documents, "webhook")


def test_a_log_level_karpenter_does_not_have_is_refused() -> None:
    with pytest.raises(Exception, match="logLevel"):
        render(merged(REQUIRED, {"controller": {"logLevel": "verbose"}}))


def test_karpenter_v0_32_settings_keys_too() -> None:
    values = merged(IMAGE, {"settings": {"clusterName": "green", "clusterEndpoint": "https://green.example",
                                         "interruptionQueue": "green-karpenter"}})

    controller = args(render(values))

    assert {"--cluster-name=green", "--api-server-endpoint=https://green.example",
            "--interruption-queue=green-karpenter"} <= set(controller)


@pytest.mark.parametrize(("ours", "karpenters", "message"), [
    ({"cluster": {"name": "blue"}}, {"settings": {"aws": {"clusterName": "green"}}},
     'cluster.name is "blue" but settings.aws.clusterName is "green"'),
    ({"cluster": {"apiServerEndpoint": "https://a.example"}}, {"settings": {"clusterEndpoint": "https://b.example"}},
     'cluster.apiServerEndpoint is "https://a.example" but settings.clusterEndpoint is "https://b.example"'),
    ({"controller": {"interruptionQueue": "q1"}}, {"settings": {"aws": {"interruptionQueueName": "q2"}}},
     'controller.interruptionQueue is "q1" but settings.aws.interruptionQueueName is "q2"'),
], ids=["cluster-name", "endpoint", "interruption-queue"])
def test_a_karpenter_key_and_ours_that_disagree_stop_the_rendering(
    ours: dict[str, Any], karpenters: dict[str, Any], message: str
) -> None:
    with pytest.raises(Exception, match=message.replace(".", r"\.")):
        render(merged(REQUIRED, ours, karpenters))


def test_a_karpenter_key_and_ours_that_agree_are_fine() -> None:
    values = merged(REQUIRED, {"cluster": {"name": "blue"}, "settings": {"clusterName": "blue",
                                                                         "aws": {"clusterName": "blue"}}})
    assert "--cluster-name=blue" in args(render(values))


@pytest.mark.parametrize(("values", "key"), [
    ({"settings": {"aws": {"isolatedVPC": True}}}, "isolatedVPC"),
    ({"settings": {"featureGates": {"driftEnabled": True}}}, "featureGates"),
    ({"hostNetwork": True}, "hostNetwork"),
    ({"podDisruptionBudget": {"minAvailable": 1}}, "minAvailable"),
])
def test_karpenter_keys_without_an_equivalent_are_refused_by_name(values: dict[str, Any], key: str) -> None:
    with pytest.raises(Exception, match=rf"additional properties '{key}' not allowed"):
        render(merged(REQUIRED, values))


@pytest.mark.parametrize("component", ["controller", "webhook"])
def test_karpenters_defaults_where_they_matter(component: str) -> None:
    """dnsPolicy Default: the pods need no cluster DNS, and ClusterFirst deadlocks a cluster whose CoreDNS runs only
    on nodes the controller must launch; the CriticalAddonsOnly toleration; a priority class for both."""
    spec = pod_spec(render(REQUIRED), component)

    assert spec["dnsPolicy"] == "Default"
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in spec["tolerations"]
    assert spec["priorityClassName"] == "system-cluster-critical"


@pytest.mark.parametrize(("values", "says", "never"), [
    ({"serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": ROLE}}}, f"IRSA: the ServiceAccount "
     f"kp-karpenter-policy-controller assumes {ROLE}", "no IAM role"),
    ({"controller": {"serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": ROLE}}}}, f"assumes {ROLE}",
     "no IAM role"),
    ({"controller": {"serviceAccount": {"roleArn": ROLE}}}, f"assumes {ROLE}", "no IAM role"),
    ({"serviceAccount": {"create": False, "name": "karpenter"}}, "the ServiceAccount karpenter is yours",
     "no IAM role"),
    ({}, "no IAM role for the ServiceAccount", "IRSA:"),
], ids=["karpenter-annotation", "our-annotation", "role-arn", "existing-account", "none"])
def test_notes_say_whether_the_controller_has_an_iam_role(values: dict[str, Any], says: str, never: str) -> None:
    text = notes(merged(REQUIRED, values))

    assert says in text
    assert never not in text


def test_the_controller_probes_its_health_endpoints() -> None:
    """/healthz (process and informer threads alive) and /readyz (informers synced, constraint sets loaded) on the
    metrics port — the controller's endpoints of issue #17."""
    (container,) = pod_spec(render(REQUIRED), "controller")["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}

    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert f"--metrics-port={ports['http-metrics']}" in container["args"]
