"""Long runs of plain list items kept out of fmt's round trip through ruamel.yaml, and put back afterwards.

ruamel.yaml's round-trip loader and dumper are pure Python: some 0.15 ms a list item each way, so one requirement
with 10,000 values cost fmt about 2 s. What fmt changes (defaults added, keys reordered) never touches such an
item, and the round trip writes the items of one list at one indentation, each plain word as it was — so a run
of at least `LONG_RUN` lines `<indent>- <word>` with the same indentation (a word: a letter first, then letters,
digits and `._/-`; not one YAML 1.1 reads as a boolean or null) is cut to one placeholder item before the round
trip (`set_aside`), and the placeholder's line of the output is replaced by the run's words at the indentation the
output gave the placeholder (`SetAside.restore`: the round trip may re-indent a list, `- a` under its key becoming
`  - a`). A placeholder the output does not hold exactly once, as a plain item on a line of its own, makes
`restore` give up (None): the caller then formats the whole text the slow way, as it also does when the result
does not read back as the expected data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

#: The shortest run set aside: below it the round trip costs little.
LONG_RUN: Final = 64

_ITEM = re.compile(r"( *- )([A-Za-z][A-Za-z0-9._/-]*)")
#: Words YAML 1.1 (the loader) or 1.2 (ruamel.yaml) reads as something other than a string.
_NOT_STRINGS: Final = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
#: The placeholder items' stem (a run's number follows); a text that holds it is not set aside.
_PLACEHOLDER: Final = "karpenter-policy-fmt-set-aside-"


@dataclass(frozen=True, slots=True)
class SetAside:
    """The text given to the round trip (`text`) and, by placeholder, the words of each run."""

    text: str
    runs: dict[str, list[str]]

    def restore(self, output: str) -> str | None:
        """`output` (the round trip's text of `text`) with each placeholder line replaced by its run's items at
        the placeholder's indentation; None when a placeholder is not found exactly once as a plain item."""
        lines = output.split("\n")
        where: dict[str, tuple[int, str]] = {}
        for index, line in enumerate(lines):
            match = _ITEM.fullmatch(line)
            if match is not None and match.group(2) in self.runs:
                if match.group(2) in where:
                    return None
                where[match.group(2)] = (index, match.group(1))
        if len(where) != len(self.runs) or sum(output.count(placeholder) for placeholder in self.runs) != len(where):
            return None
        for placeholder, (index, prefix) in sorted(where.items(), key=lambda pair: -pair[1][0]):
            lines[index : index + 1] = [prefix + word for word in self.runs[placeholder]]
        return "\n".join(lines)


def _plain_item(line: str) -> re.Match[str] | None:
    match = _ITEM.fullmatch(line)
    return match if match is not None and match.group(2).lower() not in _NOT_STRINGS else None


def set_aside(text: str) -> SetAside | None:
    """`text` with every run of `LONG_RUN` or more plain items cut to a placeholder item; None when it has none
    (or holds the placeholders' stem already)."""
    if _PLACEHOLDER in text:
        return None
    lines = text.split("\n")
    kept: list[str] = []
    runs: dict[str, list[str]] = {}
    index = 0
    while index < len(lines):
        match = _plain_item(lines[index])
        end = index + 1
        if match is not None:
            prefix = match.group(1)
            while end < len(lines):
                following = _plain_item(lines[end])
                if following is None or following.group(1) != prefix:
                    break
                end += 1
            if end - index >= LONG_RUN:
                placeholder = f"{_PLACEHOLDER}{len(runs)}"
                runs[placeholder] = [line[len(prefix) :] for line in lines[index:end]]
                kept.append(prefix + placeholder)
                index = end
                continue
        kept.extend(lines[index:end])
        index = end
    return SetAside("\n".join(kept), runs) if runs else None
