"""The loader: positions of every node, and hostile input refused with a clear parse error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from profiles import deterministic

from karpenter_policy.checks.source import loader
from karpenter_policy.checks.source.files import load_file
from karpenter_policy.checks.source.loader import MAX_NODES_PER_FILE, LoadError, UnreadableFile, discover, parse
from tests.unprivileged import ROOT, Unprivileged, unprivileged  # noqa: F401  (the fixture)

PROVISIONER = """\
# a comment
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  requirements:
    - key: kubernetes.io/arch
      operator: In
      values: [amd64, arm64]
  labels:
    team: a
"""


def test_positions_point_at_values_and_keys() -> None:
    (doc,) = parse("p.yaml", PROVISIONER)
    assert doc.position(("spec", "requirements", 0, "key")) == (8, 12)
    assert doc.position(("spec", "requirements", 0, "operator")) == (9, 17)
    assert doc.position(("spec", "requirements", 0, "values", 1)) == (10, 23)
    assert doc.position(("spec", "labels", "team"), at_key=True) == (12, 5)
    assert doc.position(("spec", "labels", "team")) == (12, 11)


def test_missing_path_falls_back_to_nearest_ancestor() -> None:
    (doc,) = parse("p.yaml", PROVISIONER)
    assert doc.position(("spec", "requirements", 5, "key")) == doc.position(("spec", "requirements"))
    assert doc.position(("spec", "providerRef")) == doc.position(("spec",))


def test_multi_document_files_and_lists() -> None:
    text = PROVISIONER + "---\n---\napiVersion: v1\nkind: List\nitems:\n  - kind: ConfigMap\n    apiVersion: v1\n"
    docs = parse("p.yaml", text)
    assert [d.data["kind"] for d in docs] == ["Provisioner", "ConfigMap"]
    assert docs[1].position(("kind",)) == (18, 11)


def test_yaml_11_scalars_like_kubectl() -> None:
    (doc,) = parse("x.yaml", "a: yes\nb: 0x10\nc: 2001-12-14\nd: '1'\ne: 1.5\nf: ~\n")
    assert doc.data == {"a": True, "b": 16, "c": "2001-12-14", "d": "1", "e": 1.5, "f": None}


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ("a: 1\nb: [\n", "invalid YAML", 2),  # the unclosed bracket, not the end of the file
        ("spec:\n\t- key: x\n", "tabs for indentation", 2),
        ("a: 1\nb: 2\na: 3\n", "duplicate key 'a' (first at line 1)", 3),
        ("? [a]\n: b\n", "mapping key must be a plain scalar", 1),
        ("a: !!python/object:os.system x\n", "unsupported YAML tag tag:yaml.org,2002:python/object:os.system", 1),
        ("a: !Secret x\n", "unsupported YAML tag !Secret", 1),
    ],
)
def test_parse_errors_name_the_line(text: str, message: str, line: int) -> None:
    with pytest.raises(LoadError) as raised:
        parse("bad.yaml", text)
    assert message in raised.value.message
    assert raised.value.line == line
    assert raised.value.file == "bad.yaml"


def test_alias_bomb_is_refused_within_the_budget() -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    with pytest.raises(LoadError, match="YAML bomb"):
        parse("bomb.yaml", "\n".join(levels) + "\n")
    assert MAX_NODES_PER_FILE < 10**8  # the bomb above expands to 10^9 nodes


def test_deep_nesting_is_refused() -> None:
    with pytest.raises(LoadError):
        parse("deep.yaml", "a: " + "[" * 20000 + "]" * 20000 + "\n")


def test_binary_non_utf8_and_oversized_files(tmp_path: Path) -> None:
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"apiVersion: v1\x00\x01")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"a: 1\nname: caf\xe9\n")
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 2000 + "\n")
    with pytest.raises(LoadError, match="binary file"):
        load_file(str(binary))
    with pytest.raises(LoadError, match="not UTF-8") as raised:
        load_file(str(latin))
    assert (raised.value.line, raised.value.column) == (2, 10)
    with pytest.raises(LoadError, match="larger than 1000 bytes"):
        load_file(str(big), max_bytes=1000)
    with pytest.raises(UnreadableFile):
        load_file(str(tmp_path / "missing.yaml"))


@given(content=st.binary(max_size=300), seen=st.integers(0, 400), bound=st.integers(0, 300))
@deterministic(300)
def test_a_file_is_read_to_one_byte_past_the_bound_whatever_size_it_was_seen_to_have(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, seen: int, bound: int
) -> None:
    """`read_text` reads in a buffer of the size `stat` gave; a file that grew or shrank since (`seen` is what
    the stat said) is read as one read of `bound + 1` bytes reads it: the bytes past the bound tell it is too
    large, and nothing short of the bound is left out."""
    file = tmp_path_factory.mktemp("bounded") / "policy.yaml"
    file.write_bytes(content)
    assert loader._read_bounded(str(file), seen, bound) == content[: bound + 1]


def test_reading_a_small_file_does_not_allocate_the_bound(tmp_path: Path) -> None:
    """A read of `MAX_FILE_BYTES + 1` allocated 4 MiB for each file, however small (and the kernel mapped and
    unmapped it: most of `validate`'s reading time on 5,000 one-NodePool files)."""
    file = tmp_path / "small.yaml"
    file.write_text(PROVISIONER)
    loader.read_text(str(file))  # anything imported or cached on a first read is not counted
    tracemalloc.start()
    try:
        text = loader.read_text(str(file))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text == PROVISIONER
    assert peak < 64 * 1024 < loader.MAX_FILE_BYTES


def test_bom_is_accepted(tmp_path: Path) -> None:
    file = tmp_path / "bom.yaml"
    file.write_bytes(b"\xef\xbb\xbfkind: ConfigMap\napiVersion: v1\n")
    assert load_file(str(file))[0].data["kind"] == "ConfigMap"


def test_discover_walks_directories_sorted_and_skips_hidden(tmp_path: Path) -> None:
    for name in ("b.yaml", "a.yml", "notes.txt", ".hidden.yaml", "sub/c.yaml", ".git/d.yaml"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("a: 1\n")
    files, missing = discover([str(tmp_path), str(tmp_path / "b.yaml"), str(tmp_path / "nope")])
    assert [Path(f).relative_to(tmp_path).as_posix() for f in files] == ["a.yml", "b.yaml", "sub/c.yaml"]
    assert missing == [str(tmp_path / "nope")]


# --- nothing unreadable passes -------------------------------------------------------------------------------


def _policy_tree(directory: Path) -> Path:
    tree = directory / "policies"
    (tree / "team-a").mkdir(parents=True)
    shutil.copy(ROOT / "policies" / "nodetemplates.yaml", tree)
    shutil.copy(ROOT / "policies" / "default.yaml", tree)
    shutil.copy(ROOT / "policies" / "gpu.yaml", tree / "team-a")
    return tree


def _findings(stdout: str) -> dict[str, str]:
    return {os.path.basename(f["file"]): f["message"] for f in json.loads(stdout)["findings"]}


@pytest.mark.slow
def test_an_unreadable_directory_is_an_error_not_a_pass(unprivileged: Unprivileged) -> None:  # noqa: F811
    """A sub-directory the user cannot list (mode 000) used to be skipped: validate said 0 errors and exit 0."""
    tree = _policy_tree(unprivileged.directory)
    (tree / "team-a").chmod(0)

    validated = unprivileged.run("validate", str(tree), "--output", "json")
    compiled = unprivileged.run("compile", str(tree), "-o", "-", "--output", "json")

    assert validated.returncode == 2, validated.stdout + validated.stderr
    assert _findings(validated.stdout)["team-a"] == "cannot read directory: Permission denied"
    assert compiled.returncode == 2 and compiled.stdout == ""  # nothing compiled from half a tree
    assert _findings(compiled.stderr)["team-a"] == "cannot read directory: Permission denied"


def test_symbolic_links_that_lead_nowhere_are_errors(tmp_path: Path) -> None:
    tree = _policy_tree(tmp_path)
    (tree / "team-a" / "gone.yaml").symlink_to(tmp_path / "deleted.yaml")
    (tree / "team-a" / "loop.yaml").symlink_to(tree / "team-a" / "loop.yaml")
    done = subprocess.run(
        [sys.executable, "-m", "karpenter_policy.cli", "validate", str(tree), "--output", "json"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    findings = _findings(done.stdout)
    assert findings["gone.yaml"] == "cannot read file: No such file or directory"
    assert findings["loop.yaml"] == "cannot read file: Too many levels of symbolic links"


def _tags(node: Any) -> list[tuple[str, str]]:
    """Every node's tag and text (a scalar's), depth first: what the conversion reads of a composed tree."""
    if isinstance(node, yaml.ScalarNode):
        return [(node.tag, node.value)]
    children = [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else node.value
    return [(node.tag, ""), *(tag for child in children for tag in _tags(child))]


_SCALAR_TEXTS = st.one_of(
    st.sampled_from(["yes", "No", "on", "OFF", "~", "null", "", "0x1F", "0o17", "017", "1_000", "+1", "-0", "1.5e3",
                     ".inf", "-.Inf", ".nan", "1:30", "190:20:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00",
                     "=", "<<", "true", "8Gi", "1h30m", "karpenter.sh/v1", "us-east-1a", "0.5", "1e3", "12e03"]),
    st.text(alphabet="0123456789.:+-_eExXoObB:tTyYnN~", min_size=1, max_size=8),
)


@given(st.lists(st.tuples(_SCALAR_TEXTS, st.sampled_from(["plain", "single", "double", "block"])), min_size=1,
                max_size=30))
@deterministic(300)
def test_tags_are_resolved_as_pyyamls_safe_loader_resolves_them(items: list[tuple[str, str]]) -> None:
    """The loader's tag resolution (each plain scalar's remembered by its text) tags every node of a document as
    PyYAML's safe loader does, repeated scalars too: plain scalars by YAML 1.1's implicit resolvers, quoted and
    block scalars as strings."""
    lines = []
    for index, (text, style) in enumerate(items):
        written = {"plain": text, "single": "'" + text.replace("'", "''") + "'", "double": json.dumps(text),
                   "block": "|-\n    " + text}[style]
        lines.append(f"k{index}: {written}")
        lines.append(f"l{index}: [{written if style != 'block' else json.dumps(text)}]")
    text = "\n".join(lines) + "\n"
    try:
        expected = _tags(yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return  # not YAML at all (a plain scalar such as `:` alone): nothing to compare
    for _ in range(2):  # the second time from what the loader remembered
        assert _tags(yaml.compose(text, Loader=loader._Loader)) == expected


class _TimestampsAsText(yaml.SafeLoader):
    """PyYAML's pure-Python safe loader, with the two changes the loader makes: timestamps and binary stay text."""


_TimestampsAsText.add_constructor("tag:yaml.org,2002:timestamp", lambda _, node: node.value)
_TimestampsAsText.add_constructor("tag:yaml.org,2002:binary", lambda _, node: node.value)


@given(st.lists(st.tuples(_SCALAR_TEXTS, st.sampled_from(["", "!!int ", "!!float ", "!!bool ", "!!null ", "!!str "]),
                          st.sampled_from(["plain", "double"])), min_size=1, max_size=30))
@deterministic(300)
def test_scalar_values_are_pyyamls_and_each_tags_own(items: list[tuple[str, str, str]]) -> None:
    """The values of scalars that are not text, remembered by their tag and text (`loader._scalar_values`), are the
    values PyYAML's safe loader constructs, each for its own tag — the same text as an int, a float, a string —,
    the second time from what was remembered too; text its tag cannot hold (`!!int yes`) is a parse error each time."""
    lines = []
    for index, (text, tag, style) in enumerate(items):
        written = text if style == "plain" else json.dumps(text)
        lines.append(f"k{index}: {tag}{written}")
    text = "\n".join(lines) + "\n"
    try:
        expected: Any = yaml.load(text, Loader=_TimestampsAsText)
    except (yaml.constructor.ConstructorError, ValueError, TypeError, KeyError, IndexError, ArithmeticError):
        expected = None  # a tag that cannot hold the text
    except yaml.YAMLError:
        return  # not YAML at all: nothing to compare
    for _ in range(2):
        if expected is None:
            with pytest.raises(LoadError):
                parse("f.yaml", text)
        else:
            assert repr(parse("f.yaml", text)[0].data) == repr(expected)  # repr: 1, 1.0, True and nan told apart


def test_the_same_text_under_each_tag_keeps_its_own_value() -> None:
    text = 'a: 1\nb: !!float 1\nc: "1"\nd: !!str 1\ne: !!bool yes\nf: yes\ng: !!null ""\nh: 0o17\ni: 017\n'
    for _ in range(2):
        data = parse("f.yaml", text)[0].data
        assert [(key, type(value).__name__, value) for key, value in data.items()] == [
            ("a", "int", 1), ("b", "float", 1.0), ("c", "str", "1"), ("d", "str", "1"), ("e", "bool", True),
            ("f", "bool", True), ("g", "NoneType", None), ("h", "str", "0o17"), ("i", "int", 15)]


def test_a_link_put_in_place_of_a_file_after_it_was_looked_at_is_not_followed(tmp_path: Path) -> None:
    """`read_text` looks at a file (lstat) and then opens it: a symbolic link swapped in between — to a file outside
    the repository — is an error, never read (O_NOFOLLOW on a file that was no link)."""
    outside = tmp_path / "secret.yaml"
    outside.write_text("password: x\n")
    link = tmp_path / "repo.yaml"
    link.symlink_to(outside)
    with pytest.raises(OSError):
        loader._read_bounded(str(link), 10, 100)  # as if lstat had seen a regular file of 10 bytes
    assert loader._read_bounded(str(link), 10, 100, follow=True) == b"password: x\n"
