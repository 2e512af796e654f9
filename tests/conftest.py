"""Shared fixtures for the book tests (build, notebooks, browser).

``quick_book`` copies the checkout's book sources and notebooks into a
temporary project and builds it once per test run with ``--quick`` and a
few small datasets (:func:`quick_datasets`); the build, notebook,
reproducibility and browser tests all read that one build, whichever
pytest-xdist worker they run in (a file lock lets the first one build it).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
from contextlib import contextmanager
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


def make_project(dest: Path, notebooks: dict[str, Path], shared_cache: Path | None = None) -> Path:
    """A minimal checkout at ``dest``: the book's sources, ``data/``, and the
    given notebooks (``{stem: source}``). Returns ``dest``.

    ``shared_cache``: a folder whose ``archives`` and ``topologies`` the
    project's ``.numalab-cache`` links to, so that the test books of one run
    parse each dump once between them (both caches are keyed on the file's
    content and the readers' source, and written by rename)."""
    dest.mkdir(parents=True, exist_ok=True)
    if shared_cache is not None:
        (dest / ".numalab-cache").mkdir(exist_ok=True)
        for kind in ("archives", "topologies"):
            (shared_cache / kind).mkdir(parents=True, exist_ok=True)
            (dest / ".numalab-cache" / kind).symlink_to(shared_cache / kind, target_is_directory=True)
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


def _shared_dir(tmp_path_factory) -> Path:
    """A folder every test process of this run sees: under pytest-xdist each
    worker has its own base temp folder, and their parent is shared."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def _exclusive(lock: Path):
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def quick_project(tmp_path_factory) -> Path:
    """A temporary copy of the checkout's book, not yet built; one per test
    run, shared by the xdist workers."""
    shared = _shared_dir(tmp_path_factory)
    root = shared / "quick-book"
    with _exclusive(shared / "quick-book.lock"):
        if not (root / ".copied").exists():
            shutil.rmtree(root, ignore_errors=True)
            make_project(root, {p.stem: p for p in chapter_notebooks()},
                         shared_cache=shared / "parsed")
            (root / ".copied").touch()
    return root


@pytest.fixture(scope="session")
def quick_book(quick_project):
    """The quick build of the checkout's book: (root, exit status, lines said).
    Built once per test run: the first worker to ask builds it, under a lock,
    and records the result; the others wait and read the record."""
    from numalab.build import build
    record = quick_project / ".quick-build.json"
    with _exclusive(quick_project.parent / "quick-book.lock"):
        if not record.exists():
            lines: list[str] = []
            old = os.environ.get("PYTHONHASHSEED")
            os.environ["PYTHONHASHSEED"] = QUICK_BOOK_HASHSEED   # the kernels inherit it
            try:
                status = build(quick_project, data=quick_datasets(), quick=True, jobs=2,
                               say=lines.append)
            finally:
                if old is None:
                    os.environ.pop("PYTHONHASHSEED", None)
                else:
                    os.environ["PYTHONHASHSEED"] = old
            record.write_text(json.dumps({"status": status, "lines": lines}))
        done = json.loads(record.read_text())
    return quick_project, done["status"], done["lines"]


BOOK_FIXTURES = {"quick_project", "quick_book"}


def pytest_collection_modifyitems(config, items):
    """Order for two test processes: one test that needs the quick book
    first (its process builds the book while the other runs the unit tests),
    then everything else, then the rest of the book's tests. The order is the
    same in every xdist worker, as xdist requires."""
    book = [i for i in items if BOOK_FIXTURES & set(getattr(i, "fixturenames", ()))]
    if not book:
        return
    first = next((i for i in book if "quick_book" in i.fixturenames), book[0])
    rest = [i for i in items if i not in book]
    items[:] = [first] + rest + [i for i in book if i is not first]


class Hang(Exception):
    """A property test's call that ran past its deadline."""


@contextmanager
def deadline(what, seconds: int = 30):
    """Raise :class:`Hang` when the block runs longer than ``seconds``
    (``signal.alarm``: the property tests' guard against a hang)."""
    def fire(signum, frame):
        raise Hang(f"{what}: still running after {seconds} s")
    old = signal.signal(signal.SIGALRM, fire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
