"""Where a policy file found in a repository may lead: a symbolic link is read only when its target stays inside
the repository that holds the link.

The repository of a link is the git work tree at or above the directory the link is in (`gitrepo.find_repository`,
found without running git), or, outside git, that directory itself. `loader.read_text` asks `escaping_link` of a
symbolic link (the `lstat` that gives a file's type and size tells one) before it opens anything, so a link such
as `policies/x.yaml -> /etc/shadow` or `-> ../../../secrets.yaml` is refused by every reader (validate, check,
compile, diff, pin, fmt, `--workloads`, `--values`, the webhook's policy files): a finding naming the link and the
repository, never the content. The writers never write through a link at all (`filestaging`).

Only the last component of a path is a link a repository can plant: directory links found while searching a
directory are not followed (`os.walk`), and a path named on the command line is the user's choice.
"""

from __future__ import annotations

import os

from karpenter_policy.checks.source.gitrepo import find_repository


def repository_root(directory: str) -> str:
    """The root of the repository holding `directory` (symbolic links resolved): its git work tree, else itself."""
    repository = find_repository(directory)
    return repository.root if repository is not None else os.path.realpath(directory)


def within(path: str, root: str) -> bool:
    """True when the resolved `path` is `root` or lies below it."""
    real = os.path.realpath(path)
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)


def escaping_link(file: str) -> str | None:
    """The root of the repository holding `file` when `file` is a symbolic link whose target lies outside it;
    None for any other file (a dangling or looping link is left to the reader, which says so)."""
    if not os.path.islink(file):
        return None
    root = repository_root(os.path.dirname(os.path.abspath(file)))
    target = os.path.realpath(file)
    if not os.path.exists(target):
        return None
    return None if within(target, root) else root
