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
    """Two synthetic machines, one real dump from data/hwloc and one project
    machine file (a ``.toml``)."""
    from numalab.datasets import hwloc_dir
    return ["pack:2 numa:1 core:4 pu:2", "numa:4 core:2 pu:1",
            str(hwloc_dir(REPO) / "linux" / "16amd64-8n2c.tar.bz2"),
            str(REPO / "data" / "machines" / "irq-example-96.toml")]


# The quick book's kernels run with this hash seed; the reproducibility test
# executes each chapter once more with another one and compares.
QUICK_BOOK_HASHSEED = "1"


def quick_executed(project: Path, stem: str) -> Path:
    """Where the quick build cached chapter ``stem``'s execution."""
    from numalab import build
    src = project / "notebooks" / f"{stem}.ipynb"
    params = build.parameters_for(build.notebook_parameters(src), quick_datasets(), quick=True)
    key = build.cache_key(src, params, build.package_digest())
    return project / ".numalab-cache" / "notebooks" / f"{stem}-{key}.ipynb"


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
    old = os.environ.get("PYTHONHASHSEED")
    os.environ["PYTHONHASHSEED"] = QUICK_BOOK_HASHSEED   # the notebook kernels inherit it
    try:
        status = build(quick_project, data=quick_datasets(), quick=True, jobs=2,
                       say=lines.append)
    finally:
        if old is None:
            os.environ.pop("PYTHONHASHSEED", None)
        else:
            os.environ["PYTHONHASHSEED"] = old
    return quick_project, status, lines


BOOK_FIXTURES = {"quick_project", "quick_book"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist with ``--dist loadgroup`` (what ``make test`` runs),
    every test that reads the session's quick book goes to one worker, so
    the book is built once per run, not once per worker."""
    for item in items:
        if BOOK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("book"))
