#!/usr/bin/env bash
# karpenter-policy-cmp-generate: the `generate` command of the karpenter-policy Argo CD Config Management Plugin.
#
# Installed in the sidecar image as /usr/local/bin/karpenter-policy-cmp-generate (see Dockerfile) and run by
# argocd-cmp-server in the Application's source directory (a copy of the repository, cwd = spec.source.path).
#
# Contract with Argo CD:
#   - stdout carries nothing but the YAML stream of the compiled manifests (Provisioners/AWSNodeTemplates, or
#     NodePools/EC2NodeClasses, and the ConfigMap of constraint sets), and only when compile succeeded;
#   - every log line and the compile report go to stderr (shown in the UI on error, and in the sidecar log with
#     --loglevel=info);
#   - any error exits non-zero with stdout EMPTY, so Argo CD keeps the last good manifests instead of pruning.
#
# Settings. Each can be given as a plugin parameter (spec.source.plugin.parameters, which Argo CD passes as
# PARAM_<NAME>) or as a plugin env entry (spec.source.plugin.env, passed as ARGOCD_ENV_<NAME>); the parameter
# wins. Unset (or empty) means the default.
#   parameter                 env entry                   compile flag / meaning                    default
#   paths (array)             PATHS (space-separated)     PATHS, relative to the app directory      .
#   values-file               VALUES_FILE                 --values (for *.yaml.j2 templates)        none
#   api                       API                         --api v1alpha5|v1                         v1alpha5
#   node-role                 NODE_ROLE                   --node-role (api v1)                      none
#   default-instance-profile  DEFAULT_INSTANCE_PROFILE    --default-instance-profile (api v1)       none
#   configmap-namespace       CONFIGMAP_NAMESPACE         --configmap-namespace                     karpenter-policy
#   configmap-name            CONFIGMAP_NAME              --configmap-name                          karpenter-policy-constraints
#   region                    REGION                      --region (the cluster's AWS region)       us-east-1
#   catalog                   CATALOG                     --catalog (a catalog file in the repo)    embedded catalog
#   allow-previous-generation ALLOW_PREVIOUS_GENERATION   --allow-previous-generation (true/false)  false
#   fail-on-warn              FAIL_ON_WARN                --fail-on-warn (true/false)               false
#   allow-empty               ALLOW_EMPTY                 accept a result without any Provisioner   false
#                                                         or NodePool (true/false)
# Paths and files must stay inside the repository Argo CD sent: absolute paths and paths that resolve (through
# `..` or symbolic links) outside it are refused. A values file must not lie where compile would read it as a
# policy (a YAML file under a compiled path).
set -euo pipefail

readonly prog=karpenter-policy-cmp-generate

log() { printf '%s: %s\n' "$prog" "$*" >&2; }
die() {
    log "error: $*"
    exit 2
}

# setting NAME [DEFAULT]: PARAM_NAME, else ARGOCD_ENV_NAME, else DEFAULT.
setting() {
    local param="PARAM_$1" env="ARGOCD_ENV_$1"
    if [[ -n ${!param-} ]]; then
        printf '%s' "${!param}"
    elif [[ -n ${!env-} ]]; then
        printf '%s' "${!env}"
    else
        printf '%s' "${2-}"
    fi
}

# flag NAME: a true/false setting, into $REPLY (no subshell, so that die exits the script).
flag() {
    local value name=${1,,}
    value=$(setting "$1" false)
    case ${value,,} in
        true | yes | 1) REPLY=true ;;
        false | no | 0) REPLY=false ;;
        *) die "${name//_/-}: expected true or false, got '$value'" ;;
    esac
}

# The repository root: the application directory minus ARGOCD_APP_SOURCE_PATH (the sidecar unpacks the whole
# repository and runs this in <root>/<source path>). Without a matching source path, the app directory itself.
app_dir=$(pwd -P)
repo_root=$app_dir
source_path=${ARGOCD_APP_SOURCE_PATH-}
while [[ $source_path == ./* ]]; do source_path=${source_path#./}; done
source_path=${source_path%/}
if [[ -n $source_path && $source_path != . && $app_dir == */"$source_path" ]]; then
    repo_root=${app_dir%/"$source_path"}
fi

# in_repo WHAT PATH: PATH resolved (symbolic links too) into $REPLY; exits if it is absolute or resolves outside
# the repository.
in_repo() {
    local what=$1 path=$2
    if [[ $path == /* ]]; then
        die "$what '$path': give a path relative to the application directory"
    fi
    REPLY=$(realpath -m -- "$path") || die "$what '$path': cannot resolve it"
    if [[ $REPLY != "$repo_root" && $REPLY != "$repo_root"/* ]]; then
        die "$what '$path' is outside the repository"
    fi
}

# PATHS: the array parameter (PARAM_PATHS_0, PARAM_PATHS_1, ...), else a string parameter or env entry.
paths=()
i=0
while true; do
    var="PARAM_PATHS_$i"
    [[ -n ${!var-} ]] || break
    paths+=("${!var}")
    i=$((i + 1))
done
if ((${#paths[@]} == 0)); then
    read -r -a paths <<<"$(setting PATHS .)"
fi
if ((${#paths[@]} == 0)); then
    paths=(.)
fi
resolved_paths=()
for path in "${paths[@]}"; do
    in_repo path "$path"
    resolved_paths+=("$REPLY")
done

api=$(setting API v1alpha5)
case $api in
    v1alpha5 | v1) ;;
    *) die "api: expected v1alpha5 or v1, got '$api'" ;;
esac

args=(compile --out - --api "$api" --output text
    --configmap-namespace "$(setting CONFIGMAP_NAMESPACE karpenter-policy)"
    --configmap-name "$(setting CONFIGMAP_NAME karpenter-policy-constraints)")

values_file=$(setting VALUES_FILE)
if [[ -n $values_file ]]; then
    in_repo values-file "$values_file"
    resolved_values=$REPLY
    [[ -f $resolved_values ]] || die "values-file '$values_file': no such file"
    # compile reads every *.yaml, *.yml, *.yaml.j2 under its paths, hidden files and directories excepted
    for resolved in "${resolved_paths[@]}"; do
        rest=${resolved_values#"$resolved"/}
        if [[ $resolved_values == "$resolved" ]] || [[ $resolved_values == "$resolved"/* && /$rest != */.* &&
            ($rest == *.yaml || $rest == *.yml || $rest == *.yaml.j2) ]]; then
            die "values-file '$values_file' is inside the compiled path '$resolved' and would be read as a policy:" \
                "keep values files out of the policy directory (e.g. ../values/prod.yaml) or set the paths parameter"
        fi
    done
    args+=(--values "$values_file")
fi

args+=(--region "$(setting REGION us-east-1)")
catalog=$(setting CATALOG)
if [[ -n $catalog ]]; then
    in_repo catalog "$catalog"
    args+=(--catalog "$catalog")
fi
flag ALLOW_PREVIOUS_GENERATION
if [[ $REPLY == true ]]; then
    args+=(--allow-previous-generation)
fi

node_role=$(setting NODE_ROLE)
if [[ -n $node_role ]]; then
    args+=(--node-role "$node_role")
fi
instance_profile=$(setting DEFAULT_INSTANCE_PROFILE)
if [[ -n $instance_profile ]]; then
    args+=(--default-instance-profile "$instance_profile")
fi
flag FAIL_ON_WARN
if [[ $REPLY == true ]]; then
    args+=(--fail-on-warn)
fi
flag ALLOW_EMPTY
allow_empty=$REPLY

# KUBE_API_VERSIONS lists the group/versions the destination cluster serves: warn when it lacks the one we emit.
want=karpenter.sh/v1alpha5
if [[ $api == v1 ]]; then
    want=karpenter.sh/v1
fi
if [[ -n ${KUBE_API_VERSIONS-} && ,$KUBE_API_VERSIONS, != *,"$want",* ]]; then
    log "warning: the destination cluster does not serve $want; set the api parameter to match its Karpenter"
fi

log "app ${ARGOCD_APP_NAME:-?} (namespace ${ARGOCD_APP_NAMESPACE:-?}), ${ARGOCD_APP_SOURCE_REPO_URL:-?}" \
    "path ${ARGOCD_APP_SOURCE_PATH:-.} at ${ARGOCD_APP_REVISION:-?}"
log "karpenter-policy ${args[*]} -- ${paths[*]}"

# Compile into a file first: stdout gets the stream only once compile succeeded and the result was checked.
out=$(mktemp "${TMPDIR:-/tmp}/karpenter-policy-cmp.XXXXXX")
trap 'rm -f -- "$out"' EXIT
status=0
karpenter-policy "${args[@]}" -- "${paths[@]}" >"$out" || status=$?
if ((status != 0)); then
    log "compile failed (exit $status): no manifests generated"
    exit "$status"
fi

# An empty policy set would make an auto-synced Application with prune delete every Provisioner: refuse it
# unless asked for. (The stream is dumped with top-level keys at column 0, nested ones indented.)
if [[ $allow_empty != true ]] && ! grep -Eq '^kind: (Provisioner|NodePool)$' "$out"; then
    log "error: no Provisioner or NodePool compiled from ${paths[*]}; with automated sync and prune Argo CD" \
        "would delete every one in the cluster. Set the allow-empty parameter to true if that is intended."
    exit 1
fi

cat -- "$out"
