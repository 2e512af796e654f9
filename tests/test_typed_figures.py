"""No result figure typed by hand in the book's Markdown.

Result prose is generated from computed values (numalab.evidence); the
hand-written Markdown of the chapters and of book/*.md explains mechanisms.
This test scans all of it (numalab.evidence.typed) and fails on any figure
that is not on the allow-list below. The allow-list holds constants, never
results: hardware and kernel constants used to explain a mechanism, and the
patches' published figures quoted as such (each checked against the
package's table of published figures, numalab.published).
"""

import re
from pathlib import Path

import pytest

from numalab import published
from numalab.evidence.typed import scan_markdown_file, scan_notebook

REPO = Path(__file__).resolve().parents[1]

# Chapters whose own issue reworks their prose: listed here until that issue
# lands, then removed (one line each, nothing else may be added).
KNOWN_EXCEPTIONS = {
}

# (file, figure) -> why it is a constant. Figures quoted from a patch are
# listed under PUBLISHED_QUOTES instead, with the patch that published them.
CONSTANTS = {
    ("notebooks/01-machine.ipynb", "2.1"):
        "explains the SLIT convention: a distance of 21 reads as 2.1 times the local 10",
}

# (file, figure) -> the patch id whose published figure the text quotes.
PUBLISHED_QUOTES = {
    ("book/intro.md", "35 %"): "001",
    ("book/intro.md", "4 MB"): "002",
    ("book/intro.md", "45.31 GB/s"): "002",
    ("book/intro.md", "3.17"): "002",
    ("book/intro.md", "48.67 GB/s"): "002",
    ("book/intro.md", "0.01"): "002",
    ("book/intro.md", "34.44 %"): "002",
    ("book/intro.md", "87.13 %"): "002",
    ("book/intro.md", "5.38 %"): "002",
    ("book/intro.md", "9.73 %"): "002",
    ("book/intro.md", "52.431 s"): "003",
    ("book/intro.md", "50.342 s"): "003",
    ("book/intro.md", "4 %"): "003",
    ("book/intro.md", "1.5"): "003",
    ("book/reviewers-guide.md", "1.5"): "003",
    ("book/intro.md", "11 %"): "004",
    ("book/intro.md", "5 %"): "004",
    ("book/intro.md", "12 %"): "004",
    ("book/intro.md", "10 %"): "004",
}

def pages():
    return sorted(REPO.glob("notebooks/*.ipynb")) + sorted(REPO.glob("book/*.md"))


def hits_of(path):
    return scan_notebook(path) if path.suffix == ".ipynb" else scan_markdown_file(path)


def _numbers(x, out):
    if isinstance(x, dict):
        for v in x.values():
            _numbers(v, out)
    elif isinstance(x, list):
        for v in x:
            _numbers(v, out)
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        out.add(round(abs(float(x)), 6))
    return out


def test_published_quotes_are_in_the_published_table():
    """A figure allowed as 'published' must be one: its number appears in the
    package's table for that patch (fractions count as percentages)."""
    table = published.table()
    for (page, fig), pid in PUBLISHED_QUOTES.items():
        num = float(re.sub(r"[^\d.]", "", fig))
        section = {"001": table["probe"]["001"], "002": table["devmem"],
                   "003": table["idle"], "004": table["irq"]}[pid]
        numbers = _numbers([section, table["headlines"].get(pid, {})], set())
        assert (round(num, 6) in numbers or round(num / 100, 6) in numbers), (page, fig, pid)


@pytest.mark.parametrize("path", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_typed_result_figures(path):
    rel = str(path.relative_to(REPO))
    if rel in KNOWN_EXCEPTIONS:
        pytest.xfail(f"known exception until {KNOWN_EXCEPTIONS[rel]}")
    bad = [h for h in hits_of(path)
           if (rel, h.figure) not in CONSTANTS and (rel, h.figure) not in PUBLISHED_QUOTES]
    assert not bad, "result figures typed by hand (generate them from computed values):\n" + \
        "\n".join(f"  {rel} cell {h.cell}: {h.figure!r} in: {h.line}" for h in bad)


def test_allow_list_has_no_stale_entries():
    found = {(str(p.relative_to(REPO)), h.figure) for p in pages() for h in hits_of(p)}
    stale = (set(CONSTANTS) | set(PUBLISHED_QUOTES)) - found
    assert not stale, f"allow-list entries no longer in the text: {sorted(stale)}"


def test_no_chapter_is_an_exception_any_more():
    """The chapter reworks (issues 14-17) have landed: every chapter passes,
    and no exception may be added back."""
    assert KNOWN_EXCEPTIONS == {}, f"no exception may be added: {sorted(KNOWN_EXCEPTIONS)}"


def test_scanner_catches_what_it_must():
    from numalab.evidence.typed import scan_text
    text = ("The model gives 3.77 % here, 42.25 ns there, 48.8 GB/s, 4× more,\n"
            "and 16.1 ms of CPU.")
    assert [h.figure for h in scan_text(text)] == ["3.77 %", "42.25 ns", "48.8 GB/s", "4×",
                                                   "16.1 ms"]
