"""Which AMI each instance type boots, asked of EC2 and SSM, with a five-minute cache of each call's answer.

* **An EC2NodeClass's `amiSelectorTerms`** (the launch settings carry them: `api.v1.launchsettings.ami_terms`): the
  calls Karpenter v1.14.1 makes (aws pkg/providers/amifamily/ami.go `DescribeImageQueries`, `amis`; types.go
  `DescribeImagesInput`) — an alias's SSM parameters (`amiselection.alias_parameters`) and one DescribeImages of the
  images they name; else a GetParameter per `ssmParameter` term, one DescribeImages of every `id` term and parameter
  value together, and one per name/owner/tags term (:func:`term_query`: owners ``self`` and ``amazon`` for a name
  without an owner, a tag value literal, ``*`` the key only) — every query also filtered to ``available`` images,
  deprecated ones included. What they answer is resolved by `amiselection.resolve_terms`, the reading `plan` applies
  to saved answers (a term's query answer taken as EC2 gave it, not filtered again): one image per requirement set
  (not deprecated first, then the newest, then the greater name), each type the first its requirements meet
  (`ami_for`). A parameter SSM says does not exist is skipped (v1.14.1 logs and continues); one SSM cannot answer now
  (throttled, 5xx) makes the answer unknown (:class:`CloudError`), where v1.14.1 skips an alias's — a deliberate
  difference: an AMI missing for a moment would read as drift (docs/cloud.md).
* **An AWSNodeTemplate's one ``amiSelector``** (v0.31.1's reading, its values split at commas:
  :func:`image_filters`), else its AMI family's default SSM parameter per type (`amiselection.default_parameter`);
  the newest image of a type's architecture (`amiselection.image_for`).

A type with no image cannot launch and is dropped by the caller.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpenter_policy.api.v1.objects import AMI_ALIAS_FAMILIES
from karpenter_policy.cloud.amiselection import (
    DEFAULT_NAME_OWNERS,
    ID_KEYS,
    NAME_KEY,
    OWNERS_KEY,
    Image,
    TermResolution,
    alias_parameters,
    ami_for,
    default_parameter,
    image_for,
    newest_first,
    resolve_terms,
    selector_values,
    term_text,
)
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.aws.cache import TtlCache
from karpenter_policy.cloud.errors import ConfigurationError, NotFound
from karpenter_policy.cloud.provider import Clock
from karpenter_policy.model.instancetypes import EC2_TO_KUBE_ARCHITECTURES, InstanceType

AMI_TTL = 300.0
DEFAULT_FAMILY = "AL2"


def image_filters(selector: Mapping[str, str]) -> dict[str, Any]:
    """DescribeImages arguments for an ``amiSelector``."""
    filters: list[dict[str, Any]] = []
    owners: list[str] = []
    for key, value in sorted(selector.items()):
        values = selector_values(value)
        if key in ID_KEYS:
            filters.append({"Name": "image-id", "Values": values})
        elif key == OWNERS_KEY:
            owners = values
        elif key == NAME_KEY:
            filters.append({"Name": "name", "Values": values})
        elif value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": values})
    if not owners and NAME_KEY in selector and not any(key in selector for key in ID_KEYS):
        owners = ["self", "amazon"]  # a name alone could match anyone's public image
    arguments: dict[str, Any] = {"Filters": filters}
    if owners:
        arguments["Owners"] = owners
    return arguments


def term_query(term: Mapping[str, Any]) -> dict[str, Any]:
    """The DescribeImages arguments of a name/owner/tags term, as v1.14.1's `DescribeImageQueries` builds them
    (before :func:`_available`): owners the term's ``owner``, else ``self`` and ``amazon`` when it has a name; one
    `name` filter; a tag value one literal value (``*``: a `tag-key` filter)."""
    owner, name = str(term.get("owner") or ""), str(term.get("name") or "")
    owners = [owner] if owner else (list(DEFAULT_NAME_OWNERS) if name else [])
    filters: list[dict[str, Any]] = [{"Name": "name", "Values": [name]}] if name else []
    tags = term.get("tags")
    for key, value in sorted((tags if isinstance(tags, Mapping) else {}).items()):
        filters.append({"Name": "tag-key", "Values": [str(key)]} if value == "*" else
                       {"Name": f"tag:{key}", "Values": [str(value)]})
    return {"Filters": filters, **({"Owners": owners} if owners else {})}


def ids_query(ids: Sequence[str]) -> dict[str, Any]:
    """The DescribeImages arguments of image ids (the id and ssmParameter terms', an alias's parameters' values)."""
    return {"Filters": [{"Name": "image-id", "Values": list(dict.fromkeys(ids))}]}


def _available(query: Mapping[str, Any]) -> dict[str, Any]:
    """v1.14.1's `DescribeImagesInput`: the query's filters and a `state` of ``available``, deprecated images
    included."""
    return {**query, "Filters": [*query["Filters"], {"Name": "state", "Values": ["available"]}],
            "IncludeDeprecated": True}


def _image(raw: Mapping[str, Any]) -> Image:
    """An :class:`Image` of a DescribeImages entry."""
    tags = {str(t.get("Key")): str(t.get("Value", "")) for t in raw.get("Tags") or [] if isinstance(t, Mapping)}
    return Image(
        str(raw["ImageId"]),
        EC2_TO_KUBE_ARCHITECTURES.get(str(raw.get("Architecture", "")), ""),
        str(raw.get("CreationDate", "")),
        str(raw.get("Name", "")),
        owner_id=str(raw.get("OwnerId") or ""),
        owner_alias=str(raw.get("ImageOwnerAlias") or ""),
        tags=tags,
        state=str(raw.get("State") or "available"),
        deprecation_time=str(raw.get("DeprecationTime") or ""),
    )


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class AmiResolver:
    """Resolves (and caches) images for instance types."""

    def __init__(self, api: AwsApi, clock: Clock, kubernetes_version: str, ttl: float = AMI_TTL,
                 wall_clock: Callable[[], dt.datetime] = _utc_now) -> None:
        self._api = api
        self._version = kubernetes_version
        self._wall_clock = wall_clock
        self._parameters: TtlCache[str | None] = TtlCache(clock, ttl)
        self._selected: TtlCache[tuple[Image, ...]] = TtlCache(clock, ttl)
        self._described: TtlCache[tuple[Image, ...]] = TtlCache(clock, ttl)

    def images(
        self, family: str | None, selectors: Sequence[Mapping[str, str]], instance_types: Sequence[InstanceType],
        terms: Sequence[Mapping[str, Any]] = (),
    ) -> dict[str, str]:
        """instance type name -> image id, for the types that have an image: of an EC2NodeClass's `terms`
        (:meth:`resolve`), else of the images the one selector matches, else the family's default.

        Raises :class:`ConfigurationError` when no type has one (naming what was looked up).
        """
        if terms:
            return self._of_terms(terms, instance_types)
        family = family or DEFAULT_FAMILY
        chosen: dict[str, str] = {}
        if selectors:
            (selector,) = selectors
            images = self.selected(selector)
            for it in instance_types:
                image = image_for(images, it)
                if image is not None:
                    chosen[it.name] = image.id
            if not chosen:
                raise ConfigurationError(
                    self._api.endpoint("ec2"),
                    f"amiSelector {dict(selector)} matches no image for the architectures "
                    f"{sorted({a for it in instance_types for a in it.architectures})}",
                    "DescribeImages",
                )
            return chosen
        if family == "Custom":
            raise ConfigurationError("AWSNodeTemplate", "amiFamily Custom needs an amiSelector", "resolve AMI")
        looked_up: set[str] = set()
        for it in instance_types:
            parameter = default_parameter(family, self._version, it)
            if parameter is None:
                continue
            looked_up.add(parameter)
            image_id = self._parameter(parameter)
            if image_id:
                chosen[it.name] = image_id
        if not chosen:
            what = ", ".join(sorted(looked_up)) or f"no {family} image exists for these instance types"
            raise ConfigurationError(
                self._api.endpoint("ssm"), f"no default {family} AMI found ({what})", "GetParameter"
            )
        return chosen

    def resolve(self, terms: Sequence[Mapping[str, Any]]) -> TermResolution:
        """What v1.14.1 resolves an EC2NodeClass's `amiSelectorTerms` to now (see the module docstring)."""
        return self._resolve(terms)[0]

    def _resolve(self, terms: Sequence[Mapping[str, Any]]) -> tuple[TermResolution, list[str]]:
        """:meth:`resolve`, and the SSM parameters SSM said do not exist."""
        now = int(self._wall_clock().timestamp())
        early = resolve_terms(terms, (), {}, (), self._version, now)
        if early.error:  # AL2 on 1.33+, Windows Server 2025 before 1.35: no call is made
            return early, []
        found: dict[str, str] = {}
        absent: list[str] = []

        def parameter(name: str) -> str | None:
            value = self._parameter(name)
            if value is None:
                absent.append(name)
            else:
                found[name] = value
            return value

        answered: dict[int, tuple[Image, ...]] = {}
        ids: list[str] = []
        alias = next((str(t["alias"]) for t in terms if t.get("alias")), None)
        if alias is not None:
            family, _, version = alias.partition("@")
            for wanted in alias_parameters(AMI_ALIAS_FAMILIES.get(family.lower(), family), self._version, version):
                value = parameter(wanted.name)
                if value is not None:
                    ids.append(value)
        else:
            for index, term in enumerate(terms):
                if term.get("id"):
                    ids.append(str(term["id"]))
                elif term.get("ssmParameter"):
                    value = parameter(str(term["ssmParameter"]))
                    if value is not None and value.startswith("ami-"):
                        ids.append(value)
                else:
                    answered[index] = self._described_by(term_query(term))
        described = self._described_by(ids_query(ids)) if ids else ()
        return resolve_terms(terms, described, found, absent, self._version, now, answered), absent

    def _of_terms(self, terms: Sequence[Mapping[str, Any]], instance_types: Sequence[InstanceType]) -> dict[str, str]:
        resolution, absent = self._resolve(terms)
        chosen = {it.name: ami.id for it in instance_types if (ami := ami_for(resolution.amis, it)) is not None}
        if chosen:
            return chosen
        what = "; ".join(term_text(term) for term in terms)
        why = resolution.error or (
            f"amiSelectorTerms [{what}] select no image for the architectures "
            f"{sorted({a for it in instance_types for a in it.architectures})}")
        if absent:
            why += f" (SSM parameters not found: {', '.join(sorted(set(absent)))})"
        raise ConfigurationError(self._api.endpoint("ec2"), why, "DescribeImages")

    def _described_by(self, query: Mapping[str, Any]) -> tuple[Image, ...]:
        """The images one DescribeImages query answers (:func:`_available`), cached per query."""
        def load() -> tuple[Image, ...]:
            try:
                found = self._api.paginate("ec2", "describe_images", "Images", **_available(query))
                return tuple(_image(raw) for raw in found)
            except NotFound:  # an image id EC2 does not know (InvalidAMIID.NotFound)
                return ()

        return self._described.get_or_load(json.dumps(query, sort_keys=True), load)

    def selected(self, selector: Mapping[str, str]) -> tuple[Image, ...]:
        """The images an ``amiSelector`` matches, newest first (ties: id)."""
        key = tuple(sorted(selector.items()))
        return self._selected.get_or_load(key, lambda: self._describe(selector))

    def _describe(self, selector: Mapping[str, str]) -> tuple[Image, ...]:
        try:
            found = list(self._api.paginate("ec2", "describe_images", "Images", **image_filters(selector)))
        except NotFound:
            return ()
        return newest_first(_image(i) for i in found if i.get("State", "available") == "available")

    def _parameter(self, name: str) -> str | None:
        def load() -> str | None:
            try:
                answer = self._api.call("ssm", "get_parameter", Name=name)
            except NotFound:
                return None
            value = answer.get("Parameter", {}).get("Value")
            return str(value) if value else None

        return self._parameters.get_or_load(name, load)


__all__ = [
    "AMI_TTL", "DEFAULT_FAMILY", "NAME_KEY", "OWNERS_KEY", "AmiResolver", "Image", "default_parameter", "ids_query",
    "image_filters", "term_query",
]
