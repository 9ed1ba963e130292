"""The documentation holds together: every relative link of the README, docs/, examples/ and deploy/ Markdown
resolves to a file or directory of the repository, and every `#anchor` to a heading of its page (GitHub's slugs);
the README opens with what the tool is for and the two commands a new user needs, and stays a first screen."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md"),
                *(ROOT / "examples").rglob("*.md"), *(ROOT / "deploy").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation other than - and _ dropped, spaces as -."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.MULTILINE)}


def links(page: Path) -> list[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    text = re.sub(r"`[^`\n]*`", "", text)
    return [m.group(1) for m in LINK.finditer(text) if not re.match(r"[a-z]+:", m.group(1))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in links(page):
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{link}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
    assert not broken, broken


def test_the_readme_opens_with_what_the_tool_is_for_then_the_quick_start() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    first_heading = next(i for i, line in enumerate(lines) if line.startswith("## "))

    assert "Karpenter" in "\n".join(lines[:first_heading]) and first_heading < 12
    assert lines[first_heading] == "## Quick start"
    quick_start = "\n".join(lines[first_heading:first_heading + 10])
    assert ("python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/karpenter-policy compile policies/"
            " -o build/") in quick_start
    # CI (.ci/run) runs this command: it must stay as it is
    assert "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/pytest -n auto" in quick_start
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:3] == ["## Quick start", "## On your own repository", "## In CI"]
    assert len(lines) < 150
