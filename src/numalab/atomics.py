"""A native microbenchmark of cache-line traffic, compiled at run time.

Two measurements, both with threads pinned to CPUs:

* **core-to-core round trip**: two threads take turns writing one shared
  cache line (a ping-pong on an atomic word). The time of one round trip is
  about two cache-line transfers between the two CPUs; the matrix over all
  CPU pairs shows which CPUs share a core, a cache, a node.
* **contended increments**: N threads increment one shared atomic counter
  (what ``refcount_inc()`` does: every CPU writes the same line) versus each
  thread incrementing its own counter on its own cache line (what
  ``percpu_ref_get()`` does in percpu mode).

The C source below is compiled with the system compiler (``cc``) into a
shared library loaded with ctypes; where there is no compiler, or the
platform cannot pin threads, :class:`BenchUnavailable` says so and callers
skip. Results are plain dicts, so they can be stored in a dump's
``numalab/bench.json`` and read back by the chapters.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import __version__
from .errors import NumalabError, ParameterError
from .validate import integer, number, option_integer

__all__ = ["BenchUnavailable", "library", "pingpong_ns", "pingpong_robust_ns", "latency_matrix",
           "contended_increments", "run_atomics", "bench_tables", "render"]

_C_SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define LINE 128   /* two lines: keeps adjacent-line prefetch out of the way */

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

/* ---- ping-pong ---------------------------------------------------------- */
struct pp { _Alignas(LINE) _Atomic long flag; };
struct pp_arg { struct pp *line; int cpu; long iters; int err; };

/* After this many empty spins the partner is probably not running (a busy
   machine): give the CPU away instead of burning the partner's chance. */
#define SPINS_BEFORE_YIELD 4096

static void *pong(void *p) {
    struct pp_arg *a = p;
    /* err is read by the other thread's spin loop: the -2 below can be
       overwritten by its next store, the err flag cannot */
    if (pin(a->cpu)) { __atomic_store_n(&a->err, 1, __ATOMIC_RELEASE);
                       atomic_store(&a->line->flag, -2); return NULL; }
    for (long i = 0; i < a->iters; i++) {
        long spins = 0;
        while (atomic_load_explicit(&a->line->flag, memory_order_acquire) != 2 * i + 1) {
            if (atomic_load_explicit(&a->line->flag, memory_order_relaxed) == -1) return NULL;
            if (++spins % SPINS_BEFORE_YIELD == 0) sched_yield();
        }
        atomic_store_explicit(&a->line->flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

/* Nanoseconds per round trip between cpu_a and cpu_b; negative on error
   (-1 bad argument or no memory, -2 no thread, -3 cannot pin). The partner
   thread, once started, is joined on every path. */
double numalab_pingpong(int cpu_a, int cpu_b, long iters) {
    if (iters <= 0) return -1;
    struct pp *line = aligned_alloc(LINE, sizeof(*line));
    if (!line) return -1;
    atomic_store(&line->flag, 0);
    struct pp_arg b = { line, cpu_b, iters, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, pong, &b)) { free(line); return -2; }
    if (pin(cpu_a)) { atomic_store(&line->flag, -1); pthread_join(t, NULL); free(line); return -3; }
    double t0 = now_ns();
    for (long i = 0; i < iters; i++) {
        atomic_store_explicit(&line->flag, 2 * i + 1, memory_order_release);
        long v;
        while ((v = atomic_load_explicit(&line->flag, memory_order_acquire)) != 2 * i + 2)
            if (v == -2 || __atomic_load_n(&b.err, __ATOMIC_ACQUIRE)) {
                pthread_join(t, NULL); free(line); return -3; }
    }
    double dt = now_ns() - t0;
    pthread_join(t, NULL);
    free(line);
    return b.err ? -3 : dt / iters;
}

/* Like numalab_pingpong, but times every block of `chunk` round trips into
   out[0 .. iters/chunk - 1] (ns per round trip): a block during which a
   thread was preempted stands out, so the caller can take the median. */
int numalab_pingpong_chunks(int cpu_a, int cpu_b, long iters, long chunk, double *out,
                            double max_ns) {
    if (chunk <= 0 || iters < chunk) return -1;
    struct pp *line = aligned_alloc(LINE, sizeof(*line));
    if (!line) return -1;
    atomic_store(&line->flag, 0);
    struct pp_arg b = { line, cpu_b, iters, 0 };
    pthread_t t;
    if (pthread_create(&t, NULL, pong, &b)) { free(line); return -2; }
    if (pin(cpu_a)) { atomic_store(&line->flag, -1); pthread_join(t, NULL); free(line); return -3; }
    double t0 = now_ns(), start = t0;
    long n = 0;
    for (long i = 0; i < iters; i++) {
        atomic_store_explicit(&line->flag, 2 * i + 1, memory_order_release);
        long v, spins = 0;
        while ((v = atomic_load_explicit(&line->flag, memory_order_acquire)) != 2 * i + 2) {
            if (v == -2 || __atomic_load_n(&b.err, __ATOMIC_ACQUIRE)) {
                pthread_join(t, NULL); free(line); return -3; }
            if (++spins % SPINS_BEFORE_YIELD == 0) sched_yield();
        }
        if ((i + 1) % chunk == 0) {
            double t1 = now_ns();
            out[n++] = (t1 - t0) / chunk;
            t0 = t1;
            if (max_ns > 0 && t1 - start > max_ns && i + 1 < iters) {
                /* out of time: stop the partner (it waits for 2i+3) */
                atomic_store(&line->flag, -1);
                break;
            }
        }
    }
    pthread_join(t, NULL);
    free(line);
    return b.err ? -3 : (int)n;
}

/* ---- contended increments ------------------------------------------------ */
struct slot { _Alignas(LINE) _Atomic long v; };
struct inc_arg { _Atomic long *counter; int cpu; long iters; _Atomic int *go; int err; double ns; };

static void *incr(void *p) {
    struct inc_arg *a = p;
    if (pin(a->cpu)) a->err = 1;
    int go;
    while (!(go = atomic_load(a->go))) sched_yield();   /* start barrier, not timed */
    if (go < 0) return NULL;     /* a later thread could not start: stop untouched */
    double t0 = now_ns();
    for (long i = 0; i < a->iters; i++)
        atomic_fetch_add_explicit(a->counter, 1, memory_order_relaxed);
    a->ns = now_ns() - t0;
    return NULL;
}

/* Total increments per second of n threads; shared != 0: one counter for all.
   Negative on error: -1 bad argument or no memory, -2 a thread could not be
   created, -3 a thread could not be pinned, -4 nothing measured. Every
   thread started is joined before returning, on every path (they wait on
   `go`, a variable of this function: none may outlive it). */
double numalab_increments(int n, const int *cpus, long iters, int shared) {
    if (n <= 0 || iters <= 0) return -1;
    struct slot *slots = aligned_alloc(LINE, sizeof(struct slot) * n);
    struct inc_arg *args = calloc(n, sizeof(*args));
    pthread_t *th = calloc(n, sizeof(*th));
    _Atomic int go = 0;
    if (!slots || !args || !th) { free(slots); free(args); free(th); return -1; }
    int started = 0;
    for (int i = 0; i < n; i++) {
        atomic_store(&slots[i].v, 0);
        args[i] = (struct inc_arg){ shared ? &slots[0].v : &slots[i].v, cpus[i], iters, &go, 0, 0 };
        if (pthread_create(&th[i], NULL, incr, &args[i])) break;
        started++;
    }
    atomic_store(&go, started == n ? 1 : -1);
    double worst = 0; int err = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        if (args[i].ns > worst) worst = args[i].ns;
        err |= args[i].err;
    }
    free(slots); free(args); free(th);
    if (started < n) return -2;
    if (err) return -3;
    return worst > 0 ? (double)n * iters / (worst / 1e9) : -4;
}
"""


class BenchUnavailable(NumalabError):
    """The benchmark cannot run here (no compiler, no thread pinning)."""


_LIB: ctypes.CDLL | None = None


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "numalab"


def library() -> ctypes.CDLL:
    """Compile (once per source version) and load the benchmark library."""
    global _LIB
    if _LIB is not None:
        return _LIB
    if not sys.platform.startswith("linux"):
        raise BenchUnavailable("the atomics benchmark pins threads with Linux affinity calls")
    cc_env = os.environ.get("CC", "").strip()
    try:
        cc_cmd = shlex.split(cc_env) if cc_env else []
    except ValueError as e:
        raise BenchUnavailable(f"CC={cc_env!r} cannot be read as a command: {e}") from None
    if not cc_cmd:
        found = shutil.which("cc") or shutil.which("gcc")
        cc_cmd = [found] if found else []
    if not cc_cmd:
        raise BenchUnavailable("no C compiler (cc or gcc) on PATH; install one to run the benchmark")
    cc = " ".join(cc_cmd)
    digest = hashlib.sha256(_C_SOURCE.encode()).hexdigest()[:16]
    out = _cache_dir() / f"atomics-{digest}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src = Path(tmp) / "atomics.c"
            src.write_text(_C_SOURCE)
            so = Path(tmp) / "atomics.so"
            try:
                r = subprocess.run([*cc_cmd, "-O2", "-std=c11", "-shared", "-fPIC", "-pthread",
                                    str(src), "-o", str(so)], capture_output=True, text=True)
            except OSError as e:       # CC names no program, or one that cannot run
                raise BenchUnavailable(f"cannot run the C compiler {cc!r} (CC): "
                                       f"{e.strerror or e}") from None
            if r.returncode != 0:
                why = (r.stderr.strip().splitlines()[-1] if r.stderr.strip()
                       else f"exit status {r.returncode}")
                raise BenchUnavailable(f"compiling the benchmark with {cc} failed: {why}")
            os.replace(so, out)
    try:
        lib = ctypes.CDLL(str(out))
    except OSError as e:
        raise BenchUnavailable(f"cannot load the compiled benchmark {out}: {e}") from None
    lib.numalab_pingpong.restype = ctypes.c_double
    lib.numalab_pingpong.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long]
    lib.numalab_pingpong_chunks.restype = ctypes.c_int
    lib.numalab_pingpong_chunks.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                                            ctypes.c_long, ctypes.POINTER(ctypes.c_double),
                                            ctypes.c_double]
    lib.numalab_increments.restype = ctypes.c_double
    lib.numalab_increments.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_long,
                                       ctypes.c_int]
    _LIB = lib
    return lib


class _KeepAffinity:
    """The ping-pong pins the *calling* thread; put its CPU set back after,
    or everything the process does next runs on one CPU."""

    def __enter__(self):
        self.saved = os.sched_getaffinity(0)
        return self

    def __exit__(self, *exc):
        os.sched_setaffinity(0, self.saved)
        return False


def _usable_cpus() -> list[int]:
    return sorted(os.sched_getaffinity(0))


MAX_ITERS = 10 ** 10       # round trips or increments per call (hours at most)
MAX_REPEATS = 1000
MAX_THREADS = 1024         # threads of one increments run


def _check_cpus(name: str, cpus, *, distinct: bool = True) -> list[int]:
    """``cpus`` as a list of CPU numbers this process may run on.

    A non-integer, a negative number, a repeated CPU (when ``distinct``) or
    an empty list is a ParameterError; a CPU outside this process's
    affinity is BenchUnavailable (it cannot be measured here).

    >>> _check_cpus("cpus", [-1])
    Traceback (most recent call last):
    numalab.errors.ParameterError: cpus: CPU must be an integer >= 0, not -1
    """
    if isinstance(cpus, (str, bytes)) or not hasattr(cpus, "__iter__"):
        raise ParameterError(f"{name} must be a list of CPU numbers, not {cpus!r}")
    out = [integer(f"{name}: CPU", c, 0) for c in cpus]
    if not out:
        raise ParameterError(f"{name} must name at least one CPU")
    if distinct and len(set(out)) != len(out):
        raise ParameterError(f"{name} must not repeat a CPU: {out}")
    usable = set(_usable_cpus())
    bad = [c for c in out if c not in usable]
    if bad:
        from .cpumask import format_cpulist
        def show(cs):
            return format_cpulist(sum(1 << c for c in cs)) or "none"
        raise BenchUnavailable(f"cannot pin threads to CPU(s) {show(bad)}: this process may "
                               f"use CPUs {show(usable)}")
    return out


def _pair(cpu_a: int, cpu_b: int) -> tuple[int, int]:
    a, b = _check_cpus("cpu_a, cpu_b", [cpu_a, cpu_b], distinct=False)
    if a == b:
        raise ParameterError(f"a round trip needs two different CPUs, not {a} and {b}")
    return a, b


_C_ERRORS = {-1: "bad argument or out of memory", -2: "cannot create a thread",
             -3: "cannot pin a thread to its CPU", -4: "nothing measured"}


def _failed(what: str, code: float) -> BenchUnavailable:
    return BenchUnavailable(f"{what}: {_C_ERRORS.get(int(code), f'error {code:g}')}")


def pingpong_ns(cpu_a: int, cpu_b: int, iters: int = 20000, repeats: int = 3) -> float:
    """Best-of-``repeats`` nanoseconds per round trip between two different
    CPUs this process may use (``iters`` round trips per repeat, >= 1)."""
    cpu_a, cpu_b = _pair(cpu_a, cpu_b)
    iters = integer("iters", iters, 1, MAX_ITERS)
    repeats = integer("repeats", repeats, 1, MAX_REPEATS)
    lib = library()
    best = float("inf")
    for _ in range(repeats):
        with _KeepAffinity():
            v = lib.numalab_pingpong(cpu_a, cpu_b, iters)
        if v < 0:
            raise _failed(f"round trip between CPUs {cpu_a} and {cpu_b}", v)
        best = min(best, v)
    return best


def pingpong_robust_ns(cpu_a: int, cpu_b: int, iters: int = 20000, chunk: int = 200,
                       max_seconds: float = 2.0) -> dict:
    """Round trip between two CPUs, robust to preemption on a busy machine.

    Times blocks of ``chunk`` round trips; returns ``{"median_ns", "min_ns",
    "p90_ns", "chunks"}`` over the blocks. On an idle machine median and
    min agree; when other work shares the CPUs, blocks where one side was
    descheduled inflate the mean by orders of magnitude but leave the
    median close to the hardware's figure. Stops after ``max_seconds``
    (at least one block), so an oversubscribed machine cannot stall it.
    """
    import statistics

    cpu_a, cpu_b = _pair(cpu_a, cpu_b)
    iters = integer("iters", iters, 1, MAX_ITERS)
    chunk = integer("chunk", chunk, 1, iters)
    number("max_seconds", max_seconds, 0, 24 * 3600, lo_open=True)
    lib = library()
    n = max(1, iters // chunk)
    out = (ctypes.c_double * n)()
    with _KeepAffinity():
        got = lib.numalab_pingpong_chunks(cpu_a, cpu_b, n * chunk, chunk, out,
                                          max_seconds * 1e9)
    if got <= 0:
        raise _failed(f"round trips between CPUs {cpu_a} and {cpu_b}", got if got < 0 else -4)
    xs = sorted(out[:got])
    return {"median_ns": statistics.median(xs), "min_ns": xs[0],
            "p90_ns": xs[min(len(xs) - 1, int(0.9 * len(xs)))], "chunks": got}


def latency_matrix(cpus: list[int] | None = None, iters: int = 20000,
                   progress=None) -> dict:
    """Round-trip latency (ns) for every ordered pair of distinct CPUs.

    Returns ``{"cpus": [...], "round_trip_ns": [[...]]}`` with ``None`` on the
    diagonal (a CPU with itself has no transfer). Each value is the median
    over blocks of 200 round trips (:func:`pingpong_robust_ns`), so a
    machine busy with other work still gives its hardware figure;
    ``"round_trip_min_ns"`` holds the fastest block.
    """
    cpus = _check_cpus("cpus", cpus) if cpus is not None else _usable_cpus()
    iters = integer("iters", iters, 1, MAX_ITERS)
    mat: list[list[float | None]] = [[None] * len(cpus) for _ in cpus]
    mins: list[list[float | None]] = [[None] * len(cpus) for _ in cpus]
    pairs = [(i, j) for i in range(len(cpus)) for j in range(len(cpus)) if i < j]
    for k, (i, j) in enumerate(pairs):
        r = pingpong_robust_ns(cpus[i], cpus[j], iters, chunk=min(200, max(1, iters // 10)))
        mat[i][j] = mat[j][i] = round(r["median_ns"], 2)
        mins[i][j] = mins[j][i] = round(r["min_ns"], 2)
        if progress:
            progress(k + 1, len(pairs))
    return {"cpus": cpus, "round_trip_ns": mat, "round_trip_min_ns": mins,
            "estimator": "median of blocks of round trips"}


def contended_increments(n: int, cpus: list[int] | None = None, iters: int = 2_000_000,
                         shared: bool = True, repeats: int = 3) -> float:
    """Best-of-``repeats`` total increments/s of ``n`` threads.

    Threads are pinned round-robin over ``cpus`` (default: the CPUs this
    process may use); with more threads than CPUs they time-share.
    """
    n = integer("n", n, 1, MAX_THREADS)
    pool = _check_cpus("cpus", cpus, distinct=False) if cpus is not None else _usable_cpus()
    iters = integer("iters", iters, 1, MAX_ITERS)
    repeats = integer("repeats", repeats, 1, MAX_REPEATS)
    lib = library()
    placed = (ctypes.c_int * n)(*[pool[i % len(pool)] for i in range(n)])
    best = 0.0
    for _ in range(repeats):
        v = lib.numalab_increments(n, placed, iters, 1 if shared else 0)
        if v < 0:
            raise _failed(f"increments on CPUs {list(placed)}", v)
        best = max(best, v)
    return best


def run_atomics(max_threads: int | None = None, quick: bool = False, progress=None) -> dict:
    """The full benchmark as one JSON-able dict (what ``collect --bench`` stores)."""
    if max_threads is not None:
        integer("max_threads", max_threads, 1, MAX_THREADS)
    cpus = _usable_cpus()
    max_threads = max_threads or max(2, len(cpus))
    iters_pp = 2000 if quick else 20000
    iters_inc = 1_000_000 if quick else 4_000_000
    t0 = time.time()
    lat = latency_matrix(cpus, iters_pp, progress=progress) if len(cpus) > 1 else \
        {"cpus": cpus, "round_trip_ns": [[None]]}
    rows = []
    for n in range(1, max_threads + 1):
        shared = contended_increments(n, cpus, iters_inc, shared=True)
        percpu = contended_increments(n, cpus, iters_inc, shared=False)
        rows.append({"threads": n, "shared_ops_per_s": round(shared),
                     "percpu_ops_per_s": round(percpu)})
    return {
        "numalab": __version__,
        "kind": "atomics",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus_used": cpus,
        "latency": lat,
        "increments": rows,
        "seconds": round(time.time() - t0, 2),
        # other work on the machine makes the increments optimistic (a thread
        # that is not running does not contend); readers should see it
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def bench_tables(result: dict):
    """A benchmark dict as two tidy DataFrames, for charts.

    ``latency``: one row per ordered CPU pair (``cpu_a``, ``cpu_b``,
    ``round_trip_ns``, ``transfer_ns`` = half of it). ``increments``: one
    row per thread count and counter (``threads``, ``counter`` "one shared
    counter" / "one counter per thread", ``mops_per_s``).

    >>> lat, inc = bench_tables({"latency": {"cpus": [0, 1],
    ...     "round_trip_ns": [[None, 80.0], [80.0, None]]},
    ...     "increments": [{"threads": 2, "shared_ops_per_s": 4e7, "percpu_ops_per_s": 1e8}]})
    >>> lat["transfer_ns"].tolist(), inc["mops_per_s"].tolist()
    ([40.0, 40.0], [40.0, 100.0])
    """
    import pandas as pd

    lat = result.get("latency", {})
    cpus, mat = lat.get("cpus", []), lat.get("round_trip_ns", [])
    rows = [{"cpu_a": a, "cpu_b": b, "round_trip_ns": mat[i][j], "transfer_ns": mat[i][j] / 2}
            for i, a in enumerate(cpus) for j, b in enumerate(cpus)
            if i != j and mat[i][j] is not None]
    inc = [{"threads": r["threads"], "counter": name, "mops_per_s": r[key] / 1e6}
           for r in result.get("increments", [])
           for name, key in (("one shared counter", "shared_ops_per_s"),
                             ("one counter per thread", "percpu_ops_per_s"))]
    return (pd.DataFrame(rows, columns=["cpu_a", "cpu_b", "round_trip_ns", "transfer_ns"]),
            pd.DataFrame(inc, columns=["threads", "counter", "mops_per_s"]))


# -- ``numalab bench atomics`` -------------------------------------------------

def _bench_arguments(p) -> None:
    p.add_argument("--quick", action="store_true",
                   help="fewer iterations: noisier, much faster")
    p.add_argument("--max-threads", type=option_integer(1, MAX_THREADS), metavar="N",
                   help=f"largest thread count of the increments table, 1..{MAX_THREADS} "
                        f"(default: the CPUs this process may use, at least 2)")


def _bench_run(args) -> dict:
    if args.max_threads is not None:
        integer("--max-threads", args.max_threads, 1, MAX_THREADS)
    return run_atomics(max_threads=args.max_threads, quick=args.quick)


def render(result: dict) -> str:
    """The benchmark dict as text: the round-trip matrix, then the increments.

    >>> print(render({"latency": {"cpus": [0, 1], "round_trip_ns": [[None, 80.0], [80.0, None]]},
    ...               "increments": [{"threads": 1, "shared_ops_per_s": 5e7,
    ...                               "percpu_ops_per_s": 5e7}], "seconds": 1}))
    ... # doctest: +NORMALIZE_WHITESPACE
    core-to-core round trip (ns, median of blocks; one transfer is about half)
      cpu      0      1
        0      -   80.0
        1   80.0      -
    increments (millions per second, all threads together)
      threads  one shared counter  one counter per thread  ratio
            1                50.0                    50.0   1.00
    measured in 1 s
    """
    lat = result.get("latency", {})
    cpus, mat = lat.get("cpus", []), lat.get("round_trip_ns", [])
    lines = ["core-to-core round trip (ns, median of blocks; one transfer is about half)"]
    if len(cpus) > 1:
        lines.append("  cpu" + "".join(f"{c:>7}" for c in cpus))
        for c, row in zip(cpus, mat):
            lines.append(f"{c:>5}" + "".join(f"{'-':>7}" if v is None else f"{v:>7.1f}"
                                             for v in row))
    else:
        lines.append("  (one CPU: no pair to measure)")
    lines.append("increments (millions per second, all threads together)")
    lines.append("  threads  one shared counter  one counter per thread  ratio")
    for r in result.get("increments", []):
        s, p = r["shared_ops_per_s"] / 1e6, r["percpu_ops_per_s"] / 1e6
        lines.append(f"  {r['threads']:>7}  {s:>18.1f}  {p:>22.1f}  {p / s if s else 0:>5.2f}")
    tail = f"measured in {result.get('seconds', '?')} s"
    if result.get("loadavg"):
        tail += f", load average {result['loadavg'][0]} (other work makes the shared " \
                "counter look better than it is)"
    lines.append(tail)
    return "\n".join(lines)


def _register() -> None:
    try:
        from .bench import Benchmark, register
    except ImportError:      # the bench command is not there: nothing to register
        return
    register(Benchmark(
        name="atomics",
        help="cache-line round trips between CPU pairs and shared vs per-thread atomic "
             "increments (the cost behind refcount_t vs percpu_ref)",
        add_arguments=_bench_arguments, run=_bench_run, render=render))


_register()
