"""A contended bitmap benchmark: what a flat idle cpumask's word costs.

A CPU entering idle does ``set_bit(cpu, idle_mask)``; a waker claiming it,
or the CPU leaving idle, ``test_and_clear_bit()`` -- locked read-modify-writes
on the word holding the bit. With one flat mask every CPU's bit of a
machine of up to 64 CPUs is in *one* word (and up to 512 in one line). This
benchmark measures, with threads pinned to CPUs:

* **contended bit flips**: 1..N threads, each setting and clearing its own
  bit of one shared 64-bit word (C11 ``atomic_fetch_or`` /
  ``atomic_fetch_and``: ``lock or`` / ``lock and`` on x86, the same line
  traffic as ``lock bts`` / ``lock btr``), against the same threads each
  flipping a bit of a word on its own line: the cost of sharing the line;
* **hand-off**: two threads pass a bit back and forth through the shared
  word (A sets B's bit; B, spinning on ``test_bit``, claims it with
  ``test_and_clear_bit`` and sets A's bit): half a round trip is the time a
  bit takes to travel between the two CPUs through a contended word.

With fewer than :data:`MIN_CPUS_FOR_CURVE` usable CPUs the contention curve
says nothing about a many-CPU machine: the result then carries
``"curve": None`` and a ``"cannot"`` list of what cannot be measured here,
with the few points that were measured kept as such.
"""

from __future__ import annotations

import ctypes
import os
import time

from ..errors import NumalabError
from .cc import PRELUDE, compile_shared
from ..validate import integer

__all__ = ["BitopsUnavailable", "MIN_CPUS_FOR_CURVE", "library", "flips_per_second",
           "handoff_ns", "run_bitops", "curve_or_reason"]

#: Below this many usable CPUs no contention curve is drawn.
MIN_CPUS_FOR_CURVE = 4
MAX_THREADS = 1024
MAX_ITERS = 10 ** 9

_C_SOURCE = PRELUDE + r"""
#define LINE 128

struct word { _Alignas(LINE) _Atomic uint64_t w; };

struct flip_arg {
    struct word *word; int bit; int cpu; long iters; _Atomic int *go; int err; double ns;
};

/* set_bit then test_and_clear_bit of one's own bit, iters times */
static void *flipper(void *p) {
    struct flip_arg *a = p;
    if (pin(a->cpu)) { a->err = 1; }
    while (!atomic_load(a->go)) ;
    uint64_t m = 1ULL << a->bit;
    double t0 = now_ns();
    for (long i = 0; i < a->iters; i++) {
        atomic_fetch_or_explicit(&a->word->w, m, memory_order_acq_rel);
        atomic_fetch_and_explicit(&a->word->w, ~m, memory_order_acq_rel);
    }
    a->ns = now_ns() - t0;
    return NULL;
}

/* n threads on cpus[]; shared != 0: one word for all, else one line each.
   Returns flips (set + clear pairs) per second over the slowest thread;
   negative on error (-1 argument/memory, -2 thread, -3 pinning). */
double numalab_bit_flips(int n, const int *cpus, long iters, int shared) {
    if (n <= 0 || iters <= 0) return -1;
    struct word *words = aligned_alloc(LINE, sizeof(struct word) * n);
    struct flip_arg *args = calloc(n, sizeof(*args));
    pthread_t *th = calloc(n, sizeof(*th));
    if (!words || !args || !th) { free(words); free(args); free(th); return -1; }
    _Atomic int go = 0;
    int started = 0, err = 0;
    for (int i = 0; i < n; i++) {
        atomic_store(&words[i].w, 0);
        args[i] = (struct flip_arg){ shared ? &words[0] : &words[i], i % 64, cpus[i], iters,
                                     &go, 0, 0 };
        if (pthread_create(&th[i], NULL, flipper, &args[i])) { err = -2; break; }
        started++;
    }
    atomic_store(&go, 1);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    double worst = 0;
    for (int i = 0; i < started; i++) {
        if (args[i].err) err = -3;
        if (args[i].ns > worst) worst = args[i].ns;
    }
    free(words); free(args); free(th);
    if (err) return err;
    return worst > 0 ? (double)n * iters / (worst / 1e9) : -4;
}

struct ho_arg { struct word *word; int cpu; long iters; int err; };

static void *ho_partner(void *p) {
    struct ho_arg *a = p;
    if (pin(a->cpu)) { a->err = 1; atomic_fetch_or(&a->word->w, 1ULL << 63); return NULL; }
    for (long i = 0; i < a->iters; i++) {
        long spins = 0;
        /* test_bit(1) until A hands it over, then test_and_clear_bit(1) */
        while (!(atomic_load_explicit(&a->word->w, memory_order_acquire) & 2ULL))
            if (++spins % 4096 == 0) sched_yield();
        atomic_fetch_and_explicit(&a->word->w, ~2ULL, memory_order_acq_rel);
        atomic_fetch_or_explicit(&a->word->w, 1ULL, memory_order_acq_rel);   /* set_bit(0) */
    }
    return NULL;
}

/* ns per round trip of a bit between cpu_a and cpu_b through one word */
double numalab_bit_handoff(int cpu_a, int cpu_b, long iters) {
    if (iters <= 0) return -1;
    struct word *word = aligned_alloc(LINE, sizeof(*word));
    if (!word) return -1;
    atomic_store(&word->w, 0);
    struct ho_arg b = { word, cpu_b, iters, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, ho_partner, &b)) { free(word); return -2; }
    if (pin(cpu_a)) {
        /* let the partner finish: hand it every bit it waits for */
        for (long i = 0; i < iters; i++) atomic_fetch_or(&word->w, 2ULL);
        pthread_join(t, NULL); free(word); return -3;
    }
    double t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        atomic_fetch_or_explicit(&word->w, 2ULL, memory_order_acq_rel);      /* set_bit(1) */
        long spins = 0;
        uint64_t v;
        while (!((v = atomic_load_explicit(&word->w, memory_order_acquire)) & 1ULL)) {
            if (v >> 63) { pthread_join(t, NULL); free(word); return -3; }
            if (++spins % 4096 == 0) sched_yield();
        }
        atomic_fetch_and_explicit(&word->w, ~1ULL, memory_order_acq_rel);   /* test_and_clear_bit(0) */
    }
    double dt = now_ns() - t0;
    pthread_join(t, NULL);
    free(word);
    return b.err ? -3 : dt / iters;
}
"""


class BitopsUnavailable(NumalabError):
    """The bitmap benchmark cannot run here (no compiler, no thread pinning)."""


_LIB: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """Compile (once per source version, cached under ~/.cache/numalab) and
    load the benchmark library."""
    global _LIB
    if _LIB is not None:
        return _LIB
    lib = compile_shared("bitops", _C_SOURCE, BitopsUnavailable, "bitmap benchmark")
    lib.numalab_bit_flips.restype = ctypes.c_double
    lib.numalab_bit_flips.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_long,
                                      ctypes.c_int]
    lib.numalab_bit_handoff.restype = ctypes.c_double
    lib.numalab_bit_handoff.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long]
    _LIB = lib
    return lib


def _usable() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def _failed(what: str, code: float) -> BitopsUnavailable:
    why = {-1: "bad argument or no memory", -2: "cannot start a thread",
           -3: "cannot pin a thread to its CPU", -4: "no time elapsed"}.get(int(code), str(code))
    return BitopsUnavailable(f"bitmap benchmark: {what}: {why}")


def flips_per_second(cpus: list[int], iters: int, shared: bool = True) -> float:
    """Set+clear pairs per second of ``len(cpus)`` threads (one per CPU of
    ``cpus``), each on its own bit of one shared word (``shared``) or of a
    word on its own line."""
    n = integer("threads", len(cpus), 1, MAX_THREADS)
    iters = integer("iters", iters, 1, MAX_ITERS)
    arr = (ctypes.c_int * n)(*cpus)
    v = library().numalab_bit_flips(n, arr, iters, 1 if shared else 0)
    if v < 0:
        raise _failed(f"flips on CPUs {list(cpus)}", v)
    return v


def handoff_ns(cpu_a: int, cpu_b: int, iters: int) -> float:
    """Nanoseconds for a bit to go from ``cpu_a`` to ``cpu_b`` through a
    shared word (half a measured round trip)."""
    iters = integer("iters", iters, 1, MAX_ITERS)
    lib = library()
    saved = os.sched_getaffinity(0)     # the C side pins the calling thread to cpu_a
    try:
        v = lib.numalab_bit_handoff(cpu_a, cpu_b, iters)
    finally:
        os.sched_setaffinity(0, saved)
    if v < 0:
        raise _failed(f"hand-off between CPUs {cpu_a} and {cpu_b}", v)
    return v / 2


def curve_or_reason(ncpus: int) -> tuple[bool, list[str]]:
    """Whether ``ncpus`` usable CPUs can give a contention curve, and what
    cannot be measured otherwise.

    >>> curve_or_reason(8)
    (True, [])
    >>> ok, cannot = curve_or_reason(2)
    >>> ok, len(cannot)
    (False, 3)
    """
    if ncpus >= MIN_CPUS_FOR_CURVE:
        return True, []
    return False, [
        f"how a shared idle-mask word scales with writers: {ncpus} CPUs give at most "
        f"{ncpus} points, not a curve (at least {MIN_CPUS_FOR_CURVE} CPUs are needed)",
        "hand-off latency between nodes: the machine has no second node"
        if ncpus < 2 else "hand-off latency between nodes needs CPUs on two nodes",
        "queueing of several writers behind one line (needs more writers than two)",
    ]


def run_bitops(quick: bool = False, max_threads: int | None = None) -> dict:
    """The benchmark as a JSON-able dict: ``cpus_used``, ``flips`` (one row
    per thread count: ``threads``, ``shared_flips_per_s``,
    ``own_line_flips_per_s``, ``ns_per_flip_shared``), ``handoff`` (CPU
    pairs from the first CPU: ``cpu_a``, ``cpu_b``, ``ns``), ``curve``
    (True when there are enough CPUs for a curve, else None) and ``cannot``
    (what cannot be measured here)."""
    cpus = _usable()
    if max_threads is not None:
        integer("max_threads", max_threads, 1, MAX_THREADS)
    top = min(len(cpus), max_threads or len(cpus), 64)
    iters = 200_000 if quick else 2_000_000
    t0 = time.time()
    rows = []
    for n in range(1, top + 1):
        shared = flips_per_second(cpus[:n], iters, shared=True)
        own = flips_per_second(cpus[:n], iters, shared=False)
        rows.append({"threads": n, "shared_flips_per_s": round(shared),
                     "own_line_flips_per_s": round(own),
                     # time per set+clear pair as each thread sees it
                     "ns_per_flip_shared": round(1e9 * n / shared, 2)})
    hand = []
    ho_iters = 20_000 if quick else 200_000
    for b in cpus[1:min(len(cpus), 17)]:
        hand.append({"cpu_a": cpus[0], "cpu_b": b, "ns": round(handoff_ns(cpus[0], b, ho_iters), 2)})
    ok, cannot = curve_or_reason(len(cpus))
    return {"cpus_used": cpus, "flips": rows, "handoff": hand,
            "curve": True if ok else None, "cannot": cannot,
            "iters": iters, "seconds": round(time.time() - t0, 2)}
