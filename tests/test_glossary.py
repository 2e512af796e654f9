"""The glossary: every chapter links a term the first time its prose uses it.

A reader who knows C but not NUMA meets a term (SLIT distance, managed
interrupt, percpu_ref modes ...) and follows the link to book/glossary.md.
These tests check the links point at real glossary entries, and that in each
chapter the first use of a term in prose (markdown cells, not headings,
tables, code spans or links) is the linked one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))

# How each term is written in prose. Terms too common to police in prose
# (package: also a Python or Debian package; pod) are left out.
PATTERNS = {
    "NUMA node": r"\bNUMA nodes?\b",
    "SLIT distance": r"\bSLIT(?: distances?| table)?\b",
    "hop level": r"\bhop levels?\b",
    "SMT sibling": r"\bSMT(?: siblings?)?\b",
    "LLC": r"\bLLCs?\b",
    "MSI-X vector": r"\bMSI-X(?: vectors?)?\b",
    "effective affinity": r"\beffective affinity\b",
    "housekeeping CPU": r"\bhousekeeping CPUs?\b",
    "affinity scope": r"\baffinity scopes?\b",
    "RCU grace period": r"\b(?:RCU )?grace periods?\b",
    "cache line": r"\bcache[- ]lines?\b",
    "idle cpumask": r"\bidle (?:cpu)?masks?\b",
    "M/M/1": r"M/M/1\b",
    "MILP": r"\bMILP\b",
    "HiGHS": r"\bHiGHS\b",
    "fit quality": r"\bfit quality\b",
    "held-out test": r"\bheld-out test\b",
    "isolcpus": r"\bisolcpus\b",
    "nohz_full": r"\bnohz_full\b",
    "cpuset partition": r"\bcpuset partitions?\b",
    "SR-IOV": r"\bSR-IOV\b",
    "RCU read section": r"\bRCU read(?:-side)? (?:critical )?sections?\b",
    "lockdep": r"\blockdep\b",
    "Welch's t-test": r"\bWelch(?:'s)?(?: t-)?test\b",
    "hand-off window": r"\bhand-off window\b",
    "brentq": r"\bbrentq\b",
    "N_ONLINE": r"\bN_ONLINE\b",
}
ROLE = re.compile(r"\{term\}`([^`<]*?)(?:\s*<([^>]+)>)?`")
MASK = re.compile(r"\{[a-z-]+\}`[^`]*`|`[^`]*`|\[[^\]]*\]\([^)]*\)|\$[^$]*\$|<[^>]*>|https?://\S+")


def glossary_terms() -> set[str]:
    text = (ROOT / "book" / "glossary.md").read_text()
    block = text.split("```{glossary}", 1)[1].split("\n```", 1)[0]
    return {line.strip() for line in block.splitlines() if line.strip() and not line.startswith(" ")}


def prose_lines(nb_path: Path, tables: bool = False):
    """(cell index, line) of every prose line: markdown, not in a fence,
    not a heading, a table row (unless ``tables``) or a label."""
    nb = json.loads(nb_path.read_text())
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        fence = False
        for line in "".join(cell["source"]).splitlines():
            if line.startswith(("```", ":::")):
                fence = not fence
                continue
            if fence or line.lstrip().startswith("#") or (line.startswith("|") and not tables) or re.match(r"^\(\S+\)=$", line):
                continue
            yield i, line


def links(nb_path: Path) -> list[str]:
    out = []
    for _, line in prose_lines(nb_path, tables=True):
        for m in ROLE.finditer(line):
            out.append((m.group(2) or m.group(1)).strip())
    return out


def first_use_is_linked(nb_path: Path, term: str) -> bool | None:
    """True/False for the term's first prose use being a link; None if unused."""
    rx = re.compile(PATTERNS[term])
    for _, line in prose_lines(nb_path):
        events = []
        for m in ROLE.finditer(line):
            if (m.group(2) or m.group(1)).strip() == term:
                events.append((m.start(), True))
        masked = [(m.start(), m.end()) for m in MASK.finditer(line)]
        for m in rx.finditer(line):
            if not any(a <= m.start() < b for a, b in masked):
                events.append((m.start(), False))
        if events:
            return min(events)[1]
    return None


def test_glossary_has_the_terms_the_issue_names():
    terms = glossary_terms()
    for t in ("NUMA node", "SLIT distance", "cluster", "SMT sibling", "LLC", "MSI-X vector",
              "managed interrupt", "effective affinity", "blk-mq hardware queue", "housekeeping CPU",
              "unbound workqueue", "pod", "affinity scope", "percpu_ref modes", "RCU grace period",
              "M/M/1", "CV", "MILP", "isolcpus", "nohz_full", "cpuset partition", "SR-IOV",
              "RCU read section", "lockdep", "Welch's t-test", "held-out test", "hand-off window",
              "brentq", "N_ONLINE"):
        assert t in terms


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_links_name_glossary_terms(nb):
    terms = glossary_terms()
    found = links(nb)
    assert found, f"{nb.name} links no glossary term"
    unknown = sorted(set(found) - terms)
    assert not unknown, f"{nb.name} links terms the glossary lacks: {unknown}"


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_first_use_links_the_glossary(nb):
    bad = [t for t in PATTERNS if first_use_is_linked(nb, t) is False]
    assert not bad, f"{nb.name}: first prose use of {bad} is not a glossary link"


def test_first_use_check_can_fail(tmp_path):
    cell = {"cell_type": "markdown", "metadata": {}, "source": ["A NUMA node, then a {term}`NUMA node`.\n"]}
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    assert first_use_is_linked(p, "NUMA node") is False
    assert first_use_is_linked(p, "LLC") is None


def test_every_term_is_linked_from_some_chapter():
    linked = {t for nb in CHAPTERS for t in links(nb)}
    missing = sorted(glossary_terms() - linked)
    assert not missing, f"glossary terms no chapter links: {missing}"
