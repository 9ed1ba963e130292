"""A scene reads its compiled directory once per process for the same bytes (`simulate/versions.py`, issue #23),
and never serves a version the files no longer hold: a set edited in place — same size, modification time put
back, the identity a directory source compares unchanged — is read anew and refused, and a directory
that does not load is refused again at every scene."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from karpenter_policy.simulate import versions
from karpenter_policy.testing import Scene, compile_policies

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "examples" / "workloads" / "policies"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_policies(POLICIES, tmp_path_factory.mktemp("versions") / "build")


def _a_set_file(directory: Path) -> Path:
    folder = directory / "constraintsets" if (directory / "constraintsets").is_dir() else directory
    return next(p for p in sorted(folder.glob("*.json")) if "default" in p.name)


def test_scenes_and_their_controllers_share_one_reading_of_the_same_files(compiled: Path) -> None:
    first, second = Scene(compiled), Scene(compiled)
    assert first.loaded is second.loaded, "the same bytes are parsed and checked once"
    controller = first.controller()
    assert controller.context.loaded is first.loaded, "the controller's source reads it the same way"
    first.add_pods("inflate", 2, cpu="1")
    first.run(controller, 120, until=lambda: not first.unbound())
    assert not first.unbound() and first.instances()


def test_a_set_edited_in_place_with_its_identity_kept_is_read_anew(compiled: Path, tmp_path: Path) -> None:
    directory = tmp_path / "build"
    shutil.copytree(compiled, directory)
    assert Scene(directory).loaded.sets
    path = _a_set_file(directory)
    stat = path.stat()
    text = path.read_text()
    edited = text.replace('"admitted"', '"bdmitted"', 1)  # a hand edit of the same size
    assert edited != text and len(edited) == len(text)
    path.write_text(edited)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ValueError, match=f"{path.name}: unknown field"):
        Scene(directory).loaded  # noqa: B018  (the read is the test)
    with pytest.raises(ValueError, match=f"{path.name}: unknown field"):
        Scene(directory).loaded  # noqa: B018  (refused again: a version that does not load is never kept)


def test_only_the_last_few_versions_are_kept(compiled: Path, tmp_path: Path) -> None:
    for i in range(versions.KEPT + 2):
        copy = tmp_path / f"build-{i}"
        shutil.copytree(compiled, copy)
        assert versions.read_version(copy).sets
    assert len(versions._VERSIONS) == versions.KEPT
