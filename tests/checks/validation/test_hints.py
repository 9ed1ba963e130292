"""Issue #12 §2 through the real CLI: typo hints on label keys and values, every independent mistake in one run,
pods Karpenter refuses to provision for, and rules no stricter than Karpenter's webhook under its rule ids."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
from clirun import run_cli as run

ROOT = Path(__file__).resolve().parents[3]

TEMPLATE = """\
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
"""


def provisioner(name: str, body: str) -> str:
    head = f"---\napiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: {name}\nspec:\n"
    return head + body.strip("\n") + "\n  providerRef: {name: default}\n"


def findings(result: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert result.returncode in (0, 1), result.stderr
    found: list[dict[str, Any]] = json.loads(result.stdout)["findings"]
    return found


def at(found: list[dict[str, Any]], rule: str, line: int) -> dict[str, Any]:
    [finding] = [f for f in found if f["rule"] == rule and f["line"] == line]
    return finding


KEY_TYPOS = provisioner(
    "keys",
    """
  requirements:
    - key: karpenter.sh/instance-family
      operator: In
      values: [c5]
    - key: node.kubernetes.io/instance-generation
      operator: Gt
      values: ["4"]
    - key: topology.kubernetes.io/zona
      operator: In
      values: [us-east-1a]
    - key: example.com/zone
      operator: In
      values: [blue]
  labels:
    karpenter.k8s.aws/instance-familly: c5
    team: data
""",
)


def test_label_key_typos_in_a_provisioner(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(KEY_TYPOS + TEMPLATE)
    found = findings(run("validate", str(tmp_path / "p.yaml"), "--output", "json"))
    wrong_domain = at(found, "restricted-label", 8)  # Karpenter refuses it: the error stays, with its hint
    assert wrong_domain["severity"] == "error"
    assert wrong_domain["message"].endswith('(typo of "karpenter.k8s.aws/instance-family"?)')
    allowed = at(found, "unknown-label-key", 11)  # node.kubernetes.io is allowed: a warning with the key meant
    assert allowed["severity"] == "warning"
    assert allowed["message"].endswith("did you mean karpenter.k8s.aws/instance-generation?")
    assert at(found, "restricted-label", 14)["message"].endswith('(typo of "topology.kubernetes.io/zone"?)')
    assert at(found, "restricted-label", 21)["message"].endswith('(typo of "karpenter.k8s.aws/instance-family"?)')
    # a label of the user's own domain, or without a domain, is nobody's typo
    assert not [f for f in found if f["line"] in (17, 22)]


INDEPENDENT = provisioner(
    "ttl",
    """
  ttlSecondsAfterEmpty: 30
  consolidation:
    enabled: true
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: [c5]
    - key: kubernetes.io/arch
      operator: In
      values: [arm64]
""",
) + provisioner(
    "spot",
    """
  ttlSecondsAfterEmpty: 30
  consolidation:
    enabled: true
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: [spot]
""",
)

WORKLOAD = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector:
        karpenter.sh/capacity-type: spot
      containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


@pytest.mark.slow
def test_an_invalid_ttl_does_not_hide_the_requirements_or_the_workloads(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(INDEPENDENT + TEMPLATE)
    (tmp_path / "apps.yaml").write_text(WORKLOAD)
    result = run("check", str(tmp_path / "p.yaml"), "--workloads", str(tmp_path / "apps.yaml"), "--output", "json")
    assert result.returncode == 1
    found = findings(result)
    assert sorted((f["rule"], f["object"]) for f in found) == [
        ("invalid-spec", "Provisioner/spot"),
        ("invalid-spec", "Provisioner/ttl"),
        ("requirements-conflict", "Provisioner/ttl"),  # proven despite its TTL error
    ]
    data = json.loads(result.stdout)
    [web] = data["workloads"]
    assert (web["object"], web["provisioner"], web["schedulable"]) == ("Deployment/web", "spot", True)
    # compile still writes nothing: the errors stand
    compiled = run("compile", str(tmp_path / "p.yaml"), "-o", str(tmp_path / "out"))
    assert compiled.returncode == 1 and not (tmp_path / "out").exists()


def test_an_invalid_inline_provider_does_not_hide_a_conflict(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        dedent(
            """\
            apiVersion: karpenter.sh/v1alpha5
            kind: Provisioner
            metadata:
              name: inline
            spec:
              requirements:
                - key: karpenter.k8s.aws/instance-family
                  operator: In
                  values: [c5]
                - key: kubernetes.io/arch
                  operator: In
                  values: [arm64]
              provider:
                launchTemplate: my-template
                amiFamily: Bottlerocket
                subnetSelector: {karpenter.sh/discovery: demo}
            """
        )
    )
    found = findings(run("check", str(tmp_path / "p.yaml"), "--output", "json"))
    rules = sorted({f["rule"] for f in found})
    assert rules == ["deprecated-provider", "invalid-spec", "requirements-conflict"]


VALUE_TYPOS = provisioner(
    "values",
    """
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: [ondemand, spot]
    - key: kubernetes.io/arch
      operator: In
      values: [amd, amd64]
    - key: karpenter.k8s.aws/instance-category
      operator: In
      values: [c, m, rr]
    - key: karpenter.k8s.aws/instance-gpu-manufacturer
      operator: NotIn
      values: [nvidai]
    - key: kubernetes.io/os
      operator: In
      values: [linux, windows]
""",
) + provisioner(
    "dead",
    """
  requirements:
    - key: karpenter.k8s.aws/instance-hypervisor
      operator: In
      values: [nitr]
""",
)


def test_label_value_typos_are_warnings_with_the_nearest_value_even_when_other_values_work(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(VALUE_TYPOS + TEMPLATE)
    result = run("check", str(tmp_path / "p.yaml"), "--output", "json")
    found = findings(result)
    capacity = at(found, "unknown-label-value", 10)
    assert capacity["severity"] == "warning"
    assert capacity["message"].startswith("karpenter.sh/capacity-type ondemand: no offering in us-east-1 has")
    assert "did you mean on-demand?" in capacity["message"]
    assert "did you mean amd64?" in at(found, "unknown-label-value", 13)["message"]
    assert "did you mean r?" in at(found, "unknown-label-value", 16)["message"]
    gpu = at(found, "unknown-label-value", 19)["message"]
    assert "did you mean nvidia?" in gpu and gpu.endswith("This NotIn excludes nothing.")
    assert not [f for f in found if f["line"] == 22]  # windows is no typo, even on a Linux node template
    # the provisioner still works: only the typo is dead weight
    provisioners = {p["object"]: p for p in json.loads(result.stdout)["provisioners"]}
    assert provisioners["Provisioner/values"]["verdict"] == "sat"
    # nothing can launch: one error, with the hint and the domain (the bare-metal hypervisor shown as "")
    dead = at(found, "no-instance-type", 31)
    assert 'one of "", nitro or xen; did you mean nitro?' in dead["message"]
    assert [f["rule"] for f in found if f["object"] == "Provisioner/dead"] == ["no-instance-type"]


DEFAULT = provisioner(
    "default",
    """
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: [spot, on-demand]
""",
)


def deployment(name: str, spec: str) -> str:
    head = dedent(
        f"""\
        ---
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: {name}
        spec:
          selector: {{matchLabels: {{app: {name}}}}}
          template:
            metadata: {{labels: {{app: {name}}}}}
            spec:
        """
    )
    body = "".join(f"      {line}\n" for line in dedent(spec).strip("\n").splitlines())
    return head + body + "      containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]\n"


REFUSED = (
    deployment(
        "match-fields",  # line 2
        """
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchFields:
                    - {key: metadata.name, operator: In, values: [node-1]}
        """,
    )
    + deployment(
        "hostname-preference",  # line 20
        """
        affinity:
          nodeAffinity:
            preferredDuringSchedulingIgnoredDuringExecution:
              - weight: 1
                preference:
                  matchExpressions:
                    - {key: kubernetes.io/hostname, operator: In, values: [ip-10-0-0-1]}
        """,
    )
    + deployment(
        "not-on-karpenter",  # line 39
        """
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchExpressions:
                    - {key: karpenter.sh/provisioner-name, operator: DoesNotExist}
        """,
    )
    + deployment(
        "hostname-selector",  # line 57: the nodeSelector is not validated by Karpenter v0.31
        """
        nodeSelector:
          kubernetes.io/hostname: ip-10-0-0-1
        """,
    )
)


def test_pods_karpenter_refuses_are_refused_with_its_reason(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(DEFAULT + TEMPLATE)
    (tmp_path / "apps.yaml").write_text(REFUSED)
    result = run("check", str(tmp_path / "p.yaml"), "--workloads", str(tmp_path / "apps.yaml"), "--output", "json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    verdicts = {w["object"]: w for w in data["workloads"]}
    refused = "Karpenter ignores the pod and never provisions a node for it: "
    messages = {f["object"]: f["message"] for f in data["findings"] if f["rule"] == "workload-unschedulable"}
    match_fields = messages["Deployment/match-fields"]
    assert match_fields == refused + "a required node selector term with matchFields is not supported"
    assert messages["Deployment/hostname-preference"].startswith(
        refused + "a preferred node affinity term: label kubernetes.io/hostname is restricted"
    )
    assert messages["Deployment/not-on-karpenter"] == refused + (
        "configured to not run on a Karpenter provisioned node via karpenter.sh/provisioner-name DoesNotExist "
        "requirement"
    )
    for name in ("match-fields", "hostname-preference", "not-on-karpenter"):
        assert verdicts[f"Deployment/{name}"]["schedulable"] is False
        assert verdicts[f"Deployment/{name}"]["refused"]
    # the preference is not relaxed away, and the capacity plan places none of them
    assert verdicts["Deployment/hostname-preference"]["relaxed"] == []
    assert data["capacity"]["unscheduled"] == {
        "Deployment/hostname-preference": 1, "Deployment/hostname-selector": 1,
        "Deployment/match-fields": 1, "Deployment/not-on-karpenter": 1,
    }
    # a nodeSelector on the hostname is let through Karpenter's validation: no node it launches has that name
    assert messages["Deployment/hostname-selector"].startswith("no provisioner can launch a node for it")


def test_pods_pick_a_node_pool_by_its_label_and_may_refuse_karpenter_by_it(tmp_path: Path) -> None:
    """`karpenter.sh/nodepool` in a pod's node affinity is how a v1 pod picks a NodePool (well-known in Karpenter
    v1.14.1): placed on that NodePool, never refused as a restricted label; `nodepool DoesNotExist` is v1's way
    to keep off Karpenter's nodes, refused with its words (provisioner.go `validateKarpenterManagedLabelCanExist`)."""
    picks = deployment(
        "batch-only",
        """
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchExpressions:
                    - {key: karpenter.sh/nodepool, operator: In, values: [batch]}
        tolerations:
          - {key: example.com/batch, operator: Exists, effect: NoSchedule}
        """,
    )
    avoids = deployment(
        "not-on-karpenter",
        """
        affinity:
          nodeAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              nodeSelectorTerms:
                - matchExpressions:
                    - {key: karpenter.sh/nodepool, operator: DoesNotExist}
        """,
    )
    (tmp_path / "apps.yaml").write_text(picks + avoids)
    policies = ROOT / "examples" / "v1" / "mixed" / "policies"
    result = run("check", str(policies), "--workloads", str(tmp_path / "apps.yaml"), "--output", "json")
    data = json.loads(result.stdout)
    verdicts = {w["object"]: w for w in data["workloads"]}
    assert verdicts["Deployment/batch-only"]["schedulable"] is True
    assert {n["provisioner"] for n in data["capacity"]["nodes"]} == {"NodePool/batch"}
    messages = {f["object"]: f["message"] for f in data["findings"] if f["rule"] == "workload-unschedulable"}
    assert messages == {
        "Deployment/not-on-karpenter": "Karpenter ignores the pod and never provisions a node for it: configured to "
        "not run on a Karpenter provisioned node via karpenter.sh/nodepool DoesNotExist requirement"
    }


WORKLOAD_TYPOS = deployment(
    "typos",
    """
    nodeSelector:
      karpenter.sh/capacity-type: ondemand
      node.kubernetes.io/instance-generation: "5"
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
            - matchExpressions:
                - {key: kubernetes.io/arch, operator: In, values: [amd, amd64]}
                - {key: node.kubernetes.io/instance-type, operator: NotIn, values: [m5.lage]}
        preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 1
            preference:
              matchExpressions:
                - {key: topology.kubernetes.io/zone, operator: In, values: [us-east1a]}
    """,
) + deployment(
    "zone",
    """
    nodeSelector:
      topology.kubernetes.io/zona: us-east-1a
    """,
)


def test_workload_label_typos_get_hints(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(DEFAULT + TEMPLATE)
    (tmp_path / "apps.yaml").write_text(WORKLOAD_TYPOS)
    result = run("check", str(tmp_path / "p.yaml"), "--workloads", str(tmp_path / "apps.yaml"), "--output", "json")
    found = findings(result)
    assert at(found, "unknown-label-value", 12)["message"].endswith("did you mean on-demand?")
    generation = at(found, "unknown-label-key", 13)["message"]
    assert generation.endswith("did you mean karpenter.k8s.aws/instance-generation?")
    assert "did you mean amd64?" in at(found, "unknown-label-value", 19)["message"]
    instance_type = at(found, "unknown-label-value", 20)["message"]
    assert instance_type.endswith("did you mean m5.large? This NotIn excludes nothing.")
    assert "did you mean us-east-1a?" in at(found, "unknown-label-value", 25)["message"]
    assert all(f["severity"] == "warning" for f in found if f["rule"].startswith("unknown-label"))
    # Karpenter's own hint on the reason: the provisioner defines no such label
    [zone] = [f for f in found if f["rule"] == "workload-unschedulable" and f["object"] == "Deployment/zone"]
    assert 'label topology.kubernetes.io/zona does not have known values (typo of "topology.kubernetes.io/zone"?)' in (
        zone["message"]
    )
    assert at(found, "unknown-label-key", 38)["object"] == "Deployment/zone"


def test_an_id_karpenter_admits_is_a_warning_of_its_own_rule_not_invalid_spec(tmp_path: Path) -> None:
    (tmp_path / "t.yaml").write_text(
        TEMPLATE.replace("subnetSelector: {karpenter.sh/discovery: demo}", "subnetSelector: {aws-ids: my-subnet-a}")
        .replace("securityGroupSelector: {karpenter.sh/discovery: demo}", "securityGroupSelector: {aws-ids: web}")
    )
    result = run("validate", str(tmp_path / "t.yaml"), "--output", "json")
    assert result.returncode == 1  # `web` has no sg- at all: Karpenter's webhook refuses it
    found = findings(result)
    assert [(f["rule"], f["severity"], f["line"]) for f in found] == [
        ("aws-id-shape", "warning", 7),
        ("invalid-spec", "error", 8),
    ]
    assert "'my-subnet-a' does not have EC2's shape (subnet- and 8 or 17 hexadecimal digits)" in found[0]["message"]


def test_a_stray_field_does_not_hide_a_conflict_but_a_misspelt_requirements_does(tmp_path: Path) -> None:
    stray = INDEPENDENT.replace("ttlSecondsAfterEmpty", "ttlSecondAfterEmpty")
    misspelt = provisioner(
        "misspelt",
        """
  requirement:
    - key: kubernetes.io/arch
      operator: In
      values: [arm64]
""",
    )
    (tmp_path / "p.yaml").write_text(stray + misspelt + TEMPLATE)
    found = findings(run("check", str(tmp_path / "p.yaml"), "--output", "json"))
    assert sorted((f["rule"], f["object"]) for f in found) == [
        ("requirements-conflict", "Provisioner/ttl"),
        ("schema", "Provisioner/misspelt"),  # unknown field spec.requirement: nothing proven as if it were absent
        ("schema", "Provisioner/spot"),
        ("schema", "Provisioner/ttl"),
    ]


@pytest.mark.slow
def test_a_restricted_key_does_not_hide_the_value_typos_of_the_other_requirements(tmp_path: Path) -> None:
    """Three independent mistakes — a restricted key (a zone typo), a capacity-type typo, an invalid TTL pair —
    all in one run; `compile` still writes nothing."""
    body = provisioner(
        "three",
        """
  requirements:
    - key: karpenter.sh/capacity-type
      operator: In
      values: ["ondemand", "spot"]
    - key: topology.kubernetes.io/zona
      operator: In
      values: ["us-east-1a"]
  ttlSecondsAfterEmpty: 30
  consolidation: {enabled: true}
""",
    )
    (tmp_path / "p.yaml").write_text(TEMPLATE + body)
    found = findings(run("check", str(tmp_path / "p.yaml"), "--output", "json"))
    rules = sorted(f["rule"] for f in found if f["severity"] in ("error", "warning"))
    assert rules == ["invalid-spec", "restricted-label", "unknown-label-value"], found
    assert "did you mean on-demand?" in next(f["message"] for f in found if f["rule"] == "unknown-label-value")
    assert '(typo of "topology.kubernetes.io/zone"?)' in next(
        f["message"] for f in found if f["rule"] == "restricted-label")
    compiled = run("compile", str(tmp_path / "p.yaml"), "-o", str(tmp_path / "out"))
    assert compiled.returncode == 1 and not (tmp_path / "out").exists()


def test_a_node_affinity_expression_of_the_wrong_types_is_invalid_not_a_crash(tmp_path: Path) -> None:
    """Found by the fuzz tests: a key, operator or values that are not strings reached Karpenter's pod checks."""
    (tmp_path / "pod.yaml").write_text(dedent("""\
        apiVersion: v1
        kind: Pod
        metadata: {name: bad}
        spec:
          containers: [{name: a, image: x}]
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                  - matchExpressions:
                      - {key: example.com/x, operator: In, values: [1]}
        """))
    policies = ROOT / "examples" / "workloads" / "policies"
    result = run("check", str(policies), "--workloads", str(tmp_path / "pod.yaml"), "--output", "json")
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert [f["rule"] for f in findings(result) if f["severity"] == "error"] == ["workload-unschedulable"]
