"""userData read as its AMI family reads it (api/userdata.py): what Karpenter v0.31 accepts passes, what it fails on
is one `invalid-user-data` violation at its line — never an exception, whatever the input."""

from __future__ import annotations

import pytest

from karpenter_policy.api.userdata import UserDataError, mime_parts, toml_settings, user_data_violations

MIME = (
    "MIME-Version: 1.0\nContent-Type: multipart/mixed;\n boundary=\"B\"\n\n--B\nContent-Type: text/x-shellscript\n\n"
    "#!/bin/bash\necho one\n--B\n\necho two\n--B--\n"
)


def test_folded_headers_and_parts_without_headers_are_read_as_go_reads_them() -> None:
    assert mime_parts(MIME) == [
        ("text/x-shellscript", "#!/bin/bash\necho one"),
        ('text/x-shellscript; charset="us-ascii"', "echo two"),
    ]


@pytest.mark.parametrize(
    "text",
    ["a = " + "[" * 100_000, "[" * 50_000, "x = 1\n" * 10_000 + "=", "\x00", "a = 1\na = 2"],
    ids=["deep-array", "deep-table", "long", "nul", "duplicate-key"],
)
def test_hostile_toml_is_a_user_data_error_not_a_crash(text: str) -> None:
    with pytest.raises(UserDataError) as caught:
        toml_settings(text)
    assert caught.value.message.startswith("not valid TOML") and caught.value.line >= 1


@pytest.mark.parametrize("family", ["Windows2019", "Windows2022", "Custom"])
def test_families_that_pass_user_data_as_is_are_not_read(family: str) -> None:
    spec = {"amiFamily": family, "userData": "[not toml\nMIME-Version: 1.0\n"}
    assert list(user_data_violations(spec, ("spec",))) == []


def test_a_violation_carries_the_line_and_column_in_the_text() -> None:
    spec = {"amiFamily": "Bottlerocket", "userData": "[settings]\nx = \n"}
    [violation] = user_data_violations(spec, ("spec",))
    assert violation.path == ("spec", "userData") and violation.in_text is not None
    assert violation.in_text[0] == 2
