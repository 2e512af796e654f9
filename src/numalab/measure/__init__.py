"""Measured inputs of the idle-mask model (chapter 4), taken on this machine.

Two measurements, both unprivileged, stored by ``numalab collect --bench``
under ``idle_inputs`` in ``NAME/numalab/bench.json`` and read back by
chapter 4 from a dump's ``meta["bench"]["idle_inputs"]``:

* :mod:`.idle_rate` -- how often the CPUs of a real parallel build block and
  wake: a short ``make -j$(nproc)`` of a generated C file set, with the
  voluntary context switches and CPU time of every process of the build
  (``getrusage(RUSAGE_CHILDREN)``) and the machine-wide ``ctxt`` of
  ``/proc/stat``. From them: the mean run between two voluntary switches
  (the model's ``run_mean_us``) and the build's utilisation (its ``load``).
* :mod:`.bitops` -- a contended bitmap benchmark: 1..N threads pinned to
  CPUs doing ``set_bit()`` / ``test_and_clear_bit()`` (x86 ``lock bts`` /
  ``lock btr``; C11 ``atomic_fetch_or`` / ``atomic_fetch_and``) on their own
  bit of *one shared 64-bit word*, as CPUs entering and leaving idle do on
  a flat idle cpumask; and the hand-off latency of a bit between two CPUs.
  With fewer than :data:`~.bitops.MIN_CPUS_FOR_CURVE` CPUs the result says
  which curve cannot be measured instead of giving one.

:func:`run_idle_inputs` runs both ``runs`` times (default
:data:`DEFAULT_RUNS`) and returns one JSON-able dict: the first run's full
record (``idle_rate``, ``bitops``, as before), every run's figures with the
load average before and after it (``repeats``) and, per figure, the median
and range over the runs (``summary``, :func:`summarise`). The machine may be
shared: the load averages say how busy it was, and the spread says how much
a single run can be trusted.
"""

from __future__ import annotations

import os
import statistics
import time

from .. import __version__
from .bitops import MIN_CPUS_FOR_CURVE, run_bitops
from .idle_rate import run_idle_rate

__all__ = ["run_idle_inputs", "run_bitops", "run_idle_rate", "MIN_CPUS_FOR_CURVE",
           "idle_inputs_of", "DEFAULT_RUNS", "run_figures", "summarise", "pick_idle_inputs",
           "load_span", "loaded_sets"]

DEFAULT_RUNS = 5
"""Repeats of the measurement: a median and a range need several runs."""


def run_figures(rate: dict, bits: dict) -> dict:
    """The figures of one run that chapter 4 uses, flat: ``run_mean_us``,
    ``voluntary_per_cpu_s``, ``load`` (of the build), ``ns_one_writer`` and
    ``ns_two_writers`` (set+clear on one shared word) and ``handoff_ns``
    (first CPU pair); None where the run has no such figure.

    >>> run_figures({"run_mean_us": 9.0, "voluntary_per_cpu_s": 2.0, "load": 0.5},
    ...             {"flips": [{"threads": 1, "ns_per_flip_shared": 4.0}], "handoff": []})
    {'run_mean_us': 9.0, 'voluntary_per_cpu_s': 2.0, 'load': 0.5, 'ns_one_writer': 4.0, 'ns_two_writers': None, 'handoff_ns': None}
    """
    flips = {row["threads"]: row["ns_per_flip_shared"] for row in bits.get("flips", [])}
    hand = bits.get("handoff") or []
    return {"run_mean_us": rate.get("run_mean_us"),
            "voluntary_per_cpu_s": rate.get("voluntary_per_cpu_s"),
            "load": rate.get("load"),
            "ns_one_writer": flips.get(1), "ns_two_writers": flips.get(2),
            "handoff_ns": hand[0]["ns"] if hand else None}


def summarise(repeats: list[dict]) -> dict:
    """Per figure of :func:`run_figures`: ``{"median", "low", "high", "n"}``
    over the runs that have it (figures no run has are left out).

    >>> s = summarise([{"figures": {"load": x}} for x in (0.5, 0.9, 0.7)])
    >>> s["load"]
    {'median': 0.7, 'low': 0.5, 'high': 0.9, 'n': 3}
    """
    out = {}
    names = [k for r in repeats for k in r["figures"]]
    for name in dict.fromkeys(names):
        xs = [r["figures"][name] for r in repeats if r["figures"].get(name) is not None]
        if xs:
            out[name] = {"median": statistics.median(xs), "low": min(xs), "high": max(xs),
                         "n": len(xs)}
    return out


def run_idle_inputs(quick: bool = False, runs: int = DEFAULT_RUNS) -> dict:
    """Both measurements, ``runs`` times, as one dict (what ``collect
    --bench`` stores under ``idle_inputs``): ``{"kind", "numalab", "time",
    "idle_rate", "bitops", "loadavg", "runs", "repeats", "summary"}``.
    ``idle_rate``/``bitops`` are the first run's full records; ``repeats``
    holds each run's :func:`run_figures` with the one-minute load average
    before and after it; ``summary`` is :func:`summarise` of them. Raises
    NumalabError where a measurement cannot run at all."""
    from ..validate import integer
    runs = integer("runs", runs, 1, 100)
    t0 = time.time()
    first = None
    repeats = []
    for i in range(runs):
        before = round(os.getloadavg()[0], 2)
        rate = run_idle_rate(quick=quick)
        bits = run_bitops(quick=quick)
        first = first or (rate, bits)
        repeats.append({"run": i, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "loadavg_before": before, "loadavg_after": round(os.getloadavg()[0], 2),
                        "figures": run_figures(rate, bits)})
    return {"kind": "idle-inputs", "numalab": __version__,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
            "idle_rate": first[0], "bitops": first[1],
            "seconds": round(time.time() - t0, 2),
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "runs": runs, "repeats": repeats, "summary": summarise(repeats)}


def idle_inputs_of(topo) -> dict | None:
    """The ``idle_inputs`` record of a dump (``topo.meta["bench"]``), or None.

    >>> from numalab.topology.synthetic import from_synthetic
    >>> t = from_synthetic("numa:1 core:2")
    >>> idle_inputs_of(t) is None
    True
    >>> t.meta["bench"] = {"idle_inputs": {"kind": "idle-inputs"}}
    >>> idle_inputs_of(t)["kind"]
    'idle-inputs'
    """
    bench = topo.meta.get("bench") if isinstance(topo.meta, dict) else None
    if not isinstance(bench, dict):
        return None
    rec = bench.get("idle_inputs")
    return rec if isinstance(rec, dict) else None


def pick_idle_inputs(records: dict[str, dict]) -> tuple[str, dict] | None:
    """The record a chapter should use among several dumps' ``idle_inputs``
    (``{dump name: record}``): the one with the most runs, then the latest
    ``time``; None when there is none. A single run cannot give a spread.

    >>> pick_idle_inputs({"a": {"runs": 1, "time": "2026-11-25"},
    ...                   "b": {"runs": 5, "time": "2026-11-24"}})[0]
    'b'
    >>> pick_idle_inputs({}) is None
    True
    """
    if not records:
        return None
    return max(records.items(), key=lambda kv: (kv[1].get("runs", 1), str(kv[1].get("time", ""))))


def load_span(record: dict) -> tuple[float, float]:
    """The one-minute load average around a record's runs: lowest and
    highest of every repeat's ``loadavg_before`` and ``loadavg_after``
    (a record without repeats: its ``loadavg`` at the end, both ends).

    >>> load_span({"repeats": [{"loadavg_before": 0.2, "loadavg_after": 0.3},
    ...                        {"loadavg_before": 0.3, "loadavg_after": 0.9}]})
    (0.2, 0.9)
    >>> load_span({"loadavg": [6.95, 5.9, 3.1]})
    (6.95, 6.95)
    """
    xs = [r[k] for r in record.get("repeats") or [] for k in ("loadavg_before", "loadavg_after")
          if r.get(k) is not None]
    if not xs:
        xs = [record["loadavg"][0]]
    return min(xs), max(xs)


def loaded_sets(record: dict) -> list[dict]:
    """The runs kept beside a record for comparison, under ``loaded`` (the
    same machine measured while other jobs ran): a list of records, each
    with ``time``, ``runs`` (1 when absent), its :func:`load_span` as
    ``load_span`` and, per figure, ``summary`` (:func:`summarise` of its
    repeats, or of its single run's :func:`run_figures`).

    >>> rec = {"loaded": {"time": "t", "loadavg": [7.0, 6, 5],
    ...        "idle_rate": {"run_mean_us": 9.0}, "bitops": {}}}
    >>> s = loaded_sets(rec)[0]
    >>> s["runs"], s["load_span"], s["summary"]["run_mean_us"]["median"]
    (1, (7.0, 7.0), 9.0)
    """
    got = record.get("loaded") or []
    if isinstance(got, dict):
        got = [got]
    out = []
    for r in got:
        summ = r.get("summary") or summarise([{"figures": run_figures(r.get("idle_rate") or {},
                                                                     r.get("bitops") or {})}])
        out.append({"time": r.get("time"), "runs": r.get("runs", 1), "load_span": load_span(r),
                    "summary": summ, "command": r.get("command", "")})
    return out
