"""Peak memory (and time) of the commands that read what a policy repository or an endpoint hands them, on
oversized input, side by side with a baseline tree measured in the same run (issue #19).

    .venv/bin/python benchmarks/bounds.py [--baseline-ref 2947bfc] [--diff-mb 300] [--answer-mb 200] [--json]

* **`diff` of a revision with a huge file**: a repository whose second commit adds `policies/huge.yaml` of
  `--diff-mb` MB (comment lines: git stores it in a few MB); `diff c1 c2`, then the same diff without the file
  (`diff c1 c1b`, the command's own size).
* **`catalog refresh` against an endpoint that answers DescribeInstanceTypes with `--answer-mb` MB**
  (`tests/catalog/hostile_ec2.py`, mode `huge`, in a process of its own), then against moto's server (a real
  answer: the command's own size).

Each command runs as a subprocess of a small wrapper that reports the peak resident memory of the command and
everything it waited for (`RUSAGE_CHILDREN`: git included), its exit code and wall time. The baseline is the
same commands run on `git archive <--baseline-ref>` (default 2947bfc, where issue #19 measured 661 MB and
1.3 GB), unpacked under benchmarks/.work/bounds/, with this venv's interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BENCHMARKS_DIR, REPOSITORY, baseline_tree, render_table  # noqa: E402

_PEAK = """\
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode, time.perf_counter() - start)
sys.stderr.write(done.stderr[-2000:])
"""
_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


def peak(tree: Path, args: list[str], cwd: Path) -> dict[str, Any]:
    """Run `karpenter-policy ARGS` from `tree` (its sources first on the path); peak MiB, exit code, seconds."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "AWS_"))},
        **_AWS,
        "PYTHONPATH": str(tree),
    }
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, sys.executable, "-m", "karpenter_policy.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    kib, code, seconds = done.stdout.split()
    last = done.stderr.strip().splitlines()[-1:] or [""]
    return {"peak_mib": int(kib) / 1024, "exit": int(code), "seconds": float(seconds), "said": last[0][:150]}


def git(repo: Path, *args: str) -> str:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
        "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid",
    }  # fmt: skip
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout.strip()


def diff_repository(work: Path, megabytes: int) -> tuple[Path, str, str, str]:
    """c1: the project's policies; c1b: one comment more; c2: c1 and policies/huge.yaml. Made once, reused."""
    repo = work / f"diff-{megabytes}mb"
    marker = repo / ".commits"
    if marker.exists():
        c1, c1b, c2 = marker.read_text().split()
        return repo, c1, c1b, c2
    shutil.rmtree(repo, ignore_errors=True)
    shutil.copytree(REPOSITORY / "policies", repo / "policies")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c1")
    c1 = git(repo, "rev-parse", "HEAD")
    line = b"# " + b"padding " * 15 + b"\n"
    with (repo / "policies" / "huge.yaml").open("wb") as handle:
        block = line * 4096
        for _ in range(megabytes * 1024 * 1024 // len(block)):
            handle.write(block)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c2")
    c2 = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", c1)
    with (repo / "policies" / "default.yaml").open("a") as handle:
        handle.write("# c1b\n")
    git(repo, "commit", "-q", "-am", "c1b")
    c1b = git(repo, "rev-parse", "HEAD")
    marker.write_text(f"{c1} {c1b} {c2}\n")
    return repo, c1, c1b, c2


class Server:
    """A subprocess serving on a loopback port until stopped: moto, or the hostile endpoint."""

    def __init__(self, argv: list[str], url: str | None = None) -> None:
        self.process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        self.url = url or (self.process.stdout.readline().strip() if self.process.stdout else "")

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.terminate()
        self.process.wait(timeout=30)


def moto() -> Server:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = Server([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], f"http://127.0.0.1:{port}")
    deadline = time.monotonic() + 60
    while True:  # ready when it accepts a connection
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return server
        except OSError:
            if time.monotonic() > deadline or server.process.poll() is not None:
                sys.exit("moto's server did not start")
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline-ref", default="2947bfc", help="The tree measured beside this one.")
    parser.add_argument("--diff-mb", type=int, default=300, help="Size of the huge file of the diff.")
    parser.add_argument("--answer-mb", type=int, default=200, help="Size of the hostile DescribeInstanceTypes.")
    parser.add_argument("--work", type=Path, default=BENCHMARKS_DIR / ".work" / "bounds")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON too.")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    trees = {"this tree": REPOSITORY, f"baseline {args.baseline_ref}": baseline_tree(args.baseline_ref, args.work)}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)

    repo, c1, c1b, c2 = diff_repository(args.work, args.diff_mb)
    hostile_script = REPOSITORY / "tests" / "catalog" / "hostile_ec2.py"
    results: list[tuple[str, str, dict[str, Any]]] = []
    out = args.work / "catalog.json"
    for label, tree in trees.items():
        results.append((label, f"diff, a {args.diff_mb} MB file", peak(tree, ["diff", c1, c2, "policies"], repo)))
        results.append((label, "diff, the same without it", peak(tree, ["diff", c1, c1b, "policies"], repo)))
        hostile = Server([sys.executable, str(hostile_script), "huge", str(args.answer_mb)])
        try:
            refresh = ["catalog", "refresh", "--endpoint-url", hostile.url, "-o", str(out), "--no-spot-prices"]
            results.append((label, f"catalog refresh, a {args.answer_mb} MB answer", peak(tree, refresh, args.work)))
        finally:
            hostile.stop()
        real = moto()
        try:
            refresh = ["catalog", "refresh", "--endpoint-url", real.url, "-o", str(out), "--no-spot-prices"]
            results.append((label, "catalog refresh, moto's EC2", peak(tree, refresh, args.work)))
        finally:
            real.stop()
        out.unlink(missing_ok=True)

    rows = [
        [label, what, f"{r['peak_mib']:,.0f}", str(r["exit"]), f"{r['seconds']:.1f}", r["said"]]
        for label, what, r in results
    ]
    print(render_table(["tree", "command", "peak MiB", "exit", "s", "last line of stderr"], rows, frozenset({2, 3, 4})))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    if args.json:
        print(json.dumps([{"tree": label, "command": what, **r} for label, what, r in results], indent=2))


if __name__ == "__main__":
    main()
