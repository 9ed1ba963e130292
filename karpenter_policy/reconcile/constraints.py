"""Where the controller reads its compiled constraint sets from, and how a new version is taken or refused.

Two sources, one contract (:meth:`ConstraintSource.poll`, called at the start of every pass):

* a directory (:class:`DirectorySource`): what `compile -o DIR` wrote, or the constraint-set ConfigMap mounted as
  a volume. Each poll compares the files' identity (inode, size, modification time) with the last version read,
  and reads again only when something changed — `compile` replaces the directory atomically, the kubelet swaps a
  mounted ConfigMap atomically;
* the ConfigMap `compile` emits and Argo CD / Flux sync (:class:`ConfigMapSource`, ``configmap/NAMESPACE/NAME``):
  read again when its resourceVersion changed.

A version that cannot be read — not JSON, a set missing, a hash that does not match its content (a hand edit, a
corrupted sync) — or whose content compile would never have written — a set its Provisioner's JSON Schema or
Karpenter's rules refuse, an index that names a set twice or under another name (`api.constraintcheck`) — is
refused as a whole, before anything is built from it: the last good version stays in force, and the refusal is
reported once per version, in one line naming the set, the field and why (a log line, and a Warning Event on the
ConfigMap). The `api` readers do every check.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from karpenter_policy.api.constraintset import (
    INDEX_KEY,
    ConstraintSet,
    ConstraintSetError,
    ConstraintSetIndex,
    read_compiled,
    read_wire_data,
)
from karpenter_policy.kube import objects
from karpenter_policy.kube.cluster import Cluster
from karpenter_policy.kube.errors import ClusterError
from karpenter_policy.kube.informer import Informer
from karpenter_policy.kube.objects import Obj

CONFIGMAP_PREFIX = "configmap/"


@dataclass(frozen=True, slots=True)
class Loaded:
    """A version of the constraint sets that was read and verified."""

    index: ConstraintSetIndex
    sets: tuple[ConstraintSet, ...]
    origin: str  # where it came from, for logs: the directory, or configmap/NS/NAME@resourceVersion

    @property
    def hash(self) -> str:
        """The hash of the index in force (what a version is known by)."""
        return self.index.hash


@dataclass(frozen=True, slots=True)
class Refused:
    """A version that could not be read: why, and the object to put a Warning Event on (None: a directory)."""

    message: str
    involved: Obj | None = None


class ConstraintSource(Protocol):
    description: str

    def poll(self) -> Loaded | Refused | None:
        """The new version if it changed since the last poll (Loaded or Refused), else None."""
        ...


class SourceError(ValueError):
    """A --constraints value that names no source."""


class DirectorySource:
    """`compile -o DIR` output, or a mounted constraint-set ConfigMap (see the module docstring)."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.description = str(self.directory)
        self._fingerprint: object = None

    def _files(self) -> list[Path]:
        folder = self.directory / "constraintsets"
        if not (folder / INDEX_KEY).exists():
            folder = self.directory
        try:
            return sorted(p for p in folder.iterdir() if p.name.endswith(".json"))
        except OSError:
            return []

    def _identity(self) -> object:
        identity = []
        for path in self._files():
            try:
                stat = path.stat()  # follows the kubelet's ..data symlinks: a swap changes the inode
            except OSError:
                continue
            identity.append((path.name, stat.st_ino, stat.st_size, stat.st_mtime_ns))
        return tuple(identity)

    def poll(self) -> Loaded | Refused | None:
        """A new version when the directory changed since the last poll (Refused when it does not load), None when it
        did not."""
        fingerprint = self._identity()
        if fingerprint == self._fingerprint:
            return None
        self._fingerprint = fingerprint
        try:
            return self.read()
        except ConstraintSetError as error:
            return Refused(str(error))

    def read(self) -> Loaded:
        """The version the directory holds now, every set checked (ConstraintSetError: it does not load)."""
        index, sets = read_compiled(self.directory)
        return Loaded(index, tuple(sets), str(self.directory))


class ConfigMapSource:
    """The constraint-set ConfigMap (see the module docstring). It has an informer of its own (`informer`, on that
    one ConfigMap), which the threaded runner starts with the others: once it has listed, a poll reads its cache,
    and each of its events sets `changed` — the provisioning controller's wake-up, which the controller takes from
    the source. Until then (the command's first read, before the runner starts; a controller driven step by step),
    a poll is a GET."""

    def __init__(self, cluster: Cluster, namespace: str, name: str) -> None:
        self.namespace, self.name = namespace, name
        self.description = f"{CONFIGMAP_PREFIX}{namespace}/{name}"
        self.changed = threading.Event()
        self.informer = Informer(
            cluster,
            objects.CONFIG_MAP,
            namespace=namespace,
            field_selector=f"metadata.name={name}",
            on_event=lambda _: self.changed.set(),
        )
        self._cluster = cluster
        self._fingerprint: object = None

    def _read(self) -> Obj | None:
        if self.informer.synced.is_set():
            return self.informer.get(self.name, self.namespace)
        return self._cluster.get(objects.CONFIG_MAP, self.name, self.namespace)

    def poll(self) -> Loaded | Refused | None:
        """A new version when the ConfigMap changed since the last poll (Refused when it does not load or cannot be read
        at first), None when it did not."""
        try:
            configmap = self._read()
        except ClusterError as error:  # transient: what is in force stays; nothing yet is worth saying
            return Refused(f"{self.description}: cannot read it: {error}") if self._fingerprint is None else None
        fingerprint = "absent" if configmap is None else (objects.uid(configmap), objects.resource_version(configmap))
        if fingerprint == self._fingerprint:
            return None
        self._fingerprint = fingerprint
        if configmap is None:
            return Refused(f"{self.description} does not exist")
        data = configmap.get("data")
        if not isinstance(data, dict):
            return Refused(f"{self.description}: no data", configmap)
        try:
            index, sets = read_wire_data({str(k): str(v) for k, v in data.items()})
        except ConstraintSetError as error:
            return Refused(f"{self.description}: {error}", configmap)
        return Loaded(index, tuple(sets), f"{self.description}@{objects.resource_version(configmap)}")


def parse_configmap_ref(value: str) -> tuple[str, str] | None:
    """(namespace, name) of ``configmap/NAMESPACE/NAME``; None when `value` is not such a reference."""
    if not value.startswith(CONFIGMAP_PREFIX):
        return None
    parts = value[len(CONFIGMAP_PREFIX) :].split("/")
    if len(parts) != 2 or not all(parts):
        raise SourceError(f"--constraints {value!r}: expected configmap/NAMESPACE/NAME")
    return parts[0], parts[1]


def source_for(value: str, cluster: Cluster) -> DirectorySource | ConfigMapSource:
    """The source a --constraints value names: ``configmap/NAMESPACE/NAME`` or a directory."""
    reference = parse_configmap_ref(value)
    if reference is not None:
        return ConfigMapSource(cluster, *reference)
    if not Path(value).is_dir():
        raise SourceError(f"--constraints {value!r}: not a directory (nor configmap/NAMESPACE/NAME)")
    return DirectorySource(value)



class FixedSource:
    """A constraint source that holds one version (compiled in memory): given once, then never changes."""

    def __init__(self, loaded: Loaded) -> None:
        self.description = loaded.origin
        self._pending: Loaded | None = loaded

    def poll(self) -> Loaded | None:
        """The version given last (at construction or by :meth:`replace`) the first time after, then None."""
        loaded, self._pending = self._pending, None
        return loaded

    def replace(self, loaded: Loaded) -> None:
        """A new version, for the next poll (as a changed directory or ConfigMap would give)."""
        self.description = loaded.origin
        self._pending = loaded

__all__ = [
    "CONFIGMAP_PREFIX",
    "ConfigMapSource",
    "ConstraintSource",
    "DirectorySource",
    "FixedSource",
    "Loaded",
    "Refused",
    "SourceError",
    "parse_configmap_ref",
    "source_for",
]
