"""Same inputs, same numbers: every chapter notebook, executed twice in
two fresh kernels with the same parameters (quick=True, a small dataset
list, seed=0), gives the same outputs once timings and execution metadata
are set aside (numalab.nbcompare). The first execution is the session's
quick book (tests/conftest.py), the second is made here.

The two kernels get different PYTHONHASHSEED values on purpose: a result
that depends on the iteration order of a set or dict of strings then
shows up as a difference instead of passing by luck.

The unit tests of nbcompare come first; they show the comparison can fail
(a changed number, a changed chart point) and what it ignores (a timing,
execution counts, papermill metadata).
"""

from __future__ import annotations

import copy

import pytest

from conftest import QUICK_BOOK_HASHSEED, chapter_notebooks, quick_datasets, quick_executed
from numalab import build, nbcompare
from numalab.topology.safetar import CACHE_ENV

NOTEBOOKS = chapter_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


# --------------------------------------------------------------------------
# nbcompare


def _executed(text="mean wait 0.31 us\nloaded 3 machines in 1.2 s\n", points=(1, 2),
              count=5, started="2026-01-01T10:00:00", duration=12.5):
    """A small executed notebook, shaped as papermill writes one."""
    return {
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3"},
                     "papermill": {"start_time": started, "duration": duration,
                                   "input_path": "a.ipynb", "parameters": {"seed": 0}}},
        "cells": [
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": "# Title"},
            {"cell_type": "code", "id": f"id-{count}", "execution_count": count,
             "metadata": {"tags": [],
                          "execution": {"iopub.execute_input": started},
                          "papermill": {"duration": duration, "start_time": started}},
             "source": "run()",
             "outputs": [
                 {"output_type": "stream", "name": "stdout", "text": text},
                 {"output_type": "execute_result", "execution_count": count, "metadata": {},
                  "data": {"text/plain": "<chart>",
                           "application/vnd.vegalite.v6+json": {
                               "mark": "line",
                               "data": {"values": [{"x": 1, "y": points[0]},
                                                   {"x": 2, "y": points[1]}]}}}},
             ]},
        ],
    }


def test_identical_runs_compare_equal():
    assert nbcompare.compare(_executed(), _executed()) == []


def test_changed_number_is_reported_with_its_cell():
    diffs = nbcompare.compare(_executed(), _executed(text="mean wait 0.32 us\n"
                                                        "loaded 3 machines in 1.2 s\n"))
    assert len(diffs) == 1
    assert diffs[0].startswith("cell 2:")
    assert "0.31" in diffs[0] and "0.32" in diffs[0]


def test_changed_chart_point_is_reported():
    diffs = nbcompare.compare(_executed(points=(1, 2)), _executed(points=(1, 3)))
    assert len(diffs) == 1 and "vegalite" in diffs[0] and "/y" in diffs[0]


def test_timing_and_run_metadata_are_ignored():
    other = _executed(text="mean wait 0.31 us\nloaded 3 machines in 48.7 s\n", count=9,
                      started="2026-06-30T23:59:59", duration=99.0)
    assert nbcompare.compare(_executed(), other) == []


def test_stream_chunking_is_ignored():
    split = _executed()
    outs = split["cells"][1]["outputs"]
    outs[0:1] = [{"output_type": "stream", "name": "stdout", "text": "mean wait 0.31 us\n"},
                 {"output_type": "stream", "name": "stdout",
                  "text": "loaded 3 machines in 1.2 s\n"}]
    assert nbcompare.compare(_executed(), split) == []


def test_added_cell_and_changed_parameter_are_reported():
    longer = _executed()
    longer["cells"].append(copy.deepcopy(longer["cells"][0]))
    assert any("cells" in d for d in nbcompare.compare(_executed(), longer))
    seeded = _executed()
    seeded["metadata"]["papermill"]["parameters"] = {"seed": 1}
    assert any("parameters" in d for d in nbcompare.compare(_executed(), seeded))


@pytest.mark.parametrize("text, masked", [
    ("320 configurations in 3.2 s", "320 configurations in <time>"),
    ("the sweep took 0.52 s", "the sweep took <time>"),
    ("chapter ran in 12.4 ms", "chapter ran in <time>"),
    ("notebook run time s      54.2", "notebook run time s      <time>"),
    ("40 points in 1.4 s on 128 CPUs", "40 points in <time> on 128 CPUs"),
])
def test_run_timings_are_masked(text, masked):
    assert nbcompare.mask_timings(text) == masked


@pytest.mark.parametrize("text", [
    "measured (cover letter): 52.431 s -> 50.342 s, gain 3.98%",  # a result, not our run
    "sweep_ms = 1.5",
    "12.4 ms per wakeup",                     # a modelled figure: no "in"/"took"
    "remote transfer in 120 ns",              # ns: a modelled latency
    "pinned in 3 sockets",                    # not a unit
])
def test_results_are_not_masked(text):
    assert nbcompare.mask_timings(text) == text


# --------------------------------------------------------------------------
# The chapters, executed twice


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_two_runs_give_the_same_outputs(path, quick_book, tmp_path, monkeypatch):
    # The first run is the quick book's (hash seed QUICK_BOOK_HASHSEED); the
    # second runs the session's copy of the book, so nothing lands in the checkout.
    project, status, lines = quick_book
    first = quick_executed(project, path.stem)
    assert first.is_file(), f"the quick build has no execution of {path.name}: {lines}"
    src = project / "notebooks" / path.name
    params = build.parameters_for(build.notebook_parameters(src), quick_datasets(), quick=True)
    hashseed = str(int(QUICK_BOOK_HASHSEED) + 1)
    monkeypatch.setenv("PYTHONHASHSEED", hashseed)   # the kernel inherits it
    # as a second build would: the archives the first parsed come from its cache
    # (the cache's own correctness is tests/test_speed.py's)
    monkeypatch.setenv(CACHE_ENV, str(project / ".numalab-cache" / "archives"))
    second = tmp_path / path.name
    result = build.execute_notebook(src, second, params, f"notebooks/{path.name}")
    assert result["ok"], result["message"]
    diffs = nbcompare.compare_files(first, second)
    assert not diffs, (f"{path.name}: two runs with the same inputs differ "
                       f"(PYTHONHASHSEED {QUICK_BOOK_HASHSEED} and {hashseed}; the second "
                       f"in {tmp_path}):\n  " + "\n  ".join(diffs))
