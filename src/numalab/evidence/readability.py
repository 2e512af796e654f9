"""Can a reader finish a chapter page? Limits checked on executed notebooks.

The book has two layers per chapter: the chapter page (the main line) and its
evidence page (``STEM-evidence.ipynb``: sweeps, refits, diagnostics). The
limits a chapter page must meet (the evidence page is exempt from the first):

* :data:`MAX_PAGE_WORDS` words of prose: markdown cells and generated
  Markdown, without code, tables, headings' anchors, and what sits in a
  collapsed dropdown (``:::{dropdown}`` blocks) -- those are counted apart;
* a generated sentence (Markdown output of a code cell) says one thing: at
  most :data:`MAX_SENTENCE_WORDS` words and :data:`MAX_SENTENCE_NUMBERS`
  numbers (a number inside a code span, a version after "Linux"/"v", or a
  number glued to a name such as ``node0`` does not count);
* a code cell whose only output is Markdown shows its sentence, not its
  template: it carries the ``remove-input`` tag;
* a table's column headers are words, not code names (no underscores), and
  a chapter page shows no table longer than :data:`MAX_MAIN_ROWS` rows
  outside a dropdown or a folded output (``hide-output``).

>>> sentences("One. Two words here.\\n- a list item")
['One.', 'Two words here.', 'a list item']
>>> sentences("It ended. \u201cThe guest\u201d has 16 vCPUs.")
['It ended.', '\u201cThe guest\u201d has 16 vCPUs.']
>>> count_numbers("on 41 of 53 machines, node0, `x = 5`, Linux 7.2, v12, 4.84x")
3
>>> long_sentences("The gain is 1 % on 2 of 3 machines at 4 ns.")
['The gain is 1 % on 2 of 3 machines at 4 ns.']

The same limits are also held on the **built page** as a reader gets it
(:func:`check_html`, on ``_build/html/notebooks/*.html``): there every word
of the article counts -- prose, dropdowns and folded outputs, tables, charts'
text, listings shown as prose -- except the source of code cells, and every
sentence, hand-written or generated, is at most :data:`MAX_SENTENCE_WORDS`
words (generated ones, in a cell's output, also at most
:data:`MAX_SENTENCE_NUMBERS` numbers). A sentence there runs as a reader
reads it (:func:`reading_runs`): across list items, paragraphs and cells
until a full stop; only headings, tables, listings and charts stop it. The notebook count is the author's
quick view; the built count is the one the limits are about.
"""

from __future__ import annotations

import html
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MAX_PAGE_WORDS", "MAX_SENTENCE_WORDS", "MAX_SENTENCE_NUMBERS", "MAX_MAIN_ROWS",
           "Report", "check_notebook", "sentences", "count_numbers", "long_sentences",
           "prose_words", "HtmlReport", "check_html", "page_words", "reading_runs", "main"]

MAX_PAGE_WORDS = 3500
MAX_SENTENCE_WORDS = 40
MAX_SENTENCE_NUMBERS = 3
MAX_MAIN_ROWS = 12

_FENCE = re.compile(r"^(`{3,}|:{3,})")
_CODE = re.compile(r"`[^`]*`")
_LINK = re.compile(r"\]\([^)]*\)")
_ROLE = re.compile(r"\{[a-z-]+\}`([^`<]*?)(?:\s*<[^>]+>)?`")
_TAG = re.compile(r"<[^>]+>")
_NUMBER = re.compile(r"(?<![\w.\-/])[-+\u2212]?\d+(?:[.,]\d+)*")
_VERSION = re.compile(r"\b(?:Linux|v|since|kernel|kernels)\s*\d+(?:\.\d+)*")
_SPLIT = re.compile(r"(?<=[.!?])[\")\]*_\u201d\u2019\x01\x02]*\s+(?=[\"*_\u201c\u2018\x01\x02]*[A-Z0-9(])")
_ABBREV = re.compile(r"\b(?:e\.g|i\.e|cf|vs|Fig|et al|approx)\.\s", re.I)


def _strip(text: str) -> str:
    """Prose without code spans, link targets, role syntax and HTML tags."""
    text = _ROLE.sub(r"\1", text)
    text = _CODE.sub("CODE", text)
    text = _LINK.sub("]", text)
    return html.unescape(_TAG.sub(" ", text))


def count_numbers(sentence: str) -> int:
    """Numbers a reader must hold in a sentence (see the module docstring)."""
    text = _VERSION.sub("V", _strip(sentence))
    return len(_NUMBER.findall(text))


def _prose_blocks(markdown: str) -> tuple[list[str], list[str], list[list[str]]]:
    """``(main lines, dropdown lines, tables)`` of a Markdown text: code
    fences dropped, the prose of directives kept, what a dropdown holds
    apart, tables (lists of rows) apart; a table in a dropdown is left out.

    >>> _prose_blocks(":::{dropdown} More\\nhidden\\n:::\\nshown\\n```python\\nx=1\\n```")
    (['shown'], ['hidden'], [])
    """
    main, dropped, tables = [], [], []
    stack: list[tuple[str, int, str]] = []     # (fence char, length, code|prose|dropdown)
    table: list[str] = []

    def in_dropdown():
        return any(k == "dropdown" for _, _, k in stack)

    def flush():
        nonlocal table
        if table and not in_dropdown():
            tables.append(table)
        table = []

    for line in markdown.splitlines():
        s = line.strip()
        m = _FENCE.match(s)
        if m:
            marker, rest = m.group(1), s[len(m.group(1)):].strip()
            top = stack[-1] if stack else None
            if top and top[0] == marker[0] and len(marker) >= top[1] and not rest:
                flush()
                stack.pop()
                continue
            if not (top and top[2] == "code"):
                flush()
                if rest.startswith("{dropdown}"):
                    kind = "dropdown"
                elif rest.startswith("{") and not re.match(r"\{(code|code-block|code-cell|"
                                                          r"literalinclude|math|raw)\}", rest):
                    kind = "prose"
                elif marker[0] == ":":
                    kind = "prose"
                else:
                    kind = "code"
                stack.append((marker[0], len(marker), kind))
                continue
        if stack and stack[-1][2] == "code":
            continue
        if stack and re.match(r"^:[a-z-]+:", s):           # a directive's option
            if s.startswith(":class:") and "dropdown" in s:
                stack[-1] = (stack[-1][0], stack[-1][1], "dropdown")
            continue
        if s.startswith("|"):
            table.append(s)
            continue
        flush()
        if not s or re.match(r"^\(\S+\)=$", s):
            continue
        s = re.sub(r"^(#+|>|[-*+]|\d+\.)\s+", "", s)
        (dropped if in_dropdown() else main).append(s)
    flush()
    return main, dropped, tables


def prose_words(markdown: str) -> tuple[int, int]:
    """``(main words, dropdown words)`` of a Markdown text."""
    main, dropped, _ = _prose_blocks(markdown)
    def n(lines):
        return sum(len(_strip(l).split()) for l in lines)
    return n(main), n(dropped)


def sentences(markdown: str) -> list[str]:
    """The sentences of a generated Markdown text: list items and lines on
    their own, tables and code left out."""
    main, dropped, _ = _prose_blocks(markdown)
    out = []
    for line in main + dropped:
        protected = _ABBREV.sub(lambda m: m.group(0).replace(". ", "\u2024 "), line)
        for s in _SPLIT.split(protected):
            s = s.replace("\u2024 ", ". ").strip()
            if s:
                out.append(s)
    return out


def long_sentences(markdown: str) -> list[str]:
    """The generated sentences over the word or number limit."""
    return [s for s in sentences(markdown)
            if len(_strip(s).split()) > MAX_SENTENCE_WORDS
            or count_numbers(s) > MAX_SENTENCE_NUMBERS]


def _html_tables(text: str) -> list[tuple[list[str], int]]:
    """``(headers, body rows)`` of each HTML table."""
    out = []
    for t in re.findall(r"<table.*?</table>", text, flags=re.S | re.I):
        heads = [html.unescape(_TAG.sub("", h)).strip()
                 for h in re.findall(r"<th[^>]*>(.*?)</th>", t, flags=re.S | re.I)]
        body = re.search(r"<tbody>(.*?)</tbody>", t, flags=re.S | re.I)
        rows = len(re.findall(r"<tr", body.group(1) if body else t, flags=re.I))
        out.append((heads, rows))
    return out


def _md_table(rows: list[str]) -> tuple[list[str], int]:
    head = [c.strip() for c in rows[0].strip().strip("|").split("|")]
    body = [r for r in rows[2:]] if len(rows) > 1 and set(rows[1].replace("|", "").strip()) <= set("-: ") else rows[1:]
    return head, len(body)


def _bad_header(h: str) -> bool:
    h = _CODE.sub("", h)
    return "_" in h.replace("\\_", "_") and not h.startswith("Unnamed")


@dataclass
class Report:
    """What :func:`check_notebook` found on one executed notebook."""
    path: str
    evidence_page: bool
    words: int = 0
    dropdown_words: int = 0
    long: list[tuple[int, str]] = field(default_factory=list)
    templates_shown: list[int] = field(default_factory=list)
    bad_headers: list[tuple[int, str]] = field(default_factory=list)
    long_tables: list[tuple[int, int]] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        out = []
        if not self.evidence_page and self.words > MAX_PAGE_WORDS:
            out.append(f"{self.words} words of prose (at most {MAX_PAGE_WORDS} on a chapter page)")
        out += [f"cell {c}: generated sentence over {MAX_SENTENCE_WORDS} words or "
                f"{MAX_SENTENCE_NUMBERS} numbers: {s[:160]}" for c, s in self.long]
        out += [f"cell {c}: shows the code of a cell whose only output is Markdown "
                "(tag it remove-input)" for c in self.templates_shown]
        out += [f"cell {c}: column header {h!r} is a code name (write words with units)"
                for c, h in self.bad_headers]
        if not self.evidence_page:
            out += [f"cell {c}: a table of {n} rows on a chapter page (at most {MAX_MAIN_ROWS}; "
                    "move it to the evidence page, a dropdown or a folded output)"
                    for c, n in self.long_tables]
        return out

    def summary(self) -> str:
        kind = "evidence page" if self.evidence_page else "chapter page"
        head = (f"{self.path} ({kind}): {self.words} words of prose, "
                f"{self.dropdown_words} more in dropdowns")
        probs = self.problems
        return head + ("; meets the limits" if not probs else
                       f"; {len(probs)} problems:\n  " + "\n  ".join(probs))


def _text(x) -> str:
    return "".join(x) if isinstance(x, list) else (x or "")


def check_notebook(path: Path | str) -> Report:
    """Check one executed notebook against the limits of this module."""
    path = Path(path)
    nb = json.loads(path.read_text(encoding="utf-8"))
    rep = Report(str(path), path.stem.endswith("-evidence"))
    for i, cell in enumerate(nb.get("cells", []), start=1):
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            src = _text(cell["source"])
            w, d = prose_words(src)
            rep.words += w
            rep.dropdown_words += d
            for t in _prose_blocks(src)[2]:
                head, n = _md_table(t)
                rep.bad_headers += [(i, h) for h in head if _bad_header(h)]
                if n > MAX_MAIN_ROWS:
                    rep.long_tables.append((i, n))
            continue
        if cell["cell_type"] != "code":
            continue
        outputs = [o for o in cell.get("outputs", []) if o.get("output_type") in
                   ("display_data", "execute_result")]
        folded = "hide-output" in tags or "remove-output" in tags
        only_md = bool(outputs) and all("text/markdown" in o.get("data", {}) for o in outputs) \
            and not any(o.get("output_type") == "stream" for o in cell.get("outputs", []))
        if only_md and not ({"remove-input", "remove-cell"} & tags) and _text(cell["source"]).strip():
            rep.templates_shown.append(i)
        if "remove-output" in tags or "remove-cell" in tags:
            continue
        for o in outputs:
            data = o.get("data", {})
            if "text/markdown" in data:
                text = _text(data["text/markdown"])
                w, d = prose_words(text)
                if folded:
                    rep.dropdown_words += w + d
                else:
                    rep.words += w
                    rep.dropdown_words += d
                rep.long += [(i, s) for s in long_sentences(text)]
                for t in _prose_blocks(text)[2]:
                    head, n = _md_table(t)
                    rep.bad_headers += [(i, h) for h in head if _bad_header(h)]
                    if n > MAX_MAIN_ROWS and not folded:
                        rep.long_tables.append((i, n))
            elif "text/html" in data:
                for head, n in _html_tables(_text(data["text/html"])):
                    rep.bad_headers += [(i, h) for h in head if _bad_header(h)]
                    if n > MAX_MAIN_ROWS and not folded:
                        rep.long_tables.append((i, n))
    return rep


# -- the built page ------------------------------------------------------------

@dataclass
class HtmlReport:
    """What :func:`check_html` found on one built page."""
    path: str
    chapter_page: bool
    words: int = 0
    long: list[tuple[str, str]] = field(default_factory=list)   # (why, sentence)

    @property
    def problems(self) -> list[str]:
        out = []
        if self.chapter_page and self.words > MAX_PAGE_WORDS:
            out.append(f"{self.words} words on the built page (at most {MAX_PAGE_WORDS} "
                       "on a chapter page)")
        out += [f"{why}: {s[:160]}" for why, s in self.long]
        return out

    def summary(self) -> str:
        kind = "chapter page" if self.chapter_page else "page"
        head = f"{self.path} (built {kind}): {self.words} words"
        probs = self.problems
        return head + ("; meets the limits" if not probs else
                       f"; {len(probs)} problems:\n  " + "\n  ".join(probs))


def _article(html_text: str):
    """The article of a built page without what a reader never reads as
    text: scripts, styles, the source of code cells, headings' anchors."""
    import bs4
    soup = bs4.BeautifulSoup(html_text, "html.parser")
    art = soup.find("article") or soup.body or soup
    for t in art.find_all(["script", "style", "noscript"]):
        t.decompose()
    for t in art.find_all(class_=["cell_input", "headerlink"]):
        t.decompose()
    return art


def page_words(html_text: str) -> int:
    """Words a reader meets on a built page (see the module docstring).

    >>> page_words('<article><p>Two words</p><div class="cell_input"><pre>x = 1</pre></div>'
    ...            '<details><summary>More</summary><table><tr><td>a b</td></tr></table>'
    ...            '</details></article>')
    5
    """
    return len(_article(html_text).get_text(" ").split())


def is_chapter_page(stem: str) -> bool:
    """A chapter's main page (``0N-slug``), not its evidence page nor another
    page of the book.

    >>> [is_chapter_page(s) for s in ("02-group-cpus", "02-group-cpus-evidence", "intro")]
    [True, False, False]
    """
    return bool(re.match(r"\d\d-", stem)) and not stem.endswith("-evidence")


# What stops a sentence on a built page: a heading, a dropdown's title, a
# caption ends one and is one; a table, a listing, a chart, an image, a
# formula and a fold's "Show code cell source" label are not prose and end
# the sentence before them. Nothing else does: list items, paragraphs and
# cells run on until a full stop, as a reader reads them (a lead-in "Three
# things:" and three items without full stops are one sentence).
_RUN_OWN = ("h1", "h2", "h3", "h4", "h5", "h6", "summary", "caption", "figcaption", "dt")
_RUN_SKIP = ("table", "pre", "svg", "img", "math", "button", "script", "style", "noscript")
_RUN_SKIP_CLASS = ("numalab-chart", "math", "cell_input", "headerlink", "vega-embed")
_TABLE_SIZE = re.compile(r"^\d+ rows × \d+ columns$")     # pandas' footer under a long table


def reading_runs(art) -> list[tuple[str, bool]]:
    """``(text, generated)`` runs of a built page's article, each to be split
    into sentences: a run ends where a heading, a dropdown title or a caption
    starts or ends, and where a table, a listing, a chart, a formula or a
    fold label stands (those are left out); an inline code span reads as one
    word. ``generated`` is true when part of the run is a cell's output.

    >>> import bs4
    >>> art = bs4.BeautifulSoup("<article><h2>Title</h2><p>Three things:</p><ul>"
    ...     "<li>one</li><li>two</li></ul><pre>x = 1</pre><p>After <code>f(x)</code>.</p>"
    ...     "</article>", "html.parser").article
    >>> reading_runs(art)
    [('Title', False), ('Three things: one two', False), ('After CODE .', False)]

    A run's generated text is marked: ``\x01`` where it starts and ``\x02``
    where it ends (:func:`_sentences_of_run` reads the marks).
    """
    import bs4
    runs: list[tuple[str, bool]] = []
    buf: list[str] = []
    gen = [False]

    def flush():
        text = " ".join("".join(buf).split())
        if text:
            runs.append((text, gen[0]))
        buf.clear()
        gen[0] = False

    def walk(node, generated):
        for ch in node.children:
            if isinstance(ch, bs4.Comment):
                continue
            if isinstance(ch, bs4.NavigableString):
                if str(ch).strip() and generated:
                    gen[0] = True
                    t = str(ch)
                    core = t.strip()
                    lead = t[:len(t) - len(t.lstrip())]
                    buf.append(lead + "\x01" + core + "\x02" + t[len(lead) + len(core):])
                else:
                    buf.append(str(ch))
                continue
            if not isinstance(ch, bs4.Tag):
                continue
            classes = set(ch.get("class") or ())
            if ch.name in _RUN_SKIP or classes & set(_RUN_SKIP_CLASS) or (
                    ch.name == "summary" and ch.get("aria-label") == "Toggle hidden content") or (
                    ch.name == "p" and _TABLE_SIZE.match(ch.get_text().strip())):
                flush()
                continue
            g = generated or "cell_output" in classes
            if ch.name == "code":
                if ch.get_text().strip():
                    gen[0] = gen[0] or g
                    buf.append(" \x01CODE\x02 " if g else " CODE ")
                continue
            if ch.name in _RUN_OWN:
                flush()
                walk(ch, g)
                flush()
                continue
            if ch.name in ("p", "li", "div", "dd", "br", "blockquote", "section", "details"):
                buf.append(" ")
            walk(ch, g)
    walk(art, False)
    flush()
    return [(t if g else t.replace("\x01", "").replace("\x02", ""), g) for t, g in runs]


def _sentences_of_run(run: str) -> list[tuple[str, bool]]:
    """``(sentence, generated)`` of one run of :func:`reading_runs`: a
    sentence is generated when any of its words came from a cell's output.

    >>> _sentences_of_run("Hand-written lead. It has \x01one and two\x02 in it. Last one.")
    [('Hand-written lead.', False), ('It has one and two in it.', True), ('Last one.', False)]
    """
    protected = _ABBREV.sub(lambda m: m.group(0).replace(". ", "\u2024 "), run)
    out, inside = [], False
    for s in _SPLIT.split(protected):
        generated = inside or "\x01" in s or "\x02" in s
        marks = [c for c in s if c in "\x01\x02"]
        if marks:
            inside = marks[-1] == "\x01"
        s = s.replace("\u2024 ", ". ").replace("\x01", "").replace("\x02", "")
        s = " ".join(s.split())
        if s:
            out.append((s, generated))
    return out


def check_html(path: Path | str) -> HtmlReport:
    """Check one built page (HTML) against the limits of this module: the
    page's words (on a chapter page) and every sentence, read as
    :func:`reading_runs` reads the page."""
    path = Path(path)
    art = _article(path.read_text(encoding="utf-8"))
    rep = HtmlReport(str(path), is_chapter_page(path.stem),
                     words=len(art.get_text(" ").split()))
    for run, _ in reading_runs(art):
        for s, generated in _sentences_of_run(run):
            n, k = len(s.split()), count_numbers(s)
            if n > MAX_SENTENCE_WORDS:
                rep.long.append((f"a sentence of {n} words", s))
            elif generated and k > MAX_SENTENCE_NUMBERS:
                rep.long.append((f"a generated sentence with {k} numbers", s))
    return rep


def main(argv: list[str] | None = None) -> int:
    """``python -m numalab.evidence.readability [PAGE.ipynb|PAGE.html ...]``
    (default: every executed notebook under ``book/notebooks`` and every
    built page under ``_build/html/notebooks``); exit status 1 when a page
    breaks a limit."""
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or (sorted(Path("book/notebooks").glob("*.ipynb"))
                                        + sorted(Path("_build/html/notebooks").glob("*.html")))
    bad = 0
    for p in paths:
        rep = check_html(p) if p.suffix == ".html" else check_notebook(p)
        print(rep.summary())
        bad += bool(rep.problems)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
