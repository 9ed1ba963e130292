"""boto3 sessions that share one botocore loader per process, so EC2's JSON service model is parsed once.

A boto3 session made the ordinary way builds a botocore session with a loader of its own, which parses
``ec2/…/service-2.json`` again for its first EC2 client (about 0.2 s of CPU). :func:`new_session` gives each caller
a session of its own — its own credentials, region and clients, as before (botocore sessions are not thread-safe
and are never shared) — whose ``data_loader`` component is the process's one :class:`botocore.loaders.Loader`.
That loader caches what it loads (``instance_cache``) and only reads: botocore itself shares one loader between
every client of a session, across threads.

boto3 appends its own data path to the loader's search paths on every session it makes
(``boto3.Session._setup_loader``): the shared loader's list keeps one copy of each path, so it does not grow by one
entry per session. The loader is made from the first session's ``data_path`` (``AWS_DATA_PATH``) setting.
"""

from __future__ import annotations

import threading
from typing import Any, SupportsIndex

import boto3.session
import botocore.session
from botocore.loaders import create_loader

_LOCK = threading.Lock()
_shared: Any = None  # the process's botocore Loader, made by the first session


class DistinctPaths(list[str]):
    """A search path list that ignores a path it already holds (boto3 appends its data path per session)."""

    def append(self, path: str) -> None:
        with _LOCK:
            if path not in self:
                super().append(path)

    def insert(self, index: SupportsIndex, path: str) -> None:
        with _LOCK:
            if path not in self:
                super().insert(index, path)


def shared_loader(session: Any) -> Any:
    """The process's botocore loader, made with ``session``'s data path when it is the first."""
    global _shared
    with _LOCK:
        if _shared is None:
            loader = create_loader(session.get_config_variable("data_path"))
            loader._search_paths = DistinctPaths(loader.search_paths)  # noqa: SLF001 - see the module docstring
            _shared = loader
        return _shared


def new_session(
    region_name: str | None = None,
    aws_access_key_id: str | None = None,
    aws_secret_access_key: str | None = None,
    aws_session_token: str | None = None,
) -> boto3.session.Session:
    """A boto3 session of its own (credentials, region, clients) on the process's shared loader."""
    core = botocore.session.get_session()
    core.register_component("data_loader", shared_loader(core))
    return boto3.session.Session(
        region_name=region_name,
        aws_access_key_id=aws_access_key_id,
        aws_secret_access_key=aws_secret_access_key,
        aws_session_token=aws_session_token,
        botocore_session=core,
    )


__all__ = ["DistinctPaths", "new_session", "shared_loader"]
