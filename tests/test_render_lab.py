"""Charts in JupyterLab: interactive, offline (src/numalab/render.py).

The fast tests check the two outputs of the ``numalab`` renderer: the
book's (unchanged: no libraries in the output) and JupyterLab's (the
libraries inline in the first chart after ``enable()``, once).

The slow test starts JupyterLab headless on 127.0.0.1 with a temporary
root holding a small notebook (two charts from ``numalab.charts.bar``)
and a copy of chapter 1 with small parameters, opens each in headless
Chromium (tests/test_browser.py's driver) with every address but
127.0.0.1 unreachable, runs all cells, and checks that the charts are
drawn by vega-embed, that hovering a mark shows a tooltip, that a legend
click changes the bars' opacity, and that the console stays clean.
Screenshots land in ``_build/screenshots/jupyterlab/``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import altair as alt
import pandas as pd
import pytest

from conftest import REPO

JUPYTER = Path(sys.executable).parent / "jupyter"


def _html(chart) -> str:
    bundle = chart._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    return bundle["text/html"]


def _chart():
    return alt.Chart(pd.DataFrame({"v": [1, 2]})).mark_point().encode(x="v:Q")


# --------------------------------------------------------------------------
# The renderer's two outputs


def test_book_output_carries_no_libraries(monkeypatch):
    from numalab import render
    monkeypatch.delenv(render.JUPYTER_SERVER_ENV, raising=False)
    render.enable(fallback=False)
    for _ in range(2):
        html = _html(_chart())
        assert html.count("<script") == 1
        assert render.READY_EVENT not in html and "new Function" not in html
        assert "document.getElementById(id)" in html


def test_jupyter_server_kernel_gets_libraries_once_per_enable(monkeypatch):
    from numalab import render
    monkeypatch.setenv(render.JUPYTER_SERVER_ENV, "chart.ipynb")
    render.enable(fallback=False)
    first, second = _html(_chart()), _html(_chart())
    assert first.count("<script") == 2 and "new Function(" in first
    assert first.index("new Function(") < first.index('<div class="numalab-chart"')
    assert second.count("<script") == 1 and "new Function" not in second
    assert render.READY_EVENT in second             # it waits for the libraries
    render.enable(fallback=False)                   # the enable cell rerun
    assert "new Function(" in _html(_chart())


def test_lab_argument_overrides_the_environment(monkeypatch):
    from numalab import render
    monkeypatch.setenv(render.JUPYTER_SERVER_ENV, "chart.ipynb")
    render.enable(fallback=False, lab=False)
    assert "new Function" not in _html(_chart())
    monkeypatch.delenv(render.JUPYTER_SERVER_ENV)
    render.enable(fallback=False, lab=True)
    assert "new Function(" in _html(_chart())


def test_libraries_html_holds_the_bundle_verbatim_and_script_safe():
    from numalab import render
    html = render.libraries_html()
    assert html.count("<script") == 1 and html.count("</script") == 1
    assert "<!--" not in html
    m = re.search(r"new Function\((\".*\")\)\(\);", html, re.S)
    assert m and json.loads(m.group(1)) == render.javascript_bundle()


def test_lab_chart_script_finds_its_div_and_escapes_data():
    from numalab import render
    evil = "</script><script>window.pwned=1</script><!--"
    spec = {"mark": "bar", "data": {"values": [{"name": evil}]}}
    html = render.lab_chart_html(spec, "numalab-chart-x-1", "<svg></svg>")
    assert html.startswith('<div class="numalab-chart" id="numalab-chart-x-1">'
                           '<div class="numalab-chart-fallback"><svg></svg></div></div>'
                           '<script type="text/javascript">')
    assert html.count("<script") == 1 and html.count("</script>") == 1 and "<!--" not in html
    m = re.search(r"spec=(\{.*?\}),opt=", html)
    assert json.loads(m.group(1)) == spec


# --------------------------------------------------------------------------
# JupyterLab in a real browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# A folder of its own: tests/test_browser.py clears _build/screenshots/*.png.
SCREENSHOTS = REPO / "_build" / "screenshots" / "jupyterlab"
TOKEN = "numalab-test-token"
CHAPTER = REPO / "notebooks" / "01-machine.ipynb"

SMALL_NOTEBOOK = [
    "import pandas as pd\nimport numalab.render\nfrom numalab import charts\n"
    "numalab.render.enable()",
    "df = pd.DataFrame({'node': ['node0', 'node1', 'node2'], 'CPUs': [8, 4, 2]})\n"
    "charts.bar(df, 'node', 'CPUs', 'CPUs per node', x_title='node', y_title='CPUs',\n"
    "           color='node', tooltip=['node', 'CPUs'])",
    "charts.bar(df, 'node', 'CPUs', 'the same, second chart', x_title='node',\n"
    "           y_title='CPUs', tooltip=['node', 'CPUs'], width=240, height=120)",
]

#: Per chart in the page: embedded by vega-embed, drawn, fallback gone.
CHART_STATE = """
(() => Array.from(document.querySelectorAll('.jp-OutputArea .numalab-chart')).map(el => ({
  id: el.id,
  embedded: el.classList.contains('vega-embed'),
  drawn: !!el.querySelector('svg.marks, canvas.marks, canvas'),
  fallback: !!el.querySelector('.numalab-chart-fallback'),
})))()
"""

#: The notebook in the main area: kernel status and executed code cells.
NOTEBOOK_STATE = """
(() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!w || !w.content || !w.sessionContext) { return null; }
  const k = w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = Array.from(w.content.widgets).filter(c => c.model.type === 'code');
  return {path: w.context.path, kernel: k ? k.status : null, ready: w.context.isReady,
          executed: cells.filter(c => c.model.executionCount !== null).length,
          code: cells.length,
          errors: cells.flatMap(c => Array.from({length: c.model.outputs.length},
                    (_, i) => c.model.outputs.get(i).toJSON())
                    .filter(o => o.output_type === 'error')
                    .map(o => o.ename + ': ' + o.evalue))};
})()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_notebook(path: Path, sources: list[str]) -> None:
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, str(path))


def _chapter_copy(path: Path) -> None:
    """Chapter 1 with papermill's parameter cell injected (as ``numalab
    build --quick`` does), on one small synthetic machine."""
    import nbformat
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook
    nb = load_notebook_node(str(CHAPTER))
    nb = parameterize_notebook(nb, {"quick": True, "datasets": ["pack:2 numa:2 core:4 pu:2"]})
    nbformat.write(nb, str(path))


class JupyterLab:
    """``jupyter lab`` on 127.0.0.1 with everything it writes in ``home``."""

    def __init__(self, root: Path, home: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        settings = home / "settings"
        notif = settings / "@jupyterlab" / "apputils-extension"
        notif.mkdir(parents=True)
        (notif / "notification.jupyterlab-settings").write_text(
            json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = dict(os.environ, HOME=str(home), JUPYTER_CONFIG_DIR=str(home / "config"),
                   JUPYTER_DATA_DIR=str(home / "data"),
                   JUPYTER_RUNTIME_DIR=str(home / "runtime"),
                   IPYTHONDIR=str(home / "ipython"), PYDEVD_DISABLE_FILE_VALIDATION="1")
        env.pop("JPY_SESSION_NAME", None)
        self.log = (home / "jupyterlab.log").open("w")
        self.proc = subprocess.Popen(
            [str(JUPYTER), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={self.port}",
             "--ServerApp.port_retries=0", f"--IdentityProvider.token={TOKEN}",
             f"--ServerApp.root_dir={root}", "--LabApp.expose_app_in_browser=True",
             "--LabApp.news_url=None", "--LabApp.extension_manager=readonly",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
             f"--LabApp.user_settings_dir={settings}",
             f"--LabApp.workspaces_dir={home / 'workspaces'}",
             *(["--allow-root"] if os.geteuid() == 0 else [])],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=root)
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/api/status?token={TOKEN}",
                                            timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("jupyter lab did not start: "
                                   + (home / "jupyterlab.log").read_text()[-2000:])
            time.sleep(0.5)

    def close(self) -> None:
        self.proc.terminate()       # SIGTERM: the server shuts its kernels down
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("lab-root")
    _write_notebook(root / "chart.ipynb", SMALL_NOTEBOOK)
    _chapter_copy(root / CHAPTER.name)
    server = JupyterLab(root, tmp_path_factory.mktemp("lab-home"))
    yield server
    server.close()


@pytest.fixture(scope="module")
def lab_browser(lab):
    """tests/test_browser.py's headless Chromium (a dead proxy, no name
    resolution), allowed to reach the JupyterLab server and nothing else;
    any other request is one of its ``problems()``."""
    pytest.importorskip("websocket")
    from test_browser import Chromium
    b = Chromium(local=lab.url)
    yield b
    b.close()


def _problems(browser) -> list[str]:
    """The driver's problems, less the requests JupyterLab cancels itself
    (it aborts a pending workspace save when a newer one starts)."""
    saved = browser.events
    browser.events = [e for e in saved if not (e.get("method") == "Network.loadingFailed"
                                               and e.get("params", {}).get("canceled"))]
    try:
        return browser.problems()
    finally:
        browser.events = saved


def _run_all(browser, lab: JupyterLab, name: str, timeout: float) -> dict:
    """Open ``name`` in JupyterLab, run all cells, wait until the kernel is
    idle with every code cell executed (or one failed). Returns NOTEBOOK_STATE.

    ``?reset`` starts from an empty workspace (no notebook of an earlier
    test restored beside it), and the notebook is activated before
    "Run All Cells", which acts on the active notebook."""
    browser.open(f"{lab.url}/lab/tree/{name}?reset&token={TOKEN}", timeout=120)
    deadline = time.monotonic() + 180
    state = None
    while time.monotonic() < deadline:
        state = browser.evaluate(NOTEBOOK_STATE)
        if state and state["path"] == name and state["ready"] and state["kernel"] == "idle":
            break
        time.sleep(0.5)
    else:
        raise TimeoutError(f"{name}: the kernel did not become idle: {state}")
    browser.evaluate("""(() => {
        const app = window.jupyterapp;
        app.shell.activateById(app.shell.currentWidget.id);
        return app.commands.execute('notebook:run-all-cells');
    })()""")
    started = time.monotonic() + 60
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        state = browser.evaluate(NOTEBOOK_STATE)
        assert state["path"] == name, state
        if state["kernel"] == "idle" and (state["executed"] == state["code"]
                                          or state["errors"]):
            return state
        if state["kernel"] == "idle" and state["executed"] == 0 and time.monotonic() > started:
            raise AssertionError(f"{name}: Run All Cells did not start: {state}")
    raise TimeoutError(f"{name}: cells still running after {timeout} s: {state}")


def _wait_for_charts(browser, count: int, timeout: float = 60) -> list[dict]:
    deadline = time.monotonic() + timeout
    while True:
        state = browser.evaluate(CHART_STATE) or []
        done = len(state) >= count and all(
            c["embedded"] and c["drawn"] and not c["fallback"] for c in state)
        if done or time.monotonic() > deadline:
            return state
        time.sleep(0.3)


def _center(browser, selector: str) -> dict:
    """Scroll the first element matching ``selector`` into view; its centre."""
    box = browser.evaluate(f"""(() => {{
        const el = document.querySelector({json.dumps(selector)});
        if (!el) {{ return null; }}
        el.scrollIntoView({{block: 'center'}});
        const r = el.getBoundingClientRect();
        return {{x: r.x + r.width / 2, y: r.y + r.height / 2}};
    }})()""")
    assert box, f"nothing matches {selector}"
    time.sleep(0.3)    # JupyterLab's windowed notebook may re-layout after scrolling
    return browser.evaluate(f"""(() => {{
        const r = document.querySelector({json.dumps(selector)}).getBoundingClientRect();
        return {{x: r.x + r.width / 2, y: r.y + r.height / 2}};
    }})()""")


def _hover_tooltip(browser, selector: str, timeout: float = 30) -> dict | None:
    """Hover the element's centre until vega-tooltip's box shows. The centre
    is measured again before each try: on a loaded machine JupyterLab is
    still laying out (and scrolling) the notebook's outputs after the cells
    ran, and a pointer sent to a stale position hovers nothing (seen in a
    full test run: no tooltip element at all after one try)."""
    deadline = time.monotonic() + timeout
    tip = None
    while time.monotonic() < deadline:
        box = _center(browser, selector)
        for dx in (0, 1, 2):   # moves: vega's hover handler wants a pointer motion
            browser.call("Input.dispatchMouseEvent",
                         {"type": "mouseMoved", "x": box["x"] + dx, "y": box["y"]}, session=True)
        until = min(deadline, time.monotonic() + 3)
        while time.monotonic() < until:
            tip = browser.evaluate("""(() => {
                const t = document.getElementById('vg-tooltip-element');
                return t ? {visible: t.classList.contains('visible'), text: t.textContent} : null;
            })()""")
            if tip and tip["visible"]:
                return tip
            time.sleep(0.2)
    return tip


@pytest.mark.slow
@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason="chromium is not installed")
def test_small_notebook_charts_respond_in_jupyterlab(lab, lab_browser):
    browser = lab_browser
    state = _run_all(browser, lab, "chart.ipynb", timeout=180)
    assert not state["errors"], state
    charts = _wait_for_charts(browser, 2)
    assert len(charts) == 2, charts
    assert all(c["embedded"] and c["drawn"] and not c["fallback"] for c in charts), charts
    first = "#" + charts[0]["id"]
    bars = f"{first} .mark-rect path"
    # Hover a bar: vega-tooltip's box shows the bar's fields.
    tip = _hover_tooltip(browser, bars)
    assert tip and tip["visible"], tip
    assert "node" in tip["text"] and "CPUs" in tip["text"], tip
    browser.screenshot(SCREENSHOTS / "jupyterlab-chart-tooltip.png")
    # Click a legend entry: the other nodes' bars fade (legend-bound selection).
    opacities = f"""Array.from(document.querySelectorAll({json.dumps(bars)}))
        .map(p => [p.getAttribute('opacity'), p.getAttribute('fill-opacity')].join('/'))"""
    before = browser.evaluate(opacities)
    assert len(before) == 3 and len(set(before)) == 1, before
    entry = _center(browser, f"{first} .role-legend-symbol path")
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        browser.call("Input.dispatchMouseEvent",
                     {"type": kind, "x": entry["x"], "y": entry["y"], "button": "left",
                      "clickCount": 1}, session=True)
    time.sleep(0.5)
    after = browser.evaluate(opacities)
    assert len(set(after)) == 2 and after != before, (before, after)
    browser.screenshot(SCREENSHOTS / "jupyterlab-chart.png")
    assert not _problems(browser)
    # Saved and reopened (a reload): the signed notebook's outputs are
    # trusted, the first chart's libraries run again, both charts embed.
    browser.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
    deadline = time.monotonic() + 30
    while browser.evaluate("window.jupyterapp.shell.currentWidget.context.model.dirty"):
        assert time.monotonic() < deadline, "the notebook was not saved"
        time.sleep(0.3)
    browser.open(f"{lab.url}/lab/tree/chart.ipynb?token={TOKEN}", timeout=120)
    charts = _wait_for_charts(browser, 2)
    assert len(charts) == 2 and all(c["embedded"] and not c["fallback"] for c in charts), charts
    assert not _problems(browser)


@pytest.mark.slow
@pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason="chromium is not installed")
@pytest.mark.skipif(not CHAPTER.exists(), reason="chapter 1 is not in the checkout")
def test_chapter_chart_responds_in_jupyterlab(lab, lab_browser):
    browser = lab_browser
    state = _run_all(browser, lab, CHAPTER.name, timeout=600)
    assert not state["errors"], state
    charts = _wait_for_charts(browser, 1)
    assert charts, "chapter 1 showed no chart"
    bad = [c["id"] for c in charts if not (c["embedded"] and c["drawn"] and not c["fallback"])]
    assert not bad, bad
    # The CPU hierarchy chart: hover a rectangle for its CPUs.
    hierarchy = browser.evaluate("""(() => {
        const c = Array.from(document.querySelectorAll('.jp-OutputArea .numalab-chart'))
            .find(el => /CPU hierarchy/.test(
                (el.querySelector('.role-title-text') || {}).textContent || ''));
        return c ? c.id : null;
    })()""")
    assert hierarchy, "no 'CPU hierarchy' chart in chapter 1"
    tip = _hover_tooltip(browser, f"#{hierarchy} .mark-rect path")
    assert tip and tip["visible"], tip
    assert "cpulist" in tip["text"], tip
    browser.screenshot(SCREENSHOTS / "jupyterlab-chapter-tooltip.png")
    assert not _problems(browser)
