"""`karpenter-policy webhook` as a user runs it: a subprocess that serves until SIGTERM, `--generate-only`, and
start-up errors (exit 2 with one line, no traceback)."""

from __future__ import annotations

import base64
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from profiles import fast_first

from karpenter_policy import __version__

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


def start(tmp_path: Path, *arguments: str) -> tuple[subprocess.Popen[str], Client]:
    """The webhook as a subprocess on a free port with a self-signed certificate in `tmp_path`, serving the pinning
    example's policies, and a client once `/readyz` says it is ready."""
    port = free_port()
    command = [
        *CLI, "--self-signed", str(tmp_path), "--address", "127.0.0.1", "--port", str(port),
        "--policies", str(ROOT / "examples" / "pinning" / "policies"), *arguments,
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "tls.crt").exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    client = Client(port, tmp_path / "ca.crt", timeout=5)
    while True:
        try:
            if client.get("/readyz").status == 200:
                return process, client
        except OSError:
            client.close()
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.1)


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM, then what the process wrote (it is killed when it does not end within 20 s)."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


@pytest.mark.slow
def test_serves_until_sigterm(tmp_path: Path) -> None:
    process, client = start(tmp_path, "--shutdown-delay", "3")
    try:
        bad = next(c.data for c in cases() if c.id == "check/negative/conflict-arch-vs-family.yaml#0")
        response = client.review("/validate/provisioners", bad)
        assert response["allowed"] is False and "[requirements-conflict]" in response["status"]["message"]
        process.send_signal(signal.SIGTERM)
        statuses = []
        deadline = time.monotonic() + 30
        while not statuses or statuses[-1] != 503:  # not ready while it drains, but still answering
            statuses.append(client.get("/readyz").status)
            assert time.monotonic() < deadline
        assert set(statuses) <= {200, 503}
        client.close()
    finally:
        stdout, stderr = stop(process)
    assert process.returncode == 0, stderr
    assert stdout.startswith("caBundle: ")
    assert "serving https://127.0.0.1:" in stderr and "1 pinning rules" not in stderr and "2 pinning rules" in stderr
    assert "Traceback" not in stderr
    # The default log format is Karpenter's console format, the controller's: time, level, logger, message, fields.
    serving = next(line for line in stderr.splitlines() if "\tserving https://" in line)
    time_, level, logger, _, trailer = serving.split("\t")
    assert time_.endswith("Z") and (level, logger) == ("INFO", "webhook")
    assert json.loads(trailer) == {"commit": __version__}


def test_json_logs_are_one_object_per_line(tmp_path: Path) -> None:
    """`--log-format json`, as the controller's: every line of the webhook's log, from start-up to the end of the
    drain, is one JSON object with level, time, logger, message and commit."""
    process, client = start(tmp_path, "--shutdown-delay", "0", "--log-format", "json")
    try:
        bad = next(c.data for c in cases() if c.id == "check/negative/conflict-arch-vs-family.yaml#0")
        assert client.review("/validate/provisioners", bad)["allowed"] is False
        client.close()
    finally:
        _, stderr = stop(process)
    assert process.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]  # every line parses, or this fails
    assert all(set(line) >= {"level", "time", "logger", "message", "commit"} for line in lines), lines
    assert all(line["commit"] == __version__ and line["time"].endswith("Z") for line in lines)
    assert all(line["logger"].startswith("webhook") for line in lines), lines
    messages = [line["message"] for line in lines]
    assert any(m.startswith("serving https://127.0.0.1:") for m in messages), messages
    assert any(m.startswith("denied /validate/provisioners") for m in messages), messages
    order = ["received SIGTERM", "stopped accepting connections", "workers stopped", "stopped"]
    assert [m for m in messages if m in order] == order
    assert {line["level"] for line in lines} == {"INFO"}


def test_log_level_error_leaves_out_the_info_lines(tmp_path: Path) -> None:
    """`--log-level error` (Karpenter's names, any case): the same run as the test above, whose log is INFO lines
    (serving, a denial, the drain), writes none of them."""
    process, client = start(tmp_path, "--shutdown-delay", "0", "--log-format", "json", "--log-level", "ERROR")
    try:
        bad = next(c.data for c in cases() if c.id == "check/negative/conflict-arch-vs-family.yaml#0")
        assert client.review("/validate/provisioners", bad)["allowed"] is False
        client.close()
    finally:
        _, stderr = stop(process)
    assert process.returncode == 0, stderr
    lines = [json.loads(line) for line in stderr.splitlines()]
    assert all(line["level"] in ("ERROR", "FATAL") for line in lines), lines


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
