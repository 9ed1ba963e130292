"""Which subnets and security groups a selector selects, as EC2's DescribeSubnets / DescribeSecurityGroups filters —
the pure part of the subnet and security-group providers, shared by the controller's discovery
(`cloud/aws/discovery.py`, which sends the filters to EC2) and `plan` (which applies them to what the user saved of
those calls), so no SDK here.

* **A v0.31 selector** (an AWSNodeTemplate's `subnetSelector` / `securityGroupSelector`): one conjunction,
  :func:`selector_filters` — ``aws-ids`` / ``aws::ids`` a comma-separated id list, any other key a tag: value ``*``
  the key only (`tag-key`), else its comma-separated values (`tag:<key>`). Karpenter v0.31.1 reads a template's
  selector the same way (aws `pkg/utils/nodeclass/nodeclass.go` `NewSubnetSelectorTerms`, then `getFilterSets` of
  `pkg/providers/subnet/subnet.go` and `pkg/providers/securitygroup/securitygroup.go`; an id list stands alone, as
  validation requires).
* **Karpenter v1.14.1's terms** (an EC2NodeClass's `subnetSelectorTerms` / `securityGroupSelectorTerms`;
  aws v1.14.1 `getFilterSets` of the same two files): one DescribeSubnets / DescribeSecurityGroups call per filter
  set, their answers united (terms OR'd, a term's tags AND'd), :func:`term_filter_sets` — every `id` term gathered
  into one `subnet-id` / `group-id` set, every security group `name` term into one `group-name` set, a tags term its
  own set (``*`` the key only, any other value one `tag:<key>` value, not split at commas).

:func:`filter_sets` is the one reading of both for the controller's launch settings (`api.v1.launchsettings`
carries an EC2NodeClass's terms as they are, an AWSNodeTemplate's selector as it is): the controller's discovery
(`cloud/aws/discovery.py`) asks EC2 exactly the sets `plan` applies to saved answers.

:func:`matches` is EC2's reading of a filter set against a described resource (every filter met, a filter met by any
of its values, values with EC2's ``*`` / ``?`` wildcards: `amiselection.any_matches`); :func:`select` the ids of the
resources any set matches; :func:`describe_command` the `aws` CLI call that saves the answer of a set.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from karpenter_policy.cloud.amiselection import ID_KEYS, any_matches

__all__ = [
    "GROUP_ID",
    "SUBNET_ID",
    "Described",
    "describe_command",
    "filter_sets",
    "matches",
    "select",
    "selection",
    "selector_filters",
    "term_filter_sets",
]

#: The id filters of DescribeSubnets and DescribeSecurityGroups.
SUBNET_ID: Final = "subnet-id"
GROUP_ID: Final = "group-id"
_COMMANDS: Final = {SUBNET_ID: "describe-subnets", GROUP_ID: "describe-security-groups"}
#: The launch settings' fields of each kind: an EC2NodeClass's terms, an AWSNodeTemplate's v0.31 selector.
_FIELDS: Final = {
    SUBNET_ID: ("subnetSelectorTerms", "subnetSelector"),
    GROUP_ID: ("securityGroupSelectorTerms", "securityGroupSelector"),
}


@dataclass(frozen=True, slots=True)
class Described:
    """A subnet or security group as its Describe* call answers: its id, name (a group's `GroupName`; "" for a
    subnet) and tags."""

    id: str
    name: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)


def _split(value: object) -> list[str]:
    return [part.strip() for part in str(value).split(",") if part.strip()]


def selector_filters(selector: Mapping[str, str], id_filter: str) -> list[dict[str, Any]]:
    """EC2 Describe* filters for a v0.31 selector (``id_filter`` is ``subnet-id`` or ``group-id``), sorted."""
    filters: list[dict[str, Any]] = []
    for key, value in sorted(selector.items()):
        if key in ID_KEYS:
            filters.append({"Name": id_filter, "Values": _split(value)})
        elif value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": _split(value)})
    return filters


def term_filter_sets(terms: Sequence[Mapping[str, Any]], id_filter: str) -> list[list[dict[str, Any]]]:
    """The filter sets of v1.14.1's `getFilterSets` for `subnetSelectorTerms` (``subnet-id``) or
    `securityGroupSelectorTerms` (``group-id``): the tags terms' in their order, then the ids', then the names'."""
    ids: list[str] = []
    names: list[str] = []
    out: list[list[dict[str, Any]]] = []
    for term in terms:
        if term.get("id"):
            ids.append(str(term["id"]))
        elif id_filter == GROUP_ID and term.get("name"):
            names.append(str(term["name"]))
        else:
            tags = term.get("tags")
            tags = tags if isinstance(tags, Mapping) else {}
            out.append([{"Name": "tag-key", "Values": [str(k)]} if v == "*" else
                        {"Name": f"tag:{k}", "Values": [str(v)]} for k, v in sorted(tags.items())])
    if ids:
        out.append([{"Name": id_filter, "Values": ids}])
    if names:
        out.append([{"Name": "group-name", "Values": names}])
    return out


def filter_sets(settings: Mapping[str, Any] | None, id_filter: str) -> list[list[dict[str, Any]]]:
    """The filter sets the controller's launch settings select subnets (``subnet-id``) or security groups
    (``group-id``) by: an EC2NodeClass's terms' (:func:`term_filter_sets`), an AWSNodeTemplate's selector's (one set,
    :func:`selector_filters`); neither: one set of no filter, which EC2 answers with every resource."""
    terms_field, selector_field = _FIELDS[id_filter]
    spec = settings or {}
    terms = spec.get(terms_field)
    if isinstance(terms, Sequence) and not isinstance(terms, str) and terms:
        return term_filter_sets(terms, id_filter)
    selector = spec.get(selector_field)
    if isinstance(selector, Mapping) and selector:
        return [selector_filters({str(k): str(v) for k, v in selector.items()}, id_filter)]
    return [[]]


def selection(settings: Mapping[str, Any] | None, id_filter: str) -> str:
    """What the launch settings select `id_filter`'s resources by, as a reason names it: ``subnetSelectorTerms
    [{…}, …]``, ``subnetSelector {…}``, or ``no subnetSelector`` (every resource)."""
    terms_field, selector_field = _FIELDS[id_filter]
    spec = settings or {}
    if spec.get(terms_field):
        return f"{terms_field} {[dict(term) for term in spec[terms_field]]}"
    if spec.get(selector_field):
        return f"{selector_field} {dict(spec[selector_field])}"
    return f"no {selector_field}"


def _met(name: str, values: Sequence[str], resource: Described, id_filter: str) -> bool:
    if name == id_filter:
        return any_matches(values, resource.id)
    if name == "group-name":
        return any_matches(values, resource.name)
    if name == "tag-key":
        return any(any_matches(values, key) for key in resource.tags)
    if name.startswith("tag:"):
        return any_matches(values, resource.tags.get(name[4:]))
    return False  # a filter this module never writes


def matches(filters: Sequence[Mapping[str, Any]], resource: Described, id_filter: str) -> bool:
    """Whether EC2 answers a Describe* call of `filters` with `resource` (every filter met)."""
    return all(_met(str(f["Name"]), [str(v) for v in f["Values"]], resource, id_filter) for f in filters)


def select(filter_sets: Iterable[Sequence[Mapping[str, Any]]], resources: Iterable[Described],
           id_filter: str) -> tuple[str, ...]:
    """The ids of the `resources` any of `filter_sets` matches, sorted (Karpenter unites the calls' answers by id;
    a set of no filter, as EC2 reads one, matches every resource)."""
    sets = list(filter_sets)
    return tuple(sorted({r.id for r in resources if any(matches(s, r, id_filter) for s in sets)}))


def describe_command(filters: Sequence[Mapping[str, Any]], id_filter: str) -> str:
    """The `aws ec2 describe-subnets|describe-security-groups --filters … --output json` call of one filter set."""
    parts = ["aws", "ec2", _COMMANDS[id_filter]]
    if filters:
        parts.append("--filters")
        parts += [shlex.quote(f"Name={f['Name']},Values={','.join(str(v) for v in f['Values'])}") for f in filters]
    return " ".join([*parts, "--output", "json"])
