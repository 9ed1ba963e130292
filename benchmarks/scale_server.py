"""The API server of `scale.py --server-process`, in a process of its own: the HTTP test API server the kube tests
use (tests/kube/emulator.py), seeded with a fleet at once, and the writers a measurement needs — bound-pod churn
and a burst of pending pods — written straight into its store, so the controller's process holds only the
controller (issue #23).

    python benchmarks/scale_server.py --seed fleet.json      # from the repository root on PYTHONPATH

`fleet.json` is {"nodes": [...], "pods": [...]} (objects as the API server stores them; each keeps its
creationTimestamp). The server prints one JSON line, {"url": …, "version": …}, once it serves, then answers one
JSON line per command read from stdin:

- `churn RATE`: bound pods replaced at RATE a second from now on (each replacement created bound to the node of
  the pod it replaces, then the old one deleted, as `scale.Churn` does in-process) → {"ok": true};
- `burst N PREFIX`: N pending pods (`_fleet.pending_pods`: PREFIX-0, PREFIX-1, …) created one after the other
  → {"last_created": t}, t the time of the last creation on CLOCK_MONOTONIC, which every process of the machine
  shares (the controller's process times its reads against it);
- `unbound PREFIX`: how many pods of the burst PREFIX (or PREFIX-) have no node yet → {"unbound": n};
- `sent PREFIX`: when the server's watches picked up the last pod of that burst to write it to their streams
  (`SentProbe`) → {"last_sent": t} on CLOCK_MONOTONIC, or null;
- `stop`: {"churn_done": n, "churn_seconds": s, "churn_cpu_seconds": c}, then the server exits.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import kmock

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _fleet import pending_pods  # noqa: E402

from karpenter_policy.kube import objects  # noqa: E402
from tests.kube.apiserver.kinds import CRD_KINDS  # noqa: E402
from tests.kube.emulator import ApiEmulator, Change, EmulatorThread  # noqa: E402

#: Change-log length: at 200 replacements a second (two changes each) and a burst, a watcher a few seconds behind
#: must still resume rather than start over from a list.
HISTORY = 200_000


class ServerChurn:
    """Bound pods replaced at `rate` a second on a thread of the server's process, written into the store under
    its lock, then the open watches woken: what a busy cluster's rollouts send, without an HTTP request each."""

    def __init__(self, emulator: ApiEmulator, rate: float) -> None:
        self.emulator, self.rate = emulator, rate
        with emulator._state:
            self.slots = [pod for pod in emulator._stored(objects.POD) if (pod.get("spec") or {}).get("nodeName")]
        self.done = 0
        self.cpu = 0.0
        self.began = time.monotonic()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="churn", daemon=True)

    def start(self) -> ServerChurn:
        if self.rate > 0 and self.slots:
            self.began = time.monotonic()
            self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(30)

    def _run(self) -> None:
        emulator = self.emulator
        while not self.stopping.is_set():
            index = self.done % len(self.slots)
            old = self.slots[index]
            metadata = old["metadata"]
            base = metadata["name"].split("-r", 1)[0]
            new = {"metadata": {"name": f"{base}-r{self.done}", "namespace": metadata["namespace"],
                                "labels": dict(metadata.get("labels") or {}),
                                "ownerReferences": metadata.get("ownerReferences", [])},
                   "spec": old["spec"], "status": old["status"]}
            with emulator._state:
                self.slots[index] = emulator._create(objects.POD, metadata["namespace"], new)
                emulator._delete(objects.POD, metadata["namespace"], metadata["name"], {})
            emulator._wake_threadsafe()
            self.done += 1
            self.cpu = time.thread_time()
            delay = self.began + self.done / self.rate - time.monotonic()
            if delay > 0:
                self.stopping.wait(delay)


def burst(emulator: ApiEmulator, count: int, prefix: str) -> tuple[float, list[str]]:
    """`count` pending pods created one after the other, each woken to the watches as it is stored; the time of
    the last creation and the pods' names."""
    names = []
    for pod in pending_pods(count, prefix=prefix):
        with emulator._state:
            names.append(objects.name(emulator._create(objects.POD, "default", pod)))
        emulator._wake_threadsafe()
    return time.monotonic(), names


class SentProbe:
    """When the server's watches first picked up each pod of a burst, to write it to their streams (the first
    encoding of its ADDED change: `Change.line` encodes a change once, for every watcher): the server's part of the
    delivery, from the pod's creation to its watch stream; what comes after (the socket, the controller's reading
    and its informer's queue) is the controller's process."""

    def __init__(self) -> None:
        self.expected: set[str] = set()
        self.sent: dict[str, float] = {}
        original = Change.line
        probe = self

        def line(change: Change, event_type: str) -> bytes:
            if change._encoded is None and change.type == "ADDED" and change.kind == objects.POD:
                name = objects.name(change.object)
                if name in probe.expected:
                    probe.sent.setdefault(name, time.monotonic())
            return original(change, event_type)

        Change.line = line  # type: ignore[method-assign]

    def last_sent(self, names: list[str]) -> float | None:
        """When the last of `names` was picked up by a watch (None: not all of them yet)."""
        times = [self.sent.get(name) for name in names]
        return max(t for t in times if t is not None) if times and None not in times else None


def unbound(emulator: ApiEmulator, names: list[str]) -> int:
    """How many of the pods `names` (in default) have no node: looked up by name, not by a scan of every pod (the
    harness asks 20 times a second, and a scan of a 100,000-pod store would hold the server's lock each time)."""
    with emulator._state:
        return sum(1 for name in names if not (_stored_pod(emulator, name).get("spec") or {}).get("nodeName"))


def _stored_pod(emulator: ApiEmulator, name: str) -> objects.Obj:
    try:
        return emulator._current(objects.POD, "default", name)
    except kmock.KubernetesError:  # gone: never bound by us, count it as unbound
        return {}


def serve(seed: Path) -> int:
    fleet = json.loads(seed.read_text(encoding="utf-8"))
    churn: ServerChurn | None = None
    bursts: dict[str, list[str]] = {}  # the pods of each burst, by its prefix
    sent = SentProbe()
    with EmulatorThread(history_window=HISTORY, crds=frozenset(CRD_KINDS)) as server:  # as the in-memory cluster
        version = 0
        for kind, key in ((objects.NODE, "nodes"), (objects.POD, "pods")):
            version = server.emulator.preload(kind, fleet[key])
        del fleet
        print(json.dumps({"url": server.url, "version": version}), flush=True)
        for line in sys.stdin:
            command, *arguments = line.split()
            answer: dict[str, Any]
            if command == "churn":
                churn = ServerChurn(server.emulator, float(arguments[0])).start()
                answer = {"ok": True}
            elif command == "burst":
                sent.expected.update(objects.name(pod) for pod in pending_pods(int(arguments[0]), prefix=arguments[1]))
                last_created, bursts[arguments[1]] = burst(server.emulator, int(arguments[0]), arguments[1])
                answer = {"last_created": last_created}
            elif command == "sent":
                answer = {"last_sent": sent.last_sent(bursts.get(arguments[0].rstrip("-"), []))}
            elif command == "unbound":
                answer = {"unbound": unbound(server.emulator, bursts.get(arguments[0].rstrip("-"), []))}
            elif command == "stop":
                if churn is not None:
                    churn.stop()
                answer = {"churn_done": churn.done if churn else 0,
                          "churn_seconds": round(time.monotonic() - churn.began, 3) if churn else 0.0,
                          "churn_cpu_seconds": round(churn.cpu, 3) if churn else 0.0}
                print(json.dumps(answer), flush=True)
                break
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seed", type=Path, required=True, help="the fleet's nodes and pods (JSON)")
    args = parser.parse_args(argv)
    return serve(args.seed)


if __name__ == "__main__":
    sys.exit(main())
