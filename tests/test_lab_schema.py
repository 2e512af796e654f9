"""The lab's schema and argument checks (issue 29): every committed lab file
passes them, every recorded command passes them, and what they refuse they
refuse before anything starts. The bad inputs themselves are the corpus
(``tests/bad_corpus.py``, ``LAB_CASES``)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bad_corpus import lab_manifest
from numalab.cli import make_parser
from numalab.lab import LabError
from numalab.lab import schema as S
from numalab.lab.args import check_run
from numalab.lab.dump import read_lab_dump
from numalab.topology.safetar import read_archive

REPO = Path(__file__).resolve().parents[1]
LAB = REPO / "data" / "lab"
DUMPS = sorted(LAB.glob("*.tar.bz2"))


def test_there_are_committed_dumps():
    assert len(DUMPS) >= 9


@pytest.mark.parametrize("path", DUMPS, ids=lambda p: p.name)
def test_every_committed_dump_passes(path):
    """The manifest passes the schema as it is, and the whole dump reads."""
    tree = read_archive(path)
    [top] = tree.children[""]
    raw = tree.read(f"{top}/numalab/lab/manifest.json")
    m = S.check_manifest(S.load_json(raw, path.name), path.name)
    d = read_lab_dump(path)
    assert d.manifest == m and d.kernel_release == m["kernel"]["release"]
    assert len(d.nvme) == len(m["devices"])


def test_the_arm64_runs_pass():
    import tomllib
    text = (LAB / "arm64" / "runs.toml").read_text()
    spec = S.check(tomllib.loads(text), S.ARM64_RUNS, "runs.toml")
    assert len(spec["run"]) >= 10


_ROW = r"^\| `(?P<file>[^`]+)` \|[^|]*\| `(?P<cmd>numalab lab run [^`]+)` \|"


def _recorded_commands() -> list[str]:
    import re
    return [m["cmd"] for m in re.finditer(_ROW, (LAB / "README.md").read_text(), re.M)]


@pytest.mark.parametrize("cmd", _recorded_commands())
def test_the_recorded_commands_pass_the_argument_checks(cmd, tmp_path, monkeypatch):
    """Every command that made a committed dump is accepted as it stands
    (with its built kernels present), so the checks refuse nothing the
    book relies on."""
    import numalab.lab.build as B
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(B, "built_kernels", lambda: {"7.2": 0, "7.2-rotate": 0, "6.12": 0,
                                                     "6.12-pfwq": 0})
    args = make_parser().parse_args(shlex.split(cmd)[1:])
    ok = check_run(args)
    assert ok["machine"].ncpus <= 128 and ok["output"].name.endswith(".tar.bz2")
    assert list(tmp_path.iterdir()) == []


def test_recorded_commands_are_found():
    assert len(_recorded_commands()) >= 9


def test_run_lab_refuses_before_starting(tmp_path, monkeypatch):
    """The API checks its options first: a bad timeout leaves no cache,
    no temporary folder, no output."""
    from numalab.lab.run import LabOptions, run_lab
    from numalab.lab.spec import NvmeSpec, machine_from_text
    cache = tmp_path / "cache"
    monkeypatch.setenv("NUMALAB_CACHE", str(cache))
    m = machine_from_text("numa:2 core:2")
    for opts, message in [
        (LabOptions(devices=[NvmeSpec(1, 0, 2)], timeout=float("nan")), "--timeout nan"),
        (LabOptions(devices=[NvmeSpec(1, 3, 2)]), "node 3 does not exist"),
        (LabOptions(trace=("a;b",)), "trace function 'a;b'"),
        (LabOptions(io_count=0), "--io-count 0"),
    ]:
        with pytest.raises(LabError, match=message):
            run_lab("7.2", m, opts, output=tmp_path / "out.tar.bz2")
    assert list(tmp_path.iterdir()) == []


# -- the checker itself -------------------------------------------------------------------

def test_present_keys_are_checked_before_missing_ones():
    with pytest.raises(S.LabFileError) as e:
        S.check_manifest({"kernel": 5}, "m.json")
    assert (e.value.file, e.value.key) == ("m.json", "kernel")
    assert str(e.value) == "m.json: kernel: expected an object, not 5"


def test_maybe_says_null_is_fine_too():
    with pytest.raises(S.LabFileError, match=r"^f: io: expected null or an object, not 3$"):
        S.check({"io": 3}, S.Obj({"io": S.Maybe(S.Obj())}), "f")


def test_good_manifest_and_unknown_keys_pass():
    m = lab_manifest()
    m["a_later_key"] = {"anything": [1, None]}
    assert S.check_manifest(m, "m") is m


@pytest.mark.parametrize("raw, problem", [
    (b"[" * 40 + b"]" * 40, "nested more than 32 levels deep"),
    (b'{"a": Infinity}', "Infinity is not JSON"),
    (b'{"a": 1' + b" " * (1 << 20) + b"}", "a lab file is at most 1048576"),
])
def test_strict_json(raw, problem):
    with pytest.raises(S.LabFileError, match=problem):
        S.load_json(raw, "x.json")


def test_distances_rules():
    assert S.check_distances([[10, 254], [254, 10]], 2) == [[10, 254], [254, 10]]
    assert S.check_distances("10 16 32;16 10 22;32 22 10", 3)[2] == [32, 22, 10]
    for bad in ("10,20", "10,20;20", "10,20;20,10;10,10", [[10, True], [20, 10]], 5):
        with pytest.raises(LabError, match="^--distances: "):
            S.check_distances(bad, 2)


def test_messages_stay_one_line():
    with pytest.raises(S.LabFileError) as e:
        S.check({"k": "a\nb\x1b"}, S.Obj({"k": S.Int(0, 1)}), "f\nile")
    assert "\n" not in str(e.value) and "\x1b" not in str(e.value)
    assert str(e.value) == 'f\\nile: k: expected an integer in [0, 1], not "a\\nb\\u001b"'
