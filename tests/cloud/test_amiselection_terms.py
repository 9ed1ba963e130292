"""Karpenter v1.14.1's `amiSelectorTerms` resolved from saved answers (`cloud/amiselection.resolve_terms`): the
SSM parameters each alias reads, named exactly as aws v1.14.1 `pkg/providers/amifamily/` (al2.go, al2023.go,
bottlerocket.go, windows.go) names them; the AMIProvider cases of `pkg/providers/amifamily/suite_test.go` ported
(each naming its line), with the same images and parameters; deprecated images after the others (`compareAMI`); a
parameter the answers lack is named, never taken as absent; and, as a property, name/tags/owner terms select as
an oracle of DescribeImages does — terms OR'd, fields AND'd, the best image per architecture kept — whatever the
order of the images and terms."""

from __future__ import annotations

import datetime as dt
import fnmatch
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.api.v1.objects import AMI_ALIAS_FAMILIES
from karpenter_policy.catalog import load_catalog
from karpenter_policy.cloud.amiselection import (
    Image,
    TermResolution,
    alias_parameters,
    ami_for,
    resolve_terms,
    term_matches,
)
from tests.profiles import deterministic

SUITE = "aws/karpenter-provider-aws v1.14.1 pkg/providers/amifamily/suite_test.go"
K8S = "1.31"
NOW = int(dt.datetime(2026, 11, 30, 9, tzinfo=dt.UTC).timestamp())
GO_ZERO = "0001-01-01T00:00:00Z"
#: suite_test.go:75-135, the images its BeforeEach answers DescribeImages with (created at Go's zero time + 0/1/2 min)
AMD64, ARM64, AMD64_NVIDIA, ARM64_NVIDIA = "ami-id-amd64", "ami-id-arm64", "ami-id-amd64-nvidia", "ami-id-arm64-nvidia"
SUITE_IMAGES = (
    Image(AMD64, "amd64", GO_ZERO, AMD64, tags={"Name": AMD64, "foo": "bar"}),
    Image(ARM64, "arm64", "0001-01-01T00:01:00Z", ARM64, tags={"Name": ARM64, "foo": "bar"}),
    Image(AMD64_NVIDIA, "amd64", "0001-01-01T00:02:00Z", AMD64_NVIDIA, tags={"Name": AMD64_NVIDIA, "foo": "bar"}),
    Image(ARM64_NVIDIA, "arm64", "0001-01-01T00:02:00Z", ARM64_NVIDIA, tags={"Name": ARM64_NVIDIA, "foo": "bar"}),
)


def resolve(terms: list[dict[str, Any]], parameters: dict[str, str], *, images: Any = SUITE_IMAGES,
            absent: tuple[str, ...] = (), version: str | None = K8S) -> TermResolution:
    """The terms resolved as the AMI provider would, SSM answering `parameters` and nothing else (the rest of
    each alias's names given as `InvalidParameters`, as `aws ssm get-parameters` prints them), unless `absent`."""
    alias = next((t["alias"] for t in terms if "alias" in t), None)
    if alias is not None and not absent:
        family, _, pinned = alias.partition("@")
        absent = tuple(p.name for p in alias_parameters(AMI_ALIAS_FAMILIES[family], version or K8S, pinned)
                       if p.name not in parameters)
    return resolve_terms(terms, images, parameters, absent, version, NOW)


# --- the parameters each alias reads -----------------------------------------------------------------------------

E = "/aws/service/eks/optimized-ami/1.31"
ALIAS_NAMES = [
    ("AL2", "latest", [f"{E}/amazon-linux-2/recommended/image_id", f"{E}/amazon-linux-2-arm64/recommended/image_id",
                       f"{E}/amazon-linux-2-gpu/recommended/image_id"]),
    ("AL2", "v20241011", [f"{E}/amazon-linux-2/amazon-eks-node-1.31-v20241011/image_id",
                          f"{E}/amazon-linux-2-arm64/amazon-eks-arm64-node-1.31-v20241011/image_id",
                          f"{E}/amazon-linux-2-gpu/amazon-eks-gpu-node-1.31-v20241011/image_id"]),
    ("AL2023", "latest", [f"{E}/amazon-linux-2023/x86_64/{v}/recommended/image_id"
                          for v in ("standard", "nvidia", "neuron")]
     + [f"{E}/amazon-linux-2023/arm64/{v}/recommended/image_id" for v in ("standard", "nvidia")]),
    ("AL2023", "v20241011", [
        f"{E}/amazon-linux-2023/x86_64/{v}/amazon-eks-node-al2023-x86_64-{v}-1.31-v20241011/image_id"
        for v in ("standard", "nvidia", "neuron")]
     + [f"{E}/amazon-linux-2023/arm64/{v}/amazon-eks-node-al2023-arm64-{v}-1.31-v20241011/image_id"
        for v in ("standard", "nvidia")]),
    ("Bottlerocket", "latest", ["/aws/service/bottlerocket/aws-k8s-1.31/x86_64/latest/image_id",
                                "/aws/service/bottlerocket/aws-k8s-1.31/arm64/latest/image_id",
                                "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/latest/image_id",
                                "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/latest/image_id"]),
    ("Bottlerocket", "v1.26.1", ["/aws/service/bottlerocket/aws-k8s-1.31/x86_64/1.26.1/image_id",
                                 "/aws/service/bottlerocket/aws-k8s-1.31/arm64/1.26.1/image_id",
                                 "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/x86_64/1.26.1/image_id",
                                 "/aws/service/bottlerocket/aws-k8s-1.31-nvidia/arm64/1.26.1/image_id"]),
    ("Windows2019", "latest",
     ["/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-1.31/image_id"]),
    ("Windows2022", "latest",
     ["/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.31/image_id"]),
    ("Windows2025", "latest",
     ["/aws/service/ami-windows-latest/Windows_Server-2025-English-Core-EKS_Optimized-1.31/image_id"]),
    ("Custom", "latest", []),
]


@pytest.mark.parametrize(("family", "version", "names"), ALIAS_NAMES, ids=[f"{f}@{v}" for f, v, _ in ALIAS_NAMES])
def test_each_alias_reads_the_parameters_v1_14_1_names(family: str, version: str, names: list[str]) -> None:
    assert sorted(p.name for p in alias_parameters(family, K8S, version)) == sorted(names)


# --- AMIProvider, ported -----------------------------------------------------------------------------------------

P = "/aws/service/eks/optimized-ami/1.31"
B = "/aws/service/bottlerocket/aws-k8s-1.31"
W = "/aws/service/ami-windows-latest/Windows_Server-{}-English-Core-EKS_Optimized-{}/image_id"
#: (line, It, alias, SSM parameters found, Kubernetes version, AMIs expected)
PROVIDER_CASES = [
    (187, "should succeed to resolve AMIs (AL2)", "al2@latest", {
        f"{P}/amazon-linux-2/recommended/image_id": AMD64, f"{P}/amazon-linux-2-gpu/recommended/image_id":
        AMD64_NVIDIA, f"{P}/amazon-linux-2-arm64/recommended/image_id": ARM64}, K8S, 4),
    (201, "should succeed to resolve AMIs (AL2023)", "al2023@latest", {
        f"{P}/amazon-linux-2023/x86_64/standard/recommended/image_id": AMD64,
        f"{P}/amazon-linux-2023/arm64/standard/recommended/image_id": ARM64}, K8S, 2),
    (211, "should succeed to resolve AMIs (Bottlerocket)", "bottlerocket@latest", {
        f"{B}/x86_64/latest/image_id": AMD64, f"{B}-nvidia/x86_64/latest/image_id": AMD64_NVIDIA,
        f"{B}/arm64/latest/image_id": ARM64, f"{B}-nvidia/arm64/latest/image_id": ARM64_NVIDIA}, K8S, 5),
    (223, "should succeed to resolve AMIs (Windows2019)", "windows2019@latest", {W.format(2019, K8S): AMD64}, K8S, 1),
    (232, "should succeed to resolve AMIs (Windows2022)", "windows2022@latest", {W.format(2022, K8S): AMD64}, K8S, 1),
    (241, "should succeed to resolve AMIs (Windows2025)", "windows2025@latest",
     {W.format(2025, "1.35"): AMD64}, "1.35", 1),
    (348, "should succeed to partially resolve AMIs if all SSM aliases don't exist (Al2)", "al2@latest", {
        f"{P}/amazon-linux-2/recommended/image_id": AMD64, f"{P}/amazon-linux-2-arm64/recommended/image_id": ARM64},
     K8S, 2),
    (363, "should succeed to partially resolve AMIs if all SSM aliases don't exist (AL2023)", "al2023@latest", {
        f"{P}/amazon-linux-2023/x86_64/standard/recommended/image_id": AMD64}, K8S, 1),
    (372, "should succeed to partially resolve AMIs if all SSM aliases don't exist (Bottlerocket)",
     "bottlerocket@latest", {f"{B}/x86_64/latest/image_id": AMD64, f"{B}-nvidia/x86_64/latest/image_id":
                             AMD64_NVIDIA, f"{B}/arm64/latest/image_id": ARM64}, K8S, 4),
]


@pytest.mark.parametrize(("line", "it", "alias", "parameters", "version", "count"), PROVIDER_CASES,
                         ids=[f"suite_test.go:{c[0]}" for c in PROVIDER_CASES])
def test_karpenters_alias_resolution_cases(line: int, it: str, alias: str, parameters: dict[str, str],
                                           version: str, count: int) -> None:
    resolution = resolve([{"alias": alias}], parameters, version=version)

    assert resolution.complete and resolution.error is None, f"{SUITE}:{line} {it}"
    assert len(resolution.amis) == count, f"{SUITE}:{line} {it}: {resolution.amis}"


@pytest.mark.parametrize(("line", "it", "alias", "version"), [
    (181, "should fail for AL2 on 1.33.0", "al2@latest", "1.33"),
    (256, "should fail to resolve AMIs for Windows2025 when EKS version is below 1.35", "windows2025@latest", "1.34"),
])
def test_an_alias_the_version_does_not_have_resolves_to_nothing(line: int, it: str, alias: str,
                                                                 version: str) -> None:
    resolution = resolve([{"alias": alias}], {}, version=version, absent=("x",))

    assert resolution.error is not None and resolution.amis == (), f"{SUITE}:{line} {it}"


CATALOG = load_catalog()


@pytest.mark.parametrize(("instance_type", "ami"), [
    ("m5.large", AMD64), ("m6g.large", ARM64), ("g4dn.xlarge", AMD64_NVIDIA), ("g5g.xlarge", ARM64_NVIDIA),
    ("inf2.xlarge", AMD64)])
def test_each_type_gets_the_image_of_its_architecture_and_variant(instance_type: str, ami: str) -> None:
    """Bottlerocket (suite_test.go:211's parameters): x86 Inferentia types take the standard image (its Neuron
    variant), GPU types the nvidia ones (`MapToInstanceTypes`)."""
    resolution = resolve([{"alias": "bottlerocket@latest"}], dict(PROVIDER_CASES[2][3]))
    it = CATALOG.get(instance_type)
    assert it is not None
    mapped = ami_for(resolution.amis, it)
    assert mapped is not None and mapped.id == ami


def test_a_parameter_the_answers_lack_is_named_not_taken_as_absent() -> None:
    found = {f"{P}/amazon-linux-2023/x86_64/standard/recommended/image_id": AMD64}

    resolution = resolve_terms([{"alias": "al2023@latest"}], SUITE_IMAGES, found, (), K8S, NOW)

    assert not resolution.complete
    assert resolution.missing_parameters == tuple(sorted(
        f"{P}/amazon-linux-2023/{arch}/{variant}/recommended/image_id"
        for arch, variant in (("x86_64", "nvidia"), ("x86_64", "neuron"), ("arm64", "standard"), ("arm64", "nvidia"))))


def test_without_the_kubernetes_version_every_parameter_is_missing() -> None:
    resolution = resolve_terms([{"alias": "al2023@latest"}], SUITE_IMAGES, {}, (), None, NOW)
    assert len(resolution.missing_parameters) == 5
    assert all("/<kubernetes-version>/" in n for n in resolution.missing_parameters)


def deprecated(hours: int) -> str:
    return dt.datetime.fromtimestamp(NOW + hours * 3600, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: (line, It, images (id, created, deprecation time), the one kept)
DEPRECATION_CASES = [
    (437, "should prioritize the older non-deprecated ami without deprecation time",
     [("ami-5678", "2021-08-31T00:12:42.000Z", deprecated(-1)), ("ami-1234", "2020-08-31T00:08:42.000Z", "")],
     "ami-1234"),
    (479, "should prioritize the non-deprecated ami with deprecation time when both have same creation time",
     [("ami-5678", "2021-08-31T00:12:42.000Z", deprecated(-1)),
      ("ami-1234", "2021-08-31T00:12:42.000Z", deprecated(10))], "ami-1234"),
    (567, "should prioritize the newer ami if both are deprecated",
     [("ami-5678", "2021-08-31T00:12:42.000Z", deprecated(-1)),
      ("ami-1234", "2020-08-31T00:08:42.000Z", deprecated(-1))], "ami-5678"),
]


@pytest.mark.parametrize(("line", "it", "images", "kept"), DEPRECATION_CASES,
                         ids=[f"suite_test.go:{c[0]}" for c in DEPRECATION_CASES])
def test_karpenters_deprecation_cases(line: int, it: str, images: list[tuple[str, str, str]], kept: str) -> None:
    made = [Image(i, "amd64", created, "amd64-ami", tags={"foo": "bar"}, deprecation_time=gone)
            for i, created, gone in images]

    resolution = resolve_terms([{"tags": {"*": "*"}}], made, None, (), K8S, NOW)

    assert [a.id for a in resolution.amis] == [kept], f"{SUITE}:{line} {it}"


def test_id_and_ssm_parameter_terms_need_their_images_and_skip_a_value_that_is_no_ami() -> None:
    terms = [{"id": "ami-0missing"}, {"ssmParameter": "/team/ami"}, {"ssmParameter": "/team/not-an-ami"},
             {"ssmParameter": "/team/unknown"}]
    resolution = resolve_terms(terms, SUITE_IMAGES, {"/team/ami": ARM64, "/team/not-an-ami": "hello"}, (),
                               K8S, NOW)

    assert resolution.missing_images == ("ami-0missing",)
    assert resolution.missing_parameters == ("/team/unknown",)
    assert [a.id for a in resolution.amis] == [ARM64]


# --- the property ------------------------------------------------------------------------------------------------

NAMES, OWNERS, TAG_VALUES = ("eks-a", "eks-b", "base"), ("111122223333", "444455556666"), ("x", "y")
images = st.builds(
    Image,
    id=st.sampled_from([f"ami-{i:02d}" for i in range(12)]),
    architecture=st.sampled_from(["amd64", "arm64", ""]),
    creation_date=st.sampled_from(["2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-01T00:00:00.500Z", ""]),
    name=st.sampled_from(NAMES),
    owner_id=st.sampled_from(OWNERS),
    owner_alias=st.sampled_from(["", "amazon"]),
    tags=st.dictionaries(st.sampled_from(["team", "env"]), st.sampled_from(TAG_VALUES), max_size=2),
    state=st.sampled_from(["available", "available", "pending"]),
    deprecation_time=st.sampled_from(["", "2026-06-01T00:00:00Z", "2027-01-01T00:00:00Z"]),
)
terms = st.fixed_dictionaries({}, optional={
    "name": st.sampled_from(["eks-*", "eks-?", "base", "*"]),
    "owner": st.sampled_from([*OWNERS, "self", "amazon"]),
    "tags": st.dictionaries(st.sampled_from(["team", "env"]), st.sampled_from([*TAG_VALUES, "*"]), min_size=1,
                            max_size=2)}).filter(bool)


def _oracle_selects(term: dict[str, Any], image: Image) -> bool:
    """DescribeImages' filters of one term, written out: name (a glob), owner (self: no alias; defaults self and
    amazon with a name), tags (`*`: the key), only available images."""
    if image.state != "available":
        return False
    if "name" in term and not fnmatch.fnmatchcase(image.name, term["name"]):
        return False
    for key, value in term.get("tags", {}).items():
        if key not in image.tags or (value != "*" and image.tags[key] != value):
            return False
    owners = [term["owner"]] if "owner" in term else (["self", "amazon"] if "name" in term else [])
    return not owners or any(o in (image.owner_id, image.owner_alias) or (o == "self" and not image.owner_alias)
                             for o in owners)


def _oracle_best(candidates: list[Image]) -> Image | None:
    def key(i: Image) -> tuple[bool, float, str]:
        gone = bool(i.deprecation_time) and dt.datetime.fromisoformat(i.deprecation_time).timestamp() <= NOW
        created = int(dt.datetime.fromisoformat(i.creation_date).timestamp()) if i.creation_date else -2**63
        return (not gone, created, i.name)
    return max(candidates, key=key, default=None)


@deterministic(300)
@given(found=st.lists(images, max_size=8, unique_by=lambda i: i.id), chosen=st.lists(terms, min_size=1, max_size=3),
       seed=st.integers(0, 2**16))
def test_terms_select_as_describe_images_and_the_best_per_architecture_is_kept(
    found: list[Image], chosen: list[dict[str, Any]], seed: int
) -> None:
    resolution = resolve_terms(chosen, found, None, (), K8S, NOW)
    shuffled = list(found)
    random.Random(seed).shuffle(shuffled)
    again = resolve_terms(list(reversed(chosen)), shuffled, None, (), K8S, NOW)

    for image in found:
        assert term_matches(chosen[0], image) == _oracle_selects(chosen[0], image)
    for arch in ("amd64", "arm64"):
        selected = [i for i in found if i.architecture == arch and any(_oracle_selects(t, i) for t in chosen)]
        best = _oracle_best(selected)
        got = [a for a in resolution.amis if ("kubernetes.io/arch", "In", (arch,)) in a.requirements]
        assert [a.id for a in got] == ([best.id] if best else [])
    # the order of the images and terms changes nothing but which of two identical-looking images is kept
    assert sorted(_look(a.id, found) for a in again.amis) == sorted(_look(a.id, found) for a in resolution.amis)
    assert [a.id for a in resolution.amis] == sorted((a.id for a in resolution.amis),
                                                     key=lambda i: (-_created(_image(i, found)), i))


def _image(image_id: str, found: list[Image]) -> Image:
    return next(i for i in found if i.id == image_id)


def _look(image_id: str, found: list[Image]) -> tuple[str, float, str, str]:
    image = _image(image_id, found)
    return (image.architecture, _created(image), image.name, image.deprecation_time)


def _created(image: Image) -> float:
    return int(dt.datetime.fromisoformat(image.creation_date).timestamp()) if image.creation_date else -2**63
