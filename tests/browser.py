"""Headless Chromium for the tests that look at a page as a person would: Debian's chromium started as the report
tests start it (headless, no sandbox, a fresh profile), driven over the DevTools protocol (websocket-client) —
a viewport of a given size, the page loaded (its load event and its fonts), the boxes of the elements a test
names measured in the page, a PNG of the first screen, and the errors the page raised."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import websocket

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage")
#: A common laptop screen.
LAPTOP = (1366, 768)
STARTUP_SECONDS = 60.0
CALL_SECONDS = 60.0

MEASURE = """
(selectors, open) => document.fonts.ready.then(() => {
  if (open) document.querySelectorAll("details").forEach((details) => { details.open = true; });
  const boxes = {};
  for (const selector of selectors) {
    boxes[selector] = Array.from(document.querySelectorAll(selector)).map((element) => {
      const r = element.getBoundingClientRect();
      return {left: r.left, top: r.top, right: r.right, bottom: r.bottom,
              text: (element.textContent || "").trim().slice(0, 200),
              clipped: element.scrollWidth > element.clientWidth + 1
                || element.scrollHeight > element.clientHeight + 1};
    });
  }
  const root = document.documentElement;
  return {width: innerWidth, height: innerHeight, scrollWidth: root.scrollWidth, scrollHeight: root.scrollHeight,
          boxes: boxes, firstElement: document.body.firstElementChild ? document.body.firstElementChild.tagName : ""};
})
"""


@dataclass(frozen=True, slots=True)
class Box:
    """An element's box in CSS pixels from the top left of the first screen, the start of its text, and whether
    its content is wider or taller than the box (cut off, or behind a scroll bar)."""

    left: float
    top: float
    right: float
    bottom: float
    text: str
    clipped: bool

    def within(self, width: float, height: float) -> bool:
        """Wholly on the first screen of a `width` × `height` viewport (not cut off at any side)."""
        return self.left >= 0 and self.top >= 0 and self.right <= width and self.bottom <= height and (
            self.right > self.left and self.bottom > self.top)


@dataclass(frozen=True, slots=True)
class Look:
    """What the page showed: the viewport, how wide and tall the document is, the boxes per selector, the first
    element of the body, the screenshot of the first screen and the exceptions the page threw; `opened`: the boxes
    again once every `<details>` was opened (after the screenshot), as a reader who clicks them all sees them."""

    width: int
    height: int
    scroll_width: int
    scroll_height: int
    boxes: dict[str, list[Box]]
    first_element: str
    screenshot: Path
    opened: dict[str, list[Box]]
    errors: list[str] = field(default_factory=list)

    def within_first_screen(self, selector: str) -> bool:
        return bool(self.boxes[selector]) and all(b.within(self.width, self.height) for b in self.boxes[selector])


class _DevTools:
    """One websocket to the browser; commands to a page go through its session (flat mode)."""

    def __init__(self, url: str) -> None:
        self.socket = websocket.create_connection(url, timeout=CALL_SECONDS, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        """The first event `method` of `session`, kept or to come (each call reads the socket until it comes)."""
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method and event.get("sessionId") == session:
                    found: dict[str, Any] = self.events.pop(i)
                    return found
            self.events.append(json.loads(self.socket.recv()))

    def close(self) -> None:
        self.socket.close()


@contextmanager
def chromium() -> Iterator[_DevTools]:
    """Chromium with a fresh profile, listening for DevTools on a port of its choice on the loopback; stopped (and
    its profile removed) on exit."""
    if CHROMIUM is None:
        raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="karpenter-policy-chromium-")
    process = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--remote-debugging-address=127.0.0.1",
         "--remote-debugging-port=0", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert process.stderr is not None
        url = ""
        for line in process.stderr:  # Chromium says where it listens once it is ready
            if line.startswith("DevTools listening on "):
                url = line.removeprefix("DevTools listening on ").strip()
                break
        if not url:
            raise RuntimeError(f"chromium exited ({process.wait(STARTUP_SECONDS)}) before it listened for DevTools")
        # what it writes later is read and dropped, so that a full pipe never stops it
        threading.Thread(target=lambda: [None for _ in process.stderr or ()], daemon=True).start()
        devtools = _DevTools(url)
        try:
            yield devtools
        finally:
            devtools.close()
    finally:
        process.terminate()
        try:
            process.wait(STARTUP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()
        shutil.rmtree(profile, ignore_errors=True)


def look_at(page: Path, screenshot: Path, selectors: Sequence[str], size: tuple[int, int] = LAPTOP) -> Look:
    """Load `page` in a viewport of `size` (CSS pixels, scale 1), measure the elements of `selectors`, and write a
    PNG of the first screen to `screenshot`."""
    width, height = size
    with chromium() as devtools:
        target = devtools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = devtools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        devtools.call("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        devtools.call("Page.enable", session=session)
        devtools.call("Runtime.enable", session=session)
        devtools.call("Page.navigate", {"url": page.resolve().as_uri()}, session)
        devtools.wait_for("Page.loadEventFired", session)
        def measure(open_details: bool) -> dict[str, Any]:
            expression = f"({MEASURE})({json.dumps(list(selectors))}, {json.dumps(open_details)})"
            found: dict[str, Any] = devtools.call(
                "Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True}, session
            )["result"]["value"]
            return found

        measured = measure(False)
        png = devtools.call("Page.captureScreenshot", {"format": "png"}, session)["data"]
        screenshot.write_bytes(base64.b64decode(png))
        opened = measure(True)
        errors = [
            str(event["params"]["exceptionDetails"].get("text", ""))
            for event in devtools.events
            if event.get("method") == "Runtime.exceptionThrown" and event.get("sessionId") == session
        ]
    return Look(
        width=int(measured["width"]),
        height=int(measured["height"]),
        scroll_width=int(measured["scrollWidth"]),
        scroll_height=int(measured["scrollHeight"]),
        boxes={s: [Box(**b) for b in found] for s, found in measured["boxes"].items()},
        first_element=str(measured["firstElement"]),
        screenshot=screenshot,
        opened={s: [Box(**b) for b in found] for s, found in opened["boxes"].items()},
        errors=errors,
    )


def png_size(path: Path) -> tuple[int, int]:
    """The width and height of a PNG (from its IHDR chunk)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
