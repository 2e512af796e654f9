"""numalab build: cache keys, the staged book, offline HTML, failures that
leave the previous book alone, parameters passed as data, Ctrl-C."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import FIXTURES, REPO, chapter_notebooks, make_project
from numalab import build
from numalab.errors import NumalabError

slow = pytest.mark.slow


# --------------------------------------------------------------------------
# Pure parts


def _write_nb(path: Path, cells: list[tuple[str, str, list[str]]], outputs=False) -> Path:
    nb = {"nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                      "language": "python"}},
          "cells": []}
    for i, (kind, src, tags) in enumerate(cells):
        cell = {"cell_type": kind, "id": f"c{i}", "metadata": {"tags": tags}, "source": src}
        if kind == "code":
            cell["outputs"] = ([{"output_type": "stream", "name": "stdout", "text": "x\n"}]
                               if outputs else [])
            cell["execution_count"] = 1 if outputs else None
        nb["cells"].append(cell)
    path.write_text(json.dumps(nb))
    return path


def test_notebook_digest_ignores_outputs_but_not_source(tmp_path):
    cells = [("code", "seed = 0", ["parameters"]), ("code", "print(seed)", [])]
    a = build.notebook_digest(_write_nb(tmp_path / "a.ipynb", cells))
    b = build.notebook_digest(_write_nb(tmp_path / "b.ipynb", cells, outputs=True))
    c = build.notebook_digest(_write_nb(tmp_path / "c.ipynb",
                                        [cells[0], ("code", "print(seed + 1)", [])]))
    assert a == b
    assert a != c


def test_path_digest_follows_content_recursively(tmp_path):
    d = tmp_path / "dump" / "sys" / "devices"
    d.mkdir(parents=True)
    (d / "online").write_text("0-3\n")
    first = build.path_digest(tmp_path / "dump")
    (d / "online").write_text("0-7\n")
    assert build.path_digest(tmp_path / "dump") != first
    f1, f2 = tmp_path / "x.xml", tmp_path / "y.xml"
    f1.write_text("<topology/>")
    f2.write_text("<topology/>")
    assert build.path_digest(f1) == build.path_digest(f2)   # by content, not name


def test_cache_key_covers_params_data_and_package(tmp_path):
    nb = _write_nb(tmp_path / "n.ipynb", [("code", "datasets = []", ["parameters"])])
    data = tmp_path / "m.xml"
    data.write_text("<a/>")
    base = build.cache_key(nb, {"datasets": [str(data)]}, "pkg1")
    assert build.cache_key(nb, {"datasets": [str(data)]}, "pkg2") != base
    assert build.cache_key(nb, {"datasets": [str(data)], "quick": True}, "pkg1") != base
    data.write_text("<b/>")
    assert build.cache_key(nb, {"datasets": [str(data)]}, "pkg1") != base


def test_package_digest_sees_every_module(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 1\n")
    before = build.package_digest(pkg)
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    assert build.package_digest(pkg) != before


def test_toc_lists_only_present_chapters_in_order():
    toc = build.toc_yaml(build.chapter_order(["05-percpu-ref", "01-machine", "99-extra"]))
    files = re.findall(r"file: (\S+)", toc)
    assert files == ["notebooks/01-machine", "notebooks/05-percpu-ref", "notebooks/99-extra",
                     "rerun", "reviewers-guide", "glossary", "errata"]
    assert "root: intro" in toc


def test_only_accepts_stem_or_number():
    nbs = {"01-machine": Path("a"), "02-group-cpus": Path("b")}
    assert build.select_notebooks(nbs, "2") == {"02-group-cpus"}
    assert build.select_notebooks(nbs, "01-machine") == {"01-machine"}
    assert build.select_notebooks(nbs, "notebooks/02-group-cpus.ipynb") == {"02-group-cpus"}
    with pytest.raises(NumalabError):
        build.select_notebooks(nbs, "7")


def test_evidence_page_follows_its_chapter():
    nbs = {"01-machine": Path("a"), "02-group-cpus": Path("b"),
           "02-group-cpus-evidence": Path("c")}
    # a chapter brings its evidence page; the evidence page alone by its stem
    assert build.select_notebooks(nbs, "2") == {"02-group-cpus", "02-group-cpus-evidence"}
    assert build.select_notebooks(nbs, "02-group") == {"02-group-cpus", "02-group-cpus-evidence"}
    assert build.select_notebooks(nbs, "02-group-cpus-evidence") == {"02-group-cpus-evidence"}
    order = build.chapter_order(nbs)
    assert order == ["01-machine", "02-group-cpus", "02-group-cpus-evidence"]
    toc = build.toc_yaml(order)
    assert ("  - file: notebooks/02-group-cpus\n    sections:\n"
            "    - file: notebooks/02-group-cpus-evidence\n") in toc
    # an evidence page whose chapter is absent is listed on its own
    assert "- file: notebooks/03-x-evidence" in build.toc_yaml(
        build.chapter_order(["03-x-evidence"]))


def _requirements(text: str) -> dict[str, str]:
    out = {}
    for req in text:
        m = re.match(r"^\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*$", req)
        out[m.group(1).lower().replace("_", "-")] = m.group(2).replace(" ", "")
    return out


def test_environment_yml_matches_pyproject():
    import tomllib
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = _requirements(project["dependencies"]
                           + project["optional-dependencies"]["test"])
    env_pip = []
    in_pip = False
    for line in (REPO / "environment.yml").read_text().splitlines():
        if re.match(r"^\s*- pip:\s*$", line):
            in_pip = True
            continue
        m = re.match(r"^\s{4,}- (.+?)\s*(#.*)?$", line)
        if in_pip and m and not m.group(1).startswith(("-e", ".")):
            env_pip.append(m.group(1).strip("'\""))
    assert _requirements(env_pip) == wanted


# --------------------------------------------------------------------------
# The quick build of the real book


class _Refs(HTMLParser):
    """Collects every URL a page would load (not links one clicks)."""

    def __init__(self):
        super().__init__()
        self.loads: list[tuple[str, str]] = []
        self.scripts: list[str] = []
        self.chart_divs = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script" and a.get("src"):
            self.loads.append((tag, a["src"]))
            self.scripts.append(a["src"])
        elif tag == "link" and a.get("href"):
            rel = (a.get("rel") or "").lower().split()
            if not set(rel) <= {"next", "prev", "index", "search", "canonical"}:
                self.loads.append((tag, a["href"]))
            elif a["href"].startswith(("http:", "https:", "//")):
                self.loads.append((tag, a["href"]))   # even these: nothing remote
        elif tag in ("img", "iframe", "audio", "video", "source", "embed") and a.get("src"):
            self.loads.append((tag, a["src"]))
        elif tag == "object" and a.get("data"):
            self.loads.append((tag, a["data"]))
        if tag == "div" and "numalab-chart" in (a.get("class") or "").split():
            self.chart_divs += 1


def _pages(html_dir: Path) -> list[Path]:
    """The book's pages (not the theme's template fragments in _static)."""
    return sorted(p for p in html_dir.rglob("*.html")
                  if not {"_static", "_sources"} & set(p.relative_to(html_dir).parts))


def _parse(page: Path) -> _Refs:
    p = _Refs()
    p.feed(page.read_text(encoding="utf-8", errors="replace"))
    return p


@slow
def test_quick_book_builds_every_chapter(quick_book):
    root, status, lines = quick_book
    assert status == 0, "\n".join(lines)
    html = root / "_build" / "html"
    for name in ["index", "intro", "rerun", "reviewers-guide"]:
        assert (html / f"{name}.html").is_file(), name
    for nb in chapter_notebooks():
        assert (html / "notebooks" / f"{nb.stem}.html").is_file(), nb.stem
        assert (root / "book" / "notebooks" / nb.name).is_file(), nb.name
    assert lines[-1].startswith("numalab build: the book is at ")


@slow
def test_no_page_loads_anything_from_the_network(quick_book):
    root, status, _ = quick_book
    assert status == 0
    html = root / "_build" / "html"
    remote = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//)", re.I)
    bad = []
    for page in _pages(html):
        for tag, url in _parse(page).loads:
            if remote.match(url) and not url.startswith("data:"):
                bad.append(f"{page.relative_to(html)}: <{tag}> {url}")
            elif not remote.match(url):
                target = (page.parent / url.split("?")[0].split("#")[0]).resolve()
                if not target.exists():
                    bad.append(f"{page.relative_to(html)}: <{tag}> {url} (missing)")
    for css in (html / "_static").rglob("*.css"):
        text = css.read_text(errors="replace")
        for m in re.finditer(r"(?:url\(\s*['\"]?|@import\s+['\"])((?:https?:)?//[^'\")\s]+)",
                             text):
            bad.append(f"{css.relative_to(html)}: {m.group(1)}")
    assert not bad, "\n".join(bad[:20])


@slow
def test_vega_bundle_shipped_once_and_referenced_locally(quick_book):
    from numalab.render import BUNDLE_NAME
    root, status, _ = quick_book
    assert status == 0
    html = root / "_build" / "html"
    defines = re.compile(rb"window\.vegaEmbed\s*=(?!=)")   # an assignment, not a test
    holders = [p for p in html.rglob("*") if p.is_file() and p.suffix in (".js", ".html")
               and defines.search(p.read_bytes())]
    assert holders == [html / "_static" / BUNDLE_NAME]
    pages = _pages(html)
    for page in pages:
        if 'http-equiv="refresh"' in page.read_text().lower():
            continue    # index.html: jupyter-book's redirect to the first page
        refs = _parse(page)
        bundle = [s for s in refs.scripts if s.split("?")[0].endswith(BUNDLE_NAME)]
        assert len(bundle) == 1, f"{page.name}: {bundle}"
        assert (page.parent / bundle[0].split("?")[0]).resolve() == \
            (html / "_static" / BUNDLE_NAME).resolve()
    # The staged notebooks' charts became divs + inline scripts.
    charts = sum(_parse(p).chart_divs for p in pages)
    executed = (root / "book" / "notebooks").glob("*.ipynb")
    expected = sum(json.dumps(json.loads(p.read_text())).count('class=\\"numalab-chart\\"')
                   for p in executed)
    assert charts == expected


@slow
def test_folded_cells_render_folded_and_links_resolve(quick_book):
    """Cells tagged hide-input show their output with the code behind a
    toggle; glossary and guide links resolve to anchors that exist."""
    root, status, _ = quick_book
    assert status == 0
    html = root / "_build" / "html"
    for nb in chapter_notebooks():
        cells = json.loads(nb.read_text())["cells"]
        n_tagged = sum("hide-input" in c.get("metadata", {}).get("tags", []) for c in cells)
        page = (html / "notebooks" / f"{nb.stem}.html").read_text()
        assert n_tagged and page.count("tag_hide-input") == n_tagged, nb.stem
        assert page.count("Show code cell source") >= n_tagged
        for href in re.findall(r'href="\.\./(glossary|reviewers-guide)\.html#([\w-]+)"', page):
            target = (html / f"{href[0]}.html").read_text()
            assert f'id="{href[1]}"' in target, f"{nb.stem}: {href} has no anchor"
        assert '../glossary.html#term-' in page, f"{nb.stem} links no glossary term"
        assert '../reviewers-guide.html#guide-' in page, f"{nb.stem} does not link the guide"


@slow
def test_guide_gives_the_lab_command_of_each_real_kernel_finding(quick_book):
    """Issue 18: a figure measured on a real kernel in the guide comes with
    the commands that measure it again."""
    from numalab.evidence.findings import collect_findings
    root, status, _ = quick_book
    assert status == 0
    lab = [f for nb in (root / "book" / "notebooks").glob("*.ipynb") for f in collect_findings(nb)
           if f.kind == "finding" and f.label.endswith("-lab")]
    assert len(lab) >= 3
    for f in lab:
        assert "To measure it again: `numalab lab " in f.text, f.text
    page = (root / "_build" / "html" / "reviewers-guide.html").read_text()
    text = re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", "", page)))   # code spans split words
    assert text.count("numalab lab run") >= len(lab)


@slow
def test_unchanged_rebuild_executes_nothing(quick_book):
    from conftest import quick_datasets
    root, status, first = quick_book
    assert status == 0
    index = root / "_build" / "html" / "index.html"
    before = index.stat().st_mtime_ns
    lines: list[str] = []
    t0 = time.monotonic()
    assert build.build(root, data=quick_datasets(), quick=True, say=lines.append) == 0
    elapsed = time.monotonic() - t0
    assert not [ln for ln in lines if ln.endswith(": running")], lines
    assert "html: unchanged (Sphinx skipped)" in lines
    assert index.stat().st_mtime_ns == before
    assert elapsed < 20, f"no-change rebuild took {elapsed:.1f} s"


# --------------------------------------------------------------------------
# Mechanics on a tiny book (tests/data/notebooks)


def _run_cli(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "numalab", "build", *args], cwd=root,
                          capture_output=True, text=True, timeout=timeout)


def _executed_stdout(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream")


def _tree_state(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_ino, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


NODATA = [("code", "seed = 0\nquick = False", ["parameters"]), ("code", "print(seed)", [])]


@pytest.fixture(scope="session")
def tiny_book(tmp_path_factory):
    """A built two-chapter book (the tiny fixture, which reads datasets, and
    ``nodata``, which does not), shared by this module's mechanics tests and
    built once per test run (the first test process that asks builds it under
    a lock; the others wait); each test that changes it works on a copy.
    The build's output is kept in ``.first-build.txt``."""
    from conftest import _exclusive, _shared_dir
    shared = _shared_dir(tmp_path_factory)
    root = shared / "tiny-book"
    with _exclusive(shared / "tiny-book.lock"):
        if not (root / ".first-build.txt").exists():
            shutil.rmtree(root, ignore_errors=True)
            make_project(root, {"tiny": FIXTURES / "tiny.ipynb"}, shared_cache=shared / "parsed")
            _write_nb(root / "notebooks" / "nodata.ipynb", NODATA)
            r = _run_cli(root, "--data", "numa:2 core:2 pu:1")
            assert r.returncode == 0, r.stdout + r.stderr
            (root / ".first-build.txt").write_text(r.stdout)
    return root


def _copy(root: Path, dest: Path) -> Path:
    shutil.copytree(root, dest, symlinks=True,
                    ignore=shutil.ignore_patterns("lock"))
    return dest


@slow
def test_failing_notebook_is_named_and_leaves_the_book(tiny_book, tmp_path):
    root = _copy(tiny_book, tmp_path / "b")
    html, executed = root / "_build" / "html", root / "book" / "notebooks"
    before_html, before_nb = _tree_state(html), _tree_state(executed)
    shutil.copy(FIXTURES / "failing.ipynb", root / "notebooks" / "failing.ipynb")
    r = _run_cli(root, "--data", "numa:2 core:2 pu:1")
    assert r.returncode == 1, r.stdout + r.stderr
    assert ("notebooks/failing.ipynb: cell 3 failed: ValueError: deliberate failure "
            "for the build test") in r.stdout
    assert "notebooks/tiny.ipynb: FAILED" not in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    assert _tree_state(html) == before_html
    assert _tree_state(executed) == before_nb
    assert not list((root / "_build").glob(".staging-*"))
    assert (root / ".numalab-cache" / "failed" / "failing.ipynb").is_file()


@slow
def test_dataset_strings_reach_the_notebook_as_data(tiny_book, tmp_path):
    payload = 'x"; import os; os.system("touch /tmp/pwned")'
    marker = Path("/tmp/pwned")
    existed = marker.exists()
    before = marker.stat().st_mtime_ns if existed else None
    root = _copy(tiny_book, tmp_path / "b")
    # Make the payload an existing path, so build passes it through.
    target = root / payload
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("not a topology\n")
    r = _run_cli(root, "--data", payload)
    assert r.returncode == 0, r.stdout + r.stderr
    got = json.loads(_executed_stdout(root / "book" / "notebooks" / "tiny.ipynb")
                     .strip().splitlines()[0])
    # the notebook runs in notebooks/ and gets the path relative to it (no builder path in the book)
    assert got["datasets"] == [os.path.relpath(target, root / "notebooks")]
    assert (root / "notebooks" / got["datasets"][0]).resolve() == target.resolve()
    if existed:
        assert marker.stat().st_mtime_ns == before
    else:
        assert not marker.exists()


@slow
def test_new_dataset_reruns_only_notebooks_that_read_datasets(tiny_book, tmp_path):
    root = _copy(tiny_book, tmp_path / "b")
    # the shared build ran both notebooks, the one that reads no dataset too
    first = (root / ".first-build.txt").read_text()
    assert "notebooks/tiny.ipynb: running" in first and "notebooks/nodata.ipynb: running" in first
    r = _run_cli(root, "--data", "numa:2 core:2 pu:1", "pack:2 numa:1 core:2 pu:1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "notebooks/tiny.ipynb: running" in r.stdout
    assert "notebooks/nodata.ipynb: cached" in r.stdout
    assert "html: rendering with jupyter-book" in r.stdout
    # --only: just the named chapter runs; the other comes from the cache.
    nodata = root / "notebooks" / "nodata.ipynb"
    nodata.write_text(nodata.read_text().replace("print(seed)", "print(seed + 1)"))
    r = _run_cli(root, "--data", "numa:4 core:1 pu:1", "--only", "tiny")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "notebooks/tiny.ipynb: running" in r.stdout
    assert "notebooks/nodata.ipynb: cached (from an earlier run" in r.stdout


@slow
def test_bad_data_is_one_line_error(tiny_book):
    r = _run_cli(tiny_book, "--data", "/nonexistent/dump.tar.bz2")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "/nonexistent/dump.tar.bz2" in r.stderr


def _interrupt_when(root: Path, line: str, delay: float, *args: str):
    """Start a build, wait for ``line`` on its output, wait ``delay``, then
    Ctrl-C the whole process group (as a terminal would)."""
    # SIGINT's default disposition in the build, as a terminal gives it: a test
    # run started in the background of a non-interactive shell inherits SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler
    proc = subprocess.Popen([sys.executable, "-u", "-m", "numalab", "build", *args], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    seen = []
    for out in proc.stdout:
        seen.append(out)
        if line in out:
            time.sleep(delay)
            os.killpg(proc.pid, signal.SIGINT)
            break
    rest = proc.communicate(timeout=120)[0]
    return proc.returncode, "".join(seen) + rest


@slow
def test_ctrl_c_keeps_the_last_good_book_and_a_consistent_cache(tiny_book, tmp_path):
    root = _copy(tiny_book, tmp_path / "b")
    html = root / "_build" / "html"
    before = _tree_state(html)
    cache = root / ".numalab-cache" / "notebooks"
    entries = sorted(p.name for p in cache.iterdir())
    # 1. during papermill
    _write_nb(root / "notebooks" / "slow.ipynb",
              [("code", "seed = 0\nquick = False", ["parameters"]),
               ("code", "import time\ntime.sleep(120)", [])])
    rc, out = _interrupt_when(root, "notebooks/slow.ipynb: running", 4.0,
                              "--data", "numa:2 core:2 pu:1")
    assert rc == 130, out
    assert _tree_state(html) == before
    assert sorted(p.name for p in cache.iterdir()) == entries
    assert not list((root / ".numalab-cache" / "tmp").glob("run-*"))
    # 2. during Sphinx
    (root / "notebooks" / "slow.ipynb").unlink()
    (root / "book" / "rerun.md").write_text("# Rerun it on your hardware\n\nChanged.\n")
    rc, out = _interrupt_when(root, "html: rendering", 1.5, "--data", "numa:2 core:2 pu:1")
    assert rc == 130, out
    assert _tree_state(html) == before
    assert not list((root / "_build").glob(".staging-*"))
    # and the next build completes from the cache
    r = _run_cli(root, "--data", "numa:2 core:2 pu:1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Changed." in (html / "rerun.html").read_text()


# --------------------------------------------------------------------------
# The renderer (src/numalab/render.py)


def test_module_doctests():
    import doctest
    from numalab import render
    for module in (build, render):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_chart_output_is_div_script_and_spec():
    import altair as alt
    import pandas as pd
    from numalab import render
    render.enable(fallback=False)
    evil = "</script><script>window.pwned=1</script><!--"
    chart = alt.Chart(pd.DataFrame({"name": [evil, "b"], "v": [1, 2]})).mark_bar().encode(
        x="v:Q", y="name:N", tooltip=["name", "v"])
    bundle = chart._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    html = bundle["text/html"]
    assert html.startswith('<div class="numalab-chart" id="numalab-chart-')
    assert html.count("<script") == 1 and html.count("</script>") == 1
    assert "<!--" not in html and "window.pwned" in html   # the data is there, escaped
    assert "http" not in html.replace("https://vega.github.io/schema/", "")
    assert "vegaEmbed" in html
    spec = bundle[render.VEGALITE_MIME_TYPE]
    assert re.fullmatch(r"application/vnd\.vegalite\.v\d+\+json", render.VEGALITE_MIME_TYPE)
    assert spec["mark"]["type"] == "bar"
    # The embedded spec is the same spec.
    m = re.search(r"spec=(\{.*?\}),opt=", html)
    assert json.loads(m.group(1)) == json.loads(json.dumps(spec))


def test_chart_fallback_drawing_is_svg():
    import altair as alt
    import pandas as pd
    from numalab import render
    render.enable()
    chart = alt.Chart(pd.DataFrame({"v": [1, 2]})).mark_point().encode(x="v:Q")
    bundle = chart._repr_mimebundle_()
    bundle = bundle[0] if isinstance(bundle, tuple) else bundle
    assert '<div class="numalab-chart-fallback"><svg' in bundle["text/html"]


def test_javascript_bundle_is_a_classic_script():
    from numalab import render
    js = render.javascript_bundle()
    assert "window.vegaEmbed=" in js
    body = js.split("\n", 1)[1]
    assert body.startswith('(function(){\n"use strict";') and body.rstrip().endswith("})();")


def test_a_kernel_that_dies_while_starting_is_started_again(tmp_path, monkeypatch, capsys):
    """A kernel process that dies before any cell ran (CI saw one of four
    kernels started at the same moment do so) is started again, at most
    KERNEL_START_ATTEMPTS times; a notebook's own failure is not retried."""
    import papermill
    from papermill.exceptions import PapermillExecutionError
    nb = tmp_path / "x.ipynb"
    _write_nb(nb, NODATA)
    out = tmp_path / "out.ipynb"
    calls = []

    def dies_once(src, dst, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("Kernel died before replying to kernel_info")
        shutil.copy(src, dst)
    monkeypatch.setattr(papermill, "execute_notebook", dies_once)
    monkeypatch.setattr(build.time, "sleep", lambda s: None)
    r = build.execute_notebook(nb, out, {}, "notebooks/x.ipynb")
    assert r["ok"] and len(calls) == 2 and out.exists()
    assert "died while starting (attempt 1 of" in capsys.readouterr().err

    calls.clear()
    monkeypatch.setattr(papermill, "execute_notebook", lambda *a, **k: (calls.append(1), (_ for _ in ()).throw(
        RuntimeError("Kernel died before replying to kernel_info")))[0])
    r = build.execute_notebook(nb, out, {}, "notebooks/x.ipynb")
    assert not r["ok"] and len(calls) == build.KERNEL_START_ATTEMPTS
    assert "died while starting, 3 times" in r["message"]

    calls.clear()
    def cell_fails(*a, **k):
        calls.append(1)
        raise PapermillExecutionError(0, 1, "x", "ZeroDivisionError", "division by zero", [])
    monkeypatch.setattr(papermill, "execute_notebook", cell_fails)
    r = build.execute_notebook(nb, out, {}, "notebooks/x.ipynb")
    assert not r["ok"] and len(calls) == 1 and "ZeroDivisionError" in r["message"]
    # any other error of the run is not taken for a failed start
    monkeypatch.setattr(papermill, "execute_notebook",
                        lambda *a, **k: (_ for _ in ()).throw(RuntimeError("bad JSON")))
    with pytest.raises(RuntimeError):
        build.execute_notebook(nb, out, {}, "notebooks/x.ipynb")
