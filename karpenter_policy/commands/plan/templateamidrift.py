"""AMI drift of Karpenter v0.31 nodes, from the EC2 and SSM answers the user saved (`ec2answers`).

Karpenter v0.31.1 (aws `pkg/cloudprovider/drift.go`, `isAMIDrifted`) drifts a node whose EC2 instance's `ImageId`
is not the AMI its AWSNodeTemplate maps to its instance type (`amifamily` `Get` then `MapToInstanceTypes`):

* a template with `launchTemplate` (v0.31's `launchTemplateName`): no AMI drift;
* with `amiSelector`: of the images it selects (`--images`, matched as DescribeImages filters them:
  `cloud/amiselection.py`), the newest of the type's architecture;
* without: its AMI family's default for the type — the value of the SSM parameter
  `cloud/amiselection.default_parameter` names (`--ssm-parameters`), for the cluster's Kubernetes version, which is
  the one the given parameters' names carry;
* an instance type Karpenter does not know, a selector that maps no image to the type, a template of `amiFamily:
  Custom` without a selector: Karpenter's check errors — no drift.

The node's instance is the one its `spec.providerID` names, its `ImageId` read from `--instances`. HEAD's template
decides (`amiSelector` is outside the template's hash: only this check sees a change of it). A node whose answer is
missing (no instance, no image list, no parameter) is not assessed and counted, with a note naming what to give —
the SSM parameter names included; without any of the three files AMI drift is not assessed at all, as before.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any, Final

from karpenter_policy.catalog import Catalog
from karpenter_policy.cloud.amiselection import default_parameter, image_for, newest_first, selector_matches
from karpenter_policy.commands.plan.drift import AMI_DRIFT, PolicySide
from karpenter_policy.commands.plan.ec2answers import Ec2Answers, kubernetes_version

__all__ = ["AMI_DRIFT", "DEFAULT_FAMILY", "TemplateAmiDrift", "kubernetes_version"]

#: v0.31's AMI family when a template names none.
DEFAULT_FAMILY: Final = "AL2"
#: Written where the note names a parameter and the Kubernetes version is not known.
VERSION_PLACEHOLDER: Final = "<kubernetes-version>"


class TemplateAmiDrift:
    """The module docstring's check for one HEAD and one set of answers; `redact`: reasons name no AMI id."""

    def __init__(self, head: PolicySide, answers: Ec2Answers, catalog: Catalog, instance_ids: Mapping[str, str],
                 *, redact: bool = False) -> None:
        self.head, self.answers, self.catalog, self.instance_ids = head, answers, catalog, instance_ids
        self.redact = redact
        self.version = kubernetes_version(answers.parameters or {})
        #: (template, what is missing) → nodes not assessed
        self.unassessed: Counter[tuple[str, str]] = Counter()
        #: template → SSM parameters its unassessed nodes need
        self.needed: defaultdict[str, set[str]] = defaultdict(set)

    def notes(self) -> list[str]:
        out = []
        for (template, why), count in sorted(self.unassessed.items()):
            nodes = f"{count} node{'s' if count != 1 else ''}"
            out.append(f"{nodes} of AWSNodeTemplate {template}: AMI drift not assessed: {why}")
        for template, names in sorted(self.needed.items()):
            out.append(f"AWSNodeTemplate {template}'s default AMIs: give `aws ssm get-parameters --names "
                       f"{' '.join(sorted(names))} --output json` as --ssm-parameters")
        return out

    def _image(self, node_name: str) -> str | None:
        instance = self.instance_ids.get(node_name)
        return (self.answers.image_of or {}).get(instance) if instance is not None else None

    def __call__(self, node_name: str, instance_type: str, template_name: str | None) -> str | None:
        """The AMIDrift reason of a node of a Provisioner referencing `template_name` (None: no drift to tell)."""
        template = self.head.node_templates.get(template_name) if template_name is not None else None
        if template_name is None or template is None or not self.answers.given:
            return None
        spec: Mapping[str, Any] = template.get("spec") or {}
        if spec.get("launchTemplate"):
            return None
        it = self.catalog.get(instance_type)
        if it is None:
            return None  # Karpenter: `finding node instance type` errors
        selector = spec.get("amiSelector")
        if selector:
            if self.answers.images is None:
                self.unassessed[(template_name, "its amiSelector needs --images (aws ec2 describe-images)")] += 1
                return None
            selected = newest_first(i for i in self.answers.images if selector_matches(selector, i))
            image = image_for(selected, it)
            if image is None:
                return None  # Karpenter: no AMI maps to the type, the check errors
            mapped, how = image.id, f"the newest image its amiSelector {dict(selector)} selects for {instance_type}"
        else:
            family = str(spec.get("amiFamily") or DEFAULT_FAMILY)
            parameter = default_parameter(family, self.version or VERSION_PLACEHOLDER, it)
            if parameter is None:
                return None  # Custom without a selector, or no image of the family for the type: Karpenter errors
            value = (self.answers.parameters or {}).get(parameter) if self.version else None
            if value is None:
                self.needed[template_name].add(parameter)
                self.unassessed[(template_name, f"its {family} default AMI needs its SSM parameter")] += 1
                return None
            mapped, how = value, f"the {family} default for {instance_type} (SSM {parameter})"
        running = self._image(node_name)
        if running is None:
            self.unassessed[(template_name, "its instance's ImageId is not in --instances (aws ec2 "
                             "describe-instances), found by the node's spec.providerID")] += 1
            return None
        if running == mapped:
            return None
        if self.redact:
            hidden = how.replace(mapped, "…")
            return f"{AMI_DRIFT}: its instance's AMI is not {hidden} (AWSNodeTemplate {template_name})"
        return f"{AMI_DRIFT}: its instance runs {running}, not {mapped}, {how} (AWSNodeTemplate {template_name})"
