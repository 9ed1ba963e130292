"""fmt sets long runs of plain list items aside during its round trip through ruamel.yaml
(`commands/fmt/setaside.py`): the formatted text is byte for byte what the whole round trip gives — whatever the
indentation, the comments, the quoting and the words around and inside the run — and a run is set aside at all
(the 10,000-value shape of `benchmarks/check.py --shapes` is formatted without loading its values)."""

from __future__ import annotations

import operator
import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from karpenter_policy.commands.fmt import fmt as fmt_module
from karpenter_policy.commands.fmt.fmt import format_text
from karpenter_policy.commands.fmt.setaside import LONG_RUN, set_aside
from tests.profiles import deterministic

#: A word of `[a-zA-Z][a-zA-Z0-9._/-]{0,12}`, drawn letter by letter: `st.from_regex` of the same language spent half
#: the test's time drawing it.
_PLAIN = st.builds(
    operator.add,
    st.sampled_from(string.ascii_letters),
    st.text(alphabet=string.ascii_letters + string.digits + "._/-", max_size=12),
)
_OTHER = st.sampled_from(["yes", "No", "on", "true", "null", "'quoted'", '"dq"', "1", "x # note", "a: b", "b  "])


@st.composite
def _values(draw: st.DrawFn) -> list[str]:
    """Mostly plain words (runs long enough to be set aside), and a few others cutting them."""
    values = draw(st.lists(_PLAIN, min_size=LONG_RUN - 2, max_size=2 * LONG_RUN + 10))
    for index, word in draw(st.lists(st.tuples(st.integers(0, len(values)), _OTHER), max_size=2)):
        values.insert(index, word)
    return values


def _provisioner(values: list[str], offset: int, comment: bool, flow_after: bool, v1: bool) -> str:
    dash = " " * offset
    if v1:
        head = ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: np\nspec:\n  template:\n"
                "    spec:\n      nodeClassRef:\n        group: karpenter.k8s.aws\n        kind: EC2NodeClass\n"
                "        name: default\n      requirements:\n")
        indent = "      "
    else:
        head = ("apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: p\nspec:\n"
                "  providerRef:\n    name: default\n  requirements:\n")
        indent = "  "
    item = indent + dash
    lines = [f"{item}- key: example.com/team", f"{item}  operator: In", f"{item}  values:"]
    lines += [f"{item}  {dash}- {value}" for value in values]
    if comment:
        lines.append(f"{item}  # about the values")
    if flow_after:
        lines += [f"{item}- key: kubernetes.io/os", f"{item}  operator: In", f"{item}  values: [linux]"]
    return head + "\n".join(lines) + "\n"


def _whole_round_trip(text: str) -> str:
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(fmt_module, "set_aside", lambda chunk: None)
        return format_text("p.yaml", text).updated


@deterministic(200)
@given(
    values=_values(),
    offset=st.sampled_from([0, 2]),
    comment=st.booleans(),
    flow_after=st.booleans(),
    v1=st.booleans(),
)
def test_the_text_is_what_the_whole_round_trip_gives(
    values: list[str], offset: int, comment: bool, flow_after: bool, v1: bool
) -> None:
    text = _provisioner(values, offset, comment, flow_after, v1)
    try:
        whole = _whole_round_trip(text)
    except Exception as error:  # noqa: BLE001 - a document the loader refuses is refused the same way
        with pytest.raises(type(error)):
            format_text("p.yaml", text)
        return
    assert format_text("p.yaml", text).updated == whole


def test_a_long_run_is_set_aside_and_the_result_is_the_whole_round_trips(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _provisioner([f"team-{i}" for i in range(2 * LONG_RUN)], 0, True, True, False)
    aside = set_aside(text)
    assert aside is not None and len(aside.runs) == 1 and "team-5\n" not in aside.text
    loaded: list[str] = []
    real = fmt_module._round_trip

    def spying(chunk: str) -> Any:
        yaml = real(chunk)
        load = yaml.load
        yaml.load = lambda source: (loaded.append(source), load(source))[1]  # type: ignore[method-assign]
        return yaml

    monkeypatch.setattr(fmt_module, "_round_trip", spying)
    formatted = format_text("p.yaml", text)
    assert loaded and all("team-5\n" not in source for source in loaded)  # the values never went through ruamel
    assert formatted.changed and "    - team-5\n" in formatted.updated  # re-indented as the whole round trip does
    assert formatted.updated == _whole_round_trip(text)


def test_short_runs_and_words_yaml_reads_otherwise_are_not_set_aside() -> None:
    assert set_aside(_provisioner([f"v{i}" for i in range(LONG_RUN - 1)], 0, False, False, False)) is None
    mixed = [f"v{i}" for i in range(LONG_RUN)]
    mixed[LONG_RUN // 2] = "yes"  # a boolean to YAML 1.1: the run is cut in two short ones
    assert set_aside(_provisioner(mixed, 0, False, False, False)) is None
