"""The built book in a real browser, offline.

Headless Chromium opens every page of the quick book from disk (file://)
with the network made unreachable (a dead proxy, no name resolution, and
DevTools' offline emulation). For each page: every ``.numalab-chart`` must
end up holding the interactive view (an svg or canvas drawn by vega-embed,
the static fallback gone), the console must show no errors, and no request
may leave file://. Screenshots land in ``_build/screenshots/``.
Chromium is driven over the DevTools protocol (websocket-client).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, make_project

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SCREENSHOTS = REPO / "_build" / "screenshots"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason="chromium is not installed"),
]

websocket = pytest.importorskip("websocket")


class Chromium:
    """A headless Chromium and one page, over the DevTools protocol.

    ``local`` (e.g. ``"http://127.0.0.1:8888"``) is an origin on 127.0.0.1
    the page may reach (a JupyterLab server); all else stays unreachable."""

    def __init__(self, local: str | None = None):
        self.local = local
        self.profile = tempfile.mkdtemp(prefix="numalab-chromium-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
             "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--no-first-run", "--disable-default-apps",
             "--disable-extensions", f"--user-data-dir={self.profile}",
             "--proxy-server=127.0.0.1:9",   # loopback never goes through it
             "--host-resolver-rules=MAP * ~NOTFOUND"
             + (", EXCLUDE 127.0.0.1" if local else ""),
             "--remote-debugging-port=0", "--window-size=1280,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                url = m.group(1)
                break
        if url is None:
            self.close()
            raise RuntimeError("chromium did not start its DevTools endpoint")
        self.ws = websocket.create_connection(url, timeout=60)
        self.next_id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.call(f"{domain}.enable", session=True)
        self.call("Network.emulateNetworkConditions",
                  {"offline": local is None, "latency": 0, "downloadThroughput": -1,
                   "uploadThroughput": -1}, session=True)
        self.call("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                  session=True)

    def call(self, method: str, params: dict | None = None, session: bool = False) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(self.ws.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def evaluate(self, expression: str):
        r = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                           "awaitPromise": True}, session=True)
        return r.get("result", {}).get("value")

    def open(self, url: str, timeout: float = 30) -> None:
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.evaluate("document.readyState") == "complete":
                return
            time.sleep(0.1)
        raise TimeoutError(f"{url} did not load in {timeout} s")

    def problems(self) -> list[str]:
        """Console errors, uncaught exceptions, failed loads, and any
        request that is not file:, data:, blob: or about:."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                args = " ".join(str(a.get("value", a.get("description", "")))
                                for a in p.get("args", []))
                out.append(f"console.{p['type']}: {args}")
            elif m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                out.append("exception: " + d.get("exception", {}).get("description",
                                                                      d.get("text", "")))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
            elif m == "Network.requestWillBeSent":
                url = p.get("request", {}).get("url", "")
                allowed = ("file:", "data:", "blob:", "about:") + (
                    (self.local + "/", "ws" + self.local[4:] + "/") if self.local else ())
                if not url.startswith(allowed):
                    out.append(f"network request: {url}")
            elif m == "Network.loadingFailed":
                out.append(f"load failed: {p.get('errorText')}")
        return out

    def screenshot(self, path: Path, chart: int | None = None) -> None:
        """The viewport (1280x900), scrolled to the top or to one chart:
        readable at full size, unlike one very tall page image."""
        if chart is None:
            self.evaluate("window.scrollTo(0, 0)")
        else:
            self.evaluate(f"document.querySelectorAll('.numalab-chart')[{chart}]"
                          ".scrollIntoView({block: 'start'})")
        time.sleep(0.2)
        shot = self.call("Page.captureScreenshot", {"format": "png"}, session=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def close(self) -> None:
        try:
            if getattr(self, "ws", None):
                self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


CHART_STATE = """
(() => Array.from(document.querySelectorAll('.numalab-chart')).map(el => ({
  id: el.id,
  embedded: el.classList.contains('vega-embed'),
  drawn: !!el.querySelector('svg.marks, canvas.marks, canvas'),
  fallback: !!el.querySelector('.numalab-chart-fallback'),
})))()
"""


def _wait_for_charts(browser: Chromium, timeout: float = 30) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        state = browser.evaluate(CHART_STATE) or []
        done = all(c["embedded"] and c["drawn"] and not c["fallback"] for c in state)
        if done or time.monotonic() > deadline:
            return state
        time.sleep(0.2)


@pytest.fixture(scope="module")
def browser():
    for old in SCREENSHOTS.glob("*.png"):   # screenshots of an earlier run
        old.unlink()
    b = Chromium()
    yield b
    b.close()


def test_every_page_renders_its_charts_offline(quick_book, browser):
    root, status, lines = quick_book
    assert status == 0, "\n".join(lines)
    html = root / "_build" / "html"
    pages = [html / "intro.html", html / "rerun.html", html / "reviewers-guide.html",
             *sorted((html / "notebooks").glob("*.html"))]
    failures = []
    for page in pages:
        browser.open(page.as_uri())
        charts = _wait_for_charts(browser)
        browser.screenshot(SCREENSHOTS / f"{page.stem}.png")
        for i in range(len(charts)):
            browser.screenshot(SCREENSHOTS / f"{page.stem}-chart{i + 1:02d}.png", chart=i)
        bad = [c["id"] for c in charts if not (c["embedded"] and c["drawn"]
                                               and not c["fallback"])]
        if bad:
            failures.append(f"{page.name}: charts not drawn: {bad}")
        failures += [f"{page.name}: {p}" for p in browser.problems()]
    assert not failures, "\n".join(failures)


def test_chart_tooltip_and_zoom_respond(tmp_path_factory, browser):
    """Interactivity on the tiny fixture's bar chart: hovering a bar shows
    vega-tooltip's box, and a wheel event over the plot changes the x scale
    (the chart is bound to scales with .interactive())."""
    from numalab.build import build
    from conftest import _shared_dir
    root = make_project(tmp_path_factory.mktemp("tiny-browser"),
                        {"tiny": FIXTURES / "tiny.ipynb"},
                        shared_cache=_shared_dir(tmp_path_factory) / "parsed")
    assert build(root, data=["numa:2 core:2 pu:1", "pack:2 numa:1 core:4 pu:2"],
                 say=lambda s: None) == 0
    browser.open((root / "_build" / "html" / "notebooks" / "tiny.html").as_uri())
    charts = _wait_for_charts(browser)
    assert len(charts) == 1 and charts[0]["drawn"] and not charts[0]["fallback"]
    box = browser.evaluate("""(() => {
        const bar = document.querySelector('.numalab-chart .mark-rect path');
        bar.scrollIntoView({block: 'center'});
        const r = bar.getBoundingClientRect();
        return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    })()""")
    for kind in ("mouseMoved",):
        browser.call("Input.dispatchMouseEvent", {"type": kind, "x": box["x"], "y": box["y"]},
                     session=True)
    time.sleep(0.5)
    tip = browser.evaluate("""(() => {
        const t = document.getElementById('vg-tooltip-element');
        return t ? {visible: t.classList.contains('visible'), text: t.textContent} : null;
    })()""")
    assert tip and tip["visible"], tip
    assert "length" in tip["text"]
    ticks = "Array.from(document.querySelectorAll('.numalab-chart .role-axis-label text'))" \
            ".map(t => t.textContent).join('|')"
    before = browser.evaluate(ticks)
    browser.call("Input.dispatchMouseEvent",
                 {"type": "mouseWheel", "x": box["x"], "y": box["y"], "deltaX": 0,
                  "deltaY": -400}, session=True)
    time.sleep(0.5)
    assert browser.evaluate(ticks) != before
    browser.screenshot(SCREENSHOTS / "tiny-interaction.png", chart=0)
    assert not browser.problems()
