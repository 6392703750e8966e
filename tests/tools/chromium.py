"""A headless Chromium driven through the DevTools protocol, for the viewer tests and benchmark.

`Chromium.start()` launches Debian's ``chromium`` with no network, no first-run work and a fresh
profile, reads the DevTools port it picked from the profile's ``DevToolsActivePort`` file, and
attaches to its page over a websocket (the ``websocket-client`` package). `call` sends one
protocol command and waits for its answer; `evaluate` runs JavaScript in the page; `click`
dispatches a real mouse press and release at a point, as a user's click arrives.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-debugging-port=0",
    "--window-size=1400,900",
)


def unavailable() -> str | None:
    """Why the viewer cannot be driven here (None: it can)."""
    if shutil.which("chromium") is None:
        return "Chromium is not installed (Debian: apt-get install chromium)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "websocket-client is not installed (pip install -e '.[test]')"
    return None


class Chromium:
    def __init__(self, process, profile: str, socket):
        self.process = process
        self.profile = profile
        self.socket = socket
        self.ids = itertools.count(1)

    @classmethod
    def start(cls, timeout: float = 30.0) -> Chromium:
        import websocket

        profile = tempfile.mkdtemp(prefix="ember-chromium-")
        process = subprocess.Popen(
            [shutil.which("chromium"), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # its own temporary folders (org.chromium.Chromium.*) go in the profile, removed
            # with it, not in /tmp, where every run left one
            env={**os.environ, "TMPDIR": profile},
        )
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while not (os.path.exists(port_file) and open(port_file).read().count("\n")):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                shutil.rmtree(profile, ignore_errors=True)
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(open(port_file).read().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as reply:
            pages = [t for t in json.load(reply) if t["type"] == "page"]
        socket = websocket.create_connection(
            pages[0]["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True
        )
        return cls(process, profile, socket)

    def close(self) -> None:
        self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)

    def call(self, method: str, **params) -> dict:
        ident = next(self.ids)
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        while True:  # events arrive in between; skip them
            message = json.loads(self.socket.recv())
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, path: str, timeout: float = 60.0) -> float:
        """Load the file at ``path`` and wait until the viewer reports its first frame drawn;
        returns the seconds from navigation to that report."""
        started = time.perf_counter()
        self.call("Page.navigate", url="file://" + os.path.abspath(path))
        deadline = time.monotonic() + timeout
        while self.evaluate("document.body && document.body.dataset.done") != "1":
            if time.monotonic() > deadline:
                raise RuntimeError(f"the viewer did not finish drawing {path}")
            time.sleep(0.02)
        return time.perf_counter() - started

    def click(self, x: float, y: float) -> None:
        self.call("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: str) -> bytes:
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        with open(path, "wb") as f:
            f.write(png)
        return png

    def next_frame(self) -> None:
        """Wait until the page has drawn a frame after whatever was just done."""
        self.call(
            "Runtime.evaluate",
            expression="new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))",
            awaitPromise=True,
        )
