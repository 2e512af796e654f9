"""Pages the build generates from the executed chapters.

* the reviewer's guide: ``book/reviewers-guide.md`` is a template whose
  ``<!-- findings: KEY -->`` markers are replaced by the findings the
  chapters computed in this build (:mod:`numalab.evidence.findings`);
* the front page's provenance: ``book/intro.md`` followed by what this book
  was built from -- the project commit, every dataset with its sha256, the
  kernel code each chapter models and the machine each measured figure comes
  from, all read from the build itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from .errors import NumalabError
from .evidence.findings import Finding, collect_findings, notebook_title, render_guide
from .evidence.findings import _cell     # one Markdown table cell (the guide's tables use it too)

__all__ = ["GUIDE_OWNERS", "guide_page", "provenance_section", "project_commit", "chapter_records"]


def chapter_records(chapters: dict[str, Path]) -> tuple[dict[str, str], list[Finding]]:
    """``(titles, records)`` of the executed chapters, in the given order."""
    titles, records = {}, []
    for stem, path in chapters.items():
        titles[stem] = notebook_title(path)
        records += collect_findings(path, stem)
    return titles, records


#: The chapter that computes each key of the reviewer's guide (its findings
#: may come from the chapter page or its evidence page).
GUIDE_OWNERS = {"machine": "01-machine", "000": "03-probing", "001": "03-probing",
                "002": "05-percpu-ref", "003": "04-idle-masks", "004": "02-group-cpus"}


def guide_page(template: str, chapters: dict[str, Path], expected: list[str]) -> str:
    """The reviewer's guide for this build: one screen per patch (verdict,
    facts with roles, the template's open questions, the commands that check
    the next version) and every finding behind a dropdown
    (:func:`numalab.evidence.findings.render_guide`). ``chapters`` maps page
    stems (chapters and evidence pages) to executed notebooks; ``expected``
    are the chapter stems the book knows; a key whose chapter is absent says
    it was not built."""
    titles, records = chapter_records(chapters)
    missing = {k for k, stem in GUIDE_OWNERS.items() if stem not in chapters}
    return render_guide(template, records, titles, missing, GUIDE_OWNERS)


def project_commit(root: Path) -> str:
    """``"abc123def456"`` (with ``+ uncommitted changes`` when the work tree
    differs), or a sentence saying the book was not built from a git checkout."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=20)
        if head.returncode != 0:
            return "not built from a git checkout"
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown (git could not be run)"
    commit = head.stdout.strip()[:12]
    return commit + (" with uncommitted changes" if dirty.stdout.strip() else "")


def _dataset_rows(datasets: list[str], digest) -> list[str]:
    from .datasets import label
    rows = []
    for d in datasets:
        p = Path(d)
        if p.exists():
            try:
                h = digest(p)[:16]
            except NumalabError:
                h = "unreadable"
            where = p.parent.name + "/" + p.name
        else:
            h, where = "synthetic", d
        rows.append(f"| `{label(d)}` | `{where}` | `{h}` |")
    return rows


def provenance_section(root: Path, chapters: dict[str, Path], datasets: list[str],
                       digest) -> str:
    """The Markdown appended to the front page: what this build was made of."""
    titles, records = chapter_records(chapters)
    lines = ["", "(provenance)=", "## What this build was made from", "",
             f"- **Project commit:** `{project_commit(root)}`."]
    kernels = [r for r in records if r.kind == "kernel"]
    measured = [r for r in records if r.kind == "measured"]
    # Tables, not lists: each entry is a long description, and a reader reads
    # a table's cells apart where list items would run into one sentence.
    if kernels:
        lines += ["- **Kernel code each chapter models:** the table below.", "",
                  "| page | kernel code modelled |", "|---|---|"]
        lines += [f"| {{doc}}`notebooks/{r.chapter}` | {_cell(r.text)} |" for r in kernels]
        lines += [""]
    else:
        lines += ["- **Kernel code modelled:** no chapter of this build recorded it."]
    if measured:
        lines += ["- **Where the measured figures come from:** the table below.", "",
                  "| page | measured on |", "|---|---|"]
        lines += [f"| {{doc}}`notebooks/{r.chapter}` | {_cell(r.text)} |" for r in measured]
        lines += [""]
    else:
        lines += ["- **Measured figures:** no chapter of this build used any."]
    lines += [f"- **Datasets:** {len(datasets)} machines (sha256 of each file, first 16 "
              "hexadecimal digits), in the dropdown below.", "",
              ":::{dropdown} The datasets of this build", "",
              "| label | file | sha256 |", "|---|---|---|", *_dataset_rows(datasets, digest),
              ":::", ""]
    return "\n".join(lines)
