"""Build the book: execute the chapter notebooks, then render HTML.

Two stages, both incremental and both all-or-nothing:

1. **Execute.** Each ``notebooks/*.ipynb`` runs under papermill in its own
   worker process (``--jobs N`` at once). Parameters: ``datasets`` (the
   absolute paths given with ``--data``, else
   :func:`numalab.datasets.default_datasets`) goes only to notebooks whose
   ``parameters`` cell defines ``datasets``; ``quick=True`` only with
   ``--quick``. The executed copy lands in the cache,
   ``.numalab-cache/notebooks/STEM-KEY.ipynb``, by a rename once it is
   complete, so an interrupted run never leaves a half-written entry.
   KEY (:func:`cache_key`) is the sha256 of the notebook's source with
   outputs stripped, the parameters as JSON, the content of every data file
   the parameters name (directories hashed recursively) and every ``.py``
   file of the numalab package.

2. **Render.** The book's sources are staged into ``_build/.staging-PID/src``:
   ``_config.yml`` (repo root), a generated ``_toc.yml`` (intro, the chapters
   that exist, then ``rerun`` and ``reviewers-guide``), ``book/*.md``, the
   executed notebooks under ``notebooks/`` and the vega bundle under
   ``_static/``. jupyter-book (notebook execution off) renders them into the
   staging folder; on success the result replaces ``_build/html`` and the
   executed copies replace ``book/notebooks/``, by renames. When the staged
   inputs hash the same as those of the book already in ``_build/html``
   (recorded in ``_build/html/.numalab-inputs``), Sphinx is skipped.

Before the first notebook runs, the machine archives the chapters read
(the datasets and the lab dumps) are parsed once, over ``--jobs``
processes, into ``.numalab-cache/topologies`` and
``.numalab-cache/archives`` (:func:`prewarm`): parallel chapters would
otherwise each parse the same tarballs.

A failing notebook is reported as ``notebooks/X.ipynb: cell N failed:
ExcType: message`` (N counts every cell of the source notebook from 1),
its partly executed copy is kept in ``.numalab-cache/failed/`` for
inspection, and nothing under ``_build/html`` or ``book/notebooks`` changes.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .errors import NumalabError

__all__ = ["KNOWN_CHAPTERS", "FRONT_MATTER", "BACK_MATTER", "Project", "Job",
           "notebook_parameters", "parameters_for", "notebook_digest", "path_digest",
           "package_digest", "cache_key", "select_notebooks", "chapter_order",
           "toc_yaml", "evidence_of", "EVIDENCE_SUFFIX", "execute_notebook", "describe_failure", "build"]

#: The book's chapters, in reading order. Notebooks not listed here are
#: appended in name order; listed ones that do not exist are left out.
KNOWN_CHAPTERS = ["01-machine", "02-group-cpus", "03-probing", "04-idle-masks",
                  "05-percpu-ref"]
FRONT_MATTER = "intro"
BACK_MATTER = ["rerun", "reviewers-guide", "glossary", "errata"]
GUIDE = "reviewers-guide"
INPUTS_FILE = ".numalab-inputs"
KEEP_PER_NOTEBOOK = 4          # cached executions kept per notebook
CELL_TIMEOUT = 1800            # seconds; a runaway cell fails instead of hanging


# --------------------------------------------------------------------------
# Where things are


@dataclass(frozen=True)
class Project:
    """The folders one build reads and writes (all under ``root``)."""

    root: Path

    @property
    def notebooks(self) -> Path:
        return self.root / "notebooks"

    @property
    def book(self) -> Path:
        return self.root / "book"

    @property
    def config(self) -> Path:
        return self.root / "_config.yml"

    @property
    def build_dir(self) -> Path:
        return self.root / "_build"

    @property
    def html(self) -> Path:
        return self.build_dir / "html"

    @property
    def cache(self) -> Path:
        return self.root / ".numalab-cache"

    @property
    def executed(self) -> Path:
        return self.book / "notebooks"

    def rel(self, path: Path) -> str:
        """``path`` relative to the root when it is inside, else as given."""
        try:
            return str(Path(path).resolve().relative_to(self.root.resolve()))
        except ValueError:
            return str(path)


# --------------------------------------------------------------------------
# Parameters and cache keys (pure functions)


def notebook_parameters(path: Path) -> dict:
    """The names and defaults declared in a notebook's ``parameters`` cell:
    ``{name: {"name": name, "default": "source text of the value"}}``, the
    names and defaults papermill's ``inspect_notebook`` gives, read with
    :mod:`ast` (importing papermill takes seconds, and a rebuild with
    nothing to execute should not pay them).

    Raises NumalabError when the notebook has no cell tagged ``parameters``
    or that cell is not valid Python.
    """
    import ast
    nb = _read_json(path)
    cell = next((c for c in nb["cells"] if c.get("cell_type") == "code"
                 and "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise NumalabError(f"{path}: no cell is tagged 'parameters' (see README, "
                           "'Notebook conventions')")
    src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    try:
        tree = ast.parse(src)
    except SyntaxError as e:
        raise NumalabError(f"{path}: the parameters cell is not valid Python "
                           f"(line {e.lineno}: {e.msg})") from None
    out: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and node.value is not None:
            targets = [t for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None \
                and isinstance(node.target, ast.Name):
            targets = [node.target]
        else:
            continue
        for t in targets:
            out[t.id] = {"name": t.id, "default": ast.get_source_segment(src, node.value)}
    return out


def parameters_for(declared: Iterable[str], datasets: list[str], quick: bool) -> dict:
    """The parameters one notebook receives: ``datasets`` only if it declares
    it, ``quick=True`` only when asked for and declared.

    >>> parameters_for(["seed", "quick"], ["/d/a.xml"], True)
    {'quick': True}
    >>> parameters_for(["datasets", "quick"], ["/d/a.xml"], False)
    {'datasets': ['/d/a.xml']}
    """
    declared = set(declared)
    params: dict = {}
    if "datasets" in declared:
        params["datasets"] = list(datasets)
    if quick and "quick" in declared:
        params["quick"] = True
    return params


def _read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise NumalabError(f"{path}: cannot read notebook: {e}") from None


def notebook_digest(path: Path) -> str:
    """sha256 of what in a notebook affects execution: each cell's type,
    source and tags, and the kernel name. Outputs, execution counts and
    other metadata are left out, so a notebook saved with outputs hashes
    like the same notebook cleared.
    """
    nb = _read_json(path)
    cells = []
    for c in nb.get("cells", []):
        src = c.get("source", "")
        cells.append([c.get("cell_type"), "".join(src) if isinstance(src, list) else src,
                      sorted(c.get("metadata", {}).get("tags", []))])
    kernel = nb.get("metadata", {}).get("kernelspec", {}).get("name", "")
    return _sha({"cells": cells, "kernel": kernel})


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


def _file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def path_digest(path: Path) -> str:
    """sha256 of a file's content, or of a directory's files (relative path
    and content, recursively, in sorted order; symlinks by their target
    text, never followed, so a dump cannot point the hash outside itself).

    Names do not matter for a file: two copies of one dump hash the same.
    """
    path = Path(path)
    if path.is_symlink() and path.is_dir():
        return _sha({"symlink": os.readlink(path)})
    if path.is_file():
        return _file_sha(path)
    if not path.is_dir():
        raise NumalabError(f"{path}: no such file or directory")
    entries = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
            p = Path(root) / name
            rel = str(p.relative_to(path))
            if p.is_symlink():
                entries.append([rel, "->", os.readlink(p)])
            elif p.is_file():
                entries.append([rel, _file_sha(p)])
    return _sha(entries)


def package_digest(package_dir: Path | None = None) -> str:
    """sha256 over every ``.py`` file of the numalab package (path and content)."""
    base = Path(package_dir or Path(__file__).resolve().parent)
    files = sorted(p for p in base.rglob("*.py") if "__pycache__" not in p.parts)
    return _sha([[str(p.relative_to(base)), _file_sha(p)] for p in files])


def cache_key(notebook: Path, params: dict, package: str, memo: dict | None = None) -> str:
    """The cache key of one execution (see the module docstring).

    Data files are found through ``params["datasets"]``: an entry that is an
    existing path is hashed by content; any other string (a synthetic
    description) is already in the parameters' JSON.
    """
    data = []
    for d in params.get("datasets", []):
        if isinstance(d, str) and os.path.exists(d):
            # ``memo``: one build hashes each data file once, not once per chapter
            if memo is None or d not in memo:
                digest = path_digest(Path(d))
                if memo is None:
                    data.append([d, digest])
                    continue
                memo[d] = digest
            data.append([d, memo[d]])
    return _sha({"notebook": notebook_digest(notebook), "params": params,
                 "data": data, "package": package})


# --------------------------------------------------------------------------
# Which notebooks, in which order


#: A chapter's evidence page (its sweeps, refits and diagnostics) is the
#: notebook ``STEM-evidence.ipynb`` beside ``STEM.ipynb``; the table of
#: contents nests it under its chapter.
EVIDENCE_SUFFIX = "-evidence"


def evidence_of(stem: str) -> str | None:
    """The chapter an evidence page belongs to, or None for a chapter page.

    >>> evidence_of("04-idle-masks-evidence"), evidence_of("04-idle-masks")
    ('04-idle-masks', None)
    """
    return stem[:-len(EVIDENCE_SUFFIX)] if stem.endswith(EVIDENCE_SUFFIX) else None


def chapter_order(stems: Iterable[str]) -> list[str]:
    """Known chapters first (in :data:`KNOWN_CHAPTERS` order), then the rest
    by name; each evidence page right after its chapter.

    >>> chapter_order(["zz", "03-probing-evidence", "03-probing", "01-machine"])
    ['01-machine', '03-probing', '03-probing-evidence', 'zz']
    """
    stems = set(stems)
    pages = {s for s in stems if evidence_of(s) is None or evidence_of(s) not in stems}
    known = [s for s in KNOWN_CHAPTERS if s in pages]
    order = []
    for s in known + sorted(pages - set(known)):
        order.append(s)
        if s + EVIDENCE_SUFFIX in stems:
            order.append(s + EVIDENCE_SUFFIX)
    return order


def select_notebooks(notebooks: dict[str, Path], only: str | None) -> set[str] | None:
    """Resolve ``--only``: a stem (``03-probing``), a unique prefix, or a
    number (``3`` or ``03``). A chapter comes with its evidence page; an
    evidence page named by its stem comes alone. Returns the stems, or None
    for no filter.

    >>> sorted(select_notebooks({"01-machine": Path("a"), "03-probing": Path("b"),
    ...                          "03-probing-evidence": Path("c")}, "3"))
    ['03-probing', '03-probing-evidence']
    """
    if only is None:
        return None
    key = only.strip()
    key = Path(key).name.removesuffix(".ipynb")

    def with_evidence(stem: str) -> set[str]:
        ev = stem + EVIDENCE_SUFFIX
        return {stem, ev} if ev in notebooks else {stem}

    if key in notebooks:
        return with_evidence(key)
    pages = [s for s in notebooks if evidence_of(s) not in notebooks]
    if key.isdigit():
        matches = [s for s in pages if re.match(rf"0*{int(key)}\D", s + "-")]
    else:
        matches = [s for s in pages if s.startswith(key)]
    if len(matches) == 1:
        return with_evidence(matches[0])
    names = ", ".join(chapter_order(notebooks)) or "none"
    raise NumalabError(f"--only {only}: {'ambiguous' if matches else 'no such chapter'} "
                       f"(chapters: {names})")


def toc_yaml(chapters: list[str], front: str = FRONT_MATTER,
             back: list[str] = BACK_MATTER) -> str:
    """jupyter-book's ``_toc.yml`` for the chapters present.

    >>> print(toc_yaml(["01-machine", "01-machine-evidence"], back=["rerun"]))
    format: jb-book
    root: intro
    parts:
    - caption: Chapters
      chapters:
      - file: notebooks/01-machine
        sections:
        - file: notebooks/01-machine-evidence
    - caption: Using the book
      chapters:
      - file: rerun
    <BLANKLINE>
    """
    lines = ["format: jb-book", f"root: {front}", "parts:"]
    if chapters:
        lines += ["- caption: Chapters", "  chapters:"]
        for c in chapters:
            parent = evidence_of(c)
            if parent is not None and parent in chapters:
                continue            # listed under its chapter below
            lines.append(f"  - file: notebooks/{c}")
            if c + EVIDENCE_SUFFIX in chapters:
                lines += ["    sections:", f"    - file: notebooks/{c}{EVIDENCE_SUFFIX}"]
    if back:
        lines += ["- caption: Using the book", "  chapters:"]
        lines += [f"  - file: {b}" for b in back]
    if lines[-1] == "parts:":
        lines.pop()
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Executing one notebook (runs in a worker process)


def _source_cell_number(source_nb: dict, failed_index: int, failed_source: str) -> int:
    """Map papermill's cell index (counted in the executed notebook, which
    has an extra injected-parameters cell) back to the source notebook,
    counting from 1."""
    cells = source_nb.get("cells", [])

    def text(c):
        s = c.get("source", "")
        return "".join(s) if isinstance(s, list) else s

    candidates = [i for i, c in enumerate(cells) if text(c) == failed_source]
    if candidates:
        return min(candidates, key=lambda i: abs(i - failed_index)) + 1
    return failed_index + 1


def describe_failure(rel_path: str, source_nb: dict, error) -> str:
    """One line naming the failing cell: ``notebooks/X.ipynb: cell N failed:
    ExcType: message`` (N from 1, counting markdown cells too)."""
    n = _source_cell_number(source_nb, error.cell_index, error.source)
    evalue = str(error.evalue).strip().splitlines()
    return f"{rel_path}: cell {n} failed: {error.ename}: {evalue[0] if evalue else ''}".rstrip()


def _tag_injected_cell(path: Path) -> None:
    """Fold the cell papermill injects (long dataset lists) in the book."""
    nb = _read_json(path)
    for c in nb.get("cells", []):
        tags = c.setdefault("metadata", {}).setdefault("tags", [])
        if "injected-parameters" in tags and "hide-cell" not in tags:
            tags.append("hide-cell")
    tmp = path.with_suffix(".tagging")
    tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def notebook_relative(params: dict, cwd: Path) -> dict:
    """``params`` with each dataset path inside the project (``cwd``'s
    parent: notebooks run in ``notebooks/``) written relative to ``cwd``,
    so the executed notebook, and the book's folded parameters cell, name
    ``../data/...`` rather than the builder's absolute paths. Paths outside
    the project and synthetic descriptions are left as they are.

    >>> notebook_relative({"datasets": ["/p/data/a.xml", "/q/b.xml", "numa:2 pu:4"], "quick": True},
    ...                   Path("/p/notebooks"))
    {'datasets': ['../data/a.xml', '/q/b.xml', 'numa:2 pu:4'], 'quick': True}
    """
    if "datasets" not in params:
        return params
    root = Path(cwd).parent

    def rel(d: str) -> str:
        p = Path(d)
        if p.is_absolute() and p.is_relative_to(root):
            return os.path.relpath(p, cwd)
        return d
    return {**params, "datasets": [rel(d) for d in params["datasets"]]}


def execute_notebook(notebook: Path, output: Path, params: dict, rel_path: str) -> dict:
    """Run one notebook with papermill (in this process) and write the
    executed copy to ``output``. Returns ``{"ok": bool, "seconds": float,
    "message": str}``; a failure's message names the cell.
    """
    import papermill
    from papermill.exceptions import PapermillExecutionError
    start = time.monotonic()
    for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
        try:
            papermill.execute_notebook(
                str(notebook), str(output), parameters=notebook_relative(params, notebook.parent),
                kernel_name="python3",
                progress_bar=False, log_output=False, request_save_on_cell_execute=False,
                cwd=str(notebook.parent), execution_timeout=CELL_TIMEOUT)
            break
        except PapermillExecutionError as e:
            return {"ok": False, "seconds": time.monotonic() - start,
                    "message": describe_failure(rel_path, _read_json(notebook), e)}
        except RuntimeError as e:
            # No cell has run yet: the kernel process died while starting
            # (seen once in CI with four kernels starting at the same moment).
            # Starting it again is safe; a notebook's own errors are not retried.
            if not _kernel_start_failed(e):
                raise
            if attempt == KERNEL_START_ATTEMPTS:
                return {"ok": False, "seconds": time.monotonic() - start,
                        "message": f"{rel_path}: failed: the Python kernel died while "
                                   f"starting, {attempt} times ({e})"}
            print(f"{rel_path}: the kernel died while starting (attempt {attempt} of "
                  f"{KERNEL_START_ATTEMPTS}); starting it again", file=sys.stderr, flush=True)
            time.sleep(0.5 * attempt)
    _tag_injected_cell(output)
    return {"ok": True, "seconds": time.monotonic() - start, "message": ""}


KERNEL_START_ATTEMPTS = 3


def _kernel_start_failed(error: BaseException) -> bool:
    """Did a kernel die before it answered its first request (so before any
    cell ran)? jupyter_client says so in a RuntimeError.

    >>> _kernel_start_failed(RuntimeError("Kernel died before replying to kernel_info"))
    True
    >>> _kernel_start_failed(RuntimeError("division by zero"))
    False
    """
    text = str(error)
    return "before replying to kernel_info" in text or "Kernel didn't respond" in text


def _worker_main(argv: list[str]) -> int:
    """``python -m numalab.build execute SPEC.json``: the worker process.
    SPEC holds notebook, output, params, rel_path, result (a JSON path)."""
    spec = json.loads(Path(argv[1]).read_text())
    try:
        result = execute_notebook(Path(spec["notebook"]), Path(spec["output"]),
                                  spec["params"], spec["rel_path"])
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # a crash outside a cell (bad kernel, bad JSON...)
        result = {"ok": False, "seconds": 0.0,
                  "message": f"{spec['rel_path']}: failed: {type(e).__name__}: "
                             f"{(str(e).strip().splitlines() or [''])[0]}"}
    tmp = Path(spec["result"] + ".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, spec["result"])
    return 0


# --------------------------------------------------------------------------
# The build


@dataclass
class Job:
    """One notebook of this build."""

    stem: str
    source: Path
    params: dict
    key: str
    cached: Path
    status: str = "pending"      # cached, stale, done, failed, missing
    seconds: float = 0.0
    message: str = ""
    executed: Path | None = None  # the executed copy the book will use
    proc: subprocess.Popen | None = field(default=None, repr=False)
    spec: Path | None = field(default=None, repr=False)


def _resolve_datasets(data: list[str] | None, root: Path) -> list[str]:
    """``--data`` entries: existing paths become absolute, synthetic strings
    stay as they are; anything else is an input error. No ``--data``: the
    default set."""
    from .datasets import default_datasets
    from .topology import is_synthetic
    if not data:
        return [str(Path(d).resolve()) for d in default_datasets(root)]
    out = []
    for d in data:
        p = Path(d).expanduser()
        if p.exists():
            out.append(str(p.resolve()))
        elif is_synthetic(d):
            out.append(d)
        else:
            raise NumalabError(f"--data {d}: no such file or directory, and not a "
                               "synthetic description (for example \"numa:2 core:8 pu:2\")")
    return out


@contextmanager
def _lock(project: Project):
    """One build at a time per checkout (they would race on the renames)."""
    project.cache.mkdir(parents=True, exist_ok=True)
    with open(project.cache / "lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NumalabError("another numalab build is running in this checkout") from None
        yield


@contextmanager
def _no_sigint():
    """Defer Ctrl-C across a pair of renames, so they happen both or neither."""
    got = []
    old = signal.signal(signal.SIGINT, lambda *a: got.append(a))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if got:
            raise KeyboardInterrupt


def _swap_in(new: Path, final: Path) -> None:
    """Replace ``final`` by ``new`` with renames; the old one is deleted after."""
    old = final.with_name(f".old-{final.name}-{os.getpid()}")
    with _no_sigint():
        if final.exists():
            os.rename(final, old)
        os.rename(new, final)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_leftovers(folder: Path, prefixes: tuple[str, ...]) -> None:
    """Delete staging folders of builds that were killed (their pid is gone)."""
    if not folder.is_dir():
        return
    for p in folder.iterdir():
        m = re.match(r"^(?:%s)-(\d+)" % "|".join(map(re.escape, prefixes)), p.name)
        if m and not _pid_alive(int(m.group(1))):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()


def _prune_cache(folder: Path, stem: str, keep: Path) -> None:
    """Keep the newest few executions of one notebook (and ``keep``)."""
    entries = sorted(folder.glob(f"{stem}-" + "[0-9a-f]" * 64 + ".ipynb"),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for p in entries[KEEP_PER_NOTEBOOK:]:
        if p != keep:
            p.unlink(missing_ok=True)


def _latest_cached(folder: Path, stem: str) -> Path | None:
    entries = sorted(folder.glob(f"{stem}-" + "[0-9a-f]" * 64 + ".ipynb"),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    return entries[0] if entries else None


def _archive_cache(project: "Project") -> Path:
    return project.cache / "archives"


def _warm_one(item: tuple[str, bool]) -> bool:
    """Parse one archive into the caches; False when it cannot be read (the
    chapter that reads it reports the error)."""
    from .datasets import load_cached
    from .topology.safetar import read_archive
    path, lab = item
    try:
        load_cached(path)
        if lab:
            read_archive(path)
    except Exception:       # noqa: BLE001 - reported by the chapter, not here
        return False
    return True


def _warm_init(root: str, archives: str) -> None:
    from .topology.safetar import CACHE_ENV
    os.chdir(root)                        # the topology cache is the checkout's
    os.environ[CACHE_ENV] = archives


def prewarm(project: "Project", datasets: list[str], jobs: int) -> int:
    """Parse every archive among ``datasets`` and the lab dumps into the
    caches, ``jobs`` processes at once; returns how many were parsed."""
    from .datasets import lab_archives
    items = [(d, False) for d in datasets if d.endswith((".tar.bz2", ".tar.gz", ".tar.xz", ".tgz"))
             and os.path.isfile(d)]
    try:
        items += [(d, True) for d in lab_archives(project.root)]
    except NumalabError:
        pass
    if not items:
        return 0
    from concurrent.futures import ProcessPoolExecutor
    with ProcessPoolExecutor(max_workers=max(1, jobs), initializer=_warm_init,
                             initargs=(str(project.root), str(_archive_cache(project)))) as pool:
        return sum(pool.map(_warm_one, items, chunksize=1))


def _start_worker(job: Job, tmpdir: Path, rel_path: str, archives: Path) -> None:
    output = tmpdir / f"{job.stem}.ipynb"
    spec = tmpdir / f"{job.stem}.json"
    spec.write_text(json.dumps({"notebook": str(job.source), "output": str(output),
                                "params": job.params, "rel_path": rel_path,
                                "result": str(tmpdir / f"{job.stem}.result.json")}))
    log = open(tmpdir / f"{job.stem}.log", "w")
    job.spec = spec
    # A build started from a JupyterLab cell must still render book output:
    # the renderer reads JPY_SESSION_NAME to tell a Jupyter server's kernel.
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    from .topology.safetar import CACHE_ENV
    env[CACHE_ENV] = str(archives)
    job.proc = subprocess.Popen([sys.executable, "-m", "numalab.build", "execute", str(spec)],
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env)
    log.close()


def _finish_worker(job: Job, tmpdir: Path, project: Project, rel_path: str) -> None:
    result_path = tmpdir / f"{job.stem}.result.json"
    output = tmpdir / f"{job.stem}.ipynb"
    if result_path.exists():
        result = json.loads(result_path.read_text())
    else:
        log = (tmpdir / f"{job.stem}.log").read_text(errors="replace").strip().splitlines()
        last = log[-1] if log else f"worker exited with status {job.proc.returncode}"
        result = {"ok": False, "seconds": 0.0, "message": f"{rel_path}: failed: {last}"}
    job.seconds = result["seconds"]
    if result["ok"]:
        job.cached.parent.mkdir(parents=True, exist_ok=True)
        os.replace(output, job.cached)
        job.status, job.executed = "done", job.cached
        _prune_cache(job.cached.parent, job.stem, job.cached)
    else:
        job.status, job.message = "failed", result["message"]
        if output.exists():
            failed = project.cache / "failed"
            failed.mkdir(parents=True, exist_ok=True)
            os.replace(output, failed / f"{job.stem}.ipynb")
            job.message += f" (executed copy: {project.rel(failed / (job.stem + '.ipynb'))})"


def _stop_workers(jobs: list[Job]) -> None:
    """Ctrl-C: ask running workers to stop (SIGINT lets papermill shut its
    kernel down), then make sure they are gone."""
    running = [j for j in jobs if j.proc and j.proc.poll() is None]
    for j in running:
        j.proc.send_signal(signal.SIGINT)
    deadline = time.monotonic() + 10
    for j in running:
        try:
            j.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            j.proc.kill()
            j.proc.wait()


DURATIONS = "durations.json"     # the last execution time of each notebook, in the cache


def run_order(stems: list[str], seconds: dict[str, float]) -> list[str]:
    """The order notebooks start in: chapter pages before evidence pages
    (an evidence page often asks for what its chapter computes, and then finds
    it in a cache instead of waiting on it), each group longest first by the
    last build's times (unknown ones first, in the given order).

    >>> run_order(["01-a", "01-a-evidence", "02-b", "02-b-evidence"],
    ...           {"01-a": 5, "02-b": 30, "01-a-evidence": 40})
    ['02-b', '01-a', '02-b-evidence', '01-a-evidence']
    """
    index = {s: i for i, s in enumerate(stems)}
    return sorted(stems, key=lambda s: (evidence_of(s) is not None,
                                        -seconds.get(s, float("inf")), index[s]))


def _durations(project: Project) -> dict[str, float]:
    try:
        d = json.loads((project.cache / DURATIONS).read_text())
        return {str(k): float(v) for k, v in d.items()} if isinstance(d, dict) else {}
    except (OSError, ValueError, TypeError):
        return {}


def _record_durations(project: Project, done: list[Job]) -> None:
    d = _durations(project)
    d.update({j.stem: round(j.seconds, 2) for j in done if j.status == "done"})
    try:
        project.cache.mkdir(parents=True, exist_ok=True)
        tmp = project.cache / f"{DURATIONS}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(d, sort_keys=True))
        os.replace(tmp, project.cache / DURATIONS)
    except OSError:
        pass                      # only an ordering hint


def _run_jobs(todo: list[Job], jobs: int, project: Project, say: Callable[[str], None]) -> None:
    """Execute ``todo`` with at most ``jobs`` workers (in :func:`run_order`),
    reporting each."""
    tmp_root = project.cache / "tmp"
    tmp_root.mkdir(parents=True, exist_ok=True)
    tmpdir = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=tmp_root))
    by_stem = {j.stem: j for j in todo}
    queue = [by_stem[s] for s in run_order([j.stem for j in todo], _durations(project))]
    running: list[Job] = []
    try:
        while queue or running:
            while queue and len(running) < jobs:
                job = queue.pop(0)
                rel = project.rel(job.source)
                say(f"{rel}: running")
                _start_worker(job, tmpdir, rel, _archive_cache(project))
                running.append(job)
            time.sleep(0.1)
            for job in [j for j in running if j.proc.poll() is not None]:
                running.remove(job)
                rel = project.rel(job.source)
                _finish_worker(job, tmpdir, project, rel)
                if job.status == "done":
                    say(f"{rel}: done in {job.seconds:.1f} s")
                else:
                    say(f"{rel}: FAILED")
                    say(job.message)
    except BaseException:
        _stop_workers(running)
        raise
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
        _record_durations(project, todo)


def _vega_bundle(project: Project) -> bytes:
    """The vega bundle, made once per vl-convert/altair version and cached."""
    from . import render
    name = f"vega-{render._vl_convert_version()}-{render.vegalite_version()}.js"
    path = project.cache / "static" / name
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(render.javascript_bundle(), encoding="utf-8")
        os.replace(tmp, path)
    return path.read_bytes()


def _book_plan(project: Project, chapters: dict[str, Path],
               datasets: list[str]) -> dict[str, bytes | Path]:
    """Everything the staged book source holds: relative path -> content
    (bytes) or a file to copy. The reviewer's guide and the front page's
    provenance are generated from the executed chapters (numalab.bookpages)."""
    from . import bookpages, render
    if not project.config.is_file():
        raise NumalabError(f"{project.config}: missing (the book's jupyter-book configuration)")
    plan: dict[str, bytes | Path] = {"_config.yml": project.config}
    for name in [FRONT_MATTER, *BACK_MATTER]:
        src = project.book / f"{name}.md"
        if not src.is_file():
            raise NumalabError(f"{src}: missing")
    for src in sorted(project.book.glob("*.md")):
        plan[src.name] = src
    static = project.book / "_static"
    if static.is_dir():
        for src in sorted(static.rglob("*")):
            if src.is_file():
                plan[str(src.relative_to(project.book))] = src
    order = chapter_order(chapters)
    ordered = {stem: chapters[stem] for stem in order}
    plan[f"{GUIDE}.md"] = bookpages.guide_page(
        (project.book / f"{GUIDE}.md").read_text(encoding="utf-8"), ordered,
        KNOWN_CHAPTERS).encode()
    plan[f"{FRONT_MATTER}.md"] = ((project.book / f"{FRONT_MATTER}.md").read_text(encoding="utf-8")
                                  + bookpages.provenance_section(project.root, ordered,
                                                                 datasets, path_digest)).encode()
    plan["_toc.yml"] = toc_yaml(order).encode()
    for stem in order:
        plan[f"notebooks/{stem}.ipynb"] = chapters[stem]
    plan[f"_static/{render.BUNDLE_NAME}"] = _vega_bundle(project)
    return plan


def _plan_digest(plan: dict[str, bytes | Path]) -> str:
    import jupyter_book
    items = []
    for rel in sorted(plan):
        v = plan[rel]
        items.append([rel, hashlib.sha256(v).hexdigest() if isinstance(v, bytes)
                      else _file_sha(v)])
    return _sha({"files": items, "jupyter-book": jupyter_book.__version__,
                 "python": sys.version_info[:2]})


def _materialize(plan: dict[str, bytes | Path], dest: Path) -> None:
    for rel, v in plan.items():
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(v, bytes):
            out.write_bytes(v)
        else:
            shutil.copyfile(v, out)


def _sphinx(src: Path, out: Path, log: Path) -> None:
    """Run jupyter-book in a child process (Ctrl-C reaches it too, and a
    crash cannot take the build's bookkeeping with it). One Sphinx process:
    with two (jupyter-book's build_sphinx takes ``jobs``) this book rendered
    no faster here (14-26 s either way), so the simpler call stays."""
    cmd = [sys.executable, "-c",
           "import sys, numalab; from jupyter_book.cli.main import main; "
           "sys.argv[0] = 'jupyter-book'; main()",
           "build", str(src), "--path-output", str(out), "--builder", "html"]
    env = dict(os.environ, PYDEVD_DISABLE_FILE_VALIDATION="1")
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
        try:
            rc = proc.wait()
        except BaseException:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            raise
    if rc != 0 or not (out / "_build" / "html" / "index.html").is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        raise NumalabError("jupyter-book failed (log: %s):\n  %s" % (log, "\n  ".join(tail)))


def _same_tree(a: Path, b: Path) -> bool:
    """True when two folders of notebooks hold the same files, byte for byte."""
    if not (a.is_dir() and b.is_dir()):
        return False
    fa = sorted(p.name for p in a.iterdir() if p.is_file())
    fb = sorted(p.name for p in b.iterdir() if p.is_file())
    return fa == fb and all(_file_sha(a / n) == _file_sha(b / n) for n in fa)


def build(root: Path | None = None, data: list[str] | None = None, jobs: int = 1,
          only: str | None = None, quick: bool = False, force: bool = False,
          say: Callable[[str], None] = print) -> int:
    """Execute the notebooks that need it and render the book.

    Returns 0 on success, 1 when a notebook failed (nothing was replaced).
    Input errors raise NumalabError; Ctrl-C raises KeyboardInterrupt after
    stopping the workers and removing the staging folders.
    """
    from .datasets import repo_root
    project = Project(Path(root).resolve() if root else repo_root())
    if jobs < 1:
        raise NumalabError("--jobs must be at least 1")
    started = time.monotonic()
    with _lock(project):
        _remove_leftovers(project.build_dir, (".staging", ".old-html"))
        _remove_leftovers(project.book, (".old-notebooks",))
        _remove_leftovers(project.cache / "tmp", ("run",))
        sources = {p.stem: p for p in sorted(project.notebooks.glob("*.ipynb"))}
        chosen = select_notebooks(sources, only)
        datasets = _resolve_datasets(data, project.root)
        package = package_digest()
        store = project.cache / "notebooks"

        all_jobs: list[Job] = []
        digests: dict[str, str] = {}
        for stem in chapter_order(sources):
            src = sources[stem]
            params = parameters_for(notebook_parameters(src), datasets, quick)
            key = cache_key(src, params, package, digests)
            all_jobs.append(Job(stem, src, params, key, store / f"{stem}-{key}.ipynb"))

        todo = []
        for job in all_jobs:
            rel = project.rel(job.source)
            if job.cached.exists() and not (force and (chosen is None or job.stem in chosen)):
                job.status, job.executed = "cached", job.cached
                say(f"{rel}: cached")
            elif chosen is not None and job.stem not in chosen:
                # --only: the other chapters keep their latest execution.
                latest = _latest_cached(store, job.stem)
                if latest is None and (project.executed / f"{job.stem}.ipynb").exists():
                    latest = project.executed / f"{job.stem}.ipynb"
                if latest is None:
                    job.status = "missing"
                    say(f"{rel}: not built yet (left out; run without --only to include it)")
                else:
                    job.status, job.executed = "stale", latest
                    say(f"{rel}: cached (from an earlier run; its inputs have changed since)")
            else:
                todo.append(job)
        if len(todo) > 1:       # one chapter alone reads only what it needs
            t0 = time.monotonic()
            n = prewarm(project, datasets, jobs)
            if n:
                say(f"machines: {n} archives parsed or found in the cache in "
                    f"{time.monotonic() - t0:.1f} s")
        _run_jobs(todo, jobs, project, say)

        failed = [j for j in all_jobs if j.status == "failed"]
        if failed:
            say(f"numalab build: {len(failed)} notebook(s) failed; the book in "
                f"{project.rel(project.html)} is unchanged")
            return 1

        chapters = {j.stem: j.executed for j in all_jobs if j.executed is not None}
        plan = _book_plan(project, chapters, datasets)
        digest = _plan_digest(plan)
        index = project.html / "index.html"
        recorded = project.html / INPUTS_FILE
        up_to_date = (index.is_file() and recorded.is_file()
                      and recorded.read_text().strip() == digest)

        staging = project.build_dir / f".staging-{os.getpid()}"
        try:
            executed_new = staging / "executed"
            executed_new.mkdir(parents=True)
            for stem, path in chapters.items():
                shutil.copyfile(path, executed_new / f"{stem}.ipynb")
            if up_to_date:
                say("html: unchanged (Sphinx skipped)")
            else:
                say("html: rendering with jupyter-book")
                t0 = time.monotonic()
                _materialize(plan, staging / "src")
                log = project.build_dir / "jupyter-book.log"
                _sphinx(staging / "src", staging / "out", log)
                html_new = staging / "out" / "_build" / "html"
                (html_new / INPUTS_FILE).write_text(digest + "\n")
                say(f"html: done in {time.monotonic() - t0:.1f} s")
                _swap_in(html_new, project.html)
            if not _same_tree(executed_new, project.executed):
                project.book.mkdir(exist_ok=True)
                _swap_in(executed_new, project.executed)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    say(f"numalab build: the book is at {index} "
        f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":  # the worker: python -m numalab.build execute SPEC.json
    if len(sys.argv) == 3 and sys.argv[1] == "execute":
        sys.exit(_worker_main(sys.argv[1:]))
    sys.exit("usage: python -m numalab.build execute SPEC.json (internal; use 'numalab build')")
