"""A small Chrome DevTools Protocol client over websockets, driving Debian's system Chromium.

Only what the inspector's browser test needs: start a headless Chromium on a free port, open
one page, navigate, evaluate JavaScript, click with real mouse events, take screenshots, and
collect uncaught page exceptions. Nothing here downloads a browser.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

from testbed.processes import stop

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
START_TIMEOUT_S = 30.0


def find_chromium() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Page:
    """One browser tab, attached through a flattened CDP session."""

    def __init__(self, ws: ClientConnection, session_id: str) -> None:
        self.ws = ws
        self.session_id = session_id
        self._next_id = 0
        self.exceptions: list[str] = []

    def send(self, method: str, timeout: float = 20.0, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        msg_id = self._next_id
        self.ws.send(json.dumps({"id": msg_id, "method": method, "params": params, "sessionId": self.session_id}))
        deadline = time.monotonic() + timeout
        while True:
            raw = self.ws.recv(timeout=max(0.01, deadline - time.monotonic()))
            msg = json.loads(raw)
            if msg.get("method") == "Runtime.exceptionThrown":
                details = msg["params"]["exceptionDetails"]
                self.exceptions.append(str(details.get("exception", {}).get("description") or details.get("text")))
            if msg.get("id") == msg_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})

    def eval(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        """Poll until ``expression`` is truthy in the page; returns its value."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.eval(expression)
            except RuntimeError:  # the page is navigating: the context went away
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {expression!r} on {self.eval('location.href')}")
            time.sleep(0.05)

    def goto(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def click(self, selector: str) -> None:
        """A real mouse click (press + release) at the centre of the element."""
        box = self.wait_for(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return r.width ? {x: r.x + r.width / 2, y: r.y + r.height / 2} : null; })()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            extra = {"button": "left", "clickCount": 1} if kind != "mouseMoved" else {}
            self.send("Input.dispatchMouseEvent", type=kind, x=box["x"], y=box["y"], **extra)

    def click_and_wait(self, selector: str, ready: str) -> None:
        """Click something that navigates, then wait until the new page satisfies ``ready``."""
        self.eval("window.__before_click = true")
        self.click(selector)
        self.wait_for(f"!window.__before_click && document.readyState === 'complete' && ({ready})")

    def type_into(self, selector: str, text: str) -> None:
        self.click(selector)
        self.eval(f"document.querySelector({json.dumps(selector)}).value = ''")
        self.send("Input.insertText", text=text)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium_page(binary: str, width: int = 1400, height: int = 900) -> Iterator[Page]:
    """A headless system Chromium with one blank page; everything is torn down afterwards."""
    profile = tempfile.mkdtemp(prefix="mc-ui-chromium-")
    proc = subprocess.Popen(
        [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", f"--user-data-dir={profile}",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--metrics-recording-only", "--hide-scrollbars",
         f"--window-size={width},{height}", "about:blank"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        ws_url = _devtools_url(proc)
        with connect(ws_url, max_size=None, open_timeout=START_TIMEOUT_S) as ws:
            target = _browser_call(ws, 1, "Target.createTarget", url="about:blank")["targetId"]
            session = _browser_call(ws, 2, "Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            page = Page(ws, session)
            page.send("Page.enable")
            page.send("Runtime.enable")
            page.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
            yield page
    finally:
        stop(proc)
        shutil.rmtree(profile, ignore_errors=True)


def _devtools_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError(f"chromium exited: {''.join(seen)[-1500:]}")
        seen.append(line)
        if "DevTools listening on " in line:
            # keep draining stderr, or a chatty browser blocks on a full pipe
            threading.Thread(target=lambda: [None for _ in proc.stderr or ()], daemon=True).start()
            return line.split("DevTools listening on ", 1)[1].strip()
    raise RuntimeError("chromium did not start in time")


def _browser_call(ws: ClientConnection, msg_id: int, method: str, **params: Any) -> dict[str, Any]:
    ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
    while True:
        msg = json.loads(ws.recv(timeout=START_TIMEOUT_S))
        if msg.get("id") == msg_id:
            if "error" in msg:
                raise RuntimeError(f"{method}: {msg['error']}")
            return msg["result"]
