"""The version comes from git tags (setuptools-scm), and the project installs from every kind of checkout.

- a release tag vX.Y.Z builds X.Y.Z — what `pip install git+URL@vX.Y.Z` and pre-commit's `rev:` install;
- a clone without tags (CI's clone) still builds, as a development version;
- a tree without git metadata (a Docker build context) builds the version the Dockerfiles pass in, else 0.0.0;
- `karpenter-policy --version` of the editable install says the installed distribution's version.
"""

from __future__ import annotations

import email.parser
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from karpenter_policy import __version__
from karpenter_policy.cli_help import version_line

from .support import GIT_IDENTITY, ROOT, git, repository_copy, tree_copy

VENV_BIN = Path(sys.executable).parent
PRETEND = "SETUPTOOLS_SCM_PRETEND_VERSION_FOR_KARPENTER_POLICY"


def built_version(source: Path, out: Path, **env: str) -> str:
    """Build the wheel of `source` as pip does for `pip install <source>`; the version its metadata records."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SETUPTOOLS_SCM_PRETEND_VERSION")}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(source)],
        env={**environment, **GIT_IDENTITY, **env}, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("karpenter_policy-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = (n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        version = email.parser.Parser().parsestr(archive.read(metadata).decode("utf-8"))["Version"]
    assert isinstance(version, str)
    wheel.unlink()
    return version


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return repository_copy(tmp_path_factory.mktemp("release") / "karpenter-policy", tag="v1.2.3")


@pytest.mark.slow
def test_a_release_tag_is_the_version(release: Path, tmp_path: Path) -> None:
    assert built_version(release, tmp_path) == "1.2.3"


@pytest.mark.slow
def test_a_clone_without_tags_installs_as_a_development_version(release: Path, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    git("clone", "-q", "--no-tags", f"file://{release}", str(clone), cwd=tmp_path)
    assert git("tag", cwd=clone) == ""
    head = git("rev-parse", "--short=7", "HEAD", cwd=clone).strip()

    version = built_version(clone, tmp_path / "wheels")

    assert re.fullmatch(rf"0\.0\.1\.dev1\+g{head}[0-9a-f]*", version), version
    # Commits after a release count from it.
    git("tag", "-a", "v1.2.3", "-m", "v1.2.3", "HEAD", cwd=clone)
    (clone / "NEW").write_text("x\n")
    git("add", "NEW", cwd=clone)
    git("commit", "-q", "-m", "after the release", cwd=clone)
    after = built_version(clone, tmp_path / "wheels")
    assert re.fullmatch(r"1\.2\.4\.dev1\+g[0-9a-f]+", after), after


@pytest.mark.slow
def test_a_tree_without_git_metadata_takes_the_version_it_is_given(tmp_path: Path) -> None:
    """What the Dockerfiles build: their context has no .git, the release workflow passes the version."""
    tree = tree_copy(tmp_path / "context")

    assert built_version(tree, tmp_path / "a", **{PRETEND: "2.0.0"}) == "2.0.0"
    assert built_version(tree, tmp_path / "b") == "0.0.0"


def test_the_editable_install_reports_its_version() -> None:
    from importlib.metadata import version

    done = subprocess.run([str(VENV_BIN / "karpenter-policy"), "--version"], capture_output=True, text=True,
                          timeout=60, check=False, cwd=ROOT)

    assert done.returncode == 0, done.stderr
    assert done.stdout == version_line(version("karpenter-policy")) + "\n"
    assert done.stdout.startswith(f"karpenter-policy, version {version('karpenter-policy')}")
    assert __version__ == version("karpenter-policy") != "0.0.0"
