"""karpenter-policy: Karpenter Provisioner policies as code — validate, prove, compile, admit, reconcile.

`__version__` is the installed distribution's version, which setuptools-scm derives from the git tags at install
time (pyproject.toml): `0.2.0` for the tag v0.2.0, `0.2.1.devN+g<commit>` after it or in a clone without tags.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("karpenter-policy")
except PackageNotFoundError:  # the source tree on sys.path without being installed
    __version__ = "0+unknown"
