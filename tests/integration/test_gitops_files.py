"""Integration: the GitOps and CI files (deploy/, examples/ci/, .pre-commit-hooks.yaml) are well-formed, agree
with each other and with the CLI, and what they run works.

- every YAML file parses; the Argo CD plugin has what argocd-cmp-server requires, and the image, the sidecar
  patch, the Helm values and the example Application agree with it;
- the Flux objects have the right apiVersions and kinds, the kustomization lists exactly what `compile` writes
  for policies/, and `${...}` in userData survives Flux's post-build substitution (emulated);
- the pre-commit hooks and the GitHub workflows name commands the CLI has, and their commands run;
- every example installs karpenter-policy from the project's repository at one release tag (no package index
  has it).

tests/deploy/test_examples.py runs what they install: pre-commit's try-repo, pip's git URL, actionlint.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
ARGOCD = DEPLOY / "argocd"
FLUX = DEPLOY / "flux"
CI = ROOT / "examples" / "ci"
HOOKS_FILE = ROOT / ".pre-commit-hooks.yaml"
WORKFLOWS = ROOT / ".github" / "workflows"
POLICIES = ROOT / "policies"
TEMPLATES = ROOT / "examples" / "templates"
VENV_BIN = Path(sys.executable).parent
CLI = str(VENV_BIN / "karpenter-policy")
TIMEOUT_SECONDS = 120

CMP_SERVER = "/var/run/argocd/argocd-cmp-server"
CMP_CONFIG = "/home/argocd/cmp-server/config/plugin.yaml"
CMP_PLUGINS = "/home/argocd/cmp-server/plugins"
FLUX_SUBSTITUTE = "kustomize.toolkit.fluxcd.io/substitute"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


#: Where the project lives (pyproject.toml), and the release tag every example installs from it.
REPOSITORY = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["urls"]["Repository"]
RELEASE = load(CI / "pre-commit-config.yaml")["repos"][0]["rev"]
INSTALL = f"karpenter-policy @ git+{REPOSITORY}@{RELEASE}"


def test_the_examples_pin_a_release_of_the_projects_repository() -> None:
    assert re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", REPOSITORY), REPOSITORY
    assert re.fullmatch(r"v\d+\.\d+\.\d+", RELEASE), RELEASE
    # nothing is installed from a package index where karpenter-policy is not published
    for base in (CI, DEPLOY, WORKFLOWS):
        for path in sorted(base.rglob("*")):
            if path.is_file():
                assert not re.search(r"karpenter-policy==", path.read_text(encoding="utf-8")), path


class _Loader(yaml.SafeLoader):
    """Safe YAML, plus CloudFormation's short-form intrinsic functions (`!Ref`, `!Sub`, `!GetAtt`) as plain values."""


def _tagged(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return loader.construct_scalar(node)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node)
    assert isinstance(node, yaml.MappingNode)
    return loader.construct_mapping(node)


_Loader.add_multi_constructor("!", _tagged)


def load_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader) if doc is not None]


def _helm_template(path: Path) -> bool:
    """A file under a Helm chart's templates/ (Go templates, not YAML until rendered)."""
    return any(d.name == "templates" and (d.parent / "Chart.yaml").is_file() for d in path.parents)


def yaml_files() -> list[Path]:
    found = [HOOKS_FILE]
    for base in (DEPLOY, CI, WORKFLOWS):
        found += [p for p in sorted(base.rglob("*")) if p.suffix in (".yaml", ".yml") and not _helm_template(p)]
    return found


def run(argv: list[str], cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PATH": os.pathsep.join([str(VENV_BIN), os.environ.get("PATH", "")]), **(env or {})}
    return subprocess.run(argv, cwd=cwd, env=environment, capture_output=True, text=True, timeout=TIMEOUT_SECONDS,
                          check=False)


@pytest.fixture(scope="module")
def cli_commands() -> set[str]:
    """The commands `karpenter-policy --help` lists."""
    done = run([CLI, "--help"], ROOT)
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("Commands:", 1)[1]
    return {line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.strip()}


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_yaml_file_parses(path: Path) -> None:
    docs = load_all(path)
    assert docs, f"{path} is empty"
    for doc in docs:
        assert isinstance(doc, dict | list), f"{path}: a document is a {type(doc).__name__}"


def test_the_yaml_files_are_found() -> None:
    names = {str(p.relative_to(ROOT)) for p in yaml_files()}
    assert {"deploy/argocd/plugin.yaml", "deploy/flux/kustomization-flux.yaml",
            "examples/ci/github-workflow.yaml", ".pre-commit-hooks.yaml", ".github/workflows/release.yaml"} <= names


# --- Argo CD ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plugin() -> dict[str, Any]:
    config = load(ARGOCD / "plugin.yaml")
    assert isinstance(config, dict)
    return config


def test_the_plugin_has_what_argocd_cmp_server_requires(plugin: dict[str, Any]) -> None:
    # argocd-cmp-server's ValidatePluginConfig: kind, metadata.name, a generate command, and one discovery rule.
    assert plugin["apiVersion"] == "argoproj.io/v1alpha1"
    assert plugin["kind"] == "ConfigManagementPlugin"
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", plugin["metadata"]["name"])
    spec = plugin["spec"]
    assert isinstance(spec["version"], str) and spec["version"]
    command = spec["generate"]["command"]
    assert isinstance(command, list) and command and all(isinstance(part, str) for part in command)
    assert all(isinstance(arg, str) for arg in spec["generate"].get("args", []))
    discover = spec["discover"]
    rules = [bool(discover.get("fileName")), bool(discover.get("find", {}).get("glob")),
             bool(discover.get("find", {}).get("command"))]
    assert rules.count(True) == 1, "exactly one of discover.fileName, find.glob, find.command"
    assert set(spec) <= {"version", "init", "generate", "discover", "parameters", "preserveFileMode",
                         "provideGitCreds"}, "a field Argo CD does not know"


def _param_env(name: str) -> str:
    """Argo CD's PARAM_ name for a parameter: upper case, anything but [A-Z0-9_] as '_'."""
    return "PARAM_" + re.sub(r"[^A-Z0-9_]", "_", name.upper())


def test_every_announced_parameter_is_read_by_the_generate_command(plugin: dict[str, Any]) -> None:
    script = (ARGOCD / "generate.sh").read_text(encoding="utf-8")
    static = plugin["spec"]["parameters"]["static"]
    assert {p["name"] for p in static} >= {"values-file", "api", "node-role", "paths"}
    for parameter in static:
        assert set(parameter) <= {"name", "title", "tooltip", "required", "itemType", "collectionType", "string",
                                  "array", "map"}, parameter
        assert parameter.get("collectionType", "string") in ("string", "array", "map")
        setting = _param_env(parameter["name"]).removeprefix("PARAM_")
        if parameter.get("collectionType") == "array":
            assert f"PARAM_{setting}_" in script, f"{parameter['name']}: generate.sh ignores the array"
        else:
            assert re.search(rf"\b(setting|flag) {setting}\b", script), f"generate.sh ignores {parameter['name']}"
        # documented as a parameter and as an env entry
        assert parameter["name"] in script and setting in script


def test_the_image_installs_the_plugin_where_the_sidecar_expects_it(plugin: dict[str, Any]) -> None:
    dockerfile = (ARGOCD / "Dockerfile").read_text(encoding="utf-8")
    copies = dict(re.findall(r"^COPY\s+(\S+)\s+(\S+)\s*$", dockerfile, re.MULTILINE))
    assert copies["deploy/argocd/plugin.yaml"] == CMP_CONFIG
    command = plugin["spec"]["generate"]["command"][0]
    assert copies["deploy/argocd/generate.sh"] == f"/usr/local/bin/{command}"
    assert re.search(rf"chmod 0?755 /usr/local/bin/{re.escape(command)}\b", dockerfile)
    installs = re.search(r"^RUN (\w+=\S+ )*pip install\b.*\s\.(\s|$)", dockerfile, re.MULTILINE)
    assert installs, "pip-installs this project"
    assert re.search(r"^USER 999\s*$", dockerfile, re.MULTILINE)
    # The build context keeps (at least) every source the Dockerfile copies.
    ignore = (ARGOCD / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    for source in copies:
        assert f"!{source}" in ignore, f"Dockerfile.dockerignore drops {source}"
    assert (ARGOCD / "generate.sh").read_text().startswith("#!/usr/bin/env bash\n")


def _sidecars() -> Iterator[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    patch = load(ARGOCD / "argocd-repo-server-patch.yaml")
    assert (patch["apiVersion"], patch["kind"]) == ("apps/v1", "Deployment")
    assert patch["metadata"]["name"] == "argocd-repo-server"
    (container,) = patch["spec"]["template"]["spec"]["containers"]
    yield "patch", container, patch["spec"]["template"]["spec"]["volumes"]
    values = load(ARGOCD / "helm-values.yaml")["repoServer"]
    (container,) = values["extraContainers"]
    yield "helm", container, values["volumes"]


@pytest.mark.parametrize("source", ["patch", "helm"])
def test_the_sidecar_container_follows_argo_cds_rules(source: str) -> None:
    sidecars = {name: (container, volumes) for name, container, volumes in _sidecars()}
    container, volumes = sidecars[source]
    assert container["command"] == [CMP_SERVER]
    assert container["securityContext"]["runAsUser"] == 999
    assert container["securityContext"]["runAsNonRoot"] is True
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounts[CMP_SERVER.rsplit("/", 1)[0]] == "var-files"
    assert mounts[CMP_PLUGINS] == "plugins"
    # Its own /tmp, not the repo-server's (Argo CD: filesystem separation against path traversal).
    assert mounts["/tmp"] in {v["name"] for v in volumes}
    assert mounts["/tmp"] != "tmp"


def test_the_patch_and_the_helm_values_run_the_same_sidecar() -> None:
    (_, patch, patch_volumes), (_, helm, helm_volumes) = _sidecars()
    assert patch == helm
    assert patch_volumes == helm_volumes
    patch_init = load(ARGOCD / "argocd-repo-server-patch.yaml")["spec"]["template"]["spec"]["initContainers"]
    assert patch_init == load(ARGOCD / "helm-values.yaml")["repoServer"]["initContainers"]
    kustomization = load(ARGOCD / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    for entry in kustomization["patches"]:
        assert (ARGOCD / entry["path"]).is_file()


def test_the_sidecar_runs_public_images_and_the_release_from_the_repository(plugin: dict[str, Any]) -> None:
    """Nothing to build or fill in: a Python image pinned to a release, karpenter-policy installed from the
    repository at the release tag by the init container into the virtualenv the sidecar runs, the plugin's files
    from the ConfigMap that the kustomization makes of plugin.yaml and generate.sh, mounted where
    argocd-cmp-server and PATH look."""
    spec = load(ARGOCD / "argocd-repo-server-patch.yaml")["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    (sidecar,) = spec["containers"]
    for container in (init, sidecar):
        assert re.fullmatch(r"python:\d+\.\d+\.\d+-\w+", container["image"]), container["image"]
    assert f'pip install --no-cache-dir --disable-pip-version-check "{INSTALL}"' in " ".join(init["args"])
    venv = {m["mountPath"]: m["name"] for m in init["volumeMounts"]}["/opt/karpenter-policy"]
    mounts = {m["mountPath"]: m for m in sidecar["volumeMounts"]}
    assert mounts["/opt/karpenter-policy"]["name"] == venv and mounts["/opt/karpenter-policy"]["readOnly"]
    path = {e["name"]: e["value"] for e in sidecar["env"]}["PATH"].split(":")
    assert path[0] == "/opt/karpenter-policy/bin"
    config = mounts[CMP_CONFIG]
    assert config["subPath"] == "plugin.yaml"
    command = plugin["spec"]["generate"]["command"][0]
    (script_dir,) = (d for d in path if mounts.get(d, {}).get("name") == config["name"])
    volumes = {v["name"]: v for v in spec["volumes"]}
    configmap = volumes[config["name"]]["configMap"]
    assert {i["path"] for i in configmap["items"]} == {"plugin.yaml", command}
    assert configmap["defaultMode"] & 0o111, "the generate command is executable"
    assert script_dir == "/opt/karpenter-policy-plugin"
    (generator,) = load(ARGOCD / "kustomization.yaml")["configMapGenerator"]
    assert generator["name"] == configmap["name"]
    assert sorted(generator["files"]) == sorted(["plugin.yaml", f"{command}=generate.sh"])
    assert load(ARGOCD / "kustomization.yaml")["generatorOptions"]["disableNameSuffixHash"] is True


def test_the_example_application_uses_the_plugin(plugin: dict[str, Any]) -> None:
    app = load(ARGOCD / "application.yaml")
    assert (app["apiVersion"], app["kind"]) == ("argoproj.io/v1alpha1", "Application")
    source = app["spec"]["source"]
    assert source["plugin"]["name"] == f"{plugin['metadata']['name']}-{plugin['spec']['version']}"
    announced = {p["name"] for p in plugin["spec"]["parameters"]["static"]}
    assert {p["name"] for p in source["plugin"].get("parameters", [])} <= announced
    assert app["spec"]["destination"]["namespace"] == "karpenter-policy"  # the ConfigMap's namespace
    assert "CreateNamespace=true" in app["spec"]["syncPolicy"]["syncOptions"]
    # the constraint-set ConfigMap may reach 1 MiB, beyond client-side apply's 256 KiB annotation
    assert "ServerSideApply=true" in app["spec"]["syncPolicy"]["syncOptions"]


# --- Flux ---------------------------------------------------------------------------------------------------


def compile_stream(*args: str, cwd: Path = ROOT) -> list[dict[str, Any]]:
    done = run([CLI, "compile", *args, "-o", "-"], cwd)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc is not None]


_FLUX_VARIABLE = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])([^}]*))?\}")


def flux_substitute(obj: dict[str, Any], variables: Mapping[str, str]) -> dict[str, Any]:
    """Flux's post-build substitution on one object, for the forms used here: skipped when annotated
    `kustomize.toolkit.fluxcd.io/substitute: disabled`; else `$${` becomes `${`, and `${var}`,
    `${var-default}`, `${var:-default}`, `${var=default}`, `${var:=default}` are replaced (an unset variable
    without a default by the empty string), as drone/envsubst does."""
    if obj.get("metadata", {}).get("annotations", {}).get(FLUX_SUBSTITUTE) == "disabled":
        return obj

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        name, operator, default = match.groups()
        value = variables.get(name)
        if value is None or (value == "" and operator and operator.startswith(":")):
            return default if operator else ""
        return value

    substituted = yaml.safe_load(_FLUX_VARIABLE.sub(replace, yaml.safe_dump(obj, sort_keys=True)))
    assert isinstance(substituted, dict)
    return substituted


def test_the_flux_objects_have_the_right_api_versions_and_kinds() -> None:
    (repository,) = load_all(FLUX / "gitrepository.yaml")
    (kustomization,) = load_all(FLUX / "kustomization-flux.yaml")
    assert (repository["apiVersion"], repository["kind"]) == ("source.toolkit.fluxcd.io/v1", "GitRepository")
    assert (kustomization["apiVersion"], kustomization["kind"]) == ("kustomize.toolkit.fluxcd.io/v1",
                                                                   "Kustomization")
    spec = kustomization["spec"]
    assert spec["sourceRef"] == {"kind": "GitRepository", "name": repository["metadata"]["name"]}
    assert kustomization["metadata"]["namespace"] == repository["metadata"]["namespace"]
    assert spec["prune"] is True
    assert isinstance(spec["postBuild"]["substitute"], dict) and spec["postBuild"]["substitute"]
    assert (ROOT / spec["path"] / "kustomization.yaml").is_file()
    # the GitRepository's ignore rules keep the applied directory
    assert f"!/{spec['path'].removeprefix('./')}/" in repository["spec"]["ignore"].split()


def test_the_kustomization_lists_the_compiled_directory_not_its_files() -> None:
    """compile writes compiled/kustomization.yaml with the manifests: nothing here names a Provisioner."""
    assert load(FLUX / "karpenter" / "kustomization.yaml")["resources"] == ["namespace.yaml", "compiled"]


def test_flux_applies_the_compiled_policies_with_substitution_where_it_belongs(tmp_path: Path, kubectl: str) -> None:
    directory = tmp_path / "karpenter"
    shutil.copytree(FLUX / "karpenter", directory)
    done = run([CLI, "compile", str(POLICIES), "-o", str(directory / "compiled")], ROOT)
    assert done.returncode == 0, done.stderr
    built = run([kubectl, "kustomize", str(directory)], tmp_path)
    assert built.returncode == 0, built.stderr
    variables = load(FLUX / "kustomization-flux.yaml")["spec"]["postBuild"]["substitute"]

    objects = [flux_substitute(o, variables) for o in yaml.safe_load_all(built.stdout) if o]

    kinds = sorted(o["kind"] for o in objects)
    assert kinds == ["AWSNodeTemplate"] * 2 + ["ConfigMap", "Namespace"] + ["Provisioner"] * 4
    (namespace,) = (o for o in objects if o["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["karpenter-policy/cluster"] == variables["cluster_name"]
    (configmap,) = (o for o in objects if o["kind"] == "ConfigMap")
    assert configmap["metadata"]["namespace"] == namespace["metadata"]["name"]


@pytest.mark.slow
def test_user_data_survives_flux_substitution(tmp_path: Path) -> None:
    """`${...}` in userData: annotated by default, escaped with --flux-escape; either way the node gets the
    script as written, while without protection Flux would rewrite it."""
    values = ["--values", str(TEMPLATES / "values" / "prod.yaml")]
    policies = str(TEMPLATES / "policies")
    variables = {"CLUSTER_NAME": "from-flux", "cluster_name": "platform-prod"}
    annotated = compile_stream(policies, *values)
    escaped = compile_stream(policies, *values, "--flux-escape")

    (template,) = (o for o in annotated if o["kind"] == "AWSNodeTemplate")
    user_data = template["spec"]["userData"]
    assert "${CLUSTER_NAME:-platform-prod}" in user_data
    assert template["metadata"]["annotations"][FLUX_SUBSTITUTE] == "disabled"

    # Default: Flux leaves every object that contains ${ alone (the constraint-set ConfigMap too).
    assert [flux_substitute(o, variables) for o in annotated] == annotated
    # --flux-escape: no annotation, and after substitution exactly the same objects.
    assert all(FLUX_SUBSTITUTE not in o["metadata"].get("annotations", {}) for o in escaped)
    delivered = [flux_substitute(o, variables) for o in escaped]
    for obj in annotated:
        obj["metadata"].get("annotations", {}).pop(FLUX_SUBSTITUTE, None)
        if obj["metadata"].get("annotations") == {}:
            del obj["metadata"]["annotations"]
    assert delivered == annotated
    # The hazard: unprotected, the shell's default would be replaced by the Flux variable.
    exposed = flux_substitute({**template, "metadata": {"name": "prod"}}, variables)
    assert 'echo "node of from-flux"' in exposed["spec"]["userData"]


@pytest.mark.slow
def test_an_object_marked_for_flux_gets_its_placeholders_filled_and_its_user_data_kept(tmp_path: Path) -> None:
    """Issue #19: `kustomize.toolkit.fluxcd.io/substitute: enabled` on the AWSNodeTemplate — no `placeholder`
    warning, and once Flux has substituted the compiled object, the selector has the cluster's name while the
    userData still has the shell's `${CLUSTER_NAME:-...}`."""
    policy = tmp_path / "marked.yaml"
    policy.write_text(
        "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata:\n  name: default\n"
        "  annotations: {kustomize.toolkit.fluxcd.io/substitute: enabled}\nspec:\n"
        '  subnetSelector: {karpenter.sh/discovery: "${CLUSTER_NAME}"}\n'
        '  securityGroupSelector: {karpenter.sh/discovery: "${CLUSTER_NAME}"}\n'
        '  userData: |\n    #!/bin/bash\n    echo "node of ${CLUSTER_NAME:-unknown}" > /etc/motd\n---\n'
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: default\n"
        "spec:\n  providerRef: {name: default}\n"
    )
    checked = run([CLI, "check", str(policy)], ROOT)
    assert checked.returncode == 0 and "[placeholder]" not in checked.stdout, checked.stdout
    (template,) = (o for o in compile_stream(str(policy)) if o["kind"] == "AWSNodeTemplate")
    delivered = flux_substitute(template, {"CLUSTER_NAME": "platform-prod"})
    assert delivered["spec"]["subnetSelector"] == {"karpenter.sh/discovery": "platform-prod"}
    assert delivered["spec"]["securityGroupSelector"] == {"karpenter.sh/discovery": "platform-prod"}
    assert 'echo "node of ${CLUSTER_NAME:-unknown}"' in delivered["spec"]["userData"]
    policy.write_text(policy.read_text().replace("{kustomize.toolkit.fluxcd.io/substitute: enabled}", "{team: a}"))
    unmarked = run([CLI, "check", str(policy)], ROOT)
    assert unmarked.stdout.count("[placeholder]") == 2


# --- pre-commit ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hooks() -> dict[str, dict[str, Any]]:
    entries = load(HOOKS_FILE)
    assert isinstance(entries, list)
    return {hook["id"]: hook for hook in entries}


def test_the_hooks_name_commands_the_cli_has(hooks: dict[str, dict[str, Any]], cli_commands: set[str]) -> None:
    assert set(hooks) == {"karpenter-policy-validate", "karpenter-policy-check", "karpenter-policy-fmt"}
    for hook in hooks.values():
        assert {"id", "name", "entry", "language"} <= set(hook)
        assert hook["language"] == "python"
        program, command, *_ = hook["entry"].split()
        assert program == "karpenter-policy"
        assert command in cli_commands, f"{hook['id']}: `{command}` is not a karpenter-policy command"
    # validate and check see the whole policy set (references across files), fmt the files staged
    assert hooks["karpenter-policy-validate"]["pass_filenames"] is False
    assert hooks["karpenter-policy-validate"]["args"][-1] == "policies/"
    assert hooks["karpenter-policy-check"]["pass_filenames"] is False
    assert hooks["karpenter-policy-check"]["args"] == ["policies/"]
    assert hooks["karpenter-policy-fmt"]["pass_filenames"] is True


@pytest.mark.parametrize(
    ("path", "validate", "check"),
    [
        ("policies/default.yaml", True, True),
        ("policies/team/gpu.yml", True, True),
        ("policies/platform.yaml.j2", False, True),  # validate cannot render templates (no --values)
        ("values/prod.yaml", False, False),
        (".github/workflows/karpenter-policy.yaml", False, False),
        ("policies/README.md", False, False),
    ],
)
def test_the_hooks_file_patterns(hooks: dict[str, dict[str, Any]], path: str, validate: bool, check: bool) -> None:
    # pre-commit matches `files` with re.search on the repository-relative path
    assert bool(re.search(hooks["karpenter-policy-validate"]["files"], path)) is validate
    assert bool(re.search(hooks["karpenter-policy-check"]["files"], path)) is check
    assert bool(re.search(hooks["karpenter-policy-fmt"]["files"], path)) is validate


def run_hook(hook: dict[str, Any], repo: Path, files: list[str]) -> subprocess.CompletedProcess[str]:
    """A hook's command line as pre-commit runs it: entry (split as a shell would) + args (+ the matching files)."""
    import shlex

    argv = [*shlex.split(hook["entry"]), *hook.get("args", [])]
    if hook.get("pass_filenames", True):
        argv += [f for f in files if re.search(hook["files"], f)]
    return run(argv, repo)


def test_the_hooks_pass_on_this_repositorys_policies(hooks: dict[str, dict[str, Any]], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(POLICIES, repo / "policies")
    files = sorted(str(p.relative_to(repo)) for p in (repo / "policies").rglob("*"))
    for hook_id in ("karpenter-policy-validate", "karpenter-policy-check"):
        done = run_hook(hooks[hook_id], repo, files)
        assert done.returncode == 0, f"{hook_id}: {done.stdout}{done.stderr}"
    # fmt rewrites what it formats and fails the commit once; then the files are formatted
    first, second = (run_hook(hooks["karpenter-policy-fmt"], repo, files) for _ in range(2))
    assert first.returncode == 1 and "formatted 5 files" in first.stderr, first.stderr
    assert second.returncode == 0, second.stderr


def test_the_validate_hook_resolves_references_across_files(
    hooks: dict[str, dict[str, Any]], tmp_path: Path
) -> None:
    """A commit that changes only a Provisioner: its providerRef names an AWSNodeTemplate of another file."""
    repo = tmp_path / "repo"
    shutil.copytree(POLICIES, repo / "policies")

    done = run_hook(hooks["karpenter-policy-validate"], repo, ["policies/default.yaml"])

    assert done.returncode == 0, done.stdout
    assert "[unresolved-reference]" not in done.stdout
    assert ": 0 errors, 0 warnings" in done.stdout


def test_the_example_pre_commit_config_runs_the_published_hooks_from_the_release(
    hooks: dict[str, dict[str, Any]]
) -> None:
    config = load(CI / "pre-commit-config.yaml")
    (remote,) = config["repos"]
    assert (remote["repo"], remote["rev"]) == (REPOSITORY, RELEASE)
    assert [hook["id"] for hook in remote["hooks"]] == list(hooks)  # each published hook, nothing overridden
    assert all(set(hook) == {"id"} for hook in remote["hooks"])


# --- GitHub workflows ---------------------------------------------------------------------------------------


def _triggers(workflow: dict[Any, Any]) -> dict[str, Any]:
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true
    assert isinstance(triggers, dict)
    return triggers


def _steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    return [step for job in workflow["jobs"].values() for step in job["steps"]]


def run_step(step: dict[str, Any], cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """A `run:` step with GitHub's default shell on Linux (bash -e)."""
    return run(["bash", "--noprofile", "--norc", "-e", "-c", step["run"]], cwd, {**env, **step.get("env", {})})


def test_the_pull_request_workflow_uploads_sarif_from_the_check(cli_commands: set[str]) -> None:
    workflow = load(CI / "github-workflow.yaml")
    assert "pull_request" in _triggers(workflow)
    (job,) = workflow["jobs"].values()
    assert job["permissions"]["security-events"] == "write"
    steps = _steps(workflow)
    (upload,) = (s for s in steps if s.get("uses", "").startswith("github/codeql-action/upload-sarif@"))
    (sarif,) = (s for s in steps if "--output sarif" in s.get("run", ""))
    assert re.search(r"\bkarpenter-policy check policies/ .*--output sarif > (\S+)", sarif["run"])
    assert sarif["run"].split("> ")[1].strip() == upload["with"]["sarif_file"]
    assert sarif.get("continue-on-error") is True, "findings exit 1, and the SARIF must still be uploaded"
    assert steps.index(sarif) < steps.index(upload)
    (annotations,) = (s for s in steps if "--output github" in s.get("run", ""))
    assert steps.index(upload) < steps.index(annotations)
    assert annotations["run"].endswith(" --strict"), "the job's verdict fails on warnings too (#27)"
    for step in steps:
        for command in re.findall(r"\bkarpenter-policy (\S+)", step.get("run", "")):
            assert command in cli_commands


def test_the_pull_request_check_reports_on_every_pull_request() -> None:
    """A required status check whose workflow is filtered by paths never reports on other pull requests, which
    then wait for it forever."""
    workflow = load(CI / "github-workflow.yaml")
    triggers = _triggers(workflow)
    assert triggers.get("pull_request") is None, "no paths or branches filter"
    assert "merge_group" in triggers
    (job,) = workflow["jobs"].values()
    assert "if" not in job and all("if" not in step or "cancelled" in step["if"] for step in job["steps"])


@pytest.mark.parametrize("path", [CI / "github-workflow.yaml", CI / "github-workflow-compile.yaml",
                                  CI / "github-workflow-pr-comment.yaml", CI / "github-workflow-plan.yaml",
                                  WORKFLOWS / "release.yaml"],
                         ids=lambda p: p.name)
def test_the_workflows_run_as_they_stand(path: Path) -> None:
    """Nothing to fill in: actions pinned to a release, a fixed runner image, and karpenter-policy installed from
    the repository at the release tag."""
    workflow = load(path)
    for step in _steps(workflow):
        if "uses" in step:
            assert re.fullmatch(r"[\w-]+/[\w/-]+@v\d+\.\d+\.\d+", step["uses"]), step["uses"]
    if path.parent == CI:
        assert workflow["env"]["KARPENTER_POLICY"] == INSTALL
        (install,) = (s for s in _steps(workflow) if s.get("name") == "Install karpenter-policy")
        assert install["run"] == 'python -m pip install --disable-pip-version-check "$KARPENTER_POLICY"'
    for job in workflow["jobs"].values():
        assert job["runs-on"] != "ubuntu-latest", "a fixed runner image"


def test_both_workflows_check_the_policies_for_the_clusters_region() -> None:
    for name in ("github-workflow.yaml", "github-workflow-compile.yaml"):
        workflow = load(CI / name)
        assert re.fullmatch(r"[a-z]{2}(-[a-z]+)+-\d", workflow["env"]["REGION"])
        commands = [s["run"] for s in _steps(workflow)
                    if re.search(r"karpenter-policy (check|compile)", s.get("run", ""))]
        assert commands and all('--region "$REGION"' in command for command in commands), name


def test_no_placeholder_organisation_in_what_renders() -> None:
    for base in (CI, DEPLOY, WORKFLOWS):
        for path in sorted(base.rglob("*")):
            if path.is_file():
                assert "example-org" not in path.read_text(encoding="utf-8"), path
    assert "example-org" not in HOOKS_FILE.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_pull_request_workflow_commands_run(tmp_path: Path) -> None:
    workflow = load(CI / "github-workflow.yaml")
    steps = [s for s in _steps(workflow) if "karpenter-policy check" in s.get("run", "")]
    repo = tmp_path / "repo"
    shutil.copytree(POLICIES, repo / "policies")

    for step in steps:
        done = run_step(step, repo, workflow.get("env", {}))
        assert done.returncode == 0, done.stdout + done.stderr
    sarif = json.loads((repo / "results.sarif").read_text(encoding="utf-8"))
    assert sarif["version"] == "2.1.0" and sarif["runs"]

    # With an error the check exits 1 (hence continue-on-error) and still writes the SARIF to upload.
    (repo / "policies" / "broken.yaml").write_text(
        "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: broken\nspec:\n"
        "  requirements:\n    - key: kubernetes.io/arch\n      operator: In\n      values: []\n"
        "  providerRef:\n    name: default\n",
        encoding="utf-8",
    )
    failed = run_step(steps[0], repo, workflow.get("env", {}))
    assert failed.returncode == 1, failed.stderr
    results = json.loads((repo / "results.sarif").read_text(encoding="utf-8"))["runs"][0]["results"]
    assert any(r["level"] == "error" and "broken.yaml" in json.dumps(r["locations"]) for r in results)


@pytest.mark.slow
def test_the_compile_workflow_produces_what_flux_applies(tmp_path: Path, kubectl: str) -> None:
    """Run the compile workflow's compile and build steps on a copy of this repository; a new Provisioner needs no
    edit of anything but the policies."""
    workflow = load(CI / "github-workflow-compile.yaml")
    assert "push" in _triggers(workflow)
    env = workflow["env"]
    kustomization = load(FLUX / "kustomization-flux.yaml")
    assert env["OUT"] == f"{kustomization['spec']['path'].removeprefix('./')}/compiled"
    repo = tmp_path / "repo"
    shutil.copytree(POLICIES, repo / "policies")
    shutil.copytree(FLUX, repo / "deploy" / "flux")
    steps = {s.get("name"): s for s in _steps(workflow)}
    build = steps["Build what Flux applies"]
    assert build["run"].startswith("kubectl kustomize deploy/flux/karpenter")
    # kubectl as on the runner image: on PATH
    env = {**env, "PATH": os.pathsep.join([str(Path(kubectl).parent), str(VENV_BIN), os.environ.get("PATH", "")])}

    def flux_objects() -> list[tuple[str, str]]:
        for name in ("Compile", "Build what Flux applies"):
            done = run_step(steps[name], repo, env)
            assert done.returncode == 0, f"{name}: {done.stdout}{done.stderr}"
        built = run([kubectl, "kustomize", str(repo / "deploy" / "flux" / "karpenter")], repo)
        return sorted((o["kind"], o["metadata"]["name"]) for o in yaml.safe_load_all(built.stdout) if o)

    assert flux_objects() == sorted([
        ("AWSNodeTemplate", "default"), ("AWSNodeTemplate", "gpu"), ("ConfigMap", "karpenter-policy-constraints"),
        ("Namespace", "karpenter-policy"), ("Provisioner", "arm64"), ("Provisioner", "default"),
        ("Provisioner", "gpu"), ("Provisioner", "spot-batch"),
    ])
    assert (repo / env["OUT"] / "constraintsets" / "index.json").is_file()

    # A new Provisioner: applied after the next compile, nothing else edited; a deleted one goes.
    extra = (POLICIES / "gpu.yaml").read_text(encoding="utf-8").replace("name: gpu\n", "name: gpu-extra\n", 1)
    (repo / "policies" / "gpu-extra.yaml").write_text(extra, encoding="utf-8")
    (repo / "policies" / "arm64.yaml").unlink()
    after = flux_objects()
    assert ("Provisioner", "gpu-extra") in after and ("Provisioner", "arm64") not in after
