"""`karpenter-policy webhook` as a user runs it: a subprocess that serves until SIGTERM, `--generate-only`, and
start-up errors (exit 2 with one line, no traceback)."""

from __future__ import annotations

import base64
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kube.support import GENEROUS, eventually
from profiles import fast_first

from .support import ROOT, Client, cases

CLI = [sys.executable, "-m", "karpenter_policy.cli", "webhook"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_generate_only_prints_the_ca_bundle(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "--self-signed", str(tmp_path), "--generate-only"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert base64.b64decode(done.stdout.strip()) == (tmp_path / "ca.crt").read_bytes()
    assert (tmp_path / "ca.crt").read_bytes().startswith(b"-----BEGIN CERTIFICATE-----")


@pytest.mark.slow
def test_serves_until_sigterm(tmp_path: Path) -> None:
    port = free_port()
    command = [
        *CLI,
        "--self-signed",
        str(tmp_path),
        "--address",
        "127.0.0.1",
        "--port",
        str(port),
        "--shutdown-delay",
        "3",
        "--policies",
        str(ROOT / "examples" / "pinning" / "policies"),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(process.stderr or []), daemon=True)
    reader.start()
    try:
        # Serving once it logs so: the certificate written, the workers warm, the socket listening.
        eventually(
            lambda: process.poll() is not None or "serving https://" in "".join(lines), 60, "the webhook serving"
        )
        assert process.poll() is None, "".join(lines)
        client = Client(port, tmp_path / "ca.crt", timeout=5)
        assert client.get("/readyz").status == 200
        bad = next(c.data for c in cases() if c.id == "check/negative/conflict-arch-vs-family.yaml#0")
        response = client.review("/validate/provisioners", bad)
        assert response["allowed"] is False and "[requirements-conflict]" in response["status"]["message"]
        process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + GENEROUS
        statuses = []
        while not statuses or statuses[-1] != 503:  # not ready while it drains, but still answering
            statuses.append(client.get("/readyz").status)
            assert time.monotonic() < deadline
        assert set(statuses) <= {200, 503}
        client.close()
        process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        reader.join(timeout=5)
    stdout, stderr = (process.stdout.read() if process.stdout else ""), "".join(lines)
    assert process.returncode == 0, stderr
    assert stdout.startswith("caBundle: ")
    assert "serving https://127.0.0.1:" in stderr and "1 pinning rules" not in stderr and "2 pinning rules" in stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    fast_first([
        ([], "give --tls-cert-file and --tls-private-key-file, or --self-signed DIR"),
        (
            ["--tls-cert-file", "/nonexistent.crt", "--tls-private-key-file", "/nonexistent.key"],
            "cannot load the serving certificate",
        ),
        (["--self-signed", "{tmp}", "--policies", str(ROOT / "examples" / "negative")], "have errors"),
        (["--self-signed", "{tmp}", "--constraints", "{tmp}"], "is it `compile -o` output?"),
        (
            ["--self-signed", "{tmp}", "--policies", "{tmp}", "--constraints", "{tmp}"],
            "give --policies or --constraints, not both",
        ),
        (["--self-signed", "{tmp}", "--region", "mars-north-1"], "no embedded catalog for region 'mars-north-1'"),
        (["--generate-only"], "--generate-only needs --self-signed DIR"),
    ], unpack=True),
    ids=[
        "no-certificate",
        "missing-files",
        "policies-with-errors",
        "not-compiled",
        "both-contexts",
        "region",
        "generate-only",
    ],
)
def test_startup_errors_exit_2(arguments: list[str], message: str, tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in arguments]
    done = subprocess.run([*CLI, "--port", "0", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_a_port_in_use_exits_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [*CLI, "--self-signed", str(tmp_path), "--address", "127.0.0.1", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in done.stderr
