"""Find result figures typed by hand in Markdown.

Result prose is generated from computed values; hand-written Markdown only
explains mechanisms. This scanner finds what looks like a result figure in
hand-written text: a decimal number, a percentage, or a number with a unit
(ms, µs, ns, s, GB/s, M/s, ×), outside code spans, code blocks, links,
headings, kernel versions and commit ids. The test suite runs it over every
notebook's Markdown cells and every ``book/*.md`` page against a commented
allow-list of constants (tests/test_typed_figures.py).

>>> [h.figure for h in scan_text("The gain is 3.8 % on `numa:2`, Linux 6.15 (abc123def456).")]
['3.8 %']
>>> scan_text("A cache line is 64 bytes; see [v1](https://x/1.5).")
[]
>>> [h.figure for h in scan_text(":::{dropdown} More\\n:class: x\\nfolded, still 2.5 ms\\n:::")]
['2.5 ms']
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Hit", "scan_text", "scan_notebook", "scan_markdown_file", "FIGURE"]

FIGURE = re.compile(
    r"(?<![\w.`/\-])[-+−]?\d+(?:[.,]\d+)*(?:\.\d+)?\s?(?:%|ms\b|µs\b|us\b|ns\b|s\b|GB/s|Gbit/s|"
    r"Gbps\b|M/s|MB\b|GiB\b|MiB\b|KiB\b|×|x\b)"
    r"|(?<![\w.`/\-])\d+\.\d+(?![\w.])")

# What is removed before scanning: fenced code (a ::: directive's prose, such as
# a dropdown's, is scanned: folding a figure does not make it a constant), inline code, links (text kept
# only when it has no digits), MyST roles and targets, headings, HTML comments,
# kernel versions and commit ids.
_STRIP = [
    (re.compile(r"^(```|~~~).*?^\1\s*$", re.S | re.M), " "),
    (re.compile(r"^\s*:{3,}.*$|^:[a-z-]+:.*$", re.M), " "),   # directive lines, not their prose
    (re.compile(r"`[^`\n]*`"), " "),
    (re.compile(r"\{[\w:-]+\}`[^`]*`"), " "),
    (re.compile(r"!?\[([^\]]*)\]\([^)]*\)"), " "),
    (re.compile(r"<https?://[^>]*>"), " "),
    (re.compile(r"https?://\S+"), " "),
    (re.compile(r"<!--.*?-->", re.S), " "),
    (re.compile(r"^\s*#.*$", re.M), " "),
    (re.compile(r"^\(\S+\)=\s*$", re.M), " "),
    (re.compile(r"\b(?:Linux|kernel|kernels|v|version|since|release|Python|QEMU|hwloc)"
                r"\s?\d+\.\d+(?:\.\d+)?\+?", re.I), " "),
    (re.compile(r"\b\d+\.\d+(?:\.\d+)?-rc\d+\b"), " "),
    (re.compile(r"\b[0-9a-f]{12,40}\b"), " "),
]


@dataclass(frozen=True)
class Hit:
    """A figure found: where (file, cell index or -1 for a page), the figure
    and its line."""
    path: str
    cell: int
    figure: str
    line: str


def _clean(text: str) -> str:
    for pat, rep in _STRIP:
        text = pat.sub(rep, text)
    return text


def scan_text(text: str, path: str = "", cell: int = -1) -> list[Hit]:
    """The figures in a piece of Markdown (see the module docstring)."""
    hits = []
    for line in _clean(text).splitlines():
        for m in FIGURE.finditer(line):
            hits.append(Hit(path, cell, m.group(0).strip(), line.strip()))
    return hits


def scan_notebook(path: Path | str) -> list[Hit]:
    """The figures in a notebook's Markdown cells (cells counted from 1)."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    out = []
    for i, c in enumerate(nb.get("cells", []), start=1):
        if c.get("cell_type") == "markdown":
            out += scan_text("".join(c.get("source", "")), str(path), i)
    return out


def scan_markdown_file(path: Path | str) -> list[Hit]:
    """The figures in a Markdown page."""
    return scan_text(Path(path).read_text(encoding="utf-8"), str(path))
