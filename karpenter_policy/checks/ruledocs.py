"""Where the rules' pages are published: the address SARIF's `helpUri` and `karpenter-policy rules` give.

What each rule means is its declaration (`api/rules`); each rule also has a page, `docs/rules/<rule>.md`, with an
example, how to fix it and how to silence it. The page's address is known when the project's is:
`$KARPENTER_POLICY_DOCS_URL` (the URL of the repository's `docs/` directory as a browser shows it), else the
`Documentation` URL of the installed package's metadata (`[project.urls]` in pyproject.toml).
"""

from __future__ import annotations

import os
from functools import cache

DOCS_URL_ENV = "KARPENTER_POLICY_DOCS_URL"


def docs_url() -> str | None:
    """The URL of the project's `docs/` directory, if known (see the module docstring)."""
    configured = os.environ.get(DOCS_URL_ENV)
    if configured:
        return configured.rstrip("/")
    return _package_docs_url()


@cache
def _package_docs_url() -> str | None:
    """The installed package's `Documentation` URL: its metadata read once per process (1.4 ms a read, at every
    SARIF report before)."""
    from importlib import metadata  # only SARIF output needs it

    try:
        urls: list[str] = metadata.metadata("karpenter-policy").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = str(entry).partition(",")
        if label.strip().lower() == "documentation" and url.strip():
            return url.strip().rstrip("/")
    return None


def help_uri(rule: str, base: str | None) -> str | None:
    """The address of a rule's page under the docs URL `base`."""
    return f"{base}/rules/{rule}.md" if base else None
