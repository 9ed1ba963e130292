"""One reading of an EC2NodeClass's AMI terms (issue #26): whatever the terms, the AMIs the controller's adapter
resolves (`cloud/aws/amis.AmiResolver.resolve`: v1.14.1's GetParameter and DescribeImages calls, aws
pkg/providers/amifamily/ami.go `DescribeImageQueries`) are those `plan` reads of the same images and parameters —
`amiselection.resolve_terms` given all of them at once. EC2 and SSM are fakes here: DescribeImages answers with the
images its filters select as EC2 reads them (each filter met by one of its values, EC2's wildcards, `Owners`), the
calls recorded; the property is about which calls the controller makes and how it reads their answers (checked
against moto in test_aws_ami_terms.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.cloud.amiselection import Image, any_matches, resolve_terms
from karpenter_policy.cloud.aws.amis import AmiResolver
from karpenter_policy.cloud.aws.api import AwsApi
from karpenter_policy.cloud.errors import NotFound

from .conftest import FakeClock

ACCOUNT = "123456789012"
_ARCHITECTURES = {"amd64": "x86_64", "arm64": "arm64"}


def _owned(owners: list[str], image: Image) -> bool:
    return any(o in (image.owner_id, image.owner_alias) or (o == "self" and image.owner_id == ACCOUNT)
               for o in owners)


def _selects(filters: list[Mapping[str, Any]], owners: list[str], image: Image) -> bool:
    """EC2's DescribeImages: every filter met, by any of its values (wildcards), and an owner when asked."""
    for f in filters:
        name, values = str(f["Name"]), [str(v) for v in f["Values"]]
        have = {"image-id": image.id, "name": image.name, "state": image.state}.get(name)
        if name == "tag-key":
            if not any(any_matches(values, key) for key in image.tags):
                return False
        elif name.startswith("tag:"):
            if not any_matches(values, image.tags.get(name[4:])):
                return False
        elif not any_matches(values, have):
            return False
    return not owners or _owned(owners, image)


class _Aws(AwsApi):
    """DescribeImages over fixed images, GetParameter over fixed parameters; the calls recorded."""

    def __init__(self, images: list[Image], parameters: Mapping[str, str]) -> None:  # no connection: no SDK
        self.images, self.parameters = images, parameters
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def endpoint(self, service: str) -> str:
        return f"https://{service}.fake"

    def call(self, service: str, operation: str, *, max_attempts: int | None = None, **kwargs: Any) -> Any:
        self.calls.append((operation, kwargs))
        name = str(kwargs["Name"])
        if name not in self.parameters:
            raise NotFound(self.endpoint(service), f"{name} not found", "GetParameter", code="ParameterNotFound")
        return {"Parameter": {"Name": name, "Value": self.parameters[name]}}

    def paginate(self, service: str, operation: str, key: str, *, max_attempts: int | None = None,
                 **kwargs: Any) -> Iterator[Any]:
        self.calls.append((operation, kwargs))
        for image in self.images:
            if _selects(kwargs["Filters"], kwargs.get("Owners") or [], image):
                yield {"ImageId": image.id, "Architecture": _ARCHITECTURES[image.architecture],
                       "CreationDate": image.creation_date, "Name": image.name, "OwnerId": image.owner_id,
                       **({"ImageOwnerAlias": image.owner_alias} if image.owner_alias else {}),
                       "Tags": [{"Key": k, "Value": v} for k, v in image.tags.items()], "State": image.state,
                       **({"DeprecationTime": image.deprecation_time} if image.deprecation_time else {})}


_NAMES = st.sampled_from(["eks-a", "eks-b", "team-a", "team-b"])
_TAGS = st.dictionaries(st.sampled_from(["team", "tier"]), st.sampled_from(["red", "blue", "red,blue"]), max_size=2)


@st.composite
def _images(draw: st.DrawFn) -> list[Image]:
    found = []
    for n in range(draw(st.integers(0, 6))):
        found.append(Image(
            f"ami-{n:04d}", draw(st.sampled_from(["amd64", "arm64"])),
            f"2026-0{draw(st.integers(1, 3))}-01T00:00:00.000Z", draw(_NAMES),
            # the account's own images carry no alias, another's one (as `amiselection` reads `self`)
            **dict(zip(("owner_id", "owner_alias"),
                       draw(st.sampled_from([(ACCOUNT, ""), ("999999999999", "amazon")])), strict=True)),
            tags=draw(_TAGS),
            state=draw(st.sampled_from(["available", "available", "pending"])),
            deprecation_time=draw(st.sampled_from(["", "2026-02-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z"])),
        ))
    return found


_TERM = st.one_of(
    st.builds(lambda n: {"id": f"ami-{n:04d}"}, st.integers(0, 7)),
    st.builds(lambda p: {"ssmParameter": p}, st.sampled_from(["/team/ami", "/team/other", "/team/absent"])),
    st.builds(lambda name, owner: {"name": name, **({"owner": owner} if owner else {})},
              st.sampled_from(["eks-*", "team-a", "*-b"]), st.sampled_from(["", "self", "amazon", "999999999999"])),
    st.builds(lambda tags: {"tags": tags},
              st.dictionaries(st.sampled_from(["team", "tier"]), st.sampled_from(["red", "red,blue", "*"]),
                              min_size=1, max_size=2)),
)
_PARAMETERS = st.fixed_dictionaries({"/team/ami": st.sampled_from(["ami-0000", "ami-0003", "not-an-ami"]),
                                     "/team/other": st.sampled_from(["ami-0001", "ami-0009"])})


@deterministic(300)
@given(images=_images(), terms=st.lists(_TERM, min_size=1, max_size=4), parameters=_PARAMETERS)
def test_the_controller_resolves_what_plan_reads_of_the_same_answers(
    images: list[Image], terms: list[dict[str, Any]], parameters: dict[str, str],
) -> None:
    now = 1_780_000_000  # 2026-05-28: the image deprecated in February is deprecated
    resolver = AmiResolver(_Aws(images, parameters), FakeClock(), "1.30",
                           wall_clock=lambda: dt.datetime.fromtimestamp(now, dt.UTC))
    plan = resolve_terms(terms, images, parameters, ["/team/absent"], "1.30", now)
    assert resolver.resolve(terms).amis == plan.amis
