"""karpenter-policy: Karpenter Provisioner policies as code — validate, prove, compile, admit, reconcile.

`__version__` (and `installed_version()`) is the installed distribution's version, which setuptools-scm derives
from the git tags at install time (pyproject.toml): `0.2.0` for the tag v0.2.0, `0.2.1.devN+g<commit>` after it or
in a clone without tags. It is read from the distribution's metadata when first asked for, not at import: the
lookup (importlib.metadata and a search of sys.path) is ≈ 0.07 s that `validate` does not need.
"""

from functools import cache


@cache
def installed_version() -> str:
    """The installed distribution's version; `0+unknown` for a source tree on sys.path without being installed."""
    import importlib.metadata  # looked up at the call, not at import: start-up does not pay for it

    try:
        return importlib.metadata.version("karpenter-policy")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"


def __getattr__(name: str) -> str:
    """`karpenter_policy.__version__`, read when first asked for (PEP 562)."""
    if name == "__version__":
        return installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
