"""Which AMI an AWSNodeTemplate gives an instance type — the pure part of Karpenter v0.31.1's AMI provider (aws
pkg/providers/amifamily/ami.go `Get`, `MapToInstanceTypes`), shared by the AWS adapter (`cloud/aws/amis.py`, which
asks EC2 and SSM) and `plan` (which reads what the user saved of them), so no SDK here.

* **Defaults** (no ``amiSelector``): the public SSM parameter naming the image of the template's family for the
  cluster's Kubernetes version (:func:`default_parameter`), chosen by the type's architecture and accelerators: AL2
  uses the ``-gpu`` image for x86 types with GPUs or Inferentia and has no image for Arm GPU types, AL2023 its
  ``nvidia`` variant for GPU types, ``neuron`` for x86 types with Inferentia or Trainium (none on Arm), ``standard``
  otherwise, Bottlerocket ``-nvidia`` for GPU types, Windows is x86 only (v0.31's ``DefaultAMIs``; AL2023 and
  Windows2025 as v1.14.1's `DescribeImageQuery`).
* **``amiSelector``** (ids, owners, name with ``*``/``?`` wildcards, tags; every entry must match): the images it
  selects (:func:`selector_matches`, as EC2's DescribeImages filters them), newest first (:func:`newest_first`;
  created in the same second: the greater name), and each type gets the newest of its architecture
  (:func:`image_for`). v0.31.1 also keeps apart images tagged with well-known labels (their tags become
  requirements); here only the architecture does.

A type with no image cannot launch.

**Karpenter v1.14.1's `amiSelectorTerms`** (aws pkg/providers/amifamily/ami.go `DescribeImageQueries`, `amis`; types.go;
al2.go, al2023.go, bottlerocket.go, windows.go; pkg/apis/v1/ec2nodeclass.go `AMISelectorTerm`): :func:`resolve_terms`
turns an EC2NodeClass's terms into what its `status.amis` would hold, from the images and SSM parameters given to it —
the one reading of the terms: the controller's AWS adapter (`cloud/aws/amis.py`) gives it the answers of the calls
v1.14.1 makes, `plan` the answers the user saved. Terms OR'd, a term's fields AND'd: an ``alias`` (exclusive) reads the
SSM parameters :func:`alias_parameters` names (each with the requirements its variant knows: GPU, Neuron, Windows build)
and describes their values as DescribeImages does (an image not among those given is missing, as an ``id``'s); ``id``
and ``ssmParameter`` terms (a value not ``ami-…`` skipped) gather into one image-id query; ``name`` (owners ``self`` and
``amazon`` unless ``owner`` says), ``owner`` and ``tags`` (``*``: the key only) select as DescribeImages filters. Of the
images a requirement set gets, the one kept is not deprecated before a deprecated one, then the newest, then the greater
name (`compareAMI`); the list is ordered newest first, then by id (`AMIs.Sort`). :func:`ami_for` is `MapToInstanceTypes`
for one type: the first whose requirements the type meets.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpenter_policy.api.v1.objects import AMI_ALIAS_FAMILIES
from karpenter_policy.model.instancetypes import InstanceType
from karpenter_policy.model.labels import ARCH as ARCH_LABEL
from karpenter_policy.model.labels import OS as OS_LABEL
from karpenter_policy.model.labels import WINDOWS_BUILD as WINDOWS_BUILD_LABEL

__all__ = [
    "DEFAULT_NAME_OWNERS",
    "ID_KEYS",
    "NAME_KEY",
    "OWNERS_KEY",
    "AliasParameter",
    "Image",
    "ResolvedAmi",
    "TermResolution",
    "alias_parameters",
    "any_matches",
    "ami_for",
    "created_at",
    "default_parameter",
    "image_for",
    "newest_first",
    "resolve_terms",
    "selector_matches",
    "selector_values",
    "term_text",
]

#: An ``amiSelector``'s (and the subnet and security group selectors') keys that list ids.
ID_KEYS = ("aws-ids", "aws::ids")
OWNERS_KEY = "aws::owners"
NAME_KEY = "aws::name"
#: Go's zero time in Unix seconds (0001-01-01T00:00:00Z).
_GO_ZERO_TIME = -62135596800
#: The owners a selector by name alone is given (a name alone could match anyone's public image).
DEFAULT_NAME_OWNERS = ("self", "amazon")


@dataclass(frozen=True, slots=True)
class Image:
    """One EC2 image as a selector sees it: id, architecture (Kubernetes name: amd64, arm64; empty: another),
    creation date (RFC 3339), name, owner id, owner alias (``amazon``, ``aws-marketplace``; empty: an account's
    own), tags and state."""

    id: str
    architecture: str
    creation_date: str
    name: str = ""
    owner_id: str = ""
    owner_alias: str = ""
    tags: Mapping[str, str] = field(default_factory=dict)
    state: str = "available"
    #: when EC2 deprecates it (RFC 3339; empty: never)
    deprecation_time: str = ""


def _accelerated(instance_type: InstanceType) -> bool:
    return instance_type.gpu_count > 0 or instance_type.accelerator_count > 0


def default_parameter(
    family: str, kubernetes_version: str, instance_type: InstanceType, version: str | None = None
) -> str | None:
    """The SSM parameter naming the default image of ``family`` for this type, or None when there is none.
    ``version``: a release an alias pins (``al2023@v20240807``); None or ``latest``: the recommended (latest)
    image. For AL2, AL2023, Bottlerocket and Windows it is the one of :func:`alias_parameters` (v1.14.1's names)
    whose architecture and variant the type has; Ubuntu (v0.31 only) is named here."""
    pinned = version if version and version.lower() != _LATEST else None
    if family in ("AL2", "AL2023", "Bottlerocket") or family.startswith("Windows"):
        if pinned and family.startswith("Windows"):
            return None  # no Windows alias names a version
        return next((p.name for p in alias_parameters(family, kubernetes_version, pinned or _LATEST)
                     if p.architecture in instance_type.architectures
                     and any(all(_meets(r, instance_type) for r in known) for known in p.requirements)), None)
    if pinned or family != "Ubuntu":
        return None
    arch = instance_type.architectures[0] if len(instance_type.architectures) == 1 else "amd64"
    return f"/aws/service/canonical/ubuntu/eks/20.04/{kubernetes_version}/stable/current/{arch}/hvm/ebs-gp2/ami-id"


def selector_values(value: object) -> list[str]:
    """A selector entry's values: comma-separated, blanks dropped."""
    return [part.strip() for part in str(value).split(",") if part.strip()]


def _wildcard(pattern: str) -> re.Pattern[str]:
    """EC2's filter wildcards: ``*`` any run of characters, ``?`` one; the rest literal, case-sensitive."""
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.DOTALL)


def any_matches(patterns: Iterable[str], value: str | None) -> bool:
    """Whether `value` matches one of `patterns`, EC2 filter values with their wildcards (None: no value)."""
    return value is not None and any(_wildcard(p).fullmatch(value) for p in patterns)


def _owned(owners: Sequence[str], image: Image) -> bool:
    """DescribeImages' `Owners`: an account id, an alias (``amazon``, ``aws-marketplace``), or ``self`` — the
    caller's own images, which carry no owner alias."""
    return any(
        image.owner_id == owner or image.owner_alias == owner or (owner == "self" and not image.owner_alias)
        for owner in owners
    )


def selector_matches(selector: Mapping[str, str], image: Image) -> bool:
    """Whether an ``amiSelector`` selects ``image``, as DescribeImages with `cloud/aws/amis.py`'s `image_filters`
    selects it: ids, owners, name and tags all match; an image not ``available`` never."""
    if image.state != "available":
        return False
    owners: list[str] = []
    for key, value in selector.items():
        values = selector_values(value)
        if key in ID_KEYS:
            if image.id not in values:
                return False
        elif key == OWNERS_KEY:
            owners = values
        elif key == NAME_KEY:
            if not any_matches(values, image.name):
                return False
        elif value == "*":
            if key not in image.tags:
                return False
        elif not any_matches(values, image.tags.get(key)):
            return False
    if not owners and NAME_KEY in selector and not any(key in selector for key in ID_KEYS):
        owners = list(DEFAULT_NAME_OWNERS)
    return not owners or _owned(owners, image)


def created_at(image: Image) -> int:
    """An image's creation time in Unix seconds, as Go's `time.Parse(time.RFC3339, …)` reads it: a date that does
    not parse is the zero time (older than any)."""
    try:
        moment = dt.datetime.fromisoformat(image.creation_date)
    except ValueError:
        return _GO_ZERO_TIME
    return int((moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).timestamp())


def newest_first(images: Iterable[Image]) -> tuple[Image, ...]:
    """Images of a known architecture, newest first by creation time (to the second); of two created in the same
    second the one of the greater name first, as v0.31.1's `getAMIs` keeps it (then by id)."""
    ordered = sorted((i for i in images if i.architecture), key=lambda i: i.id)
    ordered.sort(key=lambda i: i.name, reverse=True)
    ordered.sort(key=created_at, reverse=True)
    return tuple(ordered)


def image_for(images: Sequence[Image], instance_type: InstanceType) -> Image | None:
    """The image a type gets of ``images`` (newest first): the first of one of its architectures
    (`MapToInstanceTypes`), or None."""
    return next((i for i in images if i.architecture in instance_type.architectures), None)


# --- Karpenter v1.14.1: amiSelectorTerms -------------------------------------------------------------------------

#: A node selector requirement as the AMIs carry it: key, operator, values.
Requirement = tuple[str, str, tuple[str, ...]]
GPU_COUNT_LABEL = "karpenter.k8s.aws/instance-gpu-count"
ACCELERATOR_COUNT_LABEL = "karpenter.k8s.aws/instance-accelerator-count"
#: v1.14.1's `Variant.Requirements` (types.go).
VARIANT_REQUIREMENTS: Mapping[str, tuple[Requirement, ...]] = {
    "standard": ((ACCELERATOR_COUNT_LABEL, "DoesNotExist", ()), (GPU_COUNT_LABEL, "DoesNotExist", ())),
    "nvidia": ((GPU_COUNT_LABEL, "Exists", ()),),
    "neuron": ((ACCELERATOR_COUNT_LABEL, "Exists", ()),),
}
#: v1.14.1's Windows versions' builds (pkg/apis/v1/labels.go `Windows2019Build` …).
WINDOWS_BUILDS: Mapping[str, str] = {"2019": "10.0.17763", "2022": "10.0.20348", "2025": "10.0.26100"}
#: ``1.33`` and later have no AL2 alias, ``1.35`` is the first with a Windows Server 2025 one (`DescribeImageQueries`).
AL2_LAST_MINOR, WINDOWS2025_FIRST_MINOR = 32, 35
_LATEST = "latest"
#: Go's `time.Unix(math.MaxInt64, 0)`: a deprecation time never reached.
_MAX_TIME = 2**63 - 1


@dataclass(frozen=True, slots=True)
class AliasParameter:
    """One SSM parameter an alias reads: its exact name, the architecture its image has (Kubernetes name) and
    the requirement sets the image is known to meet (one per variant)."""

    name: str
    architecture: str
    requirements: tuple[tuple[Requirement, ...], ...]


def _variants(*names: str) -> tuple[tuple[Requirement, ...], ...]:
    return tuple(VARIANT_REQUIREMENTS[n] for n in names)


def alias_parameters(family: str, kubernetes_version: str, version: str) -> tuple[AliasParameter, ...]:
    """The SSM parameters v1.14.1's alias ``family@version`` reads (`DescribeImageQuery` of al2.go, al2023.go,
    bottlerocket.go, windows.go), named exactly so, for the cluster's Kubernetes version; ``family`` as
    `AMIFamily` spells it (``AL2023``); none for another family."""
    k, latest = kubernetes_version, version == _LATEST
    if family == "AL2":
        def al2(variant: str, prefix: str) -> str:
            release = "recommended" if latest else f"{prefix}-{k}-{version}"
            return f"/aws/service/eks/optimized-ami/{k}/{variant}/{release}/image_id"
        return (AliasParameter(al2("amazon-linux-2", "amazon-eks-node"), "amd64", _variants("standard")),
                AliasParameter(al2("amazon-linux-2-arm64", "amazon-eks-arm64-node"), "arm64", _variants("standard")),
                AliasParameter(al2("amazon-linux-2-gpu", "amazon-eks-gpu-node"), "amd64",
                               _variants("neuron", "nvidia")))
    if family == "AL2023":
        out = []
        for machine, arch, variants in (("x86_64", "amd64", ("standard", "nvidia", "neuron")),
                                        ("arm64", "arm64", ("standard", "nvidia"))):
            for variant in variants:
                name = ("recommended" if latest
                        else f"amazon-eks-node-al2023-{machine}-{variant}-{k}-{version}")
                out.append(AliasParameter(
                    f"/aws/service/eks/optimized-ami/{k}/amazon-linux-2023/{machine}/{variant}/{name}/image_id",
                    arch, _variants(variant)))
        return tuple(out)
    if family == "Bottlerocket":
        release = version.lstrip("v")  # v1.14.1 trims the GitHub release's v (strings.TrimLeft)
        return (
            AliasParameter(f"/aws/service/bottlerocket/aws-k8s-{k}/x86_64/{release}/image_id", "amd64",
                           _variants("standard", "neuron")),
            AliasParameter(f"/aws/service/bottlerocket/aws-k8s-{k}/arm64/{release}/image_id", "arm64",
                           _variants("standard")),
            AliasParameter(f"/aws/service/bottlerocket/aws-k8s-{k}-nvidia/x86_64/{release}/image_id", "amd64",
                           _variants("nvidia")),
            AliasParameter(f"/aws/service/bottlerocket/aws-k8s-{k}-nvidia/arm64/{release}/image_id", "arm64",
                           _variants("nvidia")),
        )
    year = family.removeprefix("Windows")
    if family.startswith("Windows") and year in WINDOWS_BUILDS:  # always the latest: no version pinning
        return (AliasParameter(
            f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k}/image_id",
            "amd64", (((OS_LABEL, "In", ("windows",)), (WINDOWS_BUILD_LABEL, "In", (WINDOWS_BUILDS[year],))),)),)
    return ()


@dataclass(frozen=True, slots=True)
class ResolvedAmi:
    """One entry of what an EC2NodeClass's `status.amis` would hold: the image, whether it is deprecated, the
    requirements a type must meet to get it, and the term that selected it (:func:`term_text`)."""

    id: str
    name: str
    creation_date: str
    deprecated: bool
    requirements: tuple[Requirement, ...]
    term: str


@dataclass(frozen=True, slots=True)
class TermResolution:
    """What :func:`resolve_terms` made of the answers: the AMIs (newest first, then by id), and what it lacked —
    SSM parameters in neither the found nor the invalid ones given (`missing_parameters`), image ids an alias's
    parameters, an id or `ssmParameter` term name that the images given lack (`missing_images`), `needs_images` (a
    name, tags or owner term and no images given) — or why Karpenter resolves nothing (`error`)."""

    amis: tuple[ResolvedAmi, ...] = ()
    missing_parameters: tuple[str, ...] = ()
    missing_images: tuple[str, ...] = ()
    needs_images: bool = False
    error: str | None = None

    @property
    def complete(self) -> bool:
        """Whether nothing was missing (then `amis` is what Karpenter resolves)."""
        return not (self.missing_parameters or self.missing_images or self.needs_images)


def term_text(term: Mapping[str, Any]) -> str:
    """An `amiSelectorTerms` entry as a reason names it (`alias al2023@latest`, `name eks-*, owner self`)."""
    parts = [f"{key} {term[key]}" for key in ("alias", "id", "ssmParameter", "name", "owner") if term.get(key)]
    tags = term.get("tags")
    if isinstance(tags, Mapping) and tags:
        parts.append("tags " + ", ".join(f"{k}={v}" for k, v in sorted(tags.items())))
    return ", ".join(parts) or "{}"


def term_matches(term: Mapping[str, Any], image: Image) -> bool:
    """Whether a name/owner/tags term selects ``image`` as v1.14.1's DescribeImages query does: every field it
    sets (one value each, EC2's wildcards), owners ``self`` and ``amazon`` for a name without an owner; only an
    ``available`` image."""
    if image.state != "available":
        return False
    name, owner = term.get("name") or "", term.get("owner") or ""
    if name and not any_matches([str(name)], image.name):
        return False
    for key, value in (term.get("tags") or {}).items():
        if value == "*":  # a `tag-key` filter, its wildcards too: `{"*": "*"}` selects every tagged image
            if not any(_wildcard(str(key)).fullmatch(k) for k in image.tags):
                return False
        elif not any_matches([str(value)], image.tags.get(key)):
            return False
    owners = [str(owner)] if owner else (list(DEFAULT_NAME_OWNERS) if name else [])
    return not owners or _owned(owners, image)


def _deprecated(image: Image | None, now: int) -> bool:
    if image is None or not image.deprecation_time:
        return False
    moment = created_at(Image(image.id, image.architecture, image.deprecation_time))
    return moment != _GO_ZERO_TIME and moment <= now


def _better(candidate: ResolvedAmi, kept: ResolvedAmi) -> bool:
    """`compareAMI(kept, candidate) > 0`: not deprecated first, then the newer, then the greater name."""
    if candidate.deprecated != kept.deprecated:
        return kept.deprecated
    new, old = _created(candidate.creation_date), _created(kept.creation_date)
    if new != old:
        return new > old
    return candidate.name > kept.name


def _created(date: str) -> int:
    return created_at(Image("", "", date)) if date else -_MAX_TIME - 1


def resolve_terms(terms: Sequence[Mapping[str, Any]], images: Sequence[Image] | None,
                  parameters: Mapping[str, str] | None, absent: Iterable[str], kubernetes_version: str | None,
                  now: int, answered: Mapping[int, Sequence[Image]] | None = None) -> TermResolution:
    """What v1.14.1 resolves ``terms`` to (the module docstring) with the images (`describe-images`; None: none
    given), the SSM parameters found (name → value) and those known `absent` (`InvalidParameters`), for the
    cluster's Kubernetes version (None: unknown — an alias's parameters are then all missing, named with
    ``<kubernetes-version>``), at ``now`` (Unix seconds: deprecation). ``answered``: what EC2 answered each
    name/owner/tags term's own query (by the term's index: the controller asks EC2 live); a term it does not name is
    read with :func:`term_matches` over ``images`` (`plan`'s saved answers)."""
    by_id = {i.id: i for i in images or ()}
    found, gone = parameters or {}, frozenset(absent)
    kept: dict[frozenset[Requirement], ResolvedAmi] = {}

    def offer(image_id: str, image: Image | None, arch: str, sets: Sequence[tuple[Requirement, ...]],
              term: str) -> None:
        if not arch or (image is not None and image.state != "available"):
            return
        for known in sets or ((),):
            requirements = (*known, (ARCH_LABEL, "In", (arch,)))
            ami = ResolvedAmi(image_id, image.name if image else "", image.creation_date if image else "",
                              _deprecated(image, now), requirements, term)
            key = frozenset(requirements)
            if key not in kept or _better(ami, kept[key]):
                kept[key] = ami

    alias = next((t.get("alias") for t in terms if t.get("alias")), None)
    missing_parameters: list[str] = []
    missing_images: list[str] = []
    needs_images = False
    if alias:
        family_name, _, version = str(alias).partition("@")
        family = AMI_ALIAS_FAMILIES.get(family_name.lower(), family_name)
        minor = int(kubernetes_version.split(".")[1]) if kubernetes_version else None
        if family == "AL2" and minor is not None and minor > AL2_LAST_MINOR:
            return TermResolution(error=f"AL2 aliases are no longer supported on EKS 1.33+ ({kubernetes_version})")
        if family == "Windows2025" and minor is not None and minor < WINDOWS2025_FIRST_MINOR:
            return TermResolution(error=f"Windows Server 2025 requires EKS 1.35 or later ({kubernetes_version})")
        wanted = alias_parameters(family, kubernetes_version or "<kubernetes-version>", version)
        for parameter in wanted:
            if kubernetes_version is None or (parameter.name not in found and parameter.name not in gone):
                missing_parameters.append(parameter.name)
            elif parameter.name in found:
                image_id = found[parameter.name]
                image = by_id.get(image_id)
                if image is None:  # v1.14.1 describes it (DescribeImages): not saved, its state and age unknown
                    missing_images.append(image_id)
                    continue
                offer(image_id, image, image.architecture, parameter.requirements,
                      f"alias {alias} (SSM {parameter.name})")
        if not missing_parameters and not missing_images and not kept:
            return TermResolution(error=f"failed to discover any AMIs for alias {alias}")
        return _resolution(kept, missing_parameters, missing_images, False)
    for index, term in enumerate(terms):
        if term.get("id") or term.get("ssmParameter"):
            name = str(term.get("ssmParameter") or "")
            if name and name not in found:
                if name not in gone:
                    missing_parameters.append(name)
                continue
            image_id = str(term.get("id") or found[name])
            if not image_id.startswith("ami-"):
                continue  # v1.14.1: "parameter value is an invalid AMI ID", skipped
            image = by_id.get(image_id)
            if image is None:
                missing_images.append(image_id)
                continue
            offer(image_id, image, image.architecture, (), term_text(term))
        elif answered is not None and index in answered:
            for image in answered[index]:
                offer(image.id, image, image.architecture, (), term_text(term))
        elif images is None:
            needs_images = True
        else:
            for image in images:
                if term_matches(term, image):
                    offer(image.id, image, image.architecture, (), term_text(term))
    return _resolution(kept, missing_parameters, missing_images, needs_images)


def _resolution(kept: Mapping[frozenset[Requirement], ResolvedAmi], missing_parameters: Sequence[str],
                missing_images: Sequence[str], needs_images: bool) -> TermResolution:
    amis = sorted(kept.values(), key=lambda a: a.id)
    amis.sort(key=lambda a: _created(a.creation_date), reverse=True)
    return TermResolution(tuple(amis), tuple(sorted(set(missing_parameters))), tuple(sorted(set(missing_images))),
                          needs_images)


def _meets(requirement: Requirement, instance_type: InstanceType) -> bool:
    key, operator, values = requirement
    if key in (OS_LABEL, WINDOWS_BUILD_LABEL):
        return True  # the NodePool's types are computed with the class's own family: its OS and build
    counts = {GPU_COUNT_LABEL: instance_type.gpu_count, ACCELERATOR_COUNT_LABEL: instance_type.accelerator_count}
    if key == ARCH_LABEL:
        have: tuple[str, ...] = tuple(instance_type.architectures)
    elif key in counts:
        have = (str(counts[key]),) if counts[key] > 0 else ()
    else:
        have = ()
    if operator == "In":
        return any(v in values for v in have)
    if operator == "NotIn":
        return not any(v in values for v in have)
    if operator == "Exists":
        return bool(have)
    return not have  # DoesNotExist


def ami_for(amis: Sequence[ResolvedAmi], instance_type: InstanceType) -> ResolvedAmi | None:
    """The AMI `MapToInstanceTypes` gives ``instance_type``: the first of ``amis`` whose requirements it meets."""
    return next((a for a in amis if all(_meets(r, instance_type) for r in a.requirements)), None)
