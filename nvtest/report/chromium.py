"""A small headless-Chromium driver over the DevTools protocol, for report tests and benchmarks.

Starts Debian's ``chromium`` offline (no sandbox, no GPU, no background
networking, a fresh profile directory), attaches to its first page over the
DevTools websocket (``pip install websocket-client``, the ``browser`` extra)
and offers what the report tests need: open a file and time its load event,
evaluate JavaScript, take a screenshot, and collect console errors, uncaught
exceptions and JavaScript dialogs (alert/confirm/prompt; each is dismissed
and recorded). Protocol reference: https://chromedevtools.github.io/devtools-protocol/
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["OFFLINE_FLAGS", "Chromium", "find_chromium"]

#: Flags that keep Chromium from making any outside connection.
OFFLINE_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
)


def find_chromium() -> str | None:
    """Path of a Chromium or Chrome executable on PATH, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    """A headless Chromium with one page, driven over the DevTools protocol.

    Use as a context manager::

        with Chromium() as br:
            load_s = br.open(Path("report.html"))
            n = br.eval("document.querySelectorAll('tr').length")
            br.screenshot(Path("shot.png"))
            assert not br.errors and not br.dialogs
    """

    def __init__(
        self,
        executable: str | None = None,
        width: int = 1400,
        height: int = 1000,
        timeout_s: float = 30.0,
    ) -> None:
        exe = executable or find_chromium()
        if exe is None:
            raise FileNotFoundError("no chromium on PATH (apt-get install chromium)")
        self.executable = exe
        self.width, self.height, self.timeout_s = width, height, timeout_s
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self._events: list[dict[str, Any]] = []
        self._id = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._ws: Any = None

    def __enter__(self) -> Chromium:
        import websocket  # websocket-client

        self._tmp = tempfile.TemporaryDirectory(prefix="nvtest-chromium-")
        profile = Path(self._tmp.name) / "profile"
        self._proc = subprocess.Popen(
            [
                self.executable,
                *OFFLINE_FLAGS,
                f"--user-data-dir={profile}",
                "--remote-debugging-port=0",
                f"--window-size={self.width},{self.height}",
                "--hide-scrollbars",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while not port_file.exists() or len(port_file.read_text().split()) < 2:
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.__exit__(None, None, None)
                raise RuntimeError("chromium did not open its DevTools port")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        targets: list[dict[str, Any]] = []
        while not any(t.get("type") == "page" for t in targets):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=5) as resp:
                targets = json.loads(resp.read())
            if time.monotonic() > deadline:
                raise RuntimeError("chromium has no page target")
            time.sleep(0.05)
        page = next(t for t in targets if t.get("type") == "page")
        self._ws = websocket.create_connection(
            page["webSocketDebuggerUrl"], timeout=self.timeout_s, suppress_origin=True
        )
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._ws is not None:
            try:
                self._ws.close()
            except Exception:  # noqa: BLE001 - closing a dead socket
                pass
            self._ws = None
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    # -- protocol ------------------------------------------------------------
    def _handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        p = msg.get("params") or {}
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails") or {}
            self.errors.append(f"exception: {(d.get('exception') or {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append(
                "console: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args") or [])
            )
        elif method == "Log.entryAdded" and (p.get("entry") or {}).get("level") == "error":
            self.errors.append(f"log: {p['entry'].get('text')}")
        elif method == "Page.javascriptDialogOpening":
            self.dialogs.append(f"{p.get('type')}: {p.get('message')}")
            self._ws.send(
                json.dumps(
                    {
                        "id": self._next_id(),
                        "method": "Page.handleJavaScriptDialog",
                        "params": {"accept": False},
                    }
                )
            )
        elif method == "Network.requestWillBeSent":
            self.requests.append(str((p.get("request") or {}).get("url")))
        self._events.append(msg)

    def _next_id(self) -> int:
        self._id += 1
        return self._id

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its ``result`` (raises RuntimeError on a protocol error)."""
        mid = self._next_id()
        self._ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout_s
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer to {method} within {self.timeout_s} s")
            msg = json.loads(self._ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            if "method" in msg:
                self._handle(msg)

    def wait_event(self, method: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Wait for the next event ``method`` (one already received counts)."""
        for i, ev in enumerate(self._events):
            if ev.get("method") == method:
                return self._events.pop(i)
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while time.monotonic() < deadline:
            msg = json.loads(self._ws.recv())
            if "method" in msg:
                self._handle(msg)
                if msg["method"] == method:
                    self._events.remove(msg)
                    return msg
        raise TimeoutError(f"no {method} within {timeout_s or self.timeout_s} s")

    # -- what tests use --------------------------------------------------------
    def open(self, path: Path) -> float:
        """Navigate to a local file; return seconds from navigation to the load event."""
        self._events.clear()
        t0 = time.perf_counter()
        self.send("Page.navigate", url=path.resolve().as_uri())
        self.wait_event("Page.loadEventFired")
        return time.perf_counter() - t0

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its value (JSON-serialisable)."""
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"evaluate failed: {res['exceptionDetails'].get('text')}: {expression[:200]}")
        return (res.get("result") or {}).get("value")

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        """Save a PNG of the viewport (or the whole page) to ``path``."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.eval("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size[0],
                "height": min(size[1], 16000),
                "scale": 1,
            }
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def print_pdf(self, path: Path) -> Path:
        """Print the page to PDF as the browser's print dialog would (print stylesheet applied)."""
        data = self.send("Page.printToPDF", printBackground=True, preferCSSPageSize=True)["data"]
        path.write_bytes(base64.b64decode(data))
        return path
