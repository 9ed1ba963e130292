"""userData that joins a node to the cluster, per AMI family (pure: no I/O).

- AL2 and Ubuntu: a MIME multipart document whose last part runs ``/etc/eks/bootstrap.sh`` with the cluster
  endpoint and CA, ``--use-max-pods false`` and kubelet flags (labels, taints, max pods, reserved resources,
  eviction thresholds, image GC); the template's own ``userData`` (a shell script or MIME parts) runs first.
- AL2023: a MIME multipart document whose last part is nodeadm's ``NodeConfig`` (the cluster's name, endpoint, CA
  and service CIDR; kubelet configuration inline, labels as a flag), after the template's own parts (MIME parts,
  a NodeConfig document or a shell script), as Karpenter v1.14.1 writes it (see :func:`al2023`).
- Bottlerocket: TOML settings (``[settings.kubernetes]``) merged over the template's own TOML.
- Windows2019/2022/2025: PowerShell calling ``Start-EKSBootstrap.ps1``, after the template's own script.
- Custom: the template's ``userData`` verbatim (the AMI joins the cluster its own way).

The same inputs always give the same bytes (sorted labels and flags), so launch templates named by content
hash are reused. Bad template userData raises ``ValueError`` naming the problem.
"""

from __future__ import annotations

import base64
import binascii
import email
import email.message
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from karpenter_policy.api.constraintset import INSTANCE_TYPE_KEYS
from karpenter_policy.api.userdata import SHELL_PART_TYPE, UserDataError, is_mime, mime_parts, toml_settings
from karpenter_policy.model import labels as wk
from karpenter_policy.model.pools import owner_labels
from karpenter_policy.model.requirements import Requirements
from karpenter_policy.model.taints import Taint

MIME_BOUNDARY = "//"
WINDOWS_BOOTSTRAP = r'[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"'

#: Labels a node's kubelet may not (or need not) set itself: they vary with the offering (type, zone, capacity
#: type), the kubelet sets them (hostname, arch, os, zone), or NodeRestriction forbids them.
_OFFERING_LABELS = frozenset({wk.ZONE, wk.REGION, wk.CAPACITY_TYPE, wk.HOSTNAME, *INSTANCE_TYPE_KEYS})
_KUBELET_ALLOWED_DOMAINS = ("kubelet.kubernetes.io", "node.kubernetes.io")


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """What a node needs to join: the cluster, its labels and taints, and kubelet settings."""

    cluster_name: str
    cluster_endpoint: str
    ca_bundle: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    kubelet: Mapping[str, Any] | None = None
    max_pods: int | None = None
    dns_cluster_ip: str | None = None
    custom: str | None = None
    #: The cluster's service CIDR (AL2023's NodeConfig needs it; the other families do not).
    cluster_cidr: str | None = None
    #: An EC2NodeClass's `instanceStorePolicy: RAID0`: the instance store striped and used for the kubelet's and
    #: the container runtime's storage (AL2's `--local-disks raid0`, nodeadm's `localStorage.strategy: RAID0`,
    #: Bottlerocket's `ephemeral-storage` bootstrap command), as v1.14.1's bootstrap package writes it.
    raid0: bool = False
    #: Bottlerocket 1.46.0 and later bind the default directories (`SupportsDefaultBind`): `bind` without `--dirs`.
    default_mount_paths: bool = False

    @property
    def cluster_dns(self) -> str | None:
        configured = (self.kubelet or {}).get("clusterDNS")
        if isinstance(configured, list) and configured:
            return str(configured[0])
        return self.dns_cluster_ip


def _kubelet_may_set(key: str) -> bool:
    if key in _OFFERING_LABELS:
        return False
    domain = key.split("/", 1)[0] if "/" in key else ""
    if domain.endswith(("kubernetes.io", "k8s.io")):
        return domain.endswith(_KUBELET_ALLOWED_DOMAINS) and not domain.endswith("node-restriction.kubernetes.io")
    return True


def bootstrap_labels(provisioner: str, labels: Mapping[str, str], requirements: Requirements) -> dict[str, str]:
    """The labels the kubelet registers the node with: the pool's owner label (`provisioner` is a pool key:
    `karpenter.sh/provisioner-name`, or a NodePool's `karpenter.sh/nodepool`), its labels, and the values its
    requirements pin to one value, less those that depend on the offering or the kubelet may not set."""
    merged = {**requirements.single_values(), **labels, **owner_labels(provisioner)}
    return {key: value for key, value in sorted(merged.items()) if _kubelet_may_set(key)}


def _joined(mapping: Mapping[str, Any], separator: str) -> str:
    return ",".join(f"{key}{separator}{mapping[key]}" for key in sorted(mapping))


def kubelet_flags(b: Bootstrap) -> list[str]:
    """kubelet command-line flags for labels, taints and kubeletConfiguration, in a fixed order."""
    kubelet = b.kubelet or {}
    flags: list[str] = []
    if b.labels:
        flags.append(f"--node-labels={_joined(b.labels, '=')}")
    if b.taints:
        flags.append("--register-with-taints=" + ",".join(str(t) for t in b.taints))
    if b.max_pods is not None:
        flags.append(f"--max-pods={b.max_pods}")
    if kubelet.get("podsPerCore") is not None:
        flags.append(f"--pods-per-core={kubelet['podsPerCore']}")
    for key, flag, separator in (
        ("systemReserved", "--system-reserved", "="),
        ("kubeReserved", "--kube-reserved", "="),
        ("evictionHard", "--eviction-hard", "<"),
        ("evictionSoft", "--eviction-soft", "<"),
        ("evictionSoftGracePeriod", "--eviction-soft-grace-period", "="),
    ):
        if kubelet.get(key):
            flags.append(f"{flag}={_joined(kubelet[key], separator)}")
    for key, flag in (
        ("evictionMaxPodGracePeriod", "--eviction-max-pod-grace-period"),
        ("imageGCHighThresholdPercent", "--image-gc-high-threshold"),
        ("imageGCLowThresholdPercent", "--image-gc-low-threshold"),
    ):
        if kubelet.get(key) is not None:
            flags.append(f"{flag}={kubelet[key]}")
    if kubelet.get("cpuCFSQuota") is not None:
        flags.append(f"--cpu-cfs-quota={'true' if kubelet['cpuCFSQuota'] else 'false'}")
    return flags


# --- AL2 / Ubuntu -------------------------------------------------------------------------------------------


def _mime_parts(custom: str) -> list[tuple[str, str]]:
    """(content type, body) of the template's userData: its MIME parts (decoded), or one shell-script part. A MIME
    document Karpenter could not read raises `UserDataError` (a ValueError) as validation reports it."""
    if not is_mime(custom):
        return [(SHELL_PART_TYPE, custom)]
    mime_parts(custom)  # read as Karpenter reads it: its problems, at their line
    return [
        (SHELL_PART_TYPE if content_type is None else content_type, body)
        for content_type, body in _leaf_parts(custom.lstrip(), "mixed")
    ]


def _leaf_parts(document: str, kind: str) -> list[tuple[str | None, str]]:
    """(Content-Type or None, decoded body) of each leaf part of a MIME `document`; ValueError when it is not
    multipart (`kind` names what was expected)."""
    message = email.message_from_string(document)
    if not message.is_multipart():
        raise ValueError(f"userData is a MIME document but not multipart{'/' + kind if kind else ''}")
    parts: list[tuple[str | None, str]] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        body = payload.decode("utf-8") if isinstance(payload, bytes) else str(part.get_payload())
        content_type = part.get("Content-Type")
        parts.append((None if content_type is None else str(content_type), body))
    return parts


def al2(b: Bootstrap) -> str:
    """MIME multipart: the template's parts, then the EKS bootstrap script."""
    command = [["/etc/eks/bootstrap.sh", b.cluster_name]]
    command += [["--apiserver-endpoint", b.cluster_endpoint], ["--b64-cluster-ca", b.ca_bundle]]
    if b.cluster_dns:
        command.append(["--dns-cluster-ip", b.cluster_dns])
    runtime = (b.kubelet or {}).get("containerRuntime")
    if runtime:
        command.append(["--container-runtime", str(runtime)])
    command.append(["--use-max-pods", "false"])
    flags = kubelet_flags(b)
    if flags:
        command.append(["--kubelet-extra-args", " ".join(flags)])
    if b.raid0:  # last, as eksbootstrap.go writes it
        command.append(["--local-disks", "raid0"])
    script = (
        "#!/bin/bash -xe\n"
        "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n"
        + " \\\n".join(" ".join(shlex.quote(word) for word in line) for line in command)
        + "\n"
    )
    parts = (_mime_parts(b.custom) if b.custom else []) + [(SHELL_PART_TYPE, script)]
    boundary = MIME_BOUNDARY
    while any(f"--{boundary}" in body for _, body in parts):
        boundary += "/"
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{boundary}"', ""]
    for content_type, body in parts:
        lines += [f"--{boundary}", f"Content-Type: {content_type}", "", body.rstrip("\n")]
    lines.append(f"--{boundary}--")
    return "\n".join(lines) + "\n"


# --- AL2023 (nodeadm) ---------------------------------------------------------------------------------------

NODECONFIG_PART_TYPE = "application/node.eks.aws"
NODEADM_BOUNDARY = "//"
#: kubeletConfiguration fields of v1alpha5 that Karpenter v1's KubeletConfiguration no longer has.
_NOT_V1_KUBELET = frozenset({"containerRuntime"})


def _nodeadm_custom_parts(custom: str) -> list[tuple[str, str]]:
    """The template's userData as entries of nodeadm's archive, as `Nodeadm.parseUserData` reads it (aws
    pkg/providers/amifamily/bootstrap/nodeadm.go at v1.14.1): a MIME document's parts (a last part with neither
    header nor body, left by an archive without its closing boundary, is none, as Go's multipart reader ends
    there); else a YAML mapping (or an empty document) is a NodeConfig, anything else a shell script."""
    if is_mime(custom):
        return [
            (content_type or SHELL_PART_TYPE, body)
            for content_type, body in _leaf_parts(custom.strip(), "")
            if content_type is not None or body
        ]
    try:
        document = yaml.safe_load(custom)
    except yaml.YAMLError:
        document = custom
    if document is None or isinstance(document, dict):
        return [(NODECONFIG_PART_TYPE, custom)]
    return [(SHELL_PART_TYPE, custom)]


def _go_quoted(text: str) -> str:
    """Go's `%q` of a label or taint list (printable ASCII: JSON's quoting is the same)."""
    return json.dumps(text, ensure_ascii=False)


def node_config(b: Bootstrap) -> str:
    """nodeadm's NodeConfig for the node, as `Nodeadm.getNodeConfigYAML` writes it (nodeadm.go at v1.14.1): the
    cluster (name, endpoint, CA decoded and encoded again, service CIDR), the kubelet configuration inline (the
    template's kubelet settings, maxPods, clusterDNS, registerWithTaints) and the node's labels as a flag; keys
    sorted, as `sigs.k8s.io/yaml` writes them. Raises ValueError without the CIDR or with a CA that is not
    base64 (Karpenter: the node class is not ready, "resolving cluster CIDR"; "decoding CABundle")."""
    if not b.cluster_cidr:
        raise ValueError("the cluster's service CIDR is not known: AL2023's NodeConfig needs it")
    cluster: dict[str, Any] = {"apiServerEndpoint": b.cluster_endpoint, "cidr": b.cluster_cidr, "name": b.cluster_name}
    if b.ca_bundle:
        try:
            ca = base64.b64decode(b.ca_bundle, validate=True)
        except binascii.Error:
            raise ValueError("the cluster CA bundle is not base64") from None
        cluster["certificateAuthority"] = base64.b64encode(ca).decode("ascii")
    config: dict[str, Any] = {
        key: value for key, value in (b.kubelet or {}).items() if key not in _NOT_V1_KUBELET and value is not None
    }
    if b.max_pods is not None:
        config["maxPods"] = b.max_pods
    if b.cluster_dns and not config.get("clusterDNS"):
        config["clusterDNS"] = [b.cluster_dns]
    config["registerWithTaints"] = [taint.to_api() for taint in b.taints]
    kubelet: dict[str, Any] = {"config": config}
    if b.labels:
        kubelet["flags"] = [f"--node-labels={_go_quoted(_joined(b.labels, '='))}"]
    local_storage = {"strategy": "RAID0"} if b.raid0 else {}
    document = {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "metadata": {},
        "spec": {"cluster": cluster, "containerd": {}, "instance": {"localStorage": local_storage}, "kubelet": kubelet},
    }
    text = yaml.safe_dump(document, sort_keys=True, default_flow_style=False, width=1 << 30, allow_unicode=True)
    return "# Karpenter Generated NodeConfig\n" + text


def al2023(b: Bootstrap) -> str:
    """MIME multipart: the template's entries, then Karpenter's NodeConfig (`Nodeadm.Script`; the archive as
    `mime.Archive.Serialize` writes it, aws pkg/providers/amifamily/bootstrap/mime/mime.go at v1.14.1: boundary
    `//`, carriage returns removed; the caller base64-encodes it)."""
    entries = (_nodeadm_custom_parts(b.custom) if b.custom else []) + [(NODECONFIG_PART_TYPE, node_config(b))]
    out = ["MIME-Version: 1.0\n", f'Content-Type: multipart/mixed; boundary="{NODEADM_BOUNDARY}"\n\n']
    for index, (content_type, content) in enumerate(entries):
        out.append(("\n" if index else "") + f"--{NODEADM_BOUNDARY}\nContent-Type: {content_type}\n\n{content}")
    out.append(f"\n--{NODEADM_BOUNDARY}--\n")
    return "".join(out)


# --- Bottlerocket -------------------------------------------------------------------------------------------

#: The bootstrap command v1.14.1 adds for RAID0 (bottlerocket.go), and the directories an older release binds.
MOUNT_INSTANCE_STORAGE = "000-mount-instance-storage"
BIND_DIRS = ["--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]


def bottlerocket(b: Bootstrap) -> str:
    """TOML: the template's settings with ``settings.kubernetes`` overridden by the cluster's and the node's."""
    try:
        document: dict[str, Any] = toml_settings(b.custom) if b.custom else {}
    except UserDataError as error:
        raise ValueError(f"userData is not valid TOML for Bottlerocket: line {error.line}: {error.message}") from None
    kubelet = b.kubelet or {}
    settings = document.setdefault("settings", {})
    if not isinstance(settings, dict):
        raise ValueError("userData: settings must be a TOML table")
    kubernetes = settings.setdefault("kubernetes", {})
    if not isinstance(kubernetes, dict):
        raise ValueError("userData: settings.kubernetes must be a TOML table")
    kubernetes.update({"cluster-name": b.cluster_name, "api-server": b.cluster_endpoint})
    kubernetes["cluster-certificate"] = b.ca_bundle
    if b.cluster_dns:
        kubernetes["cluster-dns-ip"] = b.cluster_dns
    if b.max_pods is not None:
        kubernetes["max-pods"] = b.max_pods
    if b.labels:
        kubernetes["node-labels"] = {**(kubernetes.get("node-labels") or {}), **b.labels}
    if b.taints:
        taints: dict[str, list[str]] = {}
        for taint in b.taints:
            taints.setdefault(taint.key, []).append(f"{taint.value}:{taint.effect}")
        kubernetes["node-taints"] = taints
    for key, setting in (
        ("kubeReserved", "kube-reserved"),
        ("systemReserved", "system-reserved"),
        ("evictionHard", "eviction-hard"),
    ):
        if kubelet.get(key):
            kubernetes[setting] = {str(k): str(v) for k, v in kubelet[key].items()}
    for key, setting in (
        ("imageGCHighThresholdPercent", "image-gc-high-threshold-percent"),
        ("imageGCLowThresholdPercent", "image-gc-low-threshold-percent"),
    ):
        if kubelet.get(key) is not None:
            kubernetes[setting] = int(kubelet[key])
    if kubelet.get("cpuCFSQuota") is not None:
        kubernetes["cpu-cfs-quota-enforced"] = bool(kubelet["cpuCFSQuota"])
    if b.raid0:
        commands = settings.setdefault("bootstrap-commands", {})
        if not isinstance(commands, dict):
            raise ValueError("userData: settings.bootstrap-commands must be a TOML table")
        commands[MOUNT_INSTANCE_STORAGE] = {
            "commands": [["apiclient", "ephemeral-storage", "init"],
                         ["apiclient", "ephemeral-storage", "bind"] + ([] if b.default_mount_paths else BIND_DIRS)],
            "mode": "always",
            "essential": True,
        }
    return toml_dumps(document)


def supports_default_bind(version: str) -> bool:
    """Whether a Bottlerocket release binds the default directories (v1.14.1's `SupportsDefaultBind`, aws
    pkg/providers/version/version.go): `latest`, or 1.46.0 and later; an unknown version (empty) does not."""
    if version == "latest":
        return True
    parts = version.lstrip("v").split(".")
    if len(parts) < 3 or not all(part.isdigit() for part in parts[:2]):
        return False
    major, minor = int(parts[0]), int(parts[1])
    return major > 1 or (major == 1 and minor >= 46)


def bottlerocket_version(names: Sequence[str]) -> str:
    """The release a Bottlerocket image name says (`bottlerocket-aws-k8s-1.33-x86_64-v1.46.0-431fe75a` → v1.46.0:
    `extractVersionFromName`, aws pkg/providers/amifamily/bottlerocket.go), of the first name saying one; empty
    when none does."""
    for name in names:
        for part in name.split("-"):
            if part.startswith("v") and "." in part:
                return part
    return ""


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in sorted(value.items())) + "}"
    raise ValueError(f"userData: cannot write a {type(value).__name__} as TOML")


def toml_dumps(document: Mapping[str, Any], prefix: tuple[str, ...] = ()) -> str:
    """TOML text for nested tables of strings, numbers, booleans and lists, keys sorted."""
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for key in sorted(document):
        value = document[key]
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{_toml_key(key)} = {_toml_value(value)}")
    out = "\n".join(lines) + ("\n" if lines else "")
    for key, table in tables:
        path = (*prefix, key)
        has_scalars = any(not isinstance(v, dict) for v in table.values())
        if has_scalars or not table:
            out += ("\n" if out else "") + "[" + ".".join(_toml_key(k) for k in path) + "]\n"
        out += toml_dumps(table, path)
    return out


# --- Windows ------------------------------------------------------------------------------------------------


def _powershell_quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def windows(b: Bootstrap) -> str:
    custom = b.custom or ""
    for tag in ("<powershell>", "</powershell>"):
        custom = custom.replace(tag, "")
    command = [
        "&",
        "$EKSBootstrapScriptFile",
        "-EKSClusterName",
        _powershell_quote(b.cluster_name),
        "-APIServerEndpoint",
        _powershell_quote(b.cluster_endpoint),
        "-Base64ClusterCA",
        _powershell_quote(b.ca_bundle),
    ]
    flags = kubelet_flags(b)
    if flags:
        command += ["-KubeletExtraArgs", _powershell_quote(" ".join(flags))]
    if b.cluster_dns:
        command += ["-DNSClusterIP", _powershell_quote(b.cluster_dns)]
    body = [line for line in (custom.strip(), WINDOWS_BOOTSTRAP, " ".join(command)) if line]
    return "<powershell>\n" + "\n".join(body) + "\n</powershell>\n"


def render(family: str, b: Bootstrap) -> str:
    """The userData text for an AMI family (AL2 when unset)."""
    if family in ("AL2", "Ubuntu", ""):
        return al2(b)
    if family == "Bottlerocket":
        return bottlerocket(b)
    if family == "AL2023":
        return al2023(b)
    if family in ("Windows2019", "Windows2022", "Windows2025"):
        return windows(b)
    if family == "Custom":
        return b.custom or ""
    raise ValueError(f"unknown amiFamily {family!r}")


__all__ = [
    "NODECONFIG_PART_TYPE",
    "Bootstrap",
    "bootstrap_labels",
    "bottlerocket_version",
    "kubelet_flags",
    "node_config",
    "render",
    "supports_default_bind",
    "toml_dumps",
]
