"""Shared fixtures for the book tests (build, notebooks, browser).

``quick_book`` copies the checkout's book sources and notebooks into a
temporary project and builds it once per session with ``--quick`` and a
few small datasets (:func:`quick_datasets`); the build, notebook and
browser tests all read that one build.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "data" / "notebooks"


def quick_datasets() -> list[str]:
    """Two synthetic machines and one real dump from data/hwloc."""
    from numalab.datasets import hwloc_dir
    return ["pack:2 numa:1 core:4 pu:2", "numa:4 core:2 pu:1",
            str(hwloc_dir(REPO) / "linux" / "16amd64-8n2c.tar.bz2")]


def make_project(dest: Path, notebooks: dict[str, Path]) -> Path:
    """A minimal checkout at ``dest``: the book's sources, ``data/``, and the
    given notebooks (``{stem: source}``). Returns ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "pyproject.toml").write_text("# test project\n")
    shutil.copy(REPO / "_config.yml", dest / "_config.yml")
    shutil.copytree(REPO / "book", dest / "book",
                    ignore=shutil.ignore_patterns("notebooks", ".*"))
    if (REPO / "data").is_dir():
        shutil.copytree(REPO / "data", dest / "data")
    (dest / "notebooks").mkdir(exist_ok=True)
    for stem, src in notebooks.items():
        shutil.copy(src, dest / "notebooks" / f"{stem}.ipynb")
    return dest


def chapter_notebooks() -> list[Path]:
    """The checkout's chapter notebooks, at collection time."""
    return sorted((REPO / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="session")
def quick_project(tmp_path_factory) -> Path:
    """A temporary copy of the checkout's book, not yet built."""
    root = tmp_path_factory.mktemp("quick-book")
    return make_project(root, {p.stem: p for p in chapter_notebooks()})


@pytest.fixture(scope="session")
def quick_book(quick_project):
    """The quick build of the checkout's book: (root, exit status, lines said)."""
    from numalab.build import build
    lines: list[str] = []
    status = build(quick_project, data=quick_datasets(), quick=True, jobs=2,
                   say=lines.append)
    return quick_project, status, lines
