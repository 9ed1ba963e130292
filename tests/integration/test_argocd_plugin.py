"""Integration: the Argo CD plugin (deploy/argocd/) run the way argocd-cmp-server runs it in the sidecar.

What the sidecar does for each manifest generation, reproduced here:
- it reads plugin.yaml and runs `spec.init` (if any), then `spec.generate` (`command` + `args`) as a subprocess
  in the Application's source directory of a fresh copy of the repository (<copy>/<spec.source.path>);
- the environment is the sidecar's own (PATH, HOME) plus the build environment (ARGOCD_APP_*, KUBE_VERSION,
  KUBE_API_VERSIONS), the Application's plugin env entries as ARGOCD_ENV_<NAME> and its plugin parameters as
  PARAM_<NAME> (arrays as PARAM_<NAME>_<i>); entries with an empty value are dropped;
- stdout must be nothing but Kubernetes objects (YAML), stderr is for logs, a non-zero exit fails the generation.

The generate command is whatever plugin.yaml names, installed under the name the Dockerfile gives it; PATH has
the venv's bin first (the image's pip-installed karpenter-policy).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from profiles import fast_first

from karpenter_policy.api.constraintset import read_wire_data

ROOT = Path(__file__).resolve().parents[2]
ARGOCD = ROOT / "deploy" / "argocd"
PLUGIN_FILE = ARGOCD / "plugin.yaml"
DOCKERFILE = ARGOCD / "Dockerfile"
GENERATE_SCRIPT = ARGOCD / "generate.sh"
POLICIES = ROOT / "policies"
TEMPLATES = ROOT / "examples" / "templates"
VENV_BIN = Path(sys.executable).parent
MARKER = ".karpenter-policy"
TIMEOUT_SECONDS = 120

#: The objects policies/ compiles to with the default api (v1alpha5).
POLICY_PROVISIONERS = {"arm64", "default", "gpu", "spot-batch"}
POLICY_NODE_TEMPLATES = {"default", "gpu"}


@dataclass(frozen=True)
class Generated:
    returncode: int
    stdout: str
    stderr: str

    def objects(self) -> list[dict[str, Any]]:
        """The manifests as Argo CD reads them: every YAML document a Kubernetes object (empty ones skipped)."""
        docs = [doc for doc in yaml.safe_load_all(self.stdout) if doc is not None]
        for doc in docs:
            assert isinstance(doc, dict), f"stdout holds something else than an object: {doc!r:.200}"
            assert isinstance(doc.get("apiVersion"), str) and isinstance(doc.get("kind"), str), doc.keys()
            assert isinstance(doc.get("metadata", {}).get("name"), str), doc.get("metadata")
        return docs

    def names(self, kind: str) -> set[str]:
        return {o["metadata"]["name"] for o in self.objects() if o["kind"] == kind}


def _plugin() -> dict[str, Any]:
    plugin = yaml.safe_load(PLUGIN_FILE.read_text(encoding="utf-8"))
    assert isinstance(plugin, dict)
    return plugin


def _installed_name() -> str:
    """Where the Dockerfile installs generate.sh (a directory on the image's PATH)."""
    match = re.search(r"^COPY\s+deploy/argocd/generate\.sh\s+(\S+)\s*$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, "the Dockerfile must COPY deploy/argocd/generate.sh onto the image's PATH"
    destination = match.group(1)
    assert destination.startswith("/usr/local/bin/"), destination
    return destination.rsplit("/", 1)[1]


@pytest.fixture(scope="module")
def image_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The image's /usr/local/bin: generate.sh under its installed name, mode 0755 (Dockerfile's chmod)."""
    if shutil.which("karpenter-policy", path=str(VENV_BIN)) is None:
        pytest.fail(f"karpenter-policy is not installed in {VENV_BIN}: run the tests with the venv's pytest")
    directory = tmp_path_factory.mktemp("image-bin")
    installed = directory / _installed_name()
    shutil.copyfile(GENERATE_SCRIPT, installed)
    installed.chmod(stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    return directory


def sidecar_environment(image_bin: Path, home: Path, source_path: str, extra: Mapping[str, str]) -> dict[str, str]:
    """A clean environment: the sidecar's PATH and HOME, Argo CD's build variables, and `extra`
    (ARGOCD_ENV_* / PARAM_* / overrides). Like argocd-cmp-server, entries with an empty value are left out."""
    env = {
        "PATH": os.pathsep.join([str(VENV_BIN), str(image_bin), "/usr/bin", "/bin"]),
        "HOME": str(home),
        "ARGOCD_APP_NAME": "karpenter-policies",
        "ARGOCD_APP_NAMESPACE": "karpenter-policy",
        "ARGOCD_APP_REVISION": "4f7c2a9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a",
        "ARGOCD_APP_SOURCE_PATH": source_path,
        "ARGOCD_APP_SOURCE_REPO_URL": "https://github.com/your_organisation/your_policy_repository.git",
        "ARGOCD_APP_SOURCE_TARGET_REVISION": "main",
        "KUBE_VERSION": "1.29.4",
        "KUBE_API_VERSIONS": "v1,apps/v1,apps/v1/Deployment,karpenter.sh/v1alpha5,karpenter.k8s.aws/v1alpha1",
        **extra,
    }
    return {name: value for name, value in env.items() if value != ""}


def run_command(command: Mapping[str, Any], cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [*command["command"], *command.get("args", [])]
    return subprocess.run(argv, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                          check=False, start_new_session=True)


def generate(image_bin: Path, repo: Path, source_path: str, **extra: str) -> Generated:
    """One manifest generation: init (if configured), then generate, in <repo>/<source_path>."""
    plugin = _plugin()
    app_dir = (repo / source_path).resolve()
    home = repo.parent / "home"
    home.mkdir(exist_ok=True)
    env = sidecar_environment(image_bin, home, source_path, extra)
    init = plugin["spec"].get("init")
    if init and init.get("command"):
        done = run_command(init, app_dir, env)
        if done.returncode != 0:
            return Generated(done.returncode, "", done.stderr)
    done = run_command(plugin["spec"]["generate"], app_dir, env)
    return Generated(done.returncode, done.stdout, done.stderr)


def discovers(app_dir: Path, env: Mapping[str, str] | None = None) -> bool:
    """argocd-cmp-server's matchRepository: discover.fileName (filepath.Glob), else find.glob (with **), else
    find.command (exit 0 and non-empty stdout), all relative to the Application's source directory."""
    discover = _plugin()["spec"]["discover"]
    if discover.get("fileName"):
        return bool(glob.glob(str(app_dir / discover["fileName"]), include_hidden=True))
    find = discover.get("find", {})
    if find.get("glob"):
        return bool(glob.glob(str(app_dir / find["glob"]), recursive=True, include_hidden=True))
    done = run_command(find, app_dir, env or {"PATH": os.environ.get("PATH", "")})
    return done.returncode == 0 and done.stdout.strip() != ""


def assert_failed_cleanly(result: Generated, *, mentions: str) -> None:
    assert result.returncode != 0, result.stderr
    assert result.stdout == "", "on error stdout must stay empty, or Argo CD would apply (and prune by) it"
    assert mentions in result.stderr, result.stderr


# --- repositories -------------------------------------------------------------------------------------------


def policy_repo(tmp_path: Path, name: str = "repo") -> Path:
    """A checkout of a policy repository: this project's policies/ with the plugin's marker."""
    repo = tmp_path / name
    shutil.copytree(POLICIES, repo / "policies")
    (repo / "policies" / MARKER).touch()
    return repo


def template_repo(tmp_path: Path) -> Path:
    """examples/templates/ as a repository: policies/*.yaml.j2 (with the marker) and values/."""
    repo = tmp_path / "repo"
    shutil.copytree(TEMPLATES, repo)
    (repo / "policies" / MARKER).touch()
    return repo


# --- generate -----------------------------------------------------------------------------------------------


def test_generate_streams_only_the_compiled_manifests(image_bin: Path, tmp_path: Path) -> None:
    result = generate(image_bin, policy_repo(tmp_path), "policies")

    assert result.returncode == 0, result.stderr
    objects = result.objects()
    kinds = Counter((o["apiVersion"], o["kind"]) for o in objects)
    assert kinds == {
        ("karpenter.sh/v1alpha5", "Provisioner"): 4,
        ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate"): 2,
        ("v1", "ConfigMap"): 1,
    }
    assert result.names("Provisioner") == POLICY_PROVISIONERS
    assert result.names("AWSNodeTemplate") == POLICY_NODE_TEMPLATES
    (configmap,) = (o for o in objects if o["kind"] == "ConfigMap")
    assert configmap["metadata"]["namespace"] == "karpenter-policy"
    assert configmap["metadata"]["name"] == "karpenter-policy-constraints"
    index = json.loads(configmap["data"]["index.json"])
    assert {entry["name"] for entry in index["sets"]} == POLICY_PROVISIONERS
    # The logs: the plugin's own lines (with Argo CD's build variables) and compile's report.
    assert "karpenter-policy-cmp-generate: app karpenter-policies" in result.stderr
    assert "4f7c2a9e1b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a" in result.stderr
    assert re.search(r"^compiled 6 objects .*: 0 errors", result.stderr, re.MULTILINE), result.stderr
    assert "warning: the destination cluster" not in result.stderr


@pytest.mark.slow
def test_generate_gives_the_same_bytes_in_every_checkout(image_bin: Path, tmp_path: Path) -> None:
    """Argo CD compares what it generates with the cluster on every refresh: any difference between two
    generations of the same commit (paths, order) would show the Application OutOfSync."""
    first = generate(image_bin, policy_repo(tmp_path, "checkout-a"), "policies")
    second = generate(image_bin, policy_repo(tmp_path / "elsewhere", "checkout-b"), "policies")

    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    assert first.stdout == second.stdout


BROKEN_POLICIES = {
    "invalid-requirement": (
        "apiVersion: karpenter.sh/v1alpha5\n"
        "kind: Provisioner\n"
        "metadata:\n"
        "  name: broken\n"
        "spec:\n"
        "  requirements:\n"
        "    - key: karpenter.k8s.aws/instance-generation\n"
        "      operator: Gt\n"
        "      values: ['5', '6']\n"
        "  providerRef:\n"
        "    name: default\n"
    ),
    "parse-error": "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: broken\n",
    # valid, but no instance type is both: the solver's verdict fails the generation too
    "requirements-conflict": (
        "apiVersion: karpenter.sh/v1alpha5\n"
        "kind: Provisioner\n"
        "metadata:\n"
        "  name: broken\n"
        "spec:\n"
        "  requirements:\n"
        "    - key: kubernetes.io/arch\n"
        "      operator: In\n"
        "      values: [arm64]\n"
        "    - key: karpenter.k8s.aws/instance-family\n"
        "      operator: In\n"
        "      values: [c5]\n"
        "  providerRef:\n"
        "    name: default\n"
    ),
}


@pytest.mark.parametrize("rule", sorted(BROKEN_POLICIES))
@pytest.mark.slow
def test_a_broken_policy_fails_the_generation_with_empty_stdout(image_bin: Path, tmp_path: Path, rule: str) -> None:
    repo = policy_repo(tmp_path)
    (repo / "policies" / "zz-broken.yaml").write_text(BROKEN_POLICIES[rule], encoding="utf-8")

    result = generate(image_bin, repo, "policies")

    assert_failed_cleanly(result, mentions=f"[{rule}]")
    assert "zz-broken.yaml:" in result.stderr  # file:line of the finding, for the Argo CD UI
    assert "compile failed" in result.stderr


@pytest.mark.slow
def test_warnings_pass_unless_fail_on_warn_is_set(image_bin: Path, tmp_path: Path) -> None:
    repo = policy_repo(tmp_path)
    shutil.copy(ROOT / "examples" / "check" / "positive" / "unknown-family-next-to-known.yaml", repo / "policies")

    passed = generate(image_bin, repo, "policies")
    failed = generate(image_bin, repo, "policies", PARAM_FAIL_ON_WARN="true")

    assert passed.returncode == 0, passed.stderr
    assert "training" in passed.names("Provisioner")
    assert "[unknown-instance-type]" in passed.stderr
    assert_failed_cleanly(failed, mentions="[unknown-instance-type]")
    assert "--fail-on-warn" in failed.stderr


def test_api_v1_with_the_node_role_from_env_entries(image_bin: Path, tmp_path: Path) -> None:
    """v1 needs a role (or instance profile) for node templates without one: the NODE_ROLE env entry."""
    result = generate(
        image_bin, policy_repo(tmp_path), "policies",
        ARGOCD_ENV_API="v1", ARGOCD_ENV_NODE_ROLE="KarpenterNodeRole-platform-prod",
        KUBE_API_VERSIONS="v1,apps/v1,karpenter.sh/v1,karpenter.k8s.aws/v1",
    )

    assert result.returncode == 0, result.stderr
    objects = result.objects()
    kinds = Counter((o["apiVersion"], o["kind"]) for o in objects)
    assert kinds == {
        ("karpenter.sh/v1", "NodePool"): 4,
        ("karpenter.k8s.aws/v1", "EC2NodeClass"): 2,
        ("v1", "ConfigMap"): 1,
    }
    assert result.names("NodePool") == POLICY_PROVISIONERS
    assert {o["spec"]["role"] for o in objects if o["kind"] == "EC2NodeClass"} == {"KarpenterNodeRole-platform-prod"}
    assert "--api v1" in result.stderr and "--node-role KarpenterNodeRole-platform-prod" in result.stderr
    assert "warning: the destination cluster" not in result.stderr


def test_api_v1_without_a_role_fails_and_says_what_to_set(image_bin: Path, tmp_path: Path) -> None:
    result = generate(image_bin, policy_repo(tmp_path), "policies", PARAM_API="v1")

    assert_failed_cleanly(result, mentions="--node-role")


def test_a_cluster_without_the_api_version_gets_a_warning(image_bin: Path, tmp_path: Path) -> None:
    result = generate(image_bin, policy_repo(tmp_path), "policies",
                      KUBE_API_VERSIONS="v1,apps/v1,karpenter.sh/v1,karpenter.k8s.aws/v1")

    assert result.returncode == 0, result.stderr
    assert "warning: the destination cluster does not serve karpenter.sh/v1alpha5" in result.stderr
    assert result.names("Provisioner") == POLICY_PROVISIONERS


def _catalog_region(result: Generated) -> str:
    (configmap,) = (o for o in result.objects() if o["kind"] == "ConfigMap")
    region = json.loads(configmap["data"]["index.json"])["catalog"]["region"]
    assert isinstance(region, str)
    return region


@pytest.mark.parametrize("setting", ["PARAM_REGION", "ARGOCD_ENV_REGION"])
@pytest.mark.slow
def test_the_region_parameter_compiles_for_the_clusters_region(image_bin: Path, tmp_path: Path, setting: str) -> None:
    """The policies name eu-west-1's zones: proven against that region's catalog, they compile for it; against
    the default (us-east-1) they fail, the zones named."""
    repo = policy_repo(tmp_path)
    default = repo / "policies" / "default.yaml"
    default.write_text(default.read_text(encoding="utf-8").replace("us-east-1", "eu-west-1"), encoding="utf-8")
    (repo / "policies" / "gpu.yaml").unlink()  # g6 is not offered in eu-west-1 (a warning, not the point here)

    in_eu = generate(image_bin, repo, "policies", **{setting: "eu-west-1"})
    by_default = generate(image_bin, repo, "policies")

    assert in_eu.returncode == 0, in_eu.stderr
    assert _catalog_region(in_eu) == "eu-west-1"
    assert "--region eu-west-1" in in_eu.stderr  # the command line the plugin logs
    assert_failed_cleanly(by_default, mentions="eu-west-1a is a zone of eu-west-1, not of us-east-1")


def test_an_unknown_region_fails_with_the_regions_there_are(image_bin: Path, tmp_path: Path) -> None:
    result = generate(image_bin, policy_repo(tmp_path), "policies", PARAM_REGION="mars-1")

    assert_failed_cleanly(result, mentions="no embedded catalog for region 'mars-1' (embedded: af-south-1")


LEGACY_GPU = """\
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: legacy-gpu
spec:
  requirements:
    - key: karpenter.k8s.aws/instance-family
      operator: In
      values: [p3]
  providerRef:
    name: gpu
"""


@pytest.mark.parametrize("setting", ["PARAM_ALLOW_PREVIOUS_GENERATION", "ARGOCD_ENV_ALLOW_PREVIOUS_GENERATION"])
@pytest.mark.slow
def test_previous_generation_types_are_admitted_when_allowed(image_bin: Path, tmp_path: Path, setting: str) -> None:
    repo = policy_repo(tmp_path)
    (repo / "policies" / "legacy-gpu.yaml").write_text(LEGACY_GPU, encoding="utf-8")

    warned = generate(image_bin, repo, "policies")
    allowed = generate(image_bin, repo, "policies", **{setting: "true"})

    # Karpenter v0.31 launches previous-generation types: a warning, which the setting acknowledges.
    assert warned.returncode == 0, warned.stderr
    assert "p3 is a previous-generation family" in warned.stderr
    assert "[previous-generation]" not in allowed.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert "legacy-gpu" in allowed.names("Provisioner")
    (configmap,) = (o for o in allowed.objects() if o["kind"] == "ConfigMap")
    (legacy,) = (c for c in read_wire_data(configmap["data"])[1] if c.name == "legacy-gpu")
    assert legacy.admitted and all(name.startswith("p3.") for name in legacy.admitted), legacy.admitted


@pytest.mark.parametrize(
    ("settings", "environment"),
    fast_first([
        ({"PARAM_VALUES_FILE": "../values/prod.yaml"}, "prod"),
        ({"ARGOCD_ENV_VALUES_FILE": "../values/dev.yaml"}, "dev"),
        ({"PARAM_VALUES_FILE": "../values/prod.yaml", "ARGOCD_ENV_VALUES_FILE": "../values/dev.yaml"}, "prod"),
    ], unpack=True),
    ids=["parameter", "env-entry", "parameter-wins"],
)
def test_templates_are_rendered_with_the_values_file(
    image_bin: Path, tmp_path: Path, settings: dict[str, str], environment: str
) -> None:
    result = generate(image_bin, template_repo(tmp_path), "policies", **settings)

    assert result.returncode == 0, result.stderr
    objects = result.objects()
    assert result.names("Provisioner") == {f"{environment}-general"}
    assert result.names("AWSNodeTemplate") == {environment}
    (provisioner,) = (o for o in objects if o["kind"] == "Provisioner")
    assert provisioner["metadata"]["annotations"]["karpenter-policy/version"].startswith(f"{environment}-")
    (template,) = (o for o in objects if o["kind"] == "AWSNodeTemplate")
    assert template["spec"]["subnetSelector"] == {"karpenter.sh/discovery": f"platform-{environment}"}
    # The shell's ${...} reach the node untouched (Argo CD does no substitution).
    assert "${CLUSTER_NAME:-" in template["spec"]["userData"]


def test_a_hidden_values_file_next_to_the_templates_is_fine(image_bin: Path, tmp_path: Path) -> None:
    """compile skips hidden files, so a values file may sit in the policy directory under a hidden name."""
    repo = template_repo(tmp_path)
    shutil.copy(repo / "values" / "dev.yaml", repo / "policies" / ".values-dev.yaml")

    result = generate(image_bin, repo, "policies", ARGOCD_ENV_VALUES_FILE=".values-dev.yaml")

    assert result.returncode == 0, result.stderr
    assert result.names("Provisioner") == {"dev-general"}


def test_a_template_without_values_fails_at_its_line(image_bin: Path, tmp_path: Path) -> None:
    result = generate(image_bin, template_repo(tmp_path), "policies")

    assert_failed_cleanly(result, mentions="[template-error]")
    assert "platform.yaml.j2:" in result.stderr


def test_the_paths_array_parameter_selects_what_is_compiled(image_bin: Path, tmp_path: Path) -> None:
    result = generate(image_bin, policy_repo(tmp_path), "policies",
                      PARAM_PATHS_0="gpu.yaml", PARAM_PATHS_1="nodetemplates.yaml")

    assert result.returncode == 0, result.stderr
    assert result.names("Provisioner") == {"gpu"}
    assert result.names("AWSNodeTemplate") == POLICY_NODE_TEMPLATES


def test_an_empty_policy_set_is_refused_unless_allowed(image_bin: Path, tmp_path: Path) -> None:
    """Auto-sync with prune would delete every Provisioner if the plugin handed over nothing."""
    repo = tmp_path / "repo"
    (repo / "apps").mkdir(parents=True)
    (repo / "apps" / MARKER).touch()
    (repo / "apps" / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: inflate\n", encoding="utf-8"
    )

    refused = generate(image_bin, repo, "apps")
    allowed = generate(image_bin, repo, "apps", PARAM_ALLOW_EMPTY="true")

    assert_failed_cleanly(refused, mentions="allow-empty")
    assert allowed.returncode == 0, allowed.stderr
    assert [o["kind"] for o in allowed.objects()] == ["ConfigMap"]


@pytest.mark.parametrize("with_git", [False, True], ids=["copy-without-.git", "copy-with-.git"])
def test_a_committed_repository_shaped_folder_runs_nothing_in_the_sidecar(
    image_bin: Path, tmp_path: Path, with_git: bool
) -> None:
    """A pull request adds policies/team-a/ with HEAD, objects/, refs/ and a config naming a command (run by git on
    an index refresh): the repo-server runs generate on every sync, so that command must never run."""
    repo = policy_repo(tmp_path)
    marker = tmp_path / "pwned"
    planted = repo / "policies" / "team-a"
    (planted / "objects").mkdir(parents=True)
    (planted / "objects" / "keep").write_text("")
    (planted / "refs").mkdir()
    (planted / "refs" / "keep").write_text("")
    (planted / "HEAD").write_text("ref: refs/heads/main\n")
    (planted / "config").write_text(
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ..\n"
        f'\tfsmonitor = "touch {marker}; false"\n'
    )
    shutil.move(repo / "policies" / "gpu.yaml", planted / "gpu.yaml")
    if with_git:  # a checkout (the sidecar may or may not get .git, depending on the Argo CD version)
        env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
        for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                     ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "pr"]):
            subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)

    result = generate(image_bin, repo, "policies")

    assert result.returncode == 0, result.stderr
    assert not marker.exists(), "generate ran a command from a folder of the repository"
    assert result.names("Provisioner") == POLICY_PROVISIONERS


@pytest.mark.parametrize(
    ("settings", "mentions"),
    [
        ({"PARAM_VALUES_FILE": "/etc/hostname"}, "relative to the application directory"),
        ({"PARAM_VALUES_FILE": "../../outside.yaml"}, "outside the repository"),
        ({"ARGOCD_ENV_VALUES_FILE": "../values/link.yaml"}, "outside the repository"),
        ({"PARAM_VALUES_FILE": "../values/missing.yaml"}, "no such file"),
        ({"PARAM_PATHS_0": "..", "PARAM_VALUES_FILE": "../values/prod.yaml"}, "inside the compiled path"),
        ({"PARAM_PATHS_0": "../values/prod.yaml", "PARAM_VALUES_FILE": "../values/prod.yaml"}, "compiled path"),
        ({"PARAM_PATHS_0": "../.."}, "outside the repository"),
        ({"ARGOCD_ENV_PATHS": "/"}, "relative to the application directory"),
        ({"PARAM_API": "v2"}, "api: expected v1alpha5 or v1"),
        ({"ARGOCD_ENV_FAIL_ON_WARN": "maybe"}, "fail-on-warn: expected true or false"),
        ({"PARAM_ALLOW_PREVIOUS_GENERATION": "p3"}, "allow-previous-generation: expected true or false"),
    ],
    ids=["absolute", "dot-dot", "symlink-out", "missing", "values-in-paths", "values-is-a-path", "paths-out",
         "paths-absolute", "api", "flag", "previous-generation-flag"],
)
def test_bad_settings_fail_before_compiling(
    image_bin: Path, tmp_path: Path, settings: dict[str, str], mentions: str
) -> None:
    repo = template_repo(tmp_path)
    (tmp_path / "outside.yaml").write_text("environment: stolen\n", encoding="utf-8")
    (repo / "values" / "link.yaml").symlink_to(tmp_path / "outside.yaml")

    result = generate(image_bin, repo, "policies", **settings)

    assert_failed_cleanly(result, mentions=mentions)
    assert "karpenter-policy compile" not in result.stderr  # refused before running anything


# --- discover -----------------------------------------------------------------------------------------------


def test_discovery_matches_directories_with_the_marker_only(tmp_path: Path) -> None:
    repo = policy_repo(tmp_path)
    templates = template_repo(tmp_path / "t")
    plain = tmp_path / "plain"
    shutil.copytree(POLICIES, plain)  # Provisioners managed as plain YAML: not this plugin's business

    assert discovers(repo / "policies")
    assert discovers(templates / "policies")
    assert not discovers(plain)
    assert not discovers(repo)  # the marker counts in the Application's source directory only
