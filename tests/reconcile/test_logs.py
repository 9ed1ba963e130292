"""The controller's log reads like Karpenter's: `<time>\\t<LEVEL>\\tcontroller.<name>\\t<message>\\t{"commit": …}`,
one line per decision; `--log-format json` gives one JSON object per line with the same facts."""

from __future__ import annotations

import io
import json
import logging

import pytest

from karpenter_policy import __version__
from karpenter_policy.kube import objects
from karpenter_policy.reconcile import logs

from .conftest import MakeHarness
from .support import KARPENTER_LINE, create_all, inflate, trailer


def test_every_line_is_in_karpenters_console_format(make_harness: MakeHarness) -> None:
    h = make_harness()
    # seven 1-vCPU pods: one c6a.2xlarge is the cheapest plan (nine take it and a c6a.xlarge, cheaper than one node)
    create_all(h.cluster, objects.POD, inflate(0, 7))
    result = h.batch()
    (node,) = result.launched
    lines = h.log_lines()
    assert lines and all(KARPENTER_LINE.match(line) for line in lines), lines
    by_message = {line.split("\t")[3]: line for line in lines}
    found = by_message["found 7 provisionable pod(s)"]
    assert found.split("\t")[1:3] == ["INFO", "controller.provisioner"]
    assert trailer(found) == {"commit": __version__, "pods": 7}
    computed = trailer(by_message["computed new node(s) to fit pod(s)"])
    assert (computed["nodes"], computed["pods"]) == (1, 7)
    launching = next(m for m in by_message if m.startswith("launching node with 7 pod(s) requesting "))
    assert launching.endswith(" other(s)") and ", " in launching  # the first five types, then how many more
    launched = f"launched instance {node.instance_id}, type {node.instance_type}, zone {node.zone}, capacity spot"
    assert trailer(by_message[launched])["provisioner"] == "default"
    assert f"Bound 7 pod(s) to node {node.node}" in by_message


def test_the_order_of_the_lines_is_the_order_of_the_decisions(make_harness: MakeHarness) -> None:
    h = make_harness()
    create_all(h.cluster, objects.POD, inflate(0, 3))
    h.batch()
    kinds = [m.split(" ")[0] for m in h.messages() if not m.startswith("loaded")]
    assert kinds == ["found", "computed", "launching", "launched", "Bound"]


def test_json_lines_carry_the_same_facts() -> None:
    stream = io.StringIO()
    handler = logs.configure(stream, logs.JSON)
    try:
        logs.logger("provisioner").info(
            "found %d provisionable pod(s)", 9, extra=logs.fields(pods=9)
        )
        logs.logger("provisioner").error("could not schedule pod, %s", "no provisioner …", extra=logs.fields(pod="a/b"))
    finally:
        logging.getLogger("karpenter_policy").removeHandler(handler)
        logging.getLogger("karpenter_policy").setLevel(logging.NOTSET)
    first, second = (json.loads(line) for line in stream.getvalue().splitlines())
    assert first["level"] == "INFO" and first["logger"] == "controller.provisioner"
    assert first["message"] == "found 9 provisionable pod(s)" and first["pods"] == 9
    assert first["commit"] == __version__ and first["time"].endswith("Z")
    assert second["level"] == "ERROR" and second["pod"] == "a/b"


def test_options_are_listed_as_karpenter_does() -> None:
    assert logs.options_text(["a", "b", "c"]) == "a, b, c"
    assert logs.options_text([f"t{i}" for i in range(8)]) == "t0, t1, t2, t3, t4 and 3 other(s)"


def test_a_log_level_leaves_out_the_lines_below_it() -> None:
    """`--log-level`'s names are Karpenter's (zap's), in any case; each writes its level and those above."""
    assert [logs.level_name(n) for n in ("DEBUG", "Info", "warn", "error", "", None)] == [
        "debug", "info", "warn", "error", "info", "info"]
    for bad in ("warning", "verbose", "trace"):
        with pytest.raises(ValueError, match="one of debug, info, warn, error"):
            logs.level_name(bad)
    stream = io.StringIO()
    handler = logs.configure(stream, logs.TEXT, logs.level_of("warn"))
    package = logging.getLogger("karpenter_policy")
    try:
        logger = logs.logger("provisioner")
        logger.debug("a debug line")
        logger.info("an info line")
        logger.warning("a warning")
        logger.error("an error")
        logs.configure(stream, logs.TEXT, logs.level_of("debug"))
        logger.debug("now written")
    finally:
        for added in [h for h in package.handlers if h.get_name() == handler.get_name()]:
            package.removeHandler(added)
        package.setLevel(logging.NOTSET)
    written = [line.split("\t")[1:4] for line in stream.getvalue().splitlines()]
    assert written == [
        ["WARN", "controller.provisioner", "a warning"],
        ["ERROR", "controller.provisioner", "an error"],
        ["DEBUG", "controller.provisioner", "now written"],
    ]
