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

:func:`run_idle_inputs` runs both and returns one JSON-able dict.
"""

from __future__ import annotations

import os
import time

from .. import __version__
from .bitops import MIN_CPUS_FOR_CURVE, run_bitops
from .idle_rate import run_idle_rate

__all__ = ["run_idle_inputs", "run_bitops", "run_idle_rate", "MIN_CPUS_FOR_CURVE",
           "idle_inputs_of"]


def run_idle_inputs(quick: bool = False) -> dict:
    """Both measurements as one dict (what ``collect --bench`` stores under
    ``idle_inputs``): ``{"kind", "numalab", "time", "idle_rate", "bitops",
    "loadavg"}``. Raises :class:`numalab.measure.atomics.BenchUnavailable`-style
    errors (NumalabError) where a measurement cannot run at all."""
    t0 = time.time()
    rate = run_idle_rate(quick=quick)
    bits = run_bitops(quick=quick)
    return {"kind": "idle-inputs", "numalab": __version__,
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "idle_rate": rate, "bitops": bits,
            "seconds": round(time.time() - t0, 2),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


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
