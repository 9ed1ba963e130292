"""Which findings a run does not report: rules turned off with `--disable RULE`, and single findings silenced in
the file with a comment.

    requirements:
      # karpenter-policy: disable=unknown-instance-type
      - key: node.kubernetes.io/instance-type
        operator: In
        values: [m7i-flex.large]     # karpenter-policy: disable=unknown-instance-type

A directive is a YAML comment `# karpenter-policy: disable=RULE[,RULE...]`. At the end of a line it silences the
findings of those rules placed on that line; alone on its line, those placed on the next line.

Some rules cannot be silenced either way (`UNSUPPRESSIBLE`: declared `silenceable=False` in `api/rules`): an
object the tool cannot read (`parse-error`, `template-error`, `schema`) or that Karpenter's webhook refuses
(`invalid-requirement`, `restricted-label`, `invalid-spec`) cannot be proven or compiled — the later stages rely on
those rules — and silencing the finding would only move the failure to the cluster; a Provisioner compile cannot
store (`reserved-name`, `configmap-too-large`) leaves nothing to write. Every other finding silenced counts as if
its rule had not fired: the object goes on to the solver and the compiler.

A file's directives are taken from the text the run read (`Suppression.read`; `validate` hands over each file's
text as it reads it), else read when a finding in it is first looked at (`loader.read_text`: the same bounds;
standard input is kept by the loader).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from karpenter_policy.api.rules import unsilenceable
from karpenter_policy.checks.findings import Finding
from karpenter_policy.checks.source.loader import LoadError, read_text

#: Rules neither `--disable` nor a comment can silence (see the module docstring).
UNSUPPRESSIBLE = unsilenceable()

# a YAML comment starts at a '#' at the start of a line or after a blank; words after the rules are a free note
_DIRECTIVE = re.compile(r"(?:^|\s)#\s*karpenter-policy:\s*disable=([A-Za-z0-9-]+(?:\s*,\s*[A-Za-z0-9-]+)*)")
_COMMENT_LINE = re.compile(r"^\s*#")


def directives(text: str) -> dict[int, frozenset[str]]:
    """Line number (1-based) → the rules silenced there, from the directives in `text`."""
    if "karpenter-policy:" not in text:
        return {}
    silenced: dict[int, set[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _DIRECTIVE.search(line)
        if match is None:
            continue
        rules = {r.strip() for r in match.group(1).split(",") if r.strip()}
        target = number + 1 if _COMMENT_LINE.match(line) else number
        silenced.setdefault(target, set()).update(rules)
    return {line: frozenset(rules) for line, rules in silenced.items()}


@dataclass(slots=True)
class Suppression:
    """The rules `--disable`d and the files' directives; decides whether a finding is reported."""

    disabled: frozenset[str] = frozenset()
    _by_file: dict[str, dict[int, frozenset[str]]] = field(default_factory=dict, repr=False)

    def suppresses(self, finding: Finding) -> bool:
        if finding.rule in UNSUPPRESSIBLE:
            return False
        if finding.rule in self.disabled:
            return True
        if not finding.line:
            return False
        return finding.rule in self._directives(finding.file).get(finding.line, frozenset())

    def read(self, file: str, text: str) -> None:
        """Take `file`'s directives from its `text`, as the run read it: a finding there does not read it again."""
        self._by_file[file] = directives(text)

    def taken(self, file: str) -> dict[int, frozenset[str]] | None:
        """`file`'s directives if they were taken already (None: not yet)."""
        return self._by_file.get(file)

    def remember(self, file: str, found: dict[int, frozenset[str]]) -> None:
        """`file`'s directives as another process took them from its text (`taken`)."""
        self._by_file[file] = found

    def _directives(self, file: str) -> dict[int, frozenset[str]]:
        known = self._by_file.get(file)
        if known is None:
            try:
                known = directives(read_text(file))
            except LoadError:
                known = {}
            self._by_file[file] = known
        return known
