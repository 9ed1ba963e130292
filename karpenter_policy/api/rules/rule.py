"""What a rule is: one declaration per rule id — its default severity, what it says in one line and at length,
whether a finding of it can be silenced, its page and the Karpenter source it follows.

Every reader of rules reads these declarations (`api/rules/index.py` collects them): the reporters (SARIF's rule
metadata), `--disable` and the `# karpenter-policy: disable=` directives, compile, `karpenter-policy rules`, and the
tests that hold `docs/rules/<id>.md` and the call sites to them.
"""

from __future__ import annotations

from dataclasses import dataclass

ERROR = "error"
WARNING = "warning"
SEVERITIES = (ERROR, WARNING)

#: Where a rule's page lives, relative to the repository's root (`docs/rules/<id>.md`).
RULE_PAGES = "docs/rules"

#: How `Rule.karpenter` names its repository: `core` is kubernetes-sigs/karpenter, `aws` is
#: aws/karpenter-provider-aws, both at v0.31.1 (the version v1alpha5 follows); `core-v1` and `aws-v1` are the same
#: repositories at v1.14.1 (the version Karpenter v1 objects follow).
KARPENTER_REPOSITORIES = {
    "core": "kubernetes-sigs/karpenter v0.31.1",
    "aws": "aws/karpenter-provider-aws v0.31.1",
    "core-v1": "kubernetes-sigs/karpenter v1.14.1",
    "aws-v1": "aws/karpenter-provider-aws v1.14.1",
}


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule.

    `severity` is the rule's severity. A call site may report another only when `severity_varies` says when
    (`invalid-requirement`'s values on Exists are a warning; `unknown-instance-type` is a warning when other values
    still exist): a test holds every call site to this. `error_when_compiled` makes `compile` report the rule's
    warnings as errors (what compile writes is applied). `silenceable` False: neither `--disable` nor a directive
    silences it. `karpenter` is the Go file and function of Karpenter the rule follows, as `core|aws path:
    function` (`KARPENTER_REPOSITORIES`), or "" for a rule of karpenter-policy's own.
    """

    id: str
    severity: str
    summary: str
    description: str
    karpenter: str = ""
    silenceable: bool = True
    severity_varies: str = ""
    error_when_compiled: bool = False

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.id}: severity {self.severity!r} is not one of {', '.join(SEVERITIES)}")

    @property
    def page(self) -> str:
        """The rule's page, from the repository's root: `docs/rules/<id>.md`."""
        return f"{RULE_PAGES}/{self.id}.md"

    @property
    def severities(self) -> frozenset[str]:
        """The severities a finding of this rule may have: its own, and the other one where it varies or compile
        makes it an error."""
        if self.severity_varies:
            return frozenset(SEVERITIES)
        return frozenset({self.severity, ERROR}) if self.error_when_compiled else frozenset({self.severity})

    def karpenter_source(self) -> str:
        """`karpenter` with its repository spelt out, or what a rule of the tool's own says."""
        if not self.karpenter:
            return "karpenter-policy's own rule (Karpenter has no such check)"
        return "; ".join(self._spelt(part.strip()) for part in self.karpenter.split(";"))

    @staticmethod
    def _spelt(source: str) -> str:
        repository, _, rest = source.partition(" ")
        return f"{KARPENTER_REPOSITORIES[repository]} {rest}" if repository in KARPENTER_REPOSITORIES else source
