"""Bad inputs from other machines, people and tools: every one gets one clear
error (or, when odd but legitimate, a note), never a traceback, never a write.

The corpus is the table in ``tests/bad_corpus.py`` (files in
``tests/data/bad/``, the rest built in ``tmp_path``). For every case:

* ``load()`` raises a TopologyError whose path ends as expected and whose
  problem contains the expected text -- or returns a Topology carrying the
  expected note;
* ``numalab show`` prints exactly one line on stderr and exits 2 (0 for
  an accepted input), with no traceback;
* nothing is created, changed or removed in the test's folder (which holds
  the input, the current directory and the temporary directory).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from bad_corpus import (CASES, DATA, LAB_CASES, good_files, good_lab_files, good_links,
                        lab_readme_table, readme_table, _compress, _tar_of_tree, _write_tree)
from numalab.cli import main
from numalab.errors import NumalabError, TopologyError, one_line
from numalab.topology import load


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` with its type, size and mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[p] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """(input folder, check): the case's input goes to ``in/``; the current
    directory is ``cwd/`` and the temporary directory ``tmp/``; ``check()``
    asserts that nothing under tmp_path changed since the input was made."""
    inp, cwd, tmp = tmp_path / "in", tmp_path / "cwd", tmp_path / "tmp"
    for d in (inp, cwd, tmp):
        d.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    monkeypatch.setenv("TMPDIR", str(tmp))
    state = {}

    def freeze():
        state["before"] = snapshot(tmp_path)

    def check():
        after = snapshot(tmp_path)
        assert after == state["before"], (
            f"written: {sorted(set(after) - set(state['before']))}, "
            f"removed: {sorted(set(state['before']) - set(after))}")
    return inp, freeze, check


IDS = [c.id for c in CASES]
BAD = [c for c in CASES if c.problem is not None]


def test_corpus_ids_unique_and_counted():
    assert len(IDS) == len(set(IDS))
    # distinct inputs: a sysfs case counts once although it is tried as a
    # folder and as a tarball
    distinct = {i.split("[")[0] for i in IDS}
    assert len(distinct) >= 90


def test_readme_lists_every_case():
    readme = (DATA / "README.md").read_text()
    missing = [c.id for c in CASES if f"| {c.id} |" not in readme]
    assert not missing, "tests/data/bad/README.md is stale; regenerate with " \
                        "'python tests/bad_corpus.py'"


def test_good_base_dump_loads(tmp_path):
    """Every sysfs case is this dump with one change: it must load cleanly."""
    _write_tree(tmp_path / "box", good_files(), good_links())
    t = load(tmp_path / "box")
    assert t.node_ids == [0, 1] and t.distances == [[10, 20], [20, 10]]
    assert t.nodes[0].cpus == 0b0011 and t.nodes[1].cpus == 0b1100
    assert not [n for n in t.meta["notes"] if "overlap" in n or "node folders" in n]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_load(case, sandbox):
    inp, freeze, check = sandbox
    source = case.make(inp)
    freeze()
    if case.problem is None:
        topo = load(source, **case.options)
        if case.note:
            notes = topo.meta.get("notes", [])
            assert any(case.note in n for n in notes), notes
        if case.check:
            case.check(topo)
    else:
        with pytest.raises(TopologyError) as e:
            load(source, **case.options)
        err = e.value
        assert case.problem in err.problem, str(err)
        if case.path:
            assert err.path is not None and err.path.endswith(case.path), str(err)
            # the message names the input the user gave (or its numactl sibling)
            assert err.path.startswith(str(inp)), str(err)
        assert "\n" not in str(err)
    check()


FLAGS = {"allow_asymmetric": "--allow-asymmetric"}
CLI = [c for c in CASES if set(c.options) <= set(FLAGS) and c.kind != "synthetic"
       or not c.options]


@pytest.mark.parametrize("case", CLI, ids=[c.id for c in CLI])
def test_cli_show(case, sandbox, capsys):
    inp, freeze, check = sandbox
    source = case.make(inp)
    freeze()
    rc = main(["show", source, *(FLAGS[k] for k in case.options)])
    out, err = capsys.readouterr()
    if case.problem is None:
        assert rc == 0 and err == ""
        assert "nodes:" in out
        if case.note:          # what the reader assumed is printed, not silent
            assert any(case.note in line for line in out.splitlines()
                       if line.startswith("  note: ")), out
    else:
        assert rc == 2
        assert err.count("\n") == 1 and err.endswith("\n"), err
        assert err.startswith("numalab show: error: ")
        assert one_line(case.problem) in err
        if case.path:
            assert one_line(case.path) in err
        assert out == ""
    assert "Traceback" not in out + err
    check()


# A few cases through a real process: what a user sees in a terminal.
PROCESS = ["truncated-bz2", "member-2g", "symlink-outside", "xml-entity-bomb", "synthetic-newline",
           "cpulist-online-0-[tar.bz2]", "no-node-dir[dir]"]


@pytest.mark.parametrize("case", [c for c in CASES if c.id in PROCESS],
                         ids=[c.id for c in CASES if c.id in PROCESS])
def test_cli_process(case, sandbox):
    inp, freeze, check = sandbox
    source = case.make(inp)
    freeze()
    env = {**os.environ, "TMPDIR": str(inp.parent / "tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-m", "numalab", "show", source], capture_output=True,
                       text=True, cwd=inp.parent / "cwd", env=env, timeout=120)
    if case.problem is None:
        assert r.returncode == 0 and r.stderr == ""
    else:
        assert r.returncode == 2, r.stderr
        assert r.stderr.count("\n") == 1 and one_line(case.problem) in r.stderr
        assert "Traceback" not in r.stderr
    check()


def test_all_cases_raise_numalab_errors_only():
    """TopologyError is a NumalabError: the CLI's one-line path covers it."""
    assert issubclass(TopologyError, NumalabError)


def test_readme_table_is_current():
    readme = (DATA / "README.md").read_text()
    assert readme_table() in readme
    distinct = {c.id.split("[")[0] for c in CASES}
    bad = {c.id.split("[")[0] for c in CASES if c.problem is not None}
    assert f"**{len(distinct)} distinct inputs: {len(bad)} bad inputs" in readme


# -- the lab's files and arguments (issue 29) -------------------------------------------------

LAB_IDS = [c.id for c in LAB_CASES]


def test_lab_corpus_ids_unique_and_counted():
    assert len(LAB_IDS) == len(set(LAB_IDS)) and len(LAB_IDS) >= 30
    kinds = {c.kind for c in LAB_CASES}
    assert {"dump", "trace", "interrupts", "lab run", "lab build-kernel", "arm64"} <= kinds


def test_good_lab_dump_reads(tmp_path, capsys):
    """Every dump case is this dump with one change: it must read cleanly."""
    from numalab.lab.dump import read_lab_dump
    files, links = good_lab_files()
    p = tmp_path / "lab.tar.bz2"
    p.write_bytes(_compress(_tar_of_tree(files, links, top="lab"), "tar.bz2"))
    d = read_lab_dump(p)
    [c] = d.nvme
    assert (c.address, c.node, c.msi_vectors, [i.queue for i in c.irqs]) == (
        "0000:11:01.0", 0, 3, [0, 1, 2])
    assert d.blk_mq == {"nvme0n1": {0: 0b0011, 1: 0b1100}}
    assert d.io_deltas == {"25": (7, 0, 0, 0)} and [t.cpu for t in d.trace] == [0]
    assert main(["lab", "show", str(p)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "irq 25" in out and "io: irq 25 nvme0q1: cpu0:7" in out


@pytest.fixture
def lab_sandbox(sandbox, monkeypatch):
    """The sandbox, with the lab's cache in ``in/cache`` (not created: a
    case that needs one makes it)."""
    inp, freeze, check = sandbox
    monkeypatch.setenv("NUMALAB_CACHE", str(inp / "cache"))
    return sandbox


@pytest.mark.parametrize("case", LAB_CASES, ids=LAB_IDS)
def test_lab_input(case, lab_sandbox, capsys):
    """One line, exactly the expected one, exit 2, from the command and from
    the function behind it; nothing written, changed or removed."""
    from numalab.lab import LabError
    inp, freeze, check = lab_sandbox
    source = case.make(inp)
    freeze()
    expected = case.error.replace("{in}", str(inp))
    assert "\n" not in expected
    if case.api is not None:
        with pytest.raises(LabError) as e:
            case.api(source)
        assert str(e.value) == expected
    if case.argv is not None:
        rc = main(case.argv(source))
        out, err = capsys.readouterr()
        assert (rc, out, err) == (2, "", f"numalab lab: error: {expected}\n")
    check()


def test_lab_process_issue_example(sandbox):
    """Issue 29's example through a real process: {"kernel": 5} as the manifest."""
    inp, freeze, check = sandbox
    case = next(c for c in LAB_CASES if c.id == "manifest-kernel-int")
    source = case.make(inp)
    freeze()
    env = {**os.environ, "TMPDIR": str(inp.parent / "tmp"), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-m", "numalab", "lab", "show", source],
                       capture_output=True, text=True, cwd=inp.parent / "cwd", env=env,
                       timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"numalab lab: error: {case.error.replace('{in}', str(inp))}\n"
    check()


def test_lab_readme_table_is_current():
    readme = (DATA / "README.md").read_text()
    assert lab_readme_table() in readme
    assert f"**{len(LAB_CASES)} lab inputs" in readme
