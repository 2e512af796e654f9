"""Results a chapter hands to the reviewer's guide, and the guide built from them.

A chapter calls :func:`finding` right where it computes a result. The call
shows the sentence in the chapter (Markdown, in JupyterLab and in the book)
and carries it, with its key and the label of the section that computes it,
as a JSON output of MIME type :data:`MIME`. The build reads those outputs
from the executed chapters and renders the guide's template
(``book/reviewers-guide.md``), replacing each marker
``<!-- findings: KEY -->`` with the findings of that key, each linked to its
section. A guide built this way carries no figure a chapter did not compute
in the same build, and it changes whenever a chapter is executed again.

The same mechanism carries two more kinds of record for the front page:
which kernel code a chapter models (:func:`kernel_modelled`) and where its
measured figures come from (:func:`measured_on`).

>>> f = Finding(chapter="01-machine", key="machine", label="ch1-compare",
...             text="2 of 3 machines have SMT.")
>>> render_guide("## Machines\\n<!-- findings: machine -->\\n", [f], {"01-machine": "The machine"})
'## Machines\\n- 2 of 3 machines have SMT. ({ref}`The machine <ch1-compare>`)\\n'
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import NumalabError

__all__ = ["MIME", "Finding", "finding", "kernel_modelled", "measured_on", "collect_findings",
           "render_guide", "MARKER", "notebook_title"]

MIME = "application/vnd.numalab.finding+json"
MARKER = re.compile(r"<!--\s*findings:\s*([\w.-]+)\s*-->")
_LABEL = re.compile(r"^[A-Za-z][\w-]*$")


@dataclass(frozen=True)
class Finding:
    """One record: ``kind`` "finding" (a result for the guide), "kernel" (the
    kernel code modelled) or "measured" (where measured figures come from)."""
    chapter: str
    key: str
    label: str
    text: str
    kind: str = "finding"
    values: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in ("finding", "kernel", "measured"):
            raise ValueError(f"kind must be finding, kernel or measured, not {self.kind!r}")
        if not _LABEL.match(self.label):
            raise ValueError(f"label {self.label!r} is not a MyST label")


class _Display:
    """What a notebook shows for a record: Markdown, plus the JSON record."""

    def __init__(self, rec: Finding, markdown: str):
        self.rec, self.markdown = rec, markdown

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/markdown": self.markdown, "text/plain": self.markdown,
                MIME: asdict(self.rec)}


def finding(chapter: str, key: str, label: str, text: str, **values) -> _Display:
    """Show ``text`` (generated from computed values) and hand it to the
    reviewer's guide under ``key`` (a patch id such as "004", or "machine"),
    linked to the section labelled ``label`` (a ``(label)=`` target in the
    chapter). ``values`` are the numbers behind the sentence (kept in the
    record, for tests and tools)."""
    rec = Finding(chapter, key, label, text, "finding",
                  {k: v for k, v in values.items()})
    return _Display(rec, f"**For reviewers:** {text}")


def kernel_modelled(chapter: str, label: str, text: str) -> _Display:
    """Record (and show) which kernel code and version the chapter models."""
    return _Display(Finding(chapter, "kernel", label, text, "kernel"),
                    f"*Kernel code modelled:* {text}")


def measured_on(chapter: str, label: str, text: str) -> _Display:
    """Record (and show) the machine that the chapter's measured figures come from."""
    return _Display(Finding(chapter, "measured", label, text, "measured"),
                    f"*Measured on:* {text}")


def collect_findings(notebook: Path | str, chapter: str | None = None) -> list[Finding]:
    """The records an executed notebook carries, in output order."""
    path = Path(notebook)
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise NumalabError(f"{path}: cannot read the executed notebook ({e})") from None
    out = []
    for cell in nb.get("cells", []):
        for o in cell.get("outputs", []) or []:
            data = o.get("data") or {}
            if MIME in data:
                rec = data[MIME]
                if isinstance(rec, str):
                    rec = json.loads(rec)
                out.append(Finding(**rec))
    return out


def notebook_title(notebook: Path | str) -> str:
    """The first ``# `` heading of a notebook's first Markdown cell."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            for line in "".join(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return Path(notebook).stem


def render_guide(template: str, findings: list[Finding], titles: dict[str, str],
                 missing: set[str] | frozenset = frozenset()) -> str:
    """Replace each ``<!-- findings: KEY -->`` marker of ``template`` with the
    findings of that key, one list item each, linked to its section.

    ``titles`` maps chapter stems to their titles; ``missing`` names keys
    whose chapter was not built (their marker says so). A finding whose key
    has no marker is an error: no computed result is silently left out.
    """
    keys = MARKER.findall(template)
    results = [f for f in findings if f.kind == "finding"]
    orphans = sorted({f.key for f in results} - set(keys))
    if orphans:
        raise NumalabError(f"the reviewer's guide has no marker for findings {orphans} "
                           "(add <!-- findings: KEY --> where they belong)")

    def items(m: re.Match) -> str:
        key = m.group(1)
        mine = [f for f in results if f.key == key]
        if not mine:
            return ("*(the chapter that computes these was not built)*" if key in missing
                    else "*(no computed findings)*")
        return "\n".join(f"- {f.text} ({{ref}}`{titles.get(f.chapter, f.chapter)} <{f.label}>`)"
                         for f in mine)

    return MARKER.sub(items, template)
