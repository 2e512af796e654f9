"""One name per chapter: the notebook's title is the one the table of
contents shows, and the intro, the reviewer's guide and the README use it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))


def title(nb: Path) -> str:
    """The notebook's first level-1 heading (what jupyter-book puts in the ToC)."""
    for cell in json.loads(nb.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    raise AssertionError(f"{nb.name} has no title")


def test_every_chapter_has_a_title():
    pages = [nb for nb in CHAPTERS if not nb.stem.endswith("-evidence")]   # not evidence pages
    assert len(pages) == 5
    assert len({title(nb) for nb in CHAPTERS}) == len(CHAPTERS)


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_intro_links_the_chapter(nb):
    """The intro's map links every chapter with {doc}, which prints the title."""
    intro = (ROOT / "book" / "intro.md").read_text()
    map_ = intro.split("## Map of the book", 1)[1].split("\n## ", 1)[0]
    assert "{doc}`notebooks/%s`" % nb.stem in map_
    # no other name for it: the map gives no bold hand-typed chapter names
    assert not re.search(r"\*\*[^*]+\*\* \(chapter", map_)


@pytest.mark.parametrize("nb", CHAPTERS, ids=lambda p: p.stem)
def test_readme_uses_the_title(nb):
    readme = (ROOT / "README.md").read_text()
    rows = [r for r in readme.splitlines() if f"`notebooks/{nb.name}`" in r and r.startswith("|")]
    assert rows, f"README's chapter table lacks {nb.name}"
    assert f"| {title(nb)} |" in rows[0]


def test_guide_and_chapters_link_each_other():
    guide = (ROOT / "book" / "reviewers-guide.md").read_text()
    labels = set(re.findall(r"^\((guide-[\w-]+)\)=$", guide, re.M))
    for nb in CHAPTERS:
        assert "{doc}`notebooks/%s`" % nb.stem in guide, f"the guide does not link {nb.stem}"
        refs = set(re.findall(r"<(guide-[\w-]+)>`", nb.read_text()))
        assert refs, f"{nb.stem} does not link the reviewer's guide"
        assert refs <= labels, f"{nb.stem} links guide labels that do not exist: {refs - labels}"
