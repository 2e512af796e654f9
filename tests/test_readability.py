"""The book reads as knowledge: each chapter page a main line a reader can
finish, its evidence page the rest (numalab.evidence.readability).

The checker's rules are tested on planted notebooks (each rule can fail);
then every executed page of the session's quick book is held to them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import chapter_notebooks
from numalab import build
from numalab.evidence import readability as rd

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = [p for p in chapter_notebooks() if build.evidence_of(p.stem) is None]


def _nb(tmp_path: Path, cells: list[dict], name: str = "09-x.ipynb") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                             "nbformat_minor": 5}))
    return p


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": [text]}


def _code(src: str, markdown: str | None = None, html: str | None = None,
          tags: tuple = ()) -> dict:
    outs = []
    if markdown is not None:
        outs.append({"output_type": "display_data", "metadata": {},
                     "data": {"text/markdown": markdown, "text/plain": markdown}})
    if html is not None:
        outs.append({"output_type": "execute_result", "metadata": {}, "execution_count": 1,
                     "data": {"text/html": html, "text/plain": "table"}})
    return {"cell_type": "code", "metadata": {"tags": list(tags)}, "source": [src],
            "outputs": outs, "execution_count": 1}


def _table(headers: list[str], rows: int) -> str:
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{i}</td>" for _ in headers) + "</tr>"
                   for i in range(rows))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# -- the rules, each shown to fail -------------------------------------------

def test_planted_long_sentence_fails(tmp_path):
    long = ("The gain is " + "very " * 40 + "small.")
    many = "On 3 of 5 machines the gain is 2.5 % at 40 ns."
    ok = "On 41 of 53 machines the map is the same (Linux 7.2, node0)."
    p = _nb(tmp_path, [_code("md(x)", long, tags=("remove-input",)),
                       _code("md(y)", many, tags=("remove-input",)),
                       _code("md(z)", ok, tags=("remove-input",))])
    rep = rd.check_notebook(p)
    assert [c for c, _ in rep.long] == [1, 2]
    assert len(rep.problems) == 2


def test_template_shown_fails_and_remove_input_passes(tmp_path):
    p = _nb(tmp_path, [_code("md(say('x {a}', a=1))", "x 1."),
                       _code("md(say('y {a}', a=1))", "y 1.", tags=("remove-input",)),
                       _code("chart", "What to see.", html="<div>chart</div>")])
    rep = rd.check_notebook(p)
    assert rep.templates_shown == [1]


def test_code_names_in_headers_fail(tmp_path):
    p = _nb(tmp_path, [_code("t", html=_table(["wait_ns", "wait (ns)"], 2)),
                       _md("| gain_pct | machines |\n|---|---|\n| 1 | 2 |\n")])
    rep = rd.check_notebook(p)
    assert rep.bad_headers == [(1, "wait_ns"), (2, "gain_pct")]


def test_long_tables_belong_to_the_evidence_page_or_a_fold(tmp_path):
    cells = [_code("t", html=_table(["machine"], 13)),
             _code("t", html=_table(["machine"], 13), tags=("hide-output",)),
             _code("t", html=_table(["machine"], 12))]
    assert rd.check_notebook(_nb(tmp_path, cells)).long_tables == [(1, 13)]
    assert rd.check_notebook(_nb(tmp_path, cells, "09-x-evidence.ipynb")).problems == []


def test_words_count_prose_not_code_tables_or_dropdowns(tmp_path):
    text = ("# Title\n\nfour words of prose\n\n```c\nint x = 1;\n```\n\n| a | b |\n|---|---|\n"
            "| 1 | 2 |\n\n:::{dropdown} More\nfive hidden words in here\n:::\n")
    rep = rd.check_notebook(_nb(tmp_path, [_md(text), _code("x", "two words",
                                                            tags=("remove-input",))]))
    assert (rep.words, rep.dropdown_words) == (1 + 4 + 2, 5)


def test_page_word_limit_fails_on_a_chapter_page_only(tmp_path):
    cells = [_md("word " * (rd.MAX_PAGE_WORDS + 1))]
    assert rd.check_notebook(_nb(tmp_path, cells)).problems
    assert not rd.check_notebook(_nb(tmp_path, cells, "09-x-evidence.ipynb")).problems


# -- the built page: every word a reader meets --------------------------------

def _page(tmp_path: Path, body: str, name: str = "09-x.html") -> Path:
    p = tmp_path / name
    p.write_text(f"<html><body><nav>menu words</nav><article class='bd-article'>{body}"
                 "</article></body></html>", encoding="utf-8")
    return p


def test_built_page_counts_dropdowns_tables_and_outputs_not_code(tmp_path):
    body = ("<p>one two three</p>"
            "<details><summary>More here</summary><p>four five</p></details>"
            "<table><tr><th>wait (ms)</th></tr><tr><td>6</td></tr></table>"
            "<div class='cell_input'><pre>x = 1 + 2 + 3</pre></div>"
            "<div class='cell_output'><p>Generated words.</p></div>"
            "<script>var hidden = 1;</script>")
    rep = rd.check_html(_page(tmp_path, body))
    # 3 + 2 (summary) + 2 + 3 (table) + 2, not the code, the script or the nav
    assert rep.words == 12 and not rep.problems


def test_built_page_over_the_limit_fails_on_a_chapter_page_only(tmp_path):
    body = "<div class='cell_output'><table><tr><td>" + "n " * rd.MAX_PAGE_WORDS + \
        "</td></tr></table></div><p>One more.</p>"
    assert rd.check_html(_page(tmp_path, body)).problems
    assert not rd.check_html(_page(tmp_path, body, "09-x-evidence.html")).problems
    assert not rd.check_html(_page(tmp_path, body, "reviewers-guide.html")).problems


def test_built_page_long_sentences_fail_hand_written_or_generated(tmp_path):
    long = "The mask " + "really " * 40 + "is wide."
    for body in (f"<p>{long}</p>", f"<ul><li>{long}<ul><li>Short.</li></ul></li></ul>",
                 f"<details><summary>x</summary><p>{long}</p></details>"):
        rep = rd.check_html(_page(tmp_path, body, "09-x-evidence.html"))
        assert len(rep.long) == 1 and "44 words" in rep.problems[0], body
    # numbers: a generated sentence holds at most three; a code span is one word
    many = "<p>On 3 of 5 machines it is 2.5 % at 40 ns.</p>"
    assert rd.check_html(_page(tmp_path, f"<div class='cell_output'>{many}</div>")).long
    assert not rd.check_html(_page(tmp_path, many)).long
    cmd = "<p>Run <code>" + "numalab lab run --nvme 3@0:62 " * 12 + "</code> again.</p>"
    assert not rd.check_html(_page(tmp_path, f"<div class='cell_output'>{cmd}</div>")).long
    # list items and paragraphs run on until a full stop, as a reader reads
    # them: a lead-in and items without full stops are one sentence
    run_on = "<p>Three things:</p><ul>" + "<li>a b c d e f g h i j k l m</li>" * 3 + "</ul>"
    assert rd.check_html(_page(tmp_path, run_on)).long
    stopped = "<p>Three things.</p><ul>" + "<li>A b c d e f g h i j k l m.</li>" * 3 + "</ul>"
    assert not rd.check_html(_page(tmp_path, stopped)).long
    # a heading, a table, a listing and a chart stop a sentence and are not one
    for block in ("<h2>Title words</h2>", "<table><tr><td>" + "c " * 50 + "</td></tr></table>",
                  "<pre>" + "x = 1; " * 30 + "</pre>",
                  "<div class='numalab-chart'><svg><text>" + "7 " * 50 + "</text></svg></div>"):
        body = "<p>" + "a " * 25 + block + "b " * 25 + "end.</p>"
        assert not rd.check_html(_page(tmp_path, body)).long, block
    # a generated sentence is judged on its own words: a hand-written lead-in
    # with numbers beside it does not make it fail, nor it the lead-in
    mixed = ("<p>Layouts 2+2+2+2 and 1+3 are tested.</p>"
             "<div class='cell_output'><p>It held on 3 of 4 machines.</p></div>")
    assert not rd.check_html(_page(tmp_path, mixed)).long


# -- the book -----------------------------------------------------------------

def test_every_chapter_has_an_evidence_page_linked_both_ways():
    for nb in CHAPTERS:
        ev = nb.with_name(nb.stem + build.EVIDENCE_SUFFIX + ".ipynb")
        assert ev.exists(), f"{nb.name} has no evidence page ({ev.name})"
        text = nb.read_text(encoding="utf-8")
        assert ev.stem in text, f"{nb.name} does not link {ev.stem}"
        assert nb.stem in ev.read_text(encoding="utf-8").replace(ev.stem, ""), \
            f"{ev.name} does not link back to {nb.stem}"


def _executed(quick_book) -> list[Path]:
    root, status, lines = quick_book
    assert status == 0, "\n".join(lines[-20:])
    return sorted((root / "book" / "notebooks").glob("*.ipynb"))


def test_every_page_meets_the_limits(quick_book):
    reports = [rd.check_notebook(p) for p in _executed(quick_book)]
    assert reports
    bad = [r.summary() for r in reports if r.problems]
    assert not bad, "\n".join(bad)


def test_every_built_page_meets_the_limits(quick_book):
    """The pages as a reader gets them: each chapter page within the word
    limit counting dropdowns, tables and outputs; no sentence over the limit
    on any page of the book."""
    root = _executed(quick_book)[0].parents[2]
    pages = sorted((root / "_build" / "html" / "notebooks").glob("*.html"))
    pages += [root / "_build" / "html" / f"{p}.html"
              for p in ("intro", "reviewers-guide", "rerun", "glossary", "errata")]
    assert len([p for p in pages if rd.is_chapter_page(p.stem)]) == len(CHAPTERS)
    bad = [r.summary() for r in map(rd.check_html, pages) if r.problems]
    assert not bad, "\n".join(bad)


def test_first_screen_gives_the_measured_answer(quick_book):
    """Before its first section, each chapter page shows a generated answer."""
    for p in _executed(quick_book):
        if build.evidence_of(p.stem) is not None:
            continue
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        answered = False
        for c in cells:
            src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            if c["cell_type"] == "markdown" and re.search(r"^## ", src, flags=re.M):
                break
            if c["cell_type"] == "code" and any("text/markdown" in o.get("data", {})
                                                for o in c.get("outputs", [])):
                answered = True
        assert answered, f"{p.name}: no generated answer before the first section"


def test_module_doctests():
    """The examples in the checker's and the findings' docstrings hold."""
    import doctest
    from numalab.evidence import findings
    for module in (rd, findings):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__
