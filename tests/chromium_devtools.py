"""Headless Chromium driven over its DevTools protocol (a websocket on 127.0.0.1), for tests that must see a page
the way a browser draws it: evaluate script in the page, move and click the mouse as real input events.

Debian's chromium starts with --remote-debugging-port=0 and writes the port it chose to DevToolsActivePort in
its profile folder; the page's websocket address comes from /json/list on that port."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import websocket

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--window-size=1280,1000",
)


def require_chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("COSTBENCH_REQUIRE_CHROMIUM"):
            pytest.fail("chromium is not installed but COSTBENCH_REQUIRE_CHROMIUM is set (.ci/run installs it)")
        pytest.skip("chromium not installed (Debian package chromium; .ci/run installs it)")
    return CHROMIUM


class Browser:
    """One headless Chromium with one page; close() ends the process."""

    def __init__(self, profile: Path, timeout_s: float = 30.0) -> None:
        self._process = subprocess.Popen(
            [require_chromium(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        self.timeout_s = timeout_s
        try:
            port = self._port(profile / "DevToolsActivePort")
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout_s) as reply:
                pages = [t for t in json.load(reply) if t["type"] == "page"]
            self._ws = websocket.create_connection(
                pages[0]["webSocketDebuggerUrl"], timeout=timeout_s, suppress_origin=True
            )
        except BaseException:
            self.close()
            raise

    def _port(self, path: Path) -> int:
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if path.exists() and path.read_text().strip():
                return int(path.read_text().splitlines()[0])
            if self._process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self._process.returncode} before it listened")
            time.sleep(0.05)
        raise TimeoutError(f"chromium wrote no {path} in {self.timeout_s:g} s")

    def send(self, method: str, **params) -> dict:
        """One DevTools command; its result (events that arrive first are skipped)."""
        call_id = next(self._ids)
        self._ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv())
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, script: str):
        result = self.send("Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, script: str, timeout_s: float | None = None):
        """Evaluate `script` until it returns something truthy; that value."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while time.monotonic() < deadline:
            value = self.evaluate(script)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(f"{script!r} stayed falsy for {timeout_s or self.timeout_s:g} s")

    def viewport(self, width: int, height: int, phone: bool = False) -> None:
        """Lay pages out in a `width` x `height` window of CSS pixels; `phone`: as a phone's browser does (without a
        viewport meta tag a page is laid out 980 pixels wide and shrunk to fit)."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=phone)

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def mouse_move(self, x: float, y: float) -> None:
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def click(self, x: float, y: float) -> None:
        self.mouse_move(x, y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def close(self) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
