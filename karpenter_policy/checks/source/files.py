"""One policy or workload file in, its documents out: plain YAML parsed by `loader`, `*.yaml.j2` templates
rendered by `templating` first (jinja2 is only imported when there are templates)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpenter_policy.checks.source.loader import MAX_FILE_BYTES, TEMPLATE_SUFFIX, Document, parse, read_text


def load_file(file: str, max_bytes: int = MAX_FILE_BYTES, values: Mapping[str, Any] | None = None) -> list[Document]:
    """Read and parse one file; raises LoadError. A `*.yaml.j2` template is rendered first with `values`
    (an empty mapping when None), see `templating`."""
    return load_text(file, read_text(file, max_bytes), max_bytes, values)


def load_text(file: str, text: str, max_bytes: int = MAX_FILE_BYTES,
              values: Mapping[str, Any] | None = None) -> list[Document]:
    """`load_file` of a file whose `text` was read already (`loader.read_text`); raises LoadError."""
    if file.endswith(TEMPLATE_SUFFIX):
        from karpenter_policy.checks.source.templating import load_template  # jinja2 only for templates

        return load_template(file, text, values, max_bytes)
    return parse(file, text)
