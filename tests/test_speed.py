"""What makes the build fast without changing a result: the archive cache,
the build's pre-parsing of machines, the skipped IRI grammar, the default
job count. (How fast it is, is `numalab bench book`'s business, not a test's.)
"""

from __future__ import annotations

import json
import shutil
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from conftest import REPO
from numalab.errors import UnsafeArchiveError
from numalab.topology import safetar

HWLOC_DUMP = REPO / "data" / "hwloc" / "linux" / "16amd64-8n2c.tar.bz2"


def _same_tree(a: safetar.MemTree, b: safetar.MemTree) -> bool:
    return (a.files, a.links, a.dirs, a.children) == (b.files, b.links, b.dirs, b.children)


def test_vega_lite_schema_uses_no_iri_format():
    """numalab skips jsonschema's IRI grammar because no Vega-Lite format needs it."""
    import altair
    folder = Path(altair.__file__).parent / "vegalite"
    formats = set()
    for schema in folder.rglob("*.json"):
        def walk(node):
            if isinstance(node, dict):
                if isinstance(node.get("format"), str):
                    formats.add(node["format"])
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(json.loads(schema.read_text()))
    assert formats, "no format found: the walk is broken"
    assert not {f for f in formats if f.startswith("iri")}, formats


def test_importing_numalab_first_skips_the_iri_grammar():
    code = ("import sys, numalab, altair, jsonschema; "
            "print(sys.modules.get('rfc3987_syntax', 'absent'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out in ("None", "absent"), out


def test_archive_is_read_once_per_process():
    safetar.clear_memo()
    a = safetar.read_archive(HWLOC_DUMP)
    assert safetar.read_archive(HWLOC_DUMP) is a
    # a predicate asks for a different tree: never served from the memo
    b = safetar.read_archive(HWLOC_DUMP, want=lambda name: name.endswith("/online"))
    assert b is not a and len(b.files) < len(a.files)


def test_disk_cache_gives_the_same_tree(tmp_path, monkeypatch):
    safetar.clear_memo()
    plain = safetar.read_archive(HWLOC_DUMP)
    safetar.clear_memo()
    monkeypatch.setenv(safetar.CACHE_ENV, str(tmp_path / "archives"))
    first = safetar.read_archive(HWLOC_DUMP)
    entries = list((tmp_path / "archives").glob("*.pickle"))
    assert len(entries) == 1
    safetar.clear_memo()
    second = safetar.read_archive(HWLOC_DUMP)        # from disk
    assert second is not first
    assert _same_tree(plain, first) and _same_tree(plain, second)
    # a damaged entry is a miss, read again from the archive
    entries[0].write_bytes(b"not a pickle")
    safetar.clear_memo()
    assert _same_tree(plain, safetar.read_archive(HWLOC_DUMP))
    safetar.clear_memo()


def test_refused_archive_is_never_cached(tmp_path, monkeypatch):
    monkeypatch.setenv(safetar.CACHE_ENV, str(tmp_path / "archives"))
    bad = tmp_path / "evil.tar"
    with tarfile.open(bad, "w") as tf:
        info = tarfile.TarInfo("../escape")
        info.size = 0
        tf.addfile(info)
    for _ in range(2):
        with pytest.raises(UnsafeArchiveError):
            safetar.read_archive(bad)
    assert not list((tmp_path / "archives").glob("*.pickle"))


def test_prewarm_parses_each_machine_archive_once(tmp_path):
    from numalab import build
    from conftest import make_project
    root = make_project(tmp_path / "book", {})
    shutil.rmtree(root / "data" / "lab" / "sweep")    # 24 more of the same kind: not needed here
    project = build.Project(root)
    data = [str(root / "data" / "hwloc" / "linux" / HWLOC_DUMP.name), "numa:2 core:2 pu:1"]
    n = build.prewarm(project, data, jobs=2)
    lab = list((root / "data" / "lab").glob("**/*.tar.bz2"))
    assert any(p.parent.name != "lab" for p in lab)      # dumps in sub-folders (sched_ext runs) too
    assert n == 1 + len(lab)
    assert len(list((root / ".numalab-cache" / "archives").glob("*.pickle"))) == 1 + len(lab)
    assert list((root / ".numalab-cache" / "topologies").glob("*.pickle"))


def test_build_uses_the_usable_cpus_by_default():
    from numalab.commands.build import usable_cpus
    n = usable_cpus()
    assert n == max(1, min(len(os.sched_getaffinity(0)), 64))


def test_archive_rewritten_in_place_is_read_again(tmp_path):
    """The memo is keyed on content: a file rewritten within one clock tick,
    with the same size, is not mistaken for the old one."""
    p = tmp_path / "a.tar"
    for text in (b"one", b"two"):
        with tarfile.open(p, "w") as tf:
            info = tarfile.TarInfo("d/f")
            info.size = len(text)
            import io
            tf.addfile(info, io.BytesIO(text))
        assert safetar.read_archive(p).read("d/f") == text
    copy = tmp_path / "b.tar"
    copy.write_bytes(p.read_bytes())
    assert safetar.read_archive(copy).name == "b.tar"


def test_parameters_read_as_papermill_reads_them():
    """numalab reads the parameters cell with ast instead of importing
    papermill (seconds); the names and defaults must be papermill's."""
    import papermill
    from numalab import build
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        ours = build.notebook_parameters(nb)
        theirs = dict(papermill.inspect_notebook(str(nb)))
        assert list(ours) == list(theirs), nb.name
        assert all(ours[k]["default"] == theirs[k]["default"] for k in ours), nb.name


def test_parameters_cell_that_is_not_python_is_one_line(tmp_path):
    from numalab import build
    from numalab.errors import NumalabError
    nb = {"cells": [{"cell_type": "code", "metadata": {"tags": ["parameters"]},
                     "source": "seed = = 0\n", "outputs": [], "execution_count": None}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps(nb))
    with pytest.raises(NumalabError, match="not valid Python"):
        build.notebook_parameters(p)


def test_one_build_hashes_each_data_file_once(tmp_path):
    from numalab import build
    data = tmp_path / "d.xml"
    data.write_text("<x/>")
    memo: dict = {}
    nb = REPO / "notebooks" / "01-machine.ipynb"
    k1 = build.cache_key(nb, {"datasets": [str(data)]}, "pkg", memo)
    assert list(memo) == [str(data)]
    assert build.cache_key(nb, {"datasets": [str(data)]}, "pkg") == k1
