"""Start-up of `validate` on one file (a pre-commit hook's run): the schema validators come from a cache instead of
being compiled on every run, and plain YAML does not import the template engine or the scheduler.

Each test runs the real CLI in a subprocess with its own cache directory (`KARPENTER_POLICY_CACHE_DIR`).
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "policies" / "default.yaml"

UNKNOWN_FIELD = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: typo
spec:
  ttlSecondAfterEmpty: 30
  providerRef:
    name: default
"""


def validate(cache: Path | str, *paths: Path, extra: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KARPENTER_POLICY_CACHE_DIR": str(cache)}
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('modules:', sorted(m for m in ('jinja2', 'karpenter_policy.scheduling', "
        "'karpenter_policy.checks.pinning', 'z3') if m in sys.modules), file=sys.stderr))\n"
        f"{extra}\n"
        "from karpenter_policy.cli import main\n"
        f"main(['validate', *{[str(p) for p in paths]!r}, '--output', 'json'])\n"
    )
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def test_plain_yaml_imports_neither_jinja2_nor_the_scheduler(tmp_path: Path) -> None:
    done = validate(tmp_path / "cache", POLICY)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "modules: []" in done.stderr


def test_the_compiled_validators_are_kept_and_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    policy = tmp_path / "typo.yaml"
    policy.write_text(UNKNOWN_FIELD, encoding="utf-8")

    first = validate(cache, policy)
    kept = sorted(p.name for p in cache.iterdir())
    second = validate(cache, policy)

    assert first.returncode == second.returncode == 1
    assert first.stdout == second.stdout
    assert "did you mean ttlSecondsAfterEmpty?" in first.stdout
    assert [name.split(".json.")[0] for name in kept] == ["provisioner.v1alpha5"]
    assert sorted(p.name for p in cache.iterdir()) == kept  # nothing compiled (nor written) again
    assert all((cache / name).stat().st_mode & 0o077 == 0 for name in kept)


def _plant_accept_everything(cache: Path, mode: int) -> None:
    """Replace the cached provisioner validator by one that accepts any document."""
    (file,) = cache.glob("provisioner.v1alpha5.json.*")
    code = compile("def accept(data, custom_formats={}, name_prefix=None):\n    return data\n", "<planted>", "exec")
    file.write_bytes(marshal.dumps(("accept", code)))
    file.chmod(mode)


def test_a_cached_validator_is_loaded_instead_of_compiled(tmp_path: Path) -> None:
    """Shown by planting a validator that accepts everything: the run trusts the cache (its own, private file)."""
    cache = tmp_path / "cache"
    policy = tmp_path / "typo.yaml"
    policy.write_text(UNKNOWN_FIELD, encoding="utf-8")
    assert validate(cache, policy).returncode == 1
    _plant_accept_everything(cache, 0o600)

    assert validate(cache, policy).returncode == 0


def test_a_cache_file_others_can_write_is_not_run(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    policy = tmp_path / "typo.yaml"
    policy.write_text(UNKNOWN_FIELD, encoding="utf-8")
    validate(cache, policy)
    _plant_accept_everything(cache, 0o666)

    done = validate(cache, policy)

    assert done.returncode == 1
    assert "did you mean ttlSecondsAfterEmpty?" in done.stdout


def test_a_corrupt_cache_file_is_compiled_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    policy = tmp_path / "typo.yaml"
    policy.write_text(UNKNOWN_FIELD, encoding="utf-8")
    expected = validate(cache, policy).stdout
    (file,) = cache.glob("provisioner.v1alpha5.json.*")
    file.write_bytes(b"\x00not marshal data")

    done = validate(cache, policy)

    assert done.returncode == 1 and done.stdout == expected, done.stderr
    assert marshal.loads(file.read_bytes())[0].startswith("validate_")  # rewritten whole


def test_without_a_usable_cache_directory_it_validates_all_the_same(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    policy = tmp_path / "typo.yaml"
    policy.write_text(UNKNOWN_FIELD, encoding="utf-8")

    for cache in (blocked / "cache", ""):  # cannot be created; turned off
        done = validate(cache, policy)
        assert done.returncode == 1, done.stderr
        assert "did you mean ttlSecondsAfterEmpty?" in done.stdout
        assert "Traceback" not in done.stderr


def test_validate_reads_no_distribution_metadata_yet_sarif_carries_the_installed_version(tmp_path: Path) -> None:
    """importlib.metadata (and its search of sys.path for the version, ≈ 0.07 s) used to be imported by every
    start-up, for `--version`; `validate` of a Provisioner file and of v1 NodePools (celpy's parser from the cache)
    needs none of it, and SARIF still names the installed version."""
    nodepools = ROOT / "examples" / "v1" / "positive"
    probe = ("import atexit, sys\n"
             "atexit.register(lambda: print('metadata:', 'importlib.metadata' in sys.modules, file=sys.stderr))\n")
    for path in (POLICY, nodepools):
        validate(tmp_path / "cache", path)  # the first run builds and stores celpy's parser
        done = validate(tmp_path / "cache", path, extra=probe)

        assert done.returncode == 0, done.stdout + done.stderr
        assert "metadata: False" in done.stderr

    from importlib.metadata import version

    sarif = subprocess.run([sys.executable, "-m", "karpenter_policy.cli", "validate", str(nodepools), "--output",
                            "sarif"], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert sarif.returncode == 0, sarif.stderr
    assert json.loads(sarif.stdout)["runs"][0]["tool"]["driver"]["version"] == version("karpenter-policy")
