"""The rules of reading a file: YAML, templates, the schema of each kind (none can be silenced: nothing
else can be checked of what cannot be read).

One declaration per rule (`rule.Rule`); `index.py` collects them.
"""

from __future__ import annotations

from karpenter_policy.api.rules.rule import ERROR, Rule

PARSE_ERROR = Rule(
    id="parse-error",
    severity=ERROR,
    summary="The file cannot be read as YAML.",
    description=(
        "The file cannot be read as Kubernetes YAML: it is not UTF-8 text, is larger than 4 MiB or binary, has a "
        "YAML syntax error (tabs in indentation, an unclosed quote or bracket, a duplicate key, a custom tag), or "
        "its aliases expand beyond 200,000 nodes. Nothing in the file is checked. It cannot be silenced."
    ),
    silenceable=False,
)


TEMPLATE_ERROR = Rule(
    id="template-error",
    severity=ERROR,
    summary="A Jinja2 template cannot be rendered.",
    description=(
        "A Jinja2 template (*.yaml.j2) cannot be rendered with the values given: an undefined variable, a syntax "
        "error, or a template that runs too long or builds too much. It cannot be silenced."
    ),
    silenceable=False,
)


SCHEMA = Rule(
    id="schema",
    severity=ERROR,
    summary=(
        "The object does not match its kind's schema (Provisioner / AWSNodeTemplate, a Karpenter v1 CRD), or is "
        "of a Karpenter version the tool does not check."
    ),
    description=(
        "The object does not match the JSON Schema of its kind (the v0.31 CRDs of Provisioner and AWSNodeTemplate, "
        "the OpenAPI schema of Karpenter v1.14.1's NodePool, NodeClaim and EC2NodeClass CRDs, or the PinningPolicy "
        "schema): an unknown field (with the nearest valid name), a wrong type, a missing required field, a value "
        "out of range, or a manifest without apiVersion/kind. Karpenter's API server would refuse it. An object of "
        "a Karpenter group in a version or kind the tool does not check (karpenter.sh/v1beta1, a misspelt kind) is "
        "this error too, naming what is checked. It cannot be silenced: the other checks need a well-formed object."
    ),
    karpenter=(
        "core pkg/apis/crds/karpenter.sh_provisioners.yaml; aws pkg/apis/crds/karpenter.k8s.aws_awsnodetemplates.yaml; "
        "core-v1 pkg/apis/crds/karpenter.sh_nodepools.yaml; core-v1 pkg/apis/crds/karpenter.sh_nodeclaims.yaml; "
        "aws-v1 pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml"
    ),
    silenceable=False,
)


RULES = (PARSE_ERROR, TEMPLATE_ERROR, SCHEMA)
