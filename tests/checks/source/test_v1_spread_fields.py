"""A topology spread constraint's Kubernetes ≥ 1.26 fields (`matchLabelKeys`, `nodeTaintsPolicy`,
`nodeAffinityPolicy`) read at the model edge: a value the API server would refuse is an `invalid-workload` finding at
the field's file:line:column, and a well-formed one is kept for the scheduler (`model/podtopology.py`)."""

from __future__ import annotations

from textwrap import dedent

import pytest

from karpenter_policy.checks.source.loader import parse
from karpenter_policy.checks.source.workloads import read_documents

DEPLOYMENT = dedent(
    """\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: web}}
    spec:
      template:
        metadata: {{labels: {{app: web, pod-template-hash: abc}}}}
        spec:
          containers: [{{name: app}}]
          topologySpreadConstraints:
            - topologyKey: topology.kubernetes.io/zone
              maxSkew: 1
              labelSelector: {{matchLabels: {{app: web}}}}
              {field}
    """
)

BAD = [
    ("nodeTaintsPolicy: honor", 13, "nodeTaintsPolicy must be Honor or Ignore, not 'honor'"),
    ("nodeAffinityPolicy: 3", 13, "nodeAffinityPolicy must be Honor or Ignore, not 3"),
    ("matchLabelKeys: pod-template-hash", 13, "matchLabelKeys must be a list of label keys"),
    ("matchLabelKeys: [pod-template-hash, pod-template-hash]", 13, "names 'pod-template-hash' twice"),
    ("matchLabelKeys: [app]", 13, "'app' is in both matchLabelKeys and labelSelector"),
    ("matchLabelKeys: [-bad-]", 13, "matchLabelKeys[0] must be a label key"),
]


@pytest.mark.parametrize(("field", "line", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_malformed_v1_spread_field_is_an_invalid_workload_finding(field: str, line: int, message: str) -> None:
    found = read_documents(parse("web.yaml", DEPLOYMENT.format(field=field)))
    [finding] = found.findings
    assert (finding.rule, finding.severity, finding.line) == ("invalid-workload", "error", line)
    assert message in finding.message
    assert found.workloads == []


def test_match_label_keys_without_a_label_selector_is_refused() -> None:
    text = DEPLOYMENT.format(field="matchLabelKeys: [pod-template-hash]").replace(
        "          labelSelector: {matchLabels: {app: web}}\n", ""
    )
    [finding] = read_documents(parse("web.yaml", text)).findings
    assert "matchLabelKeys must not be set when labelSelector is not set" in finding.message


def test_well_formed_fields_are_kept_as_written() -> None:
    indent = "\n          "
    fields = ("matchLabelKeys: [pod-template-hash]", "nodeTaintsPolicy: Honor", "nodeAffinityPolicy: Ignore")
    field = indent.join(fields)
    found = read_documents(parse("web.yaml", DEPLOYMENT.format(field=field)))
    assert found.findings == []
    [workload] = found.workloads
    [constraint] = workload.shape.topology.spread
    assert constraint.match_label_keys == ("pod-template-hash",)
    assert (constraint.node_taints_policy, constraint.node_affinity_policy) == ("Honor", "Ignore")
