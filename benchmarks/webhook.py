"""Benchmark of the admission webhook: throughput and latency over real HTTPS on loopback.

    .venv/bin/python benchmarks/webhook.py [--duration 5] [--rate 500] [--cold] [--json] [--flood-only]
        [--fresh-only] [--fresh-requests 50000] [--window 10000] [--unsat-share 0.02] [--no-baseline]
        [--updates-only [--updates-labelled] [--baseline-ref REF ...]]

The server is `karpenter-policy webhook --self-signed DIR` started as its own process (pinned to one core when
the machine has two or more); the load comes from a SEPARATE process (this script with `--load`, pinned to
another core): one thread per connection, each with one keep-alive TLS connection verified against the
generated CA, sending AdmissionReviews back to back (closed loop) at 1, 16 and 64 connections, for
`/validate/provisioners` and `/mutate/provisioners`; then `--repeat` (3) open-loop runs at `--rate` requests/s
(16 connections, each request due at a fixed time, latency counted from when it was due, so a stall is not
hidden). The request
bodies cycle through every Provisioner of examples/ (valid and invalid: about half are denied with messages).
Then the same for validate with UPDATE reviews that each carry a new resourceVersion (what a cluster sends when
a Provisioner's metadata or status moves: before issue #27 the whole-check cache never hit them, the solver's
verdicts did; now the cache leaves the server-set fields out of its key), and for
`/mutate/pods` with 600 pods (two thirds pinned by examples/pinning/policies, a third matched by no rule).
Latency is from sending the request to reading the whole answer. Server CPU per request is the server process's
user + system time over the run divided by the requests answered. `--cold` adds closed-loop runs of validate
with the solver cache off (`--solver-cache 0`): every request then runs Z3.

Then the connection-flood comparison (issue 8): validate at 16 connections, closed loop and open loop at
`--rate`, each run twice side by side — without and with a flood from a third process (`--flood-idle` TLS
connections that never send a request and `--flood-silent` TCP connections that never send a byte, each reopened
as soon as the server closes it; together more than the server's 256-connection limit) — while a prober opens a
new TLS connection every 100 ms for `GET /healthz`, as the kubelet does. A well-behaved client whose idle
keep-alive connection was closed to make room reconnects and resends (counted as `reconnects`).
`--flood-only` runs only this comparison.

`--updates-only` (issue #19) runs only the UPDATE reviews, open loop at `--rate` (`--repeat` runs) and closed loop
at 16 connections (`--updates-labelled`: each UPDATE also moves a label, which the checks read, so every tree
checks it in full); with `--baseline-ref REF` (repeatable) the same runs go, alternately, to a server running the
tree of each REF (`git archive`, under benchmarks/.work/), so that before and after are measured side by side in
one session on the same core. Since issue #27 a tree's whole-check cache leaves the resourceVersion out of its key
(`webhook.checks.cache_view`): these UPDATEs then hit it, as a cluster's do when only server-set fields moved.

Then the new-requirements comparison (issue #12): `--fresh-requests` (50,000) validate CREATEs whose
requirements no earlier request had (a team label of their own; `--unsat-share` of them unsatisfiable, so Z3 is
reached), closed loop at 16 connections and open loop at `--rate`, throughput and latency per `--window`
(10,000) requests, side by side with a server that behaves as before issue #12 (`KARPENTER_POLICY_SOLVER_BASELINE`:
Z3 decides every verdict, in z3's global context). `--fresh-only` runs only this part, `--no-baseline` skips
the "before" column.

Goal (issue 5): p99 ≤ 5 ms at 500 requests/s, and ≥ 1,000 requests/s per server process. The machine the
figures in README.md come from has 2 cores shared with other work: they are noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCHMARKS_DIR = Path(__file__).resolve().parent
REPOSITORY = BENCHMARKS_DIR.parent
EXAMPLES = ("examples/positive", "examples/negative", "examples/check/positive", "examples/check/negative")
PATHS = ("/validate/provisioners", "/mutate/provisioners")
CONCURRENCY = (1, 16, 64)


# --- the load process ---------------------------------------------------------------------------------------


def _read_answer(sock: ssl.SSLSocket, buffer: bytearray) -> tuple[int, bool]:
    """Read one HTTP answer (headers + Content-Length body) off `sock`; its status, and whether it is an
    AdmissionReview that denies. `buffer` keeps what is left."""
    while (end := buffer.find(b"\r\n\r\n")) < 0:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buffer += chunk
    head = bytes(buffer[:end])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
    while len(buffer) < end + 4 + length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        buffer += chunk
    denied = buffer.find(b'"allowed":false', end + 4, end + 4 + length) >= 0
    del buffer[: end + 4 + length]
    return int(head.split(b" ", 2)[1]), denied


def load(args: argparse.Namespace) -> None:
    """The load generator: prints one JSON object with the latencies (ms) and counts."""
    bodies = [b.encode() for b in json.loads(Path(args.bodies).read_text())]
    requests = [
        b"POST %s?timeout=5s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (args.path.encode(), len(body), body)
        for body in bodies
    ]
    context = ssl.create_default_context(cafile=args.ca)
    start_at = time.monotonic() + 0.5  # every connection is set up before the clock starts
    end_at = start_at + args.duration if not args.count else float("inf")
    count = args.count or 0  # with --count: exactly that many requests, each body once, in order
    latencies: list[list[float]] = [[] for _ in range(args.connections)]
    answered: list[list[tuple[int, float, float]]] = [[] for _ in range(args.connections)]  # (body, done, latency)
    errors = [0] * args.connections
    denials = [0] * args.connections
    interval = args.connections / args.rate if args.rate else 0.0

    reconnects = [0] * args.connections

    def connect() -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", args.port))
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return context.wrap_socket(raw, server_hostname="localhost")

    def worker(index: int) -> None:
        sock = connect()
        buffer = bytearray()
        mine = latencies[index]
        n = index
        due = start_at + (index / args.rate if args.rate else 0.0)
        while time.monotonic() < start_at:
            time.sleep(0.001)
        while True:
            if args.rate:
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                sent = due
                due += interval
            else:
                sent = time.monotonic()
            if sent >= end_at or (count and n >= count):
                break
            request = requests[n % len(requests)]
            body_index = n
            n += args.connections
            for _attempt in (1, 2):  # a keep-alive connection closed to make room: reconnect and resend
                try:
                    sock.sendall(request)
                    status, denied = _read_answer(sock, buffer)
                    break
                except OSError:
                    sock.close()
                    buffer.clear()
                    reconnects[index] += 1
                    status, denied = 0, False
                    try:
                        sock = connect()
                    except OSError:
                        break
            finished = time.monotonic()
            mine.append((finished - sent) * 1000)
            if count:
                answered[index].append((body_index, finished - start_at, (finished - sent) * 1000))
            if status != 200:
                errors[index] += 1
            denials[index] += denied
        sock.close()

    probes: list[float] = []
    probe_failures = [0]

    def probe() -> None:
        """The kubelet: a new TLS connection every 100 ms, GET /healthz."""
        while time.monotonic() < start_at:
            time.sleep(0.001)
        while (began := time.monotonic()) < end_at:
            try:
                with connect() as sock:
                    sock.settimeout(10)
                    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                    ok = _read_answer(sock, bytearray())[0] == 200
            except OSError:
                ok = False
            probes.append((time.monotonic() - began) * 1000)
            probe_failures[0] += not ok
            time.sleep(max(0.0, began + 0.1 - time.monotonic()))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.connections)]
    if args.probe:
        threads.append(threading.Thread(target=probe))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [x for per in latencies for x in per]
    print(
        json.dumps(
            {
                "latencies_ms": every,
                "errors": sum(errors),
                "denied": sum(denials),
                "reconnects": sum(reconnects),
                "seconds": args.duration,
                "probes_ms": probes,
                "probe_failures": probe_failures[0],
                "answered": sorted(x for per in answered for x in per),
            }
        )
    )


def flood(args: argparse.Namespace) -> None:
    """The flood process: `--flood-idle` idle TLS connections and `--flood-silent` silent TCP connections, each
    reopened when the server closes it, until killed."""
    context = ssl.create_default_context(cafile=args.ca)

    def hold(tls: bool) -> None:
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", args.port), timeout=5)
                if tls:
                    sock = context.wrap_socket(sock, server_hostname="localhost")
                sock.settimeout(None)
                while sock.recv(1024):
                    pass
            except OSError:
                time.sleep(0.01)
            finally:
                with contextlib.suppress(NameError, OSError):
                    sock.close()

    threading.stack_size(256 * 1024)
    for index in range(args.flood_idle + args.flood_silent):
        threading.Thread(target=hold, args=(index < args.flood_idle,), daemon=True).start()
    threading.Event().wait()


# --- the orchestration --------------------------------------------------------------------------------------


def _bodies() -> list[str]:
    sys.path.insert(0, str(REPOSITORY))
    from karpenter_policy.checks.source.files import load_file
    from karpenter_policy.checks.source.loader import LoadError

    objects: list[Any] = []
    for directory in EXAMPLES:
        for file in sorted((REPOSITORY / directory).glob("*.yaml")):
            try:
                documents = load_file(str(file))
            except LoadError:
                continue
            objects += [d.data for d in documents if isinstance(d.data, dict) and d.data.get("kind") == "Provisioner"]
    return [
        json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"uid": f"bench-{i}", "operation": "CREATE", "object": obj},
            }
        )
        for i, obj in enumerate(objects)
    ]


def _updates(bodies: list[str], copies: int, run: int, labelled: bool = False) -> list[str]:
    """`copies` versions of each review, as UPDATEs of the stored object (a new resourceVersion each, and none
    that an earlier `run` sent): a tree whose whole-check cache is keyed by every field (before issue #27) misses
    it every time, the solver's verdicts (keyed by requirements) still hit. `labelled`: each version also carries
    a label of its own (`benchmark/version`), a field the checks read: every tree's whole-check cache misses."""
    out = []
    for version in range(run * copies, (run + 1) * copies):
        for index, body in enumerate(bodies):
            review = json.loads(body)
            request = review["request"]
            metadata = request["object"].setdefault("metadata", {})
            if isinstance(metadata, dict):
                metadata["resourceVersion"] = str(100000 + version)
                metadata["uid"] = f"00000000-0000-0000-0000-{index:012d}"
                if labelled:
                    labels = metadata.setdefault("labels", {})
                    if isinstance(labels, dict):
                        labels["benchmark/version"] = str(version)
            request.update(uid=f"bench-{version}-{index}", operation="UPDATE", oldObject=request["object"])
            out.append(json.dumps(review))
    return out


def _fresh(count: int, seed: str, unsat_share: float) -> list[str]:
    """`count` Provisioner CREATE reviews whose requirements no earlier request had: a custom label
    (`example.com/team In [<seed>-<i>]`, and the same node label) makes each set of requirements new, so neither
    verdict cache can hit; the rest varies as a policy repository's Provisioners do — capacity types, arch,
    instance families of that arch or categories with a generation bound, vCPU bounds, sometimes zones.
    `unsat_share` of them are unsatisfiable (an arm64-only family required on amd64 nodes): those reach Z3."""
    sys.path.insert(0, str(REPOSITORY))
    from karpenter_policy.catalog import load_catalog

    catalog = load_catalog()
    families = {
        arch: sorted({it.family for it in catalog if tuple(it.architectures) == (arch,)}) for arch in ("amd64", "arm64")
    }
    zones = sorted({o.zone for it in catalog for o in it.offerings})
    rng = random.Random(seed)
    out = []
    for index in range(count):
        team = f"{seed}-{index}"
        arch = rng.choice(("amd64", "arm64"))
        requirements: list[dict[str, Any]] = [
            {"key": "kubernetes.io/arch", "operator": "In", "values": [arch]},
            {"key": "karpenter.sh/capacity-type", "operator": "In",
             "values": rng.choice((["spot"], ["on-demand"], ["spot", "on-demand"]))},
        ]  # fmt: skip
        if rng.random() < unsat_share:
            requirements[0]["values"] = ["amd64"]
            requirements.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                 "values": rng.sample(families["arm64"], 2)})  # fmt: skip
        elif rng.random() < 0.5:
            requirements.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In",
                                 "values": rng.sample(families[arch], rng.randint(3, 8))})  # fmt: skip
        else:
            requirements += [
                {"key": "karpenter.k8s.aws/instance-category", "operator": "In",
                 "values": rng.sample(["c", "m", "r"], rng.randint(1, 3))},
                {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": [str(rng.randint(1, 5))]},
            ]  # fmt: skip
        requirements += [
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": [str(rng.choice((0, 1, 3)))]},
            {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Lt", "values": [str(rng.randint(33, 129))]},
            {"key": "example.com/team", "operator": "In", "values": [team]},
        ]
        if rng.random() < 0.5:
            requirements.append(
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": rng.sample(zones, rng.randint(2, 3))}
            )
        provisioner = {
            "apiVersion": "karpenter.sh/v1alpha5",
            "kind": "Provisioner",
            "metadata": {"name": f"team-{index}"},
            "spec": {
                "requirements": requirements,
                "labels": {"example.com/team": team},
                "providerRef": {"name": "default"},
                "limits": {"resources": {"cpu": "1000"}},
                "consolidation": {"enabled": True},
            },
        }
        request = {"uid": f"fresh-{team}", "operation": "CREATE", "object": provisioner}
        out.append(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
    return out


def _pods(count: int) -> list[str]:
    """Pod CREATE reviews: a third Spark drivers, a third executors (both pinned by the example rules), a third
    that no rule matches."""
    out = []
    for index in range(count):
        labels = {"app": f"job-{index}"}
        if index % 3 < 2:
            labels["spark-role"] = "driver" if index % 3 == 0 else "executor"
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": f"job-{index}-", "namespace": "spark", "labels": labels},
            "spec": {
                "containers": [{"name": "main", "image": "public.ecr.aws/docker/library/busybox:1.36",
                                "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}],
            },
        }  # fmt: skip
        request = {"uid": f"pod-{index}", "operation": "CREATE", "namespace": "spark", "object": pod}
        out.append(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu_seconds(pid: int) -> float:
    """CPU time of the server and its worker processes (the live ones, and those it has reaped)."""
    ticks = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat.parent.name == str(pid):
            ticks += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        elif fields[1] == str(pid):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def _pin(cpu: int | None) -> Any:
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


class Server:
    def __init__(
        self, work: Path, cpu: int | None, extra: list[str], env: dict[str, str] | None = None, tree: Path = REPOSITORY
    ) -> None:
        """`karpenter-policy webhook` of `tree`, started from it (`python -m` puts the working directory first on
        the path: a baseline tree must be the working directory, not only on PYTHONPATH)."""
        self.port = _free_port()
        self.ca = work / "certs" / "ca.crt"
        command = [
            sys.executable, "-m", "karpenter_policy.cli", "webhook",
            "--self-signed", str(work / "certs"), "--address", "127.0.0.1", "--port", str(self.port),
            "--shutdown-delay", "0", *extra,
        ]  # fmt: skip
        self.log = open(work / f"server-{self.port}.log", "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            command,
            cwd=tree,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            preexec_fn=_pin(cpu),
            env={**os.environ, **(env or {})},
        )
        deadline = time.monotonic() + 120
        while True:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited: see {self.log.name}")
            if self.ca.exists() and self._ready():
                break
            if time.monotonic() > deadline:
                raise SystemExit("the server did not become ready in 120 s")
            time.sleep(0.1)

    def _ready(self) -> bool:
        try:
            context = ssl.create_default_context(cafile=str(self.ca))
            with (
                socket.create_connection(("127.0.0.1", self.port), timeout=2) as raw,
                context.wrap_socket(raw, server_hostname="localhost") as sock,
            ):
                sock.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
                return sock.recv(100).startswith(b"HTTP/1.1 200")
        except OSError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def _percentile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run_load(
    server: Server,
    path: str,
    connections: int,
    duration: float,
    rate: float,
    bodies: Path,
    cpu: int | None,
    probe: bool = False,
    count: int = 0,
) -> dict[str, Any]:
    """One run of the load process; with `count`, exactly `count` requests (each body once) instead of
    `duration` seconds."""
    command = [
        sys.executable, str(Path(__file__).resolve()), "--load", "--port", str(server.port), "--ca", str(server.ca),
        "--path", path, "--connections", str(connections), "--duration", str(duration), "--rate", str(rate),
        "--bodies", str(bodies), "--count", str(count), *(["--probe"] if probe else []),
    ]  # fmt: skip
    cpu_before = _cpu_seconds(server.process.pid)
    done = subprocess.run(command, capture_output=True, text=True, preexec_fn=_pin(cpu), check=False)
    cpu_after = _cpu_seconds(server.process.pid)
    if done.returncode != 0:
        raise SystemExit(f"the load process failed:\n{done.stderr}")
    result = json.loads(done.stdout)
    ordered = sorted(result["latencies_ms"])
    answered = result["answered"]
    if answered:  # a fixed number of requests: throughput over the time they took
        duration = max(done for _, done, _ in answered)
    count = len(ordered)
    probes = sorted(result["probes_ms"])
    return {
        "answered": answered,
        "reconnects": result["reconnects"],
        "probes": len(probes),
        "probe_failures": result["probe_failures"],
        "probe_p50": _percentile(probes, 0.50),
        "probe_p99": _percentile(probes, 0.99),
        "probe_max": probes[-1] if probes else float("nan"),
        "path": path,
        "connections": connections,
        "rate": rate,
        "requests": count,
        "errors": result["errors"],
        "denied": result["denied"],
        "throughput": count / duration,
        "p50": _percentile(ordered, 0.50),
        "p95": _percentile(ordered, 0.95),
        "p99": _percentile(ordered, 0.99),
        "max": ordered[-1] if ordered else float("nan"),
        "mean": statistics.fmean(ordered) if ordered else float("nan"),
        "server_cpu_ms_per_request": (cpu_after - cpu_before) * 1000 / count if count else float("nan"),
    }


def _row(label: str, r: dict[str, Any]) -> str:
    return (
        f"{label:<46} {r['connections']:>5} {r['requests']:>8} {r['errors']:>6} {r['throughput']:>9,.0f} "
        f"{r['p50']:>7.2f} {r['p95']:>7.2f} {r['p99']:>7.2f} {r['max']:>8.1f} {r['server_cpu_ms_per_request']:>9.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration", type=float, default=5.0, help="Seconds per run.")
    parser.add_argument("--rate", type=float, default=500.0, help="Requests/s of the open-loop runs.")
    parser.add_argument("--cold", action="store_true", help="Also validate with the solver cache off.")
    parser.add_argument("--repeat", type=int, default=3, help="Open-loop runs per workload.")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    parser.add_argument("--work", type=Path, default=BENCHMARKS_DIR / ".work" / "webhook")
    parser.add_argument("--flood-only", action="store_true", help="Run only the connection-flood comparison.")
    parser.add_argument("--fresh-only", action="store_true", help="Run only the new-requirements comparison.")
    parser.add_argument("--fresh-requests", type=int, default=50_000, help="Requests per new-requirements run.")
    parser.add_argument("--window", type=int, default=10_000, help="Requests per window of those runs.")
    parser.add_argument("--unsat-share", type=float, default=0.02, help="Unsatisfiable share of new requirements.")
    parser.add_argument("--no-baseline", action="store_true", help="Skip the before-issue-#12 run.")
    parser.add_argument("--updates-only", action="store_true", help="Run only the UPDATE reviews (issue #19).")
    parser.add_argument(
        "--updates-labelled",
        action="store_true",
        help="With --updates-only: each UPDATE also moves a label (the whole-check cache misses on every tree).",
    )
    parser.add_argument(
        "--baseline-ref", action="append", default=[], help="With --updates-only: a git ref served beside this tree."
    )
    parser.add_argument("--flood-idle", type=int, default=300, help="Idle TLS connections of the flood.")
    parser.add_argument("--flood-silent", type=int, default=300, help="Silent TCP connections of the flood.")
    # the load and flood processes' own arguments
    parser.add_argument("--load", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--flood", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--ca", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--connections", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bodies", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.load:
        load(args)
        return
    if args.flood:
        flood(args)
        return

    cpus = sorted(os.sched_getaffinity(0))
    server_cpu, load_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    args.work.mkdir(parents=True, exist_ok=True)
    bodies = _bodies()
    bodies_file = Path(tempfile.mkstemp(dir=args.work, suffix=".json")[1])
    bodies_file.write_text(json.dumps(bodies))
    update_runs = iter(range(1_000_000))

    def updates_file() -> Path:
        """UPDATE reviews of resourceVersions no earlier run sent (each run would otherwise replay the first's
        bodies and hit the whole-check cache)."""
        file = Path(tempfile.mkstemp(dir=args.work, suffix=".json")[1])
        file.write_text(json.dumps(_updates(bodies, 200, next(update_runs))))
        return file

    pods_file = Path(tempfile.mkstemp(dir=args.work, suffix=".json")[1])
    pods_file.write_text(json.dumps(_pods(600)))
    from _common import environment

    load_before = os.getloadavg()
    results: list[tuple[str, dict[str, Any]]] = []
    print(
        f"webhook benchmark: {len(bodies)} Provisioner reviews cycled, {args.duration:g} s per run; server on CPU "
        f"{server_cpu}, load generator on CPU {load_cpu} of {os.cpu_count()}; Python {sys.version.split()[0]}; "
        f"load average {' '.join(f'{x:.2f}' for x in load_before)}",
        file=sys.stderr,
    )
    print(f"environment: {environment()}", file=sys.stderr)
    header = (
        f"{'run':<46} {'conns':>5} {'requests':>8} {'errors':>6} {'req/s':>9} {'p50 ms':>7} {'p95 ms':>7} "
        f"{'p99 ms':>7} {'max ms':>8} {'srv CPU ms/req':>9}"
    )
    print(header)
    print("-" * len(header))

    def record(label: str, result: dict[str, Any]) -> None:
        results.append((label, result))
        print(_row(label, result), flush=True)

    if args.updates_only:
        updates_comparison(args, bodies, server_cpu, load_cpu, record)
        bodies_file.unlink()
        pods_file.unlink()
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    if args.flood_only or args.fresh_only:
        if args.flood_only:
            flood_comparison(args, bodies_file, server_cpu, load_cpu)
        else:
            fresh_comparison(args, server_cpu, load_cpu)
        bodies_file.unlink()
        pods_file.unlink()
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        return
    server = Server(args.work, server_cpu, ["--policies", str(REPOSITORY / "examples" / "pinning" / "policies")])
    try:
        for path in PATHS:
            # one untimed pass: the solver cache then holds every example, as it would after the first sync
            run_load(server, path, 1, 1.0, 0.0, bodies_file, load_cpu)
            for connections in CONCURRENCY:
                result = run_load(server, path, connections, args.duration, 0.0, bodies_file, load_cpu)
                record(f"{path} closed loop", result)
            for repeat in range(args.repeat):
                result = run_load(server, path, 16, args.duration, args.rate, bodies_file, load_cpu)
                record(f"{path} open loop {args.rate:g}/s ({repeat + 1})", result)
        for connections in CONCURRENCY:  # UPDATEs: a new resourceVersion each time, solver verdicts cached
            label = "/validate/provisioners UPDATEs"
            file = updates_file()
            record(label, run_load(server, PATHS[0], connections, args.duration, 0.0, file, load_cpu))
            file.unlink()
        for repeat in range(args.repeat):
            file = updates_file()
            result = run_load(server, PATHS[0], 16, args.duration, args.rate, file, load_cpu)
            file.unlink()
            record(f"/validate/provisioners UPDATEs {args.rate:g}/s ({repeat + 1})", result)
        for connections in CONCURRENCY:
            record(
                "/mutate/pods closed loop",
                run_load(server, "/mutate/pods", connections, args.duration, 0.0, pods_file, load_cpu),
            )
        for repeat in range(args.repeat):
            result = run_load(server, "/mutate/pods", 16, args.duration, args.rate, pods_file, load_cpu)
            record(f"/mutate/pods open loop {args.rate:g}/s ({repeat + 1})", result)
    finally:
        server.stop()
    if args.cold:
        server = Server(args.work, server_cpu, ["--solver-cache", "0"])
        try:
            for connections in CONCURRENCY:
                label = "/validate/provisioners no cache"
                record(label, run_load(server, PATHS[0], connections, args.duration, 0.0, bodies_file, load_cpu))
        finally:
            server.stop()
    fresh_results = fresh_comparison(args, server_cpu, load_cpu)
    flood_results = flood_comparison(args, bodies_file, server_cpu, load_cpu)
    load_after = os.getloadavg()
    for file in (bodies_file, pods_file):
        file.unlink()

    best = max(r["throughput"] for label, r in results if "closed" in label)
    by_workload: dict[str, list[float]] = {}
    for label, r in results:
        if r["rate"]:
            by_workload.setdefault(label.rsplit(" (", 1)[0], []).append(r["p99"])
    medians = {workload: statistics.median(p99s) for workload, p99s in by_workload.items()}
    p99 = max(medians.values())
    within = sum(1 for p99s in by_workload.values() for x in p99s if x <= 5)
    runs = sum(len(p99s) for p99s in by_workload.values())
    print(f"load average after: {' '.join(f'{x:.2f}' for x in load_after)}")
    print(
        f"goal ≥ 1,000 req/s per server process: {'met' if best >= 1000 else 'not met'} "
        f"(best closed loop {best:,.0f}); goal p99 ≤ 5 ms at {args.rate:g} req/s: "
        f"{'met' if p99 <= 5 else 'not met'} on the median of {args.repeat} runs of each workload (worst median "
        f"{p99:.2f} ms; {within} of {runs} runs within 5 ms)"
    )
    for workload, p99s in by_workload.items():
        print(f"  {workload}: p99 {' / '.join(f'{x:.2f}' for x in p99s)} ms (median {medians[workload]:.2f})")
    if args.json:
        print(
            json.dumps(
                {
                    "load_before": load_before,
                    "load_after": load_after,
                    "runs": dict(results),
                    "fresh": fresh_results,
                    "flood": flood_results,
                }
            )
        )


#: What `Solver` reads to behave as before issue #12 (checks/proof/solver.py: Z3 decides every verdict, in z3's
#: global context) — the "before" column of the fresh-requirements comparison, in the same run.
BASELINE_ENV = "KARPENTER_POLICY_SOLVER_BASELINE"


def _windows(answered: list[list[float]], window: int, closed: bool) -> list[dict[str, float]]:
    """Per `window` requests: throughput (closed loop: requests over the time between the window's last answer
    and the previous window's) and latency percentiles. Open loop: windows of requests in the order sent."""
    ordered = sorted(answered, key=lambda a: a[1] if closed else a[0])  # by completion, or in the order due
    rows = []
    previous_end = 0.0
    for start in range(0, len(ordered), window):
        chunk = ordered[start : start + window]
        latencies = sorted(a[2] for a in chunk)
        end = max(a[1] for a in chunk)
        rows.append(
            {
                "first": start + 1,
                "last": start + len(chunk),
                "throughput": len(chunk) / (end - previous_end) if end > previous_end else float("nan"),
                "p50": _percentile(latencies, 0.50),
                "p99": _percentile(latencies, 0.99),
                "max": latencies[-1],
            }
        )
        previous_end = end
    return rows


def updates_comparison(
    args: argparse.Namespace,
    bodies: list[str],
    server_cpu: int | None,
    load_cpu: int | None,
    record: Any,
) -> dict[str, list[float]]:
    """UPDATE reviews only (issue #19): for this tree and, with `--baseline-ref`, each baseline tree, alternately on
    the same core: one closed-loop run at 16 connections, then `--repeat` open-loop runs at `--rate`. Each run's
    reviews carry resourceVersions no earlier run sent. Prints and returns each tree's open-loop p99s."""
    from _common import baseline_tree

    trees: dict[str, Path | None] = {"this tree": None}
    for ref in args.baseline_ref:
        trees[f"baseline {ref}"] = baseline_tree(ref, args.work)
    runs = iter(range(1_000_000))
    servers: dict[str, Server] = {}
    p99s: dict[str, list[float]] = {label: [] for label in trees}
    cpu: dict[str, list[float]] = {label: [] for label in trees}

    def updates() -> Path:
        file = Path(tempfile.mkstemp(dir=args.work, suffix=".json")[1])
        file.write_text(json.dumps(_updates(bodies, 200, next(runs), args.updates_labelled)))
        return file

    warm = Path(tempfile.mkstemp(dir=args.work, suffix=".json")[1])
    warm.write_text(json.dumps(bodies))
    try:
        for index, (label, tree) in enumerate(trees.items()):
            work = args.work / f"updates-{index}"
            work.mkdir(parents=True, exist_ok=True)
            env = {"PYTHONPATH": str(tree)} if tree is not None else None
            policies = (tree or REPOSITORY) / "examples" / "pinning" / "policies"
            servers[label] = Server(work, server_cpu, ["--policies", str(policies)], env, tree or REPOSITORY)
            run_load(servers[label], PATHS[0], 1, 1.0, 0.0, warm, load_cpu)  # the solver caches warm, as after a sync
        for label, server in servers.items():
            file = updates()
            record(f"{label}: UPDATEs closed loop", run_load(server, PATHS[0], 16, args.duration, 0.0, file, load_cpu))
            file.unlink()
        for repeat in range(args.repeat):
            for label, server in servers.items():
                file = updates()
                result = run_load(server, PATHS[0], 16, args.duration, args.rate, file, load_cpu)
                file.unlink()
                record(f"{label}: UPDATEs {args.rate:g}/s ({repeat + 1})", result)
                p99s[label].append(result["p99"])
                cpu[label].append(result["server_cpu_ms_per_request"])
    finally:
        warm.unlink()
        for server in servers.values():
            server.stop()
    for label, values in p99s.items():
        shown = " / ".join(f"{x:.2f}" for x in values)
        print(
            f"  {label}: UPDATE p99 at {args.rate:g}/s {shown} ms (median {statistics.median(values):.2f}); server CPU "
            f"{' / '.join(f'{x:.3f}' for x in cpu[label])} ms/request (median {statistics.median(cpu[label]):.3f})"
        )
    return p99s


def fresh_comparison(args: argparse.Namespace, server_cpu: int | None, load_cpu: int | None) -> dict[str, Any]:
    """Validate with every request's requirements new (issue #12): `--fresh-requests` of them closed loop at 16
    connections and open loop at `--rate`, throughput and latency per `--window` requests; the same closed loop
    against the behaviour before issue #12 (`BASELINE_ENV`), side by side. Each run's bodies are generated for
    it (seeded by the run and the time): no run sends a body an earlier one sent."""
    count, window = args.fresh_requests, args.window
    figures: dict[str, Any] = {}

    def bodies_for(run: str) -> Path:
        file = Path(tempfile.mkstemp(dir=args.work, suffix=".json")[1])
        file.write_text(json.dumps(_fresh(count, f"{run}-{time.time_ns()}", args.unsat_share)))
        return file

    columns: list[tuple[str, dict[str, str], bool]] = [("now", {}, True)]
    if not args.no_baseline:
        columns.append(("before", {BASELINE_ENV: "1"}, False))
    for name, env, open_loop in columns:
        server = Server(args.work, server_cpu, [], env)
        try:
            file = bodies_for(f"{name}-closed")
            figures[f"{name} closed"] = run_load(server, PATHS[0], 16, 0, 0.0, file, load_cpu, count=count)
            file.unlink()
            if open_loop:
                file = bodies_for(f"{name}-open")
                figures[f"{name} open"] = run_load(server, PATHS[0], 16, 0, args.rate, file, load_cpu, count=count)
                file.unlink()
        finally:
            server.stop()
    print()
    print(
        f"new requirements: {count:,} /validate/provisioners CREATEs per run, each with requirements no earlier "
        f"request had ({args.unsat_share:.0%} unsatisfiable: those reach Z3); per {window:,} requests"
    )
    names = [key for key in figures]
    per_window = {key: _windows(figures[key]["answered"], window, "closed" in key) for key in names}
    header = f"{'requests':<16}" + "".join(
        f" {key + (' req/s' if 'closed' in key else f' {args.rate:g}/s'):>18} {'p50':>7} {'p99':>8}" for key in names
    )
    print(header)
    print("-" * len(header))
    for row in range(max(len(rows) for rows in per_window.values())):
        cells = []
        for key in names:
            rows = per_window[key]
            if row >= len(rows):
                cells.append(f" {'':>18} {'':>7} {'':>8}")
                continue
            r = rows[row]
            rate = f"{r['throughput']:,.0f}" if "closed" in key else ""
            cells.append(f" {rate:>18} {r['p50']:>7.2f} {r['p99']:>8.2f}")
        first = per_window[names[0]][row] if row < len(per_window[names[0]]) else {"first": 0, "last": 0}
        print(f"{first['first']:>7,}–{first['last']:<8,}" + "".join(cells))
    for key in names:
        r = figures[key]
        print(
            f"{key}: {r['requests']:,} requests, {r['errors']} errors, {r['denied']:,} denied, overall "
            f"{r['throughput']:,.0f} req/s, p99 {r['p99']:.2f} ms, max {r['max']:.1f} ms, server CPU "
            f"{r['server_cpu_ms_per_request']:.3f} ms/request"
        )
    for r in figures.values():
        del r["answered"]
    return figures


def flood_comparison(
    args: argparse.Namespace, bodies: Path, server_cpu: int | None, load_cpu: int | None
) -> dict[str, Any]:
    """Validate at 16 connections, closed and open loop, with the /healthz prober: without and with the flood,
    printed side by side."""
    server = Server(args.work, server_cpu, [])
    figures: dict[str, Any] = {}
    try:
        run_load(server, PATHS[0], 1, 1.0, 0.0, bodies, load_cpu)  # the solver cache warm, as above
        for flooded in (False, True):
            flooder = None
            if flooded:
                command = [
                    sys.executable, str(Path(__file__).resolve()), "--flood", "--port", str(server.port),
                    "--ca", str(server.ca), "--flood-idle", str(args.flood_idle),
                    "--flood-silent", str(args.flood_silent),
                ]  # fmt: skip
                flooder = subprocess.Popen(command, preexec_fn=_pin(load_cpu))
                time.sleep(3.0)  # the flood has filled the connection limit
            try:
                closed = run_load(server, PATHS[0], 16, args.duration, 0.0, bodies, load_cpu, probe=True)
                opened = run_load(server, PATHS[0], 16, args.duration, args.rate, bodies, load_cpu, probe=True)
            finally:
                if flooder is not None:
                    flooder.kill()
                    flooder.wait()
            figures["flood" if flooded else "no flood"] = {"closed loop": closed, "open loop": opened}
    finally:
        server.stop()
    rows = [
        ("closed loop req/s", "closed loop", "throughput", "{:,.0f}"),
        ("closed loop p50 ms", "closed loop", "p50", "{:.2f}"),
        ("closed loop p99 ms", "closed loop", "p99", "{:.2f}"),
        ("closed loop errors / reconnects", "closed loop", ("errors", "reconnects"), "{} / {}"),
        (f"open loop {args.rate:g}/s p50 ms", "open loop", "p50", "{:.2f}"),
        (f"open loop {args.rate:g}/s p99 ms", "open loop", "p99", "{:.2f}"),
        (f"open loop {args.rate:g}/s max ms", "open loop", "max", "{:.1f}"),
        ("open loop errors / reconnects", "open loop", ("errors", "reconnects"), "{} / {}"),
        ("/healthz p50 ms (new connection each)", "open loop", "probe_p50", "{:.2f}"),
        ("/healthz p99 ms", "open loop", "probe_p99", "{:.2f}"),
        ("/healthz max ms", "open loop", "probe_max", "{:.1f}"),
        ("/healthz failed / probes (both runs)", None, ("probe_failures", "probes"), "{} / {}"),
    ]
    print()
    print(
        f"connection flood: validate, 16 well-behaved connections; flood = {args.flood_idle} idle TLS + "
        f"{args.flood_silent} silent TCP connections, reopened when closed (server limit 256)"
    )
    print(f"{'':<40} {'no flood':>12} {'flood':>12}")
    for label, run, key, form in rows:
        cells = []
        for name in ("no flood", "flood"):
            runs = [figures[name][run]] if run else list(figures[name].values())
            if isinstance(key, tuple):
                values = [sum(r[k] for r in runs) for k in key]
                cells.append(form.format(*values))
            else:
                cells.append(form.format(runs[0][key]))
        print(f"{label:<40} {cells[0]:>12} {cells[1]:>12}", flush=True)
    return figures


if __name__ == "__main__":
    main()
