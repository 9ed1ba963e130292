"""What `karpenter-policy --help` and `--version` say beyond the commands' docstrings: each command's examples and
exit codes (the epilog of its --help, taken from the exit codes its code returns: `Report.exit_code`,
`DiffResult.exit_code`, `fmt_command`, `pin`'s, `rules_command`, `simulate_command`, the webhook's and the
reconciler's `main`), and the version line, which says plainly when the installed version is a development build
rather than a release.

The exit-code table of docs/cli.md ("Exit codes") says the same; tests/test_cli.py holds both to the code.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence

__all__ = ["EPILOGS", "version_line"]

#: setuptools-scm's version of a commit that is not a release tag: the guessed next version, `.devN` (N commits
#: after the last tag, or since the first commit when there is none), `+g<commit>` (and `.dYYYYMMDD` when dirty).
_DEVELOPMENT = re.compile(r"(?P<base>\d+(?:\.\d+)*)\.dev(?P<commits>\d+)\+g[0-9a-f]+(?:\.d\d{8})?")
#: What setuptools-scm guesses when the history holds no tag at all (pyproject.toml's [tool.setuptools_scm]).
_NO_TAG_BASE = "0.0.1"


def version_line(version: str) -> str:
    """`karpenter-policy --version`'s line: the version, and what it is when it is not a release's."""
    line = f"karpenter-policy, version {version}"
    development = _DEVELOPMENT.fullmatch(version)
    if development is not None and development["base"] == _NO_TAG_BASE:
        return f"{line} (untagged development build: no release tag in this clone's history)"
    if development is not None:
        commits = int(development["commits"])
        return f"{line} (development build: {commits} commit{'s' if commits != 1 else ''} after the last release tag)"
    if version == "0.0.0":  # pyproject.toml's fallback_version
        return f"{line} (built without git metadata and without a version given: not a release)"
    if version == "0+unknown":  # karpenter_policy.__version__ when the distribution is not installed
        return f"{line} (not installed: run from a source tree)"
    return line


def _epilog(examples: Sequence[str], exit_codes: Sequence[tuple[int | str, str]]) -> str:
    """An epilog click prints as it stands (`\\b` stops its rewrapping)."""
    lines = ["\b", "Examples:", *(f"  {example}" for example in examples), "", "\b", "Exit codes:"]
    lines += [textwrap.fill(meaning, 100, initial_indent=f"  {code}  " if code != "" else "     ",
                            subsequent_indent="     ")
              for code, meaning in exit_codes]
    return "\n".join(lines)


_COULD_NOT_RUN = "the tool could not run: a usage error, a path missing or unreadable, a bad --values or --catalog"
_FINDINGS: list[tuple[int | str, str]] = [
    (0, "no error"),
    (1, "at least one finding of severity error (warnings too with --strict)"),
    (2, f"{_COULD_NOT_RUN}, no policy file to read"),
]

EPILOGS: dict[str, str] = {
    "main": _epilog(
        [
            "karpenter-policy validate policies/",
            "karpenter-policy check policies/ --region eu-west-1",
            "karpenter-policy check policies/ --workloads apps/",
            "karpenter-policy diff origin/main HEAD policies/ --workloads apps/ --output markdown",
            "karpenter-policy compile policies/ -o build/",
            "karpenter-policy COMMAND --help   (each command's flags, examples and exit codes)",
        ],
        [
            (0, "no error"),
            (1, "an error was found (what else: see COMMAND --help)"),
            (2, "a usage error, or the tool could not run"),
        ],
    ),
    "validate": _epilog(
        [
            "karpenter-policy validate",
            "karpenter-policy validate policies/ --output sarif > results.sarif",
            "helm template charts/karpenter | karpenter-policy validate -",
        ],
        _FINDINGS,
    ),
    "check": _epilog(
        [
            "karpenter-policy check policies/ --region eu-west-1",
            "karpenter-policy check policies/ --output github",
            "karpenter-policy check policies/ --workloads apps/ --scale deployment/api=12",
            "karpenter-policy check policies/ --workloads apps/ --output markdown | gh pr comment --body-file -",
        ],
        _FINDINGS,
    ),
    "test": _epilog(
        [
            "karpenter-policy test policies/ tests/placement/ --workloads apps/",
            "karpenter-policy test policies/ --workloads apps/ --output junit > placement-tests.xml",
        ],
        [
            (0, "every PlacementTest holds"),
            (1, "an expectation does not hold, or a PlacementTest file is malformed"),
            (2, f"{_COULD_NOT_RUN}, no PlacementTest among the paths"),
        ],
    ),
    "compile": _epilog(
        [
            "karpenter-policy compile policies/ -o build/",
            "karpenter-policy compile . -o -        (one YAML stream: an Argo CD plugin)",
            "karpenter-policy compile policies/ --api v1 --node-role KarpenterNodeRole -o build/",
        ],
        [(0, "written (nothing is written when there is an error)"), *_FINDINGS[1:]],
    ),
    "diff": _epilog(
        [
            "karpenter-policy diff origin/main HEAD policies/",
            "karpenter-policy diff origin/main HEAD policies/ --workloads apps/ --output markdown",
            "karpenter-policy diff old-policies/ new-policies/ --exit-code",
            "karpenter-policy diff origin/main HEAD policies/ --equivalent --workloads apps/",
        ],
        [
            (0, "HEAD has no error (with --exit-code: and nothing differs; --equivalent: no landing set changes)"),
            (1, "HEAD has an error, a workload becomes unschedulable, (--exit-code) anything differs, or "
             "(--equivalent) a workload's landing set changes"),
            (2, "the tool could not run: a usage error, a path on neither side, no git, an unknown revision"),
            ("", "(BASE unknown in a shallow clone: set fetch-depth: 0 on actions/checkout)"),
        ],
    ),
    "plan": _epilog(
        [
            "kubectl get nodes,pods,pdb,daemonsets,nodeclaims,pvc,pv,storageclass -A -o json > snapshot.json",
            "karpenter-policy plan origin/main HEAD policies/ --snapshot snapshot.json",
            "karpenter-policy plan origin/main HEAD --snapshot - --output markdown < snapshot.json",
            "karpenter-policy plan origin/main HEAD policies/ --kubeconfig plan-reader.kubeconfig",
        ],
        [
            (0, "the plan finishes and strands no pod (or --allow-stranded)"),
            (1, "HEAD has an error, pods would be left pending, or the rollout can never finish"),
            (2, "the tool could not run: a malformed snapshot, a cluster it may not fully read, an unknown "
                "revision, a bad --start"),
        ],
    ),
    "fmt": _epilog(
        [
            "karpenter-policy fmt policies/            (print a diff)",
            "karpenter-policy fmt policies/ --write",
            "karpenter-policy fmt policies/ --check    (in CI)",
        ],
        [
            (0, "nothing to change, or every change written with --write"),
            (1, "--check and a file is (or was) not formatted; a file that cannot be read"),
            (2, "a usage error, or the tool could not run"),
        ],
    ),
    "migrate": _epilog(
        [
            "karpenter-policy migrate policies/ --to v1                 (print a diff)",
            "karpenter-policy migrate policies/ --to v1 -o policies-v1/",
            "karpenter-policy migrate policies/ --to v1 --write",
            "karpenter-policy migrate policies/ --to v1beta1 -o policies-v1beta1/   (Karpenter v0.32-v0.37)",
        ],
        [
            (0, "every Provisioner and AWSNodeTemplate migrated (each NodePool proven equivalent), or none to migrate"),
            (1, "an object was not migrated (its finding says why), or a warning with --strict"),
            (2, "a usage error, or the tool could not run (nothing written)"),
        ],
    ),
    "pin": _epilog(
        [
            "karpenter-policy pin apps/ --policies policies/            (print a diff)",
            "karpenter-policy pin apps/ --policies policies/ --write",
        ],
        [
            (0, "nothing to change, or every change written with --write"),
            (1, "changes are needed (without --write), or an error"),
            (2, "a usage error, or the tool could not run"),
        ],
    ),
    "simulate": _epilog(
        [
            "karpenter-policy compile examples/workloads/policies -o build/seeds",
            "karpenter-policy simulate --constraints build/seeds --workloads examples/workloads/apps/inflate.yaml "
            "--scale deployment/inflate=5 --scale deployment/inflate=10 --report simulate.html",
        ],
        [
            (0, "every pod scheduled"),
            (1, "pods still pending at the end, or errors"),
            (2, "a usage error, or workloads or constraint sets that cannot be read"),
        ],
    ),
    "webhook": _epilog(
        [
            "karpenter-policy webhook --self-signed /tmp/webhook-certs --policies policies/",
            "karpenter-policy webhook --tls-cert-file tls.crt --tls-private-key-file tls.key --constraints build/",
        ],
        [(0, "stopped by SIGTERM, every accepted request answered"), (2, "could not start: a usage error, "
                                                                         "certificates, constraint sets")],
    ),
    "reconcile": _epilog(
        [
            "karpenter-policy reconcile --constraints build/ --cluster-name blue --kubernetes-version 1.27",
            "karpenter-policy reconcile --constraints configmap/karpenter-policy/karpenter-policy-constraints "
            "--cluster-name blue --kubernetes-version 1.27",
        ],
        [(0, "stopped by SIGTERM"), (2, "could not start: a usage error, constraint sets, the cluster, AWS")],
    ),
    "rules": _epilog(
        [
            "karpenter-policy rules",
            "karpenter-policy rules dead-value",
            "karpenter-policy rules --output json",
        ],
        [(0, "listed or explained"), (2, "a usage error, or RULE is not a rule's id (the id meant is named)")],
    ),
    "catalog show": _epilog(
        ["karpenter-policy catalog show", "karpenter-policy catalog show m5.large c6g.xlarge --region eu-west-1"],
        [(0, "shown"), (1, "a TYPE is not in the catalog"), (2, "a usage error, a bad --catalog or --region")],
    ),
    "catalog refresh": _epilog(
        ["karpenter-policy catalog refresh --region eu-west-1 -o catalog-eu-west-1.json"],
        [(0, "written"), (2, "a usage error, or EC2 could not be read")],
    ),
    "catalog build": _epilog(
        ["karpenter-policy catalog build"],
        [(0, "written"), (2, "a usage error, or a source that cannot be read")],
    ),
}
