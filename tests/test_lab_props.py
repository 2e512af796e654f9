"""Any manifest, any lab dump: ``numalab lab show`` answers or refuses in
one line, never a traceback, never a hang (issue 29).

Hypothesis generates lab dumps from the corpus's good one
(:func:`bad_corpus.good_lab_files`): its manifest with one to three
mutations (a value anywhere in the tree replaced by one of the same JSON
type, or by any JSON value -- NaN, huge and negative numbers, strings,
lists, objects --, a key deleted, an unknown key added), sometimes a manifest that is any JSON
value or bytes at all, and sometimes the probe trace or an interrupt
snapshot replaced by generated text. For each:

* ``numalab lab show`` and ``numalab lab show --json`` (in-process,
  :func:`numalab.cli.main`) exit 0 with output and an empty stderr, or 2
  with exactly one stderr line starting ``numalab lab: error:``;
* the functions the book calls on a lab dump (``read_lab_dump``, then
  ``mask_table``, ``probe_table``, ``dedicated_counts``, ``dump_variant``,
  ``reproduce``) return or raise a NumalabError;
* nothing runs longer than :data:`TIMEOUT_S` (``signal.alarm``: a safety
  net, not a speed target).

Derandomized (the same examples every run) and small: 40 examples, about
10 s of CPU.
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from conftest import deadline
from bad_corpus import _compress, _tar_of_tree, good_lab_files, lab_manifest
from numalab.cli import main
from numalab.errors import NumalabError

TIMEOUT_S = 30
SETTINGS = settings(derandomize=True, deadline=None, database=None, max_examples=40,
                    suppress_health_check=[HealthCheck.too_slow])

BASE_FILES, BASE_LINKS = good_lab_files()




# -- values --------------------------------------------------------------------------------

ODD_NUMBERS = [0, -1, 1, 2, 10, 11, 127, 128, 129, 254, 255, 256, 2 ** 31, 2 ** 63, 2 ** 64,
               10 ** 30, -10 ** 30, 0.5, -0.0, 1e308, float("nan"), float("inf"), float("-inf")]
ODD_TEXT = ["", " ", "0", "0-3", "0-", "3-1", "0-4294967295", "zz", "7.2", "7.2.13+deb14-amd64",
            "../../etc/passwd", "a\nb", "\x1b[2J", "numalab lab run x", "ok", "oops", "tcg",
            "004-group-cpus-rotate-7.2.patch", "0" * 64, "nvme0", "0000:11:01.0", "1@0:2",
            "é" * 50]

scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(ODD_NUMBERS),
                    st.integers(-2 ** 70, 2 ** 70), st.floats(allow_nan=True),
                    st.sampled_from(ODD_TEXT), st.text(max_size=20))
json_values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12)


def paths(value, prefix=()):
    """Every path (tuple of keys/indexes) into a JSON value, the root first."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, prefix + (i,))


BASE_PATHS = [p for p in paths(lab_manifest()) if p]
# a value of the same JSON type, often one the schema accepts: the accepted
# path (lab show exit 0, then the book's functions) gets exercised too
SAME_KIND = {int: st.integers(0, 4), float: st.floats(0, 100), bool: st.booleans(),
             str: st.sampled_from(ODD_TEXT)}


@st.composite
def manifests(draw) -> bytes:
    """The manifest's bytes: the good one mutated, or anything at all."""
    kind = draw(st.sampled_from(["mutate"] * 6 + ["any-json", "any-bytes"]))
    if kind == "any-bytes":
        return draw(st.binary(max_size=64))
    if kind == "any-json":
        return json.dumps(draw(json_values)).encode()
    m = lab_manifest()
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        path = draw(st.sampled_from(BASE_PATHS))
        parent = m
        try:
            for k in path[:-1]:
                parent = parent[k]
            what = draw(st.sampled_from(["same-kind", "same-kind", "replace", "delete", "add"]))
            old = parent[path[-1]]
            if what == "same-kind" and type(old) in SAME_KIND:
                parent[path[-1]] = draw(SAME_KIND[type(old)])
            elif what in ("replace", "same-kind"):
                parent[path[-1]] = draw(json_values)
            elif what == "delete":
                del parent[path[-1]]
            elif isinstance(old, dict):
                parent[path[-1]][draw(st.text(max_size=8))] = draw(json_values)
        except (KeyError, IndexError, TypeError):
            pass                      # an earlier mutation removed or retyped the path
    return json.dumps(m).encode()


TEXT_FILES = ["numalab/lab/trace", "numalab/lab/trace.boot", "numalab/lab/interrupts.after",
              "proc/interrupts", "proc/irq/25/smp_affinity_list"]
lines = st.lists(st.one_of(
    st.sampled_from([" kworker/0:1-40 [000] ..... 3.1: nvme_probe <-local_pci_probe",
                     "           CPU0       CPU1       CPU2       CPU3", "  25: 1 2 3 4  x nvme0q1",
                     "ERR: 0", "# tracer: function", "CPU:1 [LOST 5 EVENTS]", "0-3", ""]),
    st.text(max_size=30)), max_size=5)


def write_dump(folder: Path, manifest: bytes, texts: dict[str, str]) -> str:
    files = dict(BASE_FILES)
    files["numalab/lab/manifest.json"] = manifest
    for k, v in texts.items():
        files[k] = v.encode("utf-8", "surrogatepass")
    p = folder / "lab.tar.bz2"
    p.write_bytes(_compress(_tar_of_tree(files, BASE_LINKS, top="lab"), "tar.bz2"))
    return str(p)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with deadline(argv, TIMEOUT_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def check_show(path: str) -> int:
    """``lab show`` and ``lab show --json``: the same exit status, 0 with
    output or 2 with one line; never a traceback."""
    codes = set()
    for argv in (["lab", "show", path], ["lab", "show", "--json", path]):
        rc, out, err = run_cli(argv)
        assert "Traceback" not in out + err, (argv, err)
        assert rc in (0, 2), (argv, rc, err)
        if rc == 2:
            assert out == "" and err.count("\n") == 1 and err.endswith("\n"), err
            assert err.startswith("numalab lab: error: "), err
        else:
            assert err == "" and out.strip()
        codes.add(rc)
    assert len(codes) == 1, codes
    return codes.pop()


def check_book_functions(path: str) -> None:
    """What the chapters call on a lab dump: a result or a NumalabError."""
    from numalab.lab import oracle
    from numalab.lab.dump import read_lab_dump
    with deadline(path, TIMEOUT_S):
        d = read_lab_dump(path)
        for fn in (oracle.mask_table, oracle.probe_table, oracle.dedicated_counts,
                   oracle.dump_variant, oracle.reproduce):
            try:
                fn(path if fn is not oracle.dump_variant else d)
            except NumalabError as e:
                assert "\n" not in str(e)


@SETTINGS
@given(manifest=manifests(),
       texts=st.dictionaries(st.sampled_from(TEXT_FILES), lines.map("\n".join), max_size=1))
def test_lab_show_never_breaks(manifest, texts):
    with tempfile.TemporaryDirectory() as tmp:
        path = write_dump(Path(tmp), manifest, texts)
        rc = check_show(path)
        if currently_in_test_context():
            event(f"lab show exit {rc}")
        if rc == 0:
            check_book_functions(path)


def test_the_good_dump_is_shown_and_read():
    """The property is not met by refusing everything: the good dump, and
    one changed within the schema, read cleanly."""
    with tempfile.TemporaryDirectory() as tmp:
        assert check_show(write_dump(Path(tmp), json.dumps(lab_manifest()).encode(), {})) == 0
        m = lab_manifest()
        m["kernel"]["release"] = "7.2.13+deb14-amd64"
        m["seconds"]["fetch"] = 1e6
        m["extra_key_from_a_later_numalab"] = {"x": [1, 2]}
        path = write_dump(Path(tmp), json.dumps(m).encode(), {})
        assert check_show(path) == 0
        check_book_functions(path)


@pytest.mark.parametrize("manifest", [b'{"kernel": 5}', b"5", b"null", b'{"kernel": {}}',
                                      json.dumps({**lab_manifest(), "kernel": 5}).encode(),
                                      json.dumps({**lab_manifest(), "topology": []}).encode()])
def test_issue_examples(manifest, tmp_path):
    """Issue 29's manifest ({"kernel": 5}) and its neighbours: exit 2, one line."""
    assert check_show(write_dump(tmp_path, manifest, {})) == 2

