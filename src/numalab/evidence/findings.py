"""Results a chapter hands to the reviewer's guide, and the guide built from them.

A chapter calls :func:`finding` right where it computes a result. The call
shows the sentence in the chapter (Markdown, in JupyterLab and in the book)
and carries it, with its key and the label of the section that computes it,
as a JSON output of MIME type :data:`MIME`. The build reads those outputs
from the executed chapters and evidence pages and renders the guide's
template (``book/reviewers-guide.md``). A guide built this way carries no
figure a chapter did not compute in the same build, and it changes whenever
a chapter is executed again.

The guide gives each patch (a *key*: "000" ... "004", or "machine") one
screen, filled from four markers of the template:

* ``<!-- verdict: KEY -->`` -- one or two sentences: the findings its
  chapter marks ``verdict=True``; without one, the first sentence of each
  finding measured on a real kernel in the lab (label ``*-lab``), else of
  the first measured or published fact, else of the first finding;
* ``<!-- facts: KEY -->`` -- the other measured and published facts as a
  table: role | fact (its first two sentences) | where (the section that
  computes it);
* ``<!-- commands: KEY -->`` -- the commands that check the next version:
  ``numalab build --only N`` for the chapter, then every command the
  findings give under "To measure it again:" (the lab's kernel builds and
  boots), once each;
* ``<!-- findings: KEY -->`` -- every finding of the key with its roles,
  folded in a dropdown. Every key a chapter records must have this marker:
  no computed result is silently left out.

A finding's roles are the ``role=`` its chapter passes ("measured",
"published", "fitted", "predicted", "assumed", "port": computed by the
book's port of the kernel code, or "model output": computed by a model that
failed its test, with its qualifier in parentheses; several joined by commas). Without one they
are read from the finding (:func:`finding_roles`): measured when its label
ends in ``-lab``, and the role tags of its figures -- the book writes a
figure's role in parentheses -- plus a fit, a held-out test or a real kernel
named anywhere. Nothing here depends on a particular chapter's wording;
a chapter that wants its role shown exactly passes ``role=``.

The same mechanism carries two more kinds of record for the front page:
which kernel code a chapter models (:func:`kernel_modelled`) and where its
measured figures come from (:func:`measured_on`).

>>> f = Finding(chapter="01-machine", key="machine", label="ch1-compare",
...             text="2 of 3 machines have SMT (measured).")
>>> print(render_guide("<!-- verdict: machine -->\\n<!-- findings: machine -->", [f],
...                    {"01-machine": "The machine"}))  # doctest: +NORMALIZE_WHITESPACE
**Verdict** (measured): 2 of 3 machines have SMT (measured). ({ref}`ch. 1 <ch1-compare>`)
:::{dropdown} Every finding of this build for this section (1)
<BLANKLINE>
| role | finding | where |
|---|---|---|
| measured | 2 of 3 machines have SMT (measured). | {ref}`ch. 1 <ch1-compare>` |
<BLANKLINE>
:::
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import NumalabError

__all__ = ["MIME", "Finding", "finding", "kernel_modelled", "measured_on", "collect_findings",
           "render_guide", "MARKER", "SECTION_MARKER", "GUIDE_ROLES", "finding_roles",
           "notebook_title"]

MIME = "application/vnd.numalab.finding+json"
MARKER = re.compile(r"<!--\s*findings:\s*([\w.-]+)\s*-->")
#: Any of the guide's markers: ``<!-- PART: KEY -->``.
SECTION_MARKER = re.compile(r"<!--\s*(verdict|facts|commands|findings):\s*([\w.-]+)\s*-->")
#: The roles a finding may carry in the guide: the evidence roles, plus
#: "port" (computed by the book's port of the kernel code) and "model output"
#: (computed by a model that failed its test, or by a rule the kernel does not
#: have: shown, never a prediction). A passed role may carry a qualifier in
#: parentheses, "model output (failed placement model)", which the guide shows.
GUIDE_ROLES = ("measured", "published", "port", "predicted", "model output", "fitted", "assumed")
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
    role: str = ""
    verdict: bool = False

    def __post_init__(self):
        if self.kind not in ("finding", "kernel", "measured"):
            raise ValueError(f"kind must be finding, kernel or measured, not {self.kind!r}")
        if not _LABEL.match(self.label):
            raise ValueError(f"label {self.label!r} is not a MyST label")
        bad = [r for r in _split_roles(self.role) if _role_base(r) not in GUIDE_ROLES]
        if bad:
            raise ValueError(f"role {bad[0]!r} is not one of {', '.join(GUIDE_ROLES)}")


class _Display:
    """What a notebook shows for a record: Markdown, plus the JSON record."""

    def __init__(self, rec: Finding, markdown: str):
        self.rec, self.markdown = rec, markdown

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/markdown": self.markdown, "text/plain": self.markdown,
                MIME: asdict(self.rec)}


def finding(chapter: str, key: str, label: str, text: str, *, role: str = "",
            verdict: bool = False, prefix: str | None = None, **values) -> _Display:
    """Show ``text`` (generated from computed values) and hand it to the
    reviewer's guide under ``key`` (a patch id such as "004", or "machine"),
    linked to the section labelled ``label`` (a ``(label)=`` target in the
    page named by ``chapter``: the chapter's stem, or its evidence page's).
    ``role``: the roles of its numbers (see the module docstring; read from
    the text when empty); ``verdict=True`` makes it the key's verdict in the
    guide, and the chapter shows it as its answer (without the "For
    reviewers" prefix). ``prefix``: what the page shows before the text
    instead (``""``: nothing, for a finding the page already introduces).
    ``values`` are the numbers behind the sentence (kept in the record, for
    tests and tools)."""
    rec = Finding(chapter, key, label, text, "finding",
                  {k: v for k, v in values.items()}, role, verdict)
    if prefix is None:
        prefix = "" if verdict else "**For reviewers:** "
    return _Display(rec, prefix + text)


def _full_stop(text: str) -> str:
    """``text`` ending as a sentence ends (a reader's sentence otherwise runs
    on into the next paragraph).

    >>> _full_stop("lib/group_cpus.c of Linux 7.2"), _full_stop("Done.")
    ('lib/group_cpus.c of Linux 7.2.', 'Done.')
    """
    text = text.rstrip()
    return text if text.endswith((".", "!", "?")) else text + "."


def kernel_modelled(chapter: str, label: str, text: str) -> _Display:
    """Record (and show) which kernel code and version the chapter models."""
    return _Display(Finding(chapter, "kernel", label, text, "kernel"),
                    f"*Kernel code modelled:* {_full_stop(text)}")


def measured_on(chapter: str, label: str, text: str) -> _Display:
    """Record (and show) the machine that the chapter's measured figures come from."""
    return _Display(Finding(chapter, "measured", label, text, "measured"),
                    f"*Measured on:* {_full_stop(text)}")


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




def _split_roles(role: str) -> list[str]:
    """The roles of a ``role=`` string, split at commas outside parentheses.

    >>> _split_roles("model output (failed placement model, pod rule), assumed")
    ['model output (failed placement model, pod rule)', 'assumed']
    """
    return [r.strip() for r in re.split(r",(?![^()]*\))", role) if r.strip()]


def _role_base(role: str) -> str:
    """A role without its qualifier: "model output (failed ...)" -> "model output"."""
    return role.split("(", 1)[0].strip()


#: Role words a finding's text may use when its chapter passed no role. The
#: book tags a figure's role in parentheses ("(measured, 10 boots)", "(port of
#: the patched code)"), so most words count only there; a fit or a held-out
#: test, and a real kernel, count anywhere.
_IN_PARENS = {
    "measured": r"measured",
    "published": r"published",
    "port": r"ports? of|port counts?|the ports?\b",
    "predicted": r"predicted|model\b|simulat",
    "assumed": r"assumed",
    "fitted": r"fitted",
}
_ANYWHERE = {
    "measured": r"real (?:[\w.-]+ ){0,3}kernels?\b",
    "predicted": r"held-out",
    "fitted": r"fitted|fit quality|calibrated",
}
_NEGATED = re.compile(r"\b(?:not|no|nothing)\s+(?:an?\s+)?$", re.I)
_PARENS = re.compile(r"\(([^()]*)\)")
_AGAIN = re.compile(r"\s*To measure it again:.*$", re.S)
_SENTENCE_END = re.compile(r"(?<=[.!?])[)*_]*\s+(?=[\"(*_]*[A-Z0-9])")


def _claims(text: str) -> str:
    """A finding's text without its "To measure it again: ..." commands."""
    return _AGAIN.sub("", text).strip()


def _says(text: str, words: str) -> bool:
    """``text`` uses one of ``words`` (a regex), not right after a negation."""
    for m in re.finditer(rf"\b(?:{words})", text, flags=re.I):
        if not _NEGATED.search(text[max(0, m.start() - 16):m.start()]):
            return True
    return False


def finding_roles(f: Finding) -> list[str]:
    """The roles of a finding's numbers, in :data:`GUIDE_ROLES` order: the
    ``role`` its chapter passed, or else read from it (measured when its
    label ends in ``-lab``; the role words of :data:`_IN_PARENS` inside its
    parentheses and of :data:`_ANYWHERE` anywhere, a word right after
    "not", "no" or "nothing" left out).

    >>> finding_roles(Finding("c", "k", "ch-lab", "Probes ran on CPU 0."))
    ['measured']
    >>> finding_roles(Finding("c", "k", "ch-x", "A rate (fitted), not measured, against 3 (published)."))
    ['published', 'fitted']
    >>> finding_roles(Finding("c", "k", "ch-x", "Ask whether it was measured (port of 7.2)."))
    ['port']
    >>> finding_roles(Finding("c", "k", "ch-x", "Counted.", role="port"))
    ['port']
    >>> finding_roles(Finding("c", "k", "ch-x", "1.6x.", role="assumed, model output (failed model)"))
    ['model output', 'assumed']
    """
    if f.role:
        return [r for r in GUIDE_ROLES if r in map(_role_base, _split_roles(f.role))]
    text = _claims(f.text)
    found = {"measured"} if f.label.endswith("-lab") else set()
    inside = " | ".join(_PARENS.findall(text.replace("()", "")))   # f() is no parenthesis
    found |= {r for r, words in _IN_PARENS.items() if _says(inside, words)}
    found |= {r for r, words in _ANYWHERE.items() if _says(text, words)}
    return [r for r in GUIDE_ROLES if r in found]


def _first_sentence(text: str) -> str:
    parts = _SENTENCE_END.split(_claims(text), maxsplit=1)
    return parts[0].strip()


def _lead(text: str, n: int = 2) -> str:
    """The first ``n`` sentences of a finding (its commands left out), with
    " …" when more follow: the rest is in the dropdown of every finding."""
    parts = _SENTENCE_END.split(_claims(text))
    return " ".join(p.strip() for p in parts[:n]) + (" …" if len(parts) > n else "")


def _is_fact(f: Finding) -> bool:
    """Measured or published, and not a fit."""
    roles = finding_roles(f)
    return bool({"measured", "published"} & set(roles)) and "fitted" not in roles


def _where(f: Finding, titles: dict[str, str]) -> str:
    """``{ref}`ch. 3 <label>``` (``ch. 3, evidence`` for an evidence page), or
    the page's title for a page without a chapter number."""
    stem = f.chapter
    evidence = stem.endswith("-evidence")
    base = stem[: -len("-evidence")] if evidence else stem
    num = re.match(r"^(\d+)-", base)
    text = (f"ch. {int(num.group(1))}" + (", evidence" if evidence else "") if num
            else titles.get(stem, stem))
    return f"{{ref}}`{text} <{f.label}>`"


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return re.sub(r"\s+", " ", text).replace("|", "\\|").strip()


def _roles_text(f: Finding) -> str:
    """The roles the guide's tables show: a passed role with its qualifier."""
    if f.role:
        passed = _split_roles(f.role)
        return ", ".join(sorted(passed, key=lambda r: GUIDE_ROLES.index(_role_base(r))))
    return ", ".join(finding_roles(f)) or "computed"


def _verdict_sources(mine: list[Finding]) -> tuple[list[Finding], bool]:
    """The findings the verdict is made of, and whether their whole text is
    used (marked verdicts) or only their first sentence."""
    marked = [f for f in mine if f.verdict]
    if marked:
        return marked, True
    lab = [f for f in mine if f.label.endswith("-lab")][:2]
    if lab:
        return lab, False
    facts = [f for f in mine if _is_fact(f)]
    return (facts or mine)[:1], False


def _verdict(mine: list[Finding], titles: dict[str, str]) -> str:
    src, whole = _verdict_sources(mine)
    roles = [r for r in GUIDE_ROLES if any(r in finding_roles(f) for f in src)]
    parts = [f"{_unlead(_claims(f.text) if whole else _first_sentence(f.text))} ({_where(f, titles)})"
             for f in src]
    return f"**Verdict** ({', '.join(roles) or 'computed'}): " + " ".join(parts)


def _unlead(text: str) -> str:
    """A verdict's text without its own bold lead ("**Measured here**: ..."),
    which the guide's "**Verdict** (role):" replaces.

    >>> _unlead("**Measured here** (6 runs): with 40 ns of work it was slower.")
    '(6 runs): with 40 ns of work it was slower.'
    >>> _unlead("**Measured here**: slower.")
    'Slower.'
    >>> _unlead("Slower on 3 of 4.")
    'Slower on 3 of 4.'
    """
    m = re.match(r"^\*\*[^*]+\*\*\s*:?\s*", text)
    if not m:
        return text
    rest = text[m.end():]
    return rest[:1].upper() + rest[1:] if m.group(0).rstrip().endswith(":") else rest


def _facts(mine: list[Finding], titles: dict[str, str]) -> str:
    used = set(map(id, _verdict_sources(mine)[0]))
    rows = [f for f in mine if _is_fact(f) and id(f) not in used]
    if not rows:
        return "*No other measured or published fact in this build's facts table.*"
    out = ["| role | fact | where |", "|---|---|---|"]
    out += [f"| {_roles_text(f)} | {_cell(_lead(f.text))} | {_where(f, titles)} |" for f in rows]
    return "\n".join(out)


def _commands(mine: list[Finding], stem: str | None) -> str:
    cmds, notes = [], []
    if stem:
        num = re.match(r"^(\d+)-", stem)
        cmds.append(f"numalab build --only {int(num.group(1)) if num else stem}")
    for f in mine:
        m = re.search(r"To measure it again:(.*)$", f.text, flags=re.S)
        if not m:
            continue
        spans = [c for c in re.findall(r"`([^`]+)`", m.group(1)) if c.startswith("numalab ")]
        if not spans:
            note = _cell(m.group(1)).rstrip(".")
            if note not in notes:
                notes.append(note)
        for c in spans:
            if c not in cmds:
                cmds.append(c)
    out = ["```sh", *cmds, "```"] if cmds else []
    if any("--patch " in c for c in cmds):
        out += ["", "For a new version of the patch: save it under `src/numalab/lab/patches/`, "
                "name it in `--patch` of the build line and boot that build "
                "(`--kernel built:NAME`); the lines above are the posting this build tested."]
    elif any(c.startswith("numalab lab run ") for c in cmds):
        out += ["", "To boot a new version of the patch: `numalab lab build-kernel --source "
                "VERSION --patch FILE -o NAME`, then the same runs with `--kernel built:NAME`."]
    out += [f"- Also: {n}." for n in notes]
    return "\n".join(out)


def _all_findings(mine: list[Finding], titles: dict[str, str]) -> str:
    out = [f":::{{dropdown}} Every finding of this build for this section ({len(mine)})", "",
           "| role | finding | where |", "|---|---|---|"]
    out += [f"| {_roles_text(f)} | {_cell(f.text)} | {_where(f, titles)} |" for f in mine]
    return "\n".join(out + ["", ":::"])


def render_guide(template: str, findings: list[Finding], titles: dict[str, str],
                 missing: set[str] | frozenset = frozenset(),
                 owners: dict[str, str] | None = None) -> str:
    """Fill the guide's markers (see the module docstring) from ``findings``.

    ``titles`` maps page stems to their titles; ``missing`` names keys whose
    chapter was not built (their markers say so); ``owners`` maps keys to the
    chapter stem that computes them (for the ``numalab build --only``
    command when the key has no finding). A finding whose key has no
    ``findings`` marker is an error: no computed result is silently left out.
    """
    keys = MARKER.findall(template)
    results = [f for f in findings if f.kind == "finding"]
    orphans = sorted({f.key for f in results} - set(keys))
    if orphans:
        raise NumalabError(f"the reviewer's guide has no marker for findings {orphans} "
                           "(add <!-- findings: KEY --> where they belong)")
    owners = owners or {}

    def part(m: re.Match) -> str:
        what, key = m.group(1), m.group(2)
        mine = [f for f in results if f.key == key]
        stem = (mine[0].chapter.removesuffix("-evidence") if mine else owners.get(key))
        if what == "commands":
            return _commands(mine, stem)
        if not mine:
            if what in ("verdict", "findings"):
                return ("*(the chapter that computes these was not built)*" if key in missing
                        else "*(no computed findings)*")
            return ""
        return {"verdict": _verdict, "facts": _facts,
                "findings": _all_findings}[what](mine, titles)

    return SECTION_MARKER.sub(part, template)
