"""Resource bombs in policy templates: each is refused with `template-error` at its line, quickly and within
bounded memory, through the real CLI; ordinary templates render exactly as Jinja's own sandbox renders them.

Each bomb runs in a child process limited to 1.5 GB of address space (RLIMIT_AS), so that a regression fails
(MemoryError, a timeout) instead of eating the machine.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import pytest
from jinja2.sandbox import SandboxedEnvironment

from karpenter_policy.checks.source.templating import render_template

ROOT = Path(__file__).resolve().parents[3]
MEMORY_LIMIT = 1536 * 2**20
SECONDS = 20  # generous on a loaded 2-core machine; unbounded, these run for minutes or for ever
HEAD = "apiVersion: v1\nkind: ConfigMap\n"  # the bomb is on line 3
ZEROS = ", ".join(["0"] * 10_000)

#: name → (line 3 of the template, what the message must say: one of `|`-separated phrases)
BOMBS: dict[str, tuple[str, str]] = {
    "nested-range": (
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "more than 1,000,000 loop iterations",
    ),
    "tower-of-powers": ("data: {a: '{{ (((9**256)**256)**256)**256 }}'}", "integer of more than 4096 bits"),
    "lipsum": ("data: {a: '{{ lipsum(n=1000000) }}'}", "lipsum of 1000000 paragraphs"),
    "doubling-concat": (
        "{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "string of more than 1,000,000 characters",
    ),
    "center": ("data: {a: '{{ 'x'|center(10**10) }}'}", "center to a width of 10,000,000,000"),
    "format-width": ("data: {a: '{{ '%0999999999d'|format(1) }}'}", "%-format width 999,999,999"),
    "percent-width": ("data: {a: '{{ '%0999999999d' % 1 }}'}", "%-format width 999,999,999"),
    "str-format-width": ("data: {a: '{{ '{:>999999999}'.format(1) }}'}", "format width 999,999,999"),
    "repeated-string": ("data: {a: '{{ 'a' * 10**10 }}'}", "repeated sequence of more than 1,000,000"),
    "replace-empty": ("data: {a: '{{ ('ab' * 1000).replace('', 'x' * 1000000) }}'}", "replace would build"),
    "join-of-copies": ("data: {a: '{{ 'x'.join(['a' * 1000000] * 1000000) }}'}", "string of more than"),
    "print-copies": ("data: {a: '{{ ['a' * 1000000] * 1000000 }}'}", "string of more than"),
    "set-block-loop": (
        "{% set x %}{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxx{% endfor %}{% endfor %}"
        "{% endset %}",
        "more than 1,000,000 loop iterations",
    ),
    "list-extend-doubling": (
        "{% set l = [1] %}{% for i in range(64) %}{{ l.extend(l) }}{% endfor %}",
        "collection of more than 1,000,000",
    ),
    # a million list concatenations: the iteration bound refuses it, or on a loaded machine the render deadline
    # first (each concatenation copies the growing list)
    "sum-of-lists": (
        "data: {a: '{{ ([[1]] * 1000000)|sum(start=[])|length }}'}", "loop iterations|rendering takes more than 5 s"
    ),
    "batch-padding": ("data: {a: '{{ range(3)|batch(10**10, 0)|list }}'}", "batch of 10,000,000,000"),
    "literal-accumulation": (
        "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l, [" + ZEROS + "]] %}"
        "{% endfor %}",
        "MiB of memory|takes more than 5 s",  # the memory net, or on a slow machine the deadline first
    ),
    "slow-loop": (
        "{% set big = range(100000)|list %}{% for i in range(100000) %}{% if -1 in big %}x{% endif %}{% endfor %}",
        "rendering takes more than 5 s",
    ),
    "output-flood": ("{% for i in range(100000) %}{{ 'x' * 100 }}\n{% endfor %}", "renders to more than"),
}


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@dataclass
class Run:
    seconds: float
    returncode: int
    stdout: str
    stderr: str


def _validate(folder: Path) -> Run:
    started = time.monotonic()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "karpenter_policy.cli", "validate", str(folder), "--output", "json"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=SECONDS * 3,
            preexec_fn=_limit_memory,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return Run(time.monotonic() - started, -1, "", "timed out")
    return Run(time.monotonic() - started, result.returncode, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def bomb_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every bomb in its own CLI process, two at a time."""
    base = tmp_path_factory.mktemp("bombs")
    folders = {}
    for name, (line, _) in BOMBS.items():
        folder = base / name
        folder.mkdir()
        (folder / "bomb.yaml.j2").write_text(HEAD + line + "\n")
        folders[name] = folder
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_validate, folder) for name, folder in folders.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="RLIMIT_AS needs a POSIX child process")
@pytest.mark.parametrize("name", sorted(BOMBS))
@pytest.mark.slow
def test_bomb_is_refused_at_its_line(name: str, bomb_runs: dict[str, Run]) -> None:
    run = bomb_runs[name]
    assert "Traceback" not in run.stderr and "internal error" not in run.stderr, run.stderr[-2000:]
    assert run.returncode == 1, (run.returncode, run.stdout[-1000:], run.stderr[-1000:])
    (finding,) = json.loads(run.stdout)["findings"]
    assert (finding["rule"], finding["line"]) == ("template-error", 3), finding
    assert any(phrase in finding["message"] for phrase in BOMBS[name][1].split("|")), finding["message"]
    assert run.seconds < SECONDS, f"{name} took {run.seconds:.1f} s"


# --- ordinary templates are not affected -----------------------------------------------------------------------

ORDINARY = [
    "{% for z in zones %}{{ loop.index }}/{{ loop.length }}:{{ z }}{% if not loop.last %},{% endif %}{% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %}",
    "{% for k, v in m.items() %}{{ k ~ '=' ~ v ~ 1 }};{% endfor %}",
    "{% for item in tree recursive %}{{ item.n }}[{{ loop(item.c) }}]{% endfor %}",
    "{{ zones|join(', ') }} {{ zones|map('upper')|join }} {{ [1, 2, 3]|sum }} {{ [[1], [2, 3]]|sum(start=[]) }}",
    "{{ '{}-{:>5}'.format('a', 'b') }} {{ '{a}'.format_map({'a': 1}) }} {{ '%s-%05d'|format('x', 42) }}",
    "{{ '%(a)s' % {'a': 2} }} {{ '%s %s' % (1, 2) }} {{ '%*d' % (4, 2) }}",
    "{% macro m(x) %}<{{ x }}{{ caller() }}>{% endmacro %}{% call m(1) %}x{% endcall %}",
    "{% set b %}block {{ 1 + 2 }}{% endset %}{{ b }}|{% filter upper %}up {{ 'x' }}{% endfilter %}",
    "{% set ns = namespace(c=0) %}{% for i in range(5) %}{% set ns.c = ns.c + i %}{% endfor %}{{ ns.c }}",
    "{{ m|tojson }} {{ 'a\nb'|indent(2, true) }} {{ 'x'|center(7) }} {{ 'abc'[1:] }} {{ 'abc'.replace('b', 'B') }}",
    "{{ 2 ** 10 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 1.5 * 2 }} {{ 'ab' * 3 }} {{ [1] * 3 }} {{ [1] + [2] }} {{ -3 }}",
    "{% set c = cycler('a', 'b') %}{% for i in range(4) %}{{ c.next() }}{% endfor %} {{ range(3)|list }}",
    "{{ zones|batch(2)|list }} {{ zones|slice(2)|list }} {{ m|dictsort }} {{ zones|first }} {{ '-'.join(zones) }}",
    "{{ 'x y'|wordwrap(1) }} {{ 'abcdef'|truncate(5, true, '') }} {{ 'a' ~ 1 ~ none ~ [1] }} {{ zones|length }}",
    "{{ zones|reverse|list }} {{ zones|sort|unique|list }} {{ lipsum(2, false, 5, 6)|length > 0 }}",
]
VALUES: dict[str, Any] = {
    "zones": ["us-east-1a", "us-east-1b", "us-east-1c"],
    "m": {"a": 1, "b": "x"},
    "tree": [{"n": 1, "c": [{"n": 2, "c": []}]}],
}


@pytest.mark.parametrize("source", ORDINARY)
def test_ordinary_templates_render_as_jinja_renders_them(source: str) -> None:
    jinja = SandboxedEnvironment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    assert render_template("t.yaml.j2", source, VALUES).text == jinja.from_string(source).render(**VALUES)
