"""A native microbenchmark of cache-line traffic, compiled at run time.

Two measurements, both with threads pinned to CPUs:

* **core-to-core round trip**: two threads take turns writing one shared
  cache line (a ping-pong on an atomic word). The time of one round trip is
  about two cache-line transfers between the two CPUs; the matrix over all
  CPU pairs shows which CPUs share a core, a cache, a node.
* **reference operations** (:func:`refops`, the ``refops`` record): the
  operations the devmem percpu_ref patch changes. The patch's base (net-next,
  November 2025) called ``refcount_inc_not_zero()`` and
  ``refcount_dec_and_test()``; the benchmark writes them as
  ``include/linux/refcount.h`` of Linux 7.2 does on x86
  (``__refcount_add_not_zero()``: a read, then a ``lock cmpxchg`` loop;
  ``__refcount_sub_and_test()``: a release ``lock xadd`` and the zero test)
  -- against ``this_cpu_add()`` (one *unlocked* add on the CPU's own
  counter), by 1..N threads with a fixed work loop between operations
  (none, then two levels).
  Threads are released together by a barrier; each trial measures how long
  all threads really ran at once and is rejected below 90 %; at least 10
  accepted trials give a median and a range.
* **contended increments** (:func:`contended_increments`, kept for the
  records written before ``refops``): ``fetch_add`` on one word against a
  ``lock add`` per thread, best of 3 -- neither arm is the kernel's, and
  nothing checks that the threads overlapped.

The C source below is compiled with the system compiler (``cc``) into a
shared library loaded with ctypes; where there is no compiler, or the
platform cannot pin threads, :class:`BenchUnavailable` says so and callers
skip. Results are plain dicts, so they can be stored in a dump's
``numalab/bench.json`` and read back by the chapters.
"""

from __future__ import annotations

import ctypes
import os
import time

from .. import __version__
from ..errors import NumalabError, ParameterError
from ..validate import integer, number, one_of, option_integer
from .cc import PRELUDE, compile_shared

__all__ = ["BenchUnavailable", "library", "pingpong_ns", "pingpong_robust_ns", "latency_matrix",
           "contended_increments", "run_atomics", "run_atomics_repeated", "runs_of", "runs_table",
           "spread_over_runs", "host_cpu", "bench_tables", "render", "load_gate", "dump_cpu_model",
           "cannot_show_contention", "contention_check", "gate_label"]

_C_SOURCE = PRELUDE + r"""
#define LINE 128   /* two lines: keeps adjacent-line prefetch out of the way */

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

/* ---- refcount_t vs percpu_ref: the operations the devmem patch changes ----
   Written as Linux 7.2's include/linux/refcount.h and percpu-refcount.h do on
   x86 (the helpers the patch's base called):
   get  = refcount_inc_not_zero() -> __refcount_add_not_zero(): read, then a
          try_cmpxchg loop (lock cmpxchg), saturation test on the old value;
   put  = refcount_dec_and_test() -> __refcount_sub_and_test(): release
          fetch_sub (lock xadd), acquire fence when the old value was 1,
          saturation test;
   percpu = percpu_ref_get/put_many() in percpu mode: this_cpu_add() on the
          CPU's own counter, one unlocked add (the rcu_read_lock() around it
          is a preempt-count or nesting-count update, also unlocked, and is
          not reproduced).
   Threads are released together by a barrier, run for a fixed time, sample
   the clock every `chunk` operations and add up gaps longer than GAP_NS
   (time they were not running): the caller gets each thread's interval and
   stolen time, so it can measure how long all of them really ran at once. */
#define GAP_NS 200000.0
enum { OP_GET = 0, OP_PUT = 1, OP_SPLIT = 2 };
struct rc { _Alignas(LINE) _Atomic int refs; };
struct pcount { _Alignas(LINE) volatile long v; };
struct ro_arg { struct rc *rc; struct pcount *mine; int cpu, index, op, percpu; long work, chunk;
                double dur_ns; _Atomic int *ready, *go, *stop;
                long ops, warn; double t0, t1, stolen; int err; };

static inline long spin_work(long n, long x) {
    for (long i = 0; i < n; i++) {
        x = x * 6364136223846793005L + 1442695040888963407L;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

static inline int rc_get(struct rc *r) {          /* refcount_inc_not_zero() */
    int old = atomic_load_explicit(&r->refs, memory_order_relaxed);
    do {
        if (!old) break;
    } while (!atomic_compare_exchange_strong_explicit(&r->refs, &old, old + 1,
                                                      memory_order_relaxed,
                                                      memory_order_relaxed));
    return old <= 0 || old + 1 < 0;              /* would WARN (saturate) */
}

static inline int rc_put(struct rc *r) {          /* refcount_dec_and_test() */
    int old = atomic_fetch_sub_explicit(&r->refs, 1, memory_order_release);
    if (old == 1) { atomic_thread_fence(memory_order_acquire); return 1; }
    return old < 0 || old - 1 < 0;
}

static void *refops_thread(void *p) {
    struct ro_arg *a = p;
    if (pin(a->cpu)) a->err = 1;
    atomic_fetch_add(a->ready, 1);
    int go; long spins = 0;
    while (!(go = atomic_load_explicit(a->go, memory_order_acquire)))
        if (++spins % SPINS_BEFORE_YIELD == 0) sched_yield();
    if (go < 0) return NULL;
    int op = a->op == OP_SPLIT ? ((a->index & 1) ? OP_PUT : OP_GET) : a->op;
    long ops = 0, warn = 0, x = a->index + 1;
    double t0 = now_ns(), last = t0, stolen = 0;
    for (;;) {
        for (long k = 0; k < a->chunk; k++) {
            x = spin_work(a->work, x);
            if (a->percpu)
                a->mine->v += (op == OP_GET) ? 1 : -1;        /* this_cpu_add() */
            else if (op == OP_GET)
                warn += rc_get(a->rc);
            else
                warn += rc_put(a->rc);
        }
        ops += a->chunk;
        double t = now_ns();
        if (t - last > GAP_NS) stolen += t - last;
        last = t;
        if (atomic_load_explicit(a->stop, memory_order_relaxed)) break;
        if (t - t0 >= a->dur_ns) { atomic_store_explicit(a->stop, 1, memory_order_relaxed); break; }
    }
    a->t0 = t0; a->t1 = last; a->ops = ops; a->warn = warn + (x == 42);  /* keep x live */
    a->stolen = stolen;
    return NULL;
}

/* One trial: n threads on cpus[], operation op (0 get, 1 put, 2 split: even
   threads get, odd threads put), percpu != 0 for the per-CPU counter, `work`
   spin iterations between operations, the clock read every `chunk`
   operations, about dur_ns of running time. out[] receives, per thread i,
   out[4i..4i+3] = operations, start ns, end ns, stolen ns (start and end on
   one CLOCK_MONOTONIC scale). Returns 0, or -1 bad argument / no memory,
   -2 a thread could not be created, -3 a thread could not be pinned,
   -5 a saturation warning fired. Every thread started is joined before
   returning, on every path. */
int numalab_refops(int n, const int *cpus, int op, int percpu, long work, long chunk,
                   double dur_ns, double *out) {
    if (n <= 0 || chunk <= 0 || work < 0 || dur_ns <= 0 || op < 0 || op > 2) return -1;
    struct rc *rc = aligned_alloc(LINE, sizeof(*rc));
    struct pcount *mine = aligned_alloc(LINE, sizeof(struct pcount) * n);
    struct ro_arg *args = calloc(n, sizeof(*args));
    pthread_t *th = calloc(n, sizeof(*th));
    _Atomic int ready = 0, go = 0, stop = 0;
    if (!rc || !mine || !args || !th) { free(rc); free(mine); free(args); free(th); return -1; }
    atomic_store(&rc->refs, 1 << 30);      /* far from 0 and from saturation */
    int started = 0;
    for (int i = 0; i < n; i++) {
        mine[i].v = 0;
        args[i] = (struct ro_arg){ rc, &mine[i], cpus[i], i, op, percpu, work, chunk, dur_ns,
                                   &ready, &go, &stop, 0, 0, 0, 0, 0, 0 };
        if (pthread_create(&th[i], NULL, refops_thread, &args[i])) break;
        started++;
    }
    if (started == n) {
        long spins = 0;
        while (atomic_load(&ready) < n)       /* every thread pinned and waiting */
            if (++spins % SPINS_BEFORE_YIELD == 0) sched_yield();
    }
    atomic_store_explicit(&go, started == n ? 1 : -1, memory_order_release);
    int err = 0; long warn = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(th[i], NULL);
        err |= args[i].err;
        warn += args[i].warn;
        out[4 * i] = (double)args[i].ops; out[4 * i + 1] = args[i].t0;
        out[4 * i + 2] = args[i].t1; out[4 * i + 3] = args[i].stolen;
    }
    free(rc); free(mine); free(args); free(th);
    if (started < n) return -2;
    if (err) return -3;
    return warn ? -5 : 0;
}

/* Nanoseconds that `iters` iterations of the work loop take on this CPU. */
double numalab_spin_ns(long iters) {
    double t0 = now_ns();
    long x = spin_work(iters, 1);
    double dt = now_ns() - t0;
    return dt + (x == 42 ? 1e-9 : 0);
}
"""


class BenchUnavailable(NumalabError):
    """The benchmark cannot run here (no compiler, no thread pinning)."""


_LIB: ctypes.CDLL | None = None


def library() -> ctypes.CDLL:
    """Compile (once per source version) and load the benchmark library."""
    global _LIB
    if _LIB is not None:
        return _LIB
    lib = compile_shared("atomics", _C_SOURCE, BenchUnavailable, "benchmark")
    lib.numalab_pingpong.restype = ctypes.c_double
    lib.numalab_pingpong.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long]
    lib.numalab_pingpong_chunks.restype = ctypes.c_int
    lib.numalab_pingpong_chunks.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long,
                                            ctypes.c_long, ctypes.POINTER(ctypes.c_double),
                                            ctypes.c_double]
    lib.numalab_refops.restype = ctypes.c_int
    lib.numalab_refops.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                   ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_double,
                                   ctypes.POINTER(ctypes.c_double)]
    lib.numalab_spin_ns.restype = ctypes.c_double
    lib.numalab_spin_ns.argtypes = [ctypes.c_long]
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
        from ..cpumask import format_cpulist
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
             -3: "cannot pin a thread to its CPU", -4: "nothing measured",
             -5: "refcount_t saturation warning (the counter reached 0 or overflowed)"}


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


# -- refcount_t vs percpu_ref operations -------------------------------------------

OPS = ("get", "put", "split")
COUNTERS = ("refcount_t", "percpu")
#: Work between operations (ns) the benchmark runs by default: none (the
#: operation's own cost, which the model's local cost is read from), then the
#: per-fragment work the devmem fit finds on the app CPU (about 40 ns) and on
#: the net CPU (about 150 ns), rounded.
WORK_NS = (0, 40, 150)
#: Runs of the whole benchmark ``collect --bench`` stores by default.
RUNS = 5
MIN_TRIALS = 10
MIN_OVERLAP = 0.9
#: A thread that did not run for longer than this (ns) is seen by the overlap
#: check (the C source's GAP_NS); shorter preemptions are invisible to it.
GAP_NS = 200_000.0


def trial_overlap(threads: list[tuple[float, float, float, float]]) -> dict:
    """One trial's throughput and how much its threads really ran together.

    ``threads``: per thread (operations, start ns, end ns, stolen ns), as
    ``numalab_refops`` reports them. The window is from the first start to
    the last end; ``overlap`` is the share of it during which every thread
    was running (the common interval minus the most time any thread was not
    running), 0..1. ``ops_per_s`` counts every operation over the whole
    window (so start skew lowers it, never raises it).

    >>> r = trial_overlap([(100, 0.0, 1000.0, 0.0), (100, 100.0, 1000.0, 0.0)])
    >>> r["ops_per_s"], r["overlap"]
    (200000000.0, 0.9)
    >>> trial_overlap([(10, 0.0, 10.0, 0.0), (10, 20.0, 30.0, 0.0)])["overlap"]
    0.0
    """
    if not threads:
        raise ParameterError("a trial needs at least one thread")
    start = min(t[1] for t in threads)
    end = max(t[2] for t in threads)
    window = end - start
    if window <= 0:
        raise BenchUnavailable("a trial measured no time (clock did not advance)")
    common = min(t[2] for t in threads) - max(t[1] for t in threads) - max(t[3] for t in threads)
    return {"ops_per_s": sum(t[0] for t in threads) / window * 1e9,
            "overlap": max(0.0, common) / window,
            "per_thread_ops_per_s": [t[0] / (t[2] - t[1]) * 1e9 if t[2] > t[1] else 0.0
                                     for t in threads]}


def spread(values: list[float]) -> dict:
    """Median, low, high and count of a list of trial results.

    >>> spread([3.0, 1.0, 2.0])
    {'median': 2.0, 'low': 1.0, 'high': 3.0, 'n': 3}
    """
    import statistics
    if not values:
        return {"median": float("nan"), "low": float("nan"), "high": float("nan"), "n": 0}
    return {"median": float(statistics.median(values)), "low": float(min(values)),
            "high": float(max(values)), "n": len(values)}


_SPIN: dict[str, float] = {}


def spin_ns_per_iter() -> float:
    """Nanoseconds of one iteration of the benchmark's work loop on this
    machine (median of 7 timings of 10^6 iterations, cached per process)."""
    if "ns" not in _SPIN:
        import statistics
        lib = library()
        _SPIN["ns"] = statistics.median(lib.numalab_spin_ns(1_000_000) / 1e6 for _ in range(7))
    return _SPIN["ns"]


def refops(n: int, cpus: list[int] | None = None, op: str = "get", counter: str = "refcount_t",
           work_ns: float = 40.0, duration_s: float = 0.002, trials: int = MIN_TRIALS,
           min_overlap: float = MIN_OVERLAP, max_attempts: int | None = None) -> dict:
    """The kernel's reference operations by ``n`` threads, ``trials`` times.

    ``op``: "get" (``refcount_inc_not_zero()``: read + cmpxchg loop), "put"
    (``refcount_dec_and_test()``: release fetch_sub + zero test) or "split"
    (even threads get, odd threads put: devmem's app and net CPUs);
    ``counter``: "refcount_t" (one shared word) or "percpu" (an unlocked add
    on each thread's own line, as ``this_cpu_add()``). ``work_ns`` of
    spinning between operations. Threads are pinned round-robin over
    ``cpus`` (default: the CPUs this process may use), released by a
    barrier, and run ``duration_s`` each trial; a trial whose threads ran
    together less than ``min_overlap`` of its window is rejected and
    retried, up to ``max_attempts`` (default 30 x trials). Trials are short
    (2 ms by default) because on a machine busy with other work two threads
    are rarely both running for long.

    Returns a dict: the inputs, ``accepted`` (ops/s and overlap of each
    accepted trial), ``rejected`` (their overlaps), ``ops_per_s`` (spread of
    the accepted trials: median, low, high, n), ``ns_per_op_per_thread``
    (median: n / ops_per_s x 1e9) and ``enough`` (at least ``trials``
    accepted).
    """
    n = integer("n", n, 1, MAX_THREADS)
    pool = _check_cpus("cpus", cpus, distinct=False) if cpus is not None else _usable_cpus()
    one_of("op", op, OPS)
    one_of("counter", counter, COUNTERS)
    number("work_ns", work_ns, 0, 1e6)
    number("duration_s", duration_s, 0, 60, lo_open=True)
    trials = integer("trials", trials, 1, MAX_REPEATS)
    number("min_overlap", min_overlap, 0, 1)
    max_attempts = integer("max_attempts", max_attempts if max_attempts is not None
                           else 30 * trials, trials, 100 * MAX_REPEATS)
    lib = library()
    work = int(round(work_ns / spin_ns_per_iter())) if work_ns > 0 else 0
    # a clock read every ~10 us of nominal work, so GAP_NS (200 us) only
    # catches a thread that was not running
    chunk = max(1, min(256, int(10_000 / (work_ns + 50))))
    placed = [pool[i % len(pool)] for i in range(n)]
    cp = (ctypes.c_int * n)(*placed)
    out = (ctypes.c_double * (4 * n))()
    accepted, rejected = [], []
    opcode = OPS.index(op)
    for _ in range(max_attempts):
        if len(accepted) >= trials:
            break
        rc = lib.numalab_refops(n, cp, opcode, 1 if counter == "percpu" else 0, work, chunk,
                                duration_s * 1e9, out)
        if rc < 0:
            raise _failed(f"{counter} {op} on CPUs {placed}", rc)
        t = trial_overlap([tuple(out[4 * i:4 * i + 4]) for i in range(n)])
        if t["overlap"] >= min_overlap:
            accepted.append({"ops_per_s": round(t["ops_per_s"]), "overlap": round(t["overlap"], 4)})
        else:
            rejected.append(round(t["overlap"], 4))
    sp = spread([a["ops_per_s"] for a in accepted])
    return {"threads": n, "cpus": placed, "op": op, "counter": counter, "work_ns": work_ns,
            "work_iters": work, "duration_s": duration_s, "min_overlap": min_overlap,
            "accepted": accepted, "rejected": rejected, "ops_per_s": sp,
            "ns_per_op_per_thread": (n / sp["median"] * 1e9 if sp["n"] else float("nan")),
            "enough": sp["n"] >= trials}


def run_refops(max_threads: int | None = None, quick: bool = False,
               works: tuple[float, ...] = WORK_NS, trials: int = MIN_TRIALS,
               progress=None) -> dict:
    """Every configuration of :func:`refops` for 1..``max_threads`` threads
    (default: the CPUs this process may use), each work level, the three
    operations on ``refcount_t`` (split from 2 threads on) and the per-CPU
    add: the ``refops`` record of ``numalab bench atomics`` and
    ``collect --bench``. ``quick``: 2 ms trials instead of 3 ms."""
    cpus = _usable_cpus()
    if max_threads is not None:
        max_threads = integer("max_threads", max_threads, 1, MAX_THREADS)
    top = max_threads or len(cpus)
    dur = 0.002 if quick else 0.003
    t0 = time.time()
    configs = [(n, w, c, op) for n in range(1, top + 1) for w in works
               for c, op in (("refcount_t", "get"), ("refcount_t", "put"),
                             ("refcount_t", "split"), ("percpu", "get"))
               if not (op == "split" and n < 2)]
    rows = []
    for k, (n, w, c, op) in enumerate(configs):
        r = refops(n, cpus, op, c, w, duration_s=dur, trials=trials)
        rows.append(r)
        if progress:
            progress(k + 1, len(configs))
    return {"kind": "refops", "cpus_used": cpus, "spin_ns_per_iter": spin_ns_per_iter(),
            "trial_seconds": dur, "min_trials": trials, "min_overlap": MIN_OVERLAP,
            "rows": rows, "seconds": round(time.time() - t0, 2),
            "loadavg": [round(x, 2) for x in os.getloadavg()]}


def refops_table(record: dict):
    """A ``refops`` record as a tidy DataFrame: threads, work_ns, counter, op,
    arm ("refcount_t get", ..., "percpu add"), median / low / high Mops/s,
    trials accepted and rejected, median overlap, ns per operation per thread.

    >>> rec = {"rows": [{"threads": 1, "work_ns": 40, "counter": "percpu", "op": "get",
    ...         "ops_per_s": {"median": 2e7, "low": 1.9e7, "high": 2.1e7, "n": 10},
    ...         "accepted": [{"ops_per_s": 2e7, "overlap": 1.0}] * 10, "rejected": [],
    ...         "ns_per_op_per_thread": 50.0}]}
    >>> refops_table(rec)[["arm", "mops_median", "trials"]].values.tolist()
    [['percpu add', 20.0, 10]]
    """
    import statistics

    import pandas as pd
    rows = []
    for r in record.get("rows", []):
        arm = "percpu add" if r["counter"] == "percpu" else f"refcount_t {r['op']}"
        sp = r["ops_per_s"]
        ov = [a["overlap"] for a in r["accepted"]]
        rows.append({"threads": r["threads"], "work_ns": r["work_ns"], "counter": r["counter"],
                     "op": r["op"], "arm": arm, "mops_median": sp["median"] / 1e6,
                     "mops_low": sp["low"] / 1e6, "mops_high": sp["high"] / 1e6,
                     "trials": sp["n"], "rejected": len(r["rejected"]),
                     "overlap_median": statistics.median(ov) if ov else float("nan"),
                     "ns_per_op_per_thread": r["ns_per_op_per_thread"]})
    return pd.DataFrame(rows, columns=["threads", "work_ns", "counter", "op", "arm",
                                       "mops_median", "mops_low", "mops_high", "trials",
                                       "rejected", "overlap_median", "ns_per_op_per_thread"])


def refops_scope(record: dict, cpus: int | None = None) -> dict:
    """What a ``refops`` record can support. ``cpus``: the machine's CPUs
    (default: those the benchmark used). A thread curve needs at least
    :data:`CURVE_MIN_CPUS` CPUs and a load average below half of them; every
    configuration needs :data:`MIN_TRIALS` accepted trials.

    >>> refops_scope({"cpus_used": [0, 1], "loadavg": [1.5], "min_trials": 10, "rows": [
    ...     {"threads": 2, "ops_per_s": {"n": 10}, "accepted": [{}] * 10, "rejected": [0.3]}]})
    {'cpus': 2, 'max_threads': 2, 'load': 1.5, 'accepted': 10, 'rejected': 1, 'all_enough': True, 'curve': False}
    """
    rows = record.get("rows", [])
    n = cpus if cpus is not None else len(record.get("cpus_used", [])) or 1
    load = (record.get("loadavg") or [float("nan")])[0]
    need = record.get("min_trials", MIN_TRIALS)
    return {"cpus": n, "max_threads": max((r["threads"] for r in rows), default=0),
            "load": load,
            "accepted": sum(len(r["accepted"]) for r in rows),
            "rejected": sum(len(r["rejected"]) for r in rows),
            "all_enough": bool(rows) and all(r["ops_per_s"]["n"] >= need for r in rows),
            "curve": n >= CURVE_MIN_CPUS and load < n / 2}


#: The fewest CPUs a benchmark needs before its thread curve is drawn.
CURVE_MIN_CPUS = 4


def crossover(table, arm: str = "refcount_t get", work_ns: float = 40, loss: float = 0.1):
    """The smallest thread count at which ``arm`` does less per thread than
    one thread alone by more than ``loss`` (the whole range of the trials
    below ``(1 - loss)`` x the one-thread median), or None when no measured
    count does. ``table``: :func:`refops_table`.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"arm": ["a"] * 3, "work_ns": [0] * 3, "threads": [1, 2, 3],
    ...                   "mops_median": [10.0, 19.0, 12.0], "mops_high": [11.0, 20.0, 13.0]})
    >>> crossover(t, "a", 0)
    3
    """
    t = table[(table["arm"] == arm) & (table["work_ns"] == work_ns)].sort_values("threads")
    one = t[t["threads"] == 1]
    if one.empty:
        return None
    base = float(one["mops_median"].iloc[0])
    for r in t.itertuples():
        if r.threads > 1 and r.mops_high / r.threads < (1 - loss) * base:
            return int(r.threads)
    return None


def host_cpu(cpuinfo: str | None = None) -> dict:
    r"""This machine's CPU as ``/proc/cpuinfo`` names it: ``model_name``,
    ``vendor_id``, ``cpu_family``, ``model``, ``stepping`` (strings, first
    CPU's block; missing keys are left out) and ``hypervisor`` (the
    ``hypervisor`` flag: a virtual machine). ``cpuinfo``: the file's text
    (default: read it; ``{}`` plus ``hypervisor`` False when unreadable).

    >>> host_cpu("vendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
    ...          "model name\t: AMD EPYC\nflags\t\t: fpu hypervisor\n\nmodel name\t: x\n")
    {'vendor_id': 'AuthenticAMD', 'cpu_family': '25', 'model': '1', 'model_name': 'AMD EPYC', 'hypervisor': True}
    """
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            cpuinfo = ""
    keys = {"model name": "model_name", "vendor_id": "vendor_id", "cpu family": "cpu_family",
            "model": "model", "stepping": "stepping"}
    out: dict = {}
    flags = ""
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        k, sep, v = line.partition(":")
        k = k.strip()
        if not sep:
            continue
        if k in keys:
            out[keys[k]] = v.strip()
        elif k == "flags":
            flags = v
    out["hypervisor"] = "hypervisor" in flags.split()
    return out


def run_atomics(max_threads: int | None = None, quick: bool = False, progress=None) -> dict:
    """The full benchmark, one run, as one JSON-able dict: the round-trip
    matrix (``latency``) and the reference operations of :func:`run_refops`
    (``refops``) for 1..``max_threads`` threads (default: the CPUs this
    process may use), with the host CPU (:func:`host_cpu`) and the load
    average before (``loadavg_before``) and after (``loadavg``) the run.
    ``progress(done, total)`` is called per CPU pair of the matrix.

    Records written before ``refops`` existed carry ``increments`` instead
    (a ``lock add`` per-thread arm and best-of-3 trials without an overlap
    check); :func:`bench_tables` still reads them, the chapters do not use
    them as evidence."""
    if max_threads is not None:
        integer("max_threads", max_threads, 1, MAX_THREADS)
    cpus = _usable_cpus()
    iters_pp = 2000 if quick else 20000
    before = [round(x, 2) for x in os.getloadavg()]
    t0 = time.time()
    lat = latency_matrix(cpus, iters_pp, progress=progress) if len(cpus) > 1 else \
        {"cpus": cpus, "round_trip_ns": [[None]]}
    ref = run_refops(max_threads=max_threads, quick=quick)
    return {
        "numalab": __version__,
        "kind": "atomics",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": host_cpu(),
        "cpus_used": cpus,
        "latency": lat,
        "refops": ref,
        "seconds": round(time.time() - t0, 2),
        # other work on the machine: trials where the threads did not run
        # together are rejected (refops), but readers should see the load
        "loadavg_before": before,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def run_atomics_repeated(runs: int = RUNS, max_threads: int | None = None, quick: bool = False,
                         progress=None, pause_s: float = 1.0) -> dict:
    """``runs`` runs of :func:`run_atomics`, ``pause_s`` apart: what
    ``collect --bench`` stores. The record is the first run's dict (so readers
    of the one-run format still find ``latency`` and ``refops``) plus
    ``runs``: every run's dict, the first included, each with its own time,
    load averages and host CPU. :func:`runs_of` reads either format."""
    runs = integer("runs", runs, 1, MAX_REPEATS)
    number("pause_s", pause_s, 0, 3600)
    out = []
    for k in range(runs):
        if k:
            time.sleep(pause_s)
        out.append(run_atomics(max_threads=max_threads, quick=quick, progress=progress))
    return {**out[0], "runs": out, "seconds": round(sum(r["seconds"] for r in out), 2)}


def runs_of(record: dict) -> list[dict]:
    """The runs of a stored benchmark record: its ``runs`` list, or the record
    itself as one run (records written before repeated runs).

    >>> len(runs_of({"latency": {}, "refops": {}})), len(runs_of({"runs": [{}, {}]}))
    (1, 2)
    """
    if not isinstance(record, dict):
        raise ParameterError("a benchmark record is a dict")
    rs = record.get("runs")
    return list(rs) if isinstance(rs, list) and rs else [record]


def run_sets(record: dict) -> dict[str, dict]:
    """A stored benchmark record split into its run sets, in stored order.

    A dump may hold runs made at different times under different loads
    (e.g. a loaded set and a quiet set of the same day), each run tagged
    with its set's name in ``set`` (the record's ``sets`` describes them).
    Returns ``{set name: record}``, each record a one-set record in the
    format :func:`runs_of` reads: its first run's dict plus ``runs`` (the
    set's runs), ``set`` and, when the record describes it, ``command``.
    Runs without a ``set`` (records written before sets existed, or a
    one-run record) form one set named "".

    >>> s = run_sets({"runs": [{"set": "a", "time": 1}, {"set": "b", "time": 2}, {"set": "a", "time": 3}],
    ...               "sets": {"a": {"command": "x"}}})
    >>> [(k, len(v["runs"]), v.get("command")) for k, v in s.items()]
    [('a', 2, 'x'), ('b', 1, None)]
    >>> list(run_sets({"latency": {}, "refops": {}}))
    ['']
    """
    out: dict[str, list[dict]] = {}
    for r in runs_of(record):
        out.setdefault(str(r.get("set") or ""), []).append(r)
    described = record.get("sets") if isinstance(record.get("sets"), dict) else {}
    sets = {}
    for name, rs in out.items():
        rec = {**rs[0], "runs": rs, "set": name}
        about = described.get(name) or {}
        if isinstance(about, dict) and about.get("command"):
            rec["command"] = about["command"]
        elif not name and record.get("command"):
            rec["command"] = record["command"]
        sets[name] = rec
    return sets


def runs_table(record: dict):
    """Every run of a record as one tidy DataFrame: :func:`refops_table`'s
    columns plus ``run`` (1..), ``time``, ``load_before`` and ``load_after``
    (one-minute load averages; NaN when not recorded), ``round_trip_ns``
    (median over CPU pairs of that run's round trips; NaN with one CPU) and
    ``cpu_model`` (``host.model_name``, "" when not recorded)."""
    import statistics

    import pandas as pd

    nan = float("nan")
    parts = []
    for i, r in enumerate(runs_of(record), 1):
        t = refops_table(r.get("refops") or {})
        lat, _ = bench_tables(r)
        la = r.get("loadavg") or [nan]
        lb = r.get("loadavg_before") or [nan]
        parts.append(t.assign(run=i, time=r.get("time", ""), load_before=lb[0], load_after=la[0],
                              round_trip_ns=statistics.median(lat["round_trip_ns"]) if len(lat)
                              else nan,
                              cpu_model=(r.get("host") or {}).get("model_name", "")))
    return pd.concat(parts, ignore_index=True)


#: A round trip between two CPUs below this (ns) is what two hardware threads
#: of one core show (they share the core's L1, so a line never moves); two
#: cores of one chip take about 100 ns or more (116-151 ns on this project's
#: own machine, ``data/collected``).
SHARED_CORE_ROUND_TRIP_NS = 40.0
#: Two threads of per-CPU adds reaching less than this multiple of one
#: thread's rate do not run side by side (one host CPU behind two virtual
#: ones, or two hardware threads sharing one core's execution units).
MIN_PARALLEL_SCALING = 1.5


def cannot_show_contention(round_trip_ns: float | None, scaling: float | None) -> str | None:
    """Why two CPUs cannot show contention, or None if nothing says so.

    ``round_trip_ns``: the median cache-line round trip between them;
    ``scaling``: two threads of per-CPU adds over one thread (ops/s). A
    shared counter only costs more than private ones when two threads run at
    the same moment on two cores that each hold their own copy of its line.
    Unknown inputs (None or NaN) say nothing.

    >>> cannot_show_contention(120.0, 1.9) is None
    True
    >>> cannot_show_contention(25.0, 1.9)
    'its CPUs pass a cache line back and forth in 25 ns, as two hardware threads of one core do'
    >>> cannot_show_contention(120.0, 1.1)
    'two threads of per-CPU adds reach only 1.1 times the rate of one'
    """
    if round_trip_ns is not None and round_trip_ns == round_trip_ns \
            and round_trip_ns < SHARED_CORE_ROUND_TRIP_NS:
        return (f"its CPUs pass a cache line back and forth in {round_trip_ns:.0f} ns, "
                f"as two hardware threads of one core do")
    if scaling is not None and scaling == scaling and scaling < MIN_PARALLEL_SCALING:
        return f"two threads of per-CPU adds reach only {scaling:.2g} times the rate of one"
    return None


def contention_check(cpu_a: int, cpu_b: int, trials: int = 5) -> dict:
    """Measure whether CPUs ``cpu_a`` and ``cpu_b`` can show contention now.

    Runs per-CPU adds on one and on two threads (trials whose threads did
    not run together are rejected, as in :func:`refops`) and the cache-line
    round trip between the two. Returns ``round_trip_ns``, ``scaling`` and
    ``why``: None when the pair can show contention, else the reason (the
    machine was too busy for enough overlapping trials, or
    :func:`cannot_show_contention`).
    """
    one = refops(1, [cpu_a], op="get", counter="percpu", work_ns=0, trials=trials)
    two = refops(2, [cpu_a, cpu_b], op="get", counter="percpu", work_ns=0, trials=trials)
    rt = pingpong_robust_ns(cpu_a, cpu_b, iters=4000, chunk=100)["median_ns"]
    out = {"round_trip_ns": rt, "scaling": None, "why": None}
    if not (one["enough"] and two["enough"]):
        out["why"] = (f"its two threads were rarely both running (overlap of rejected trials "
                      f"{two['rejected'][:5]}): the machine was too busy")
        return out
    out["scaling"] = two["ops_per_s"]["median"] / one["ops_per_s"]["median"]
    out["why"] = cannot_show_contention(rt, out["scaling"])
    return out


def _record_pair(record: dict) -> tuple[float | None, float | None]:
    """Median over a record's runs of the first CPU pair's round trip and of
    the two-thread over one-thread rate of per-CPU adds without work."""
    import statistics
    rts, scal = [], []
    for r in runs_of(record):
        m = (r.get("latency") or {}).get("round_trip_ns") or []
        if len(m) > 1 and len(m[0]) > 1 and m[0][1] is not None:
            rts.append(float(m[0][1]))
        pc = {x["threads"]: x["ops_per_s"]["median"] for x in (r.get("refops") or {}).get("rows", [])
              if x.get("counter") == "percpu" and x.get("work_ns") == 0 and x["ops_per_s"].get("n")}
        if 1 in pc and 2 in pc and pc[1] > 0:
            scal.append(pc[2] / pc[1])
    return (statistics.median(rts) if rts else None, statistics.median(scal) if scal else None)


def load_gate(record: dict, cpus: int) -> dict:
    """Whether a benchmark record ran quietly enough, on CPUs able, to show contention.

    A precaution, not an explanation of any run: two threads on two CPUs
    only contend while both run, and when the one-minute load average
    reaches the CPU count other tasks may take turns on those CPUs without
    the overlap check (which sees only long gaps) noticing. Whether they did
    is not known; :func:`run_groups` shows that the stored runs split by
    something the load average does not see. A quiet record is then read
    for what its own numbers say of the machine (:func:`cannot_show_contention`:
    two hardware threads of one core, or CPUs that do not run side by side).

    Returns ``max_load`` (highest load average recorded before or after any
    run; NaN when none), ``cpus``, ``verdict``: "quiet", "too loaded to show
    contention", "machine cannot show contention" or "load not recorded",
    and ``why`` (a clause saying why it is not "quiet", else ""). Only a
    "quiet" record may enter a conclusion or a held-out test.

    >>> load_gate({"runs": [{"loadavg": [0.4], "loadavg_before": [0.3]}]}, 2)["verdict"]
    'quiet'
    >>> g = load_gate({"runs": [{"loadavg": [0.4]}, {"loadavg": [2.0]}]}, 2)
    >>> g["verdict"], g["why"]
    ('too loaded to show contention', 'its load average reached 2 on 2 CPUs')
    >>> load_gate({"runs": [{}]}, 2)["verdict"]
    'load not recorded'
    >>> g = load_gate({"runs": [{"loadavg": [0.1], "latency": {"round_trip_ns": [[None, 22.0], [22.0, None]]}}]}, 2)
    >>> g["verdict"], g["why"]
    ('machine cannot show contention', 'its CPUs pass a cache line back and forth in 22 ns, as two hardware threads of one core do')
    """
    loads = [float(v[0]) for r in runs_of(record) for v in (r.get("loadavg"), r.get("loadavg_before"))
             if v]
    if not loads:
        return {"max_load": float("nan"), "cpus": cpus, "verdict": "load not recorded",
                "why": "its load average was not recorded"}
    top = max(loads)
    if top >= cpus:
        return {"max_load": top, "cpus": cpus, "verdict": "too loaded to show contention",
                "why": f"its load average reached {top:g} on {cpus} CPUs"}
    why = "it ran on one CPU" if cpus < 2 else cannot_show_contention(*_record_pair(record))
    return {"max_load": top, "cpus": cpus,
            "verdict": "machine cannot show contention" if why else "quiet", "why": why or ""}


#: A chart legend's words for each :func:`load_gate` verdict: nothing for a
#: set that enters conclusions, else why it is left out.
GATE_LABELS = {"quiet": "", "too loaded to show contention": " (left out: load ≥ CPUs)",
               "machine cannot show contention": " (left out: CPUs cannot contend)",
               "load not recorded": " (left out: load not recorded)"}


def gate_label(verdict: str) -> str:
    """The legend's words for a :func:`load_gate` verdict.

    >>> gate_label("quiet"), gate_label("too loaded to show contention")
    ('', ' (left out: load ≥ CPUs)')
    """
    return GATE_LABELS[verdict]


#: The two groups :func:`run_groups` names: the shared counter's two-thread
#: rate high or low relative to two threads of per-CPU adds, with work
#: between operations (at zero work the slow group's puts may be the faster).
GROUPS = ("fast with work", "slow with work")


def run_groups(records: dict[str, dict], work_ns: float | None = None,
               arm: str = "refcount_t get"):
    """Every run of several one-set records, classed by how fast two threads
    on one shared counter ran relative to two threads of per-CPU adds.

    ``records``: ``{run set name: one-set record}`` (:func:`run_sets`), all of
    one machine. ``work_ns``: the work level compared (default: the lowest
    non-zero one the runs have). For each run with both configurations,
    ``ratio`` = ``arm``'s two-thread median rate / the per-CPU add's. Sorted
    by ratio, the runs are cut at the largest gap between neighbours (in
    log ratio); the split counts (``split`` True) when that gap is larger
    than twice the widest group's own log range and than log(1.25). Then
    ``group`` is :data:`GROUPS`' first name above the gap, its second below;
    else every run is in the first group. Role: measured.

    DataFrame: ``record``, ``run``, ``max_load`` (highest one-minute load
    before or after the run), ``ratio``, ``group``, ``split`` (same for every
    row), ``shared`` and ``percpu`` (the two rates, M ops/s).

    >>> row = lambda c, op, m: {"threads": 2, "work_ns": 40, "counter": c, "op": op,
    ...     "ops_per_s": {"median": m, "low": m, "high": m, "n": 10},
    ...     "accepted": [], "rejected": [], "ns_per_op_per_thread": 1.0}
    >>> run = lambda g: {"loadavg": [0.1], "refops": {"rows": [row("refcount_t", "get", g),
    ...                                                       row("percpu", "get", 50e6)]}}
    >>> g = run_groups({"q": {"runs": [run(32e6), run(33e6), run(17e6), run(31e6)]}})
    >>> g["group"].tolist(), bool(g["split"].iloc[0])
    (['fast with work', 'fast with work', 'slow with work', 'fast with work'], True)
    """
    import math

    import pandas as pd

    rows = []
    for name, rec in records.items():
        t = runs_table(rec)
        t = t[(t["threads"] == 2) & (t["trials"] > 0)]
        w = work_ns if work_ns is not None else min((x for x in t["work_ns"] if x > 0), default=None)
        for i, r in enumerate(runs_of(rec), 1):
            sel = t[(t["run"] == i) & (t["work_ns"] == w)].set_index("arm")["mops_median"]
            if arm not in sel.index or "percpu add" not in sel.index:
                continue
            loads = [float(v[0]) for v in (r.get("loadavg_before"), r.get("loadavg")) if v]
            rows.append({"record": name, "run": i, "max_load": max(loads) if loads else float("nan"),
                         "work_ns": w, "ratio": float(sel[arm] / sel["percpu add"]),
                         "shared": float(sel[arm]), "percpu": float(sel["percpu add"])})
    out = pd.DataFrame(rows, columns=["record", "run", "max_load", "work_ns", "ratio", "shared", "percpu"])
    out["group"], out["split"] = GROUPS[0], False
    if len(out) < 2:
        return out
    logs = sorted(math.log(x) for x in out["ratio"])
    gaps = [b - a for a, b in zip(logs, logs[1:])]
    k = max(range(len(gaps)), key=gaps.__getitem__)
    widest = max(logs[k] - logs[0], logs[-1] - logs[k + 1])
    if gaps[k] > max(2 * widest, math.log(1.25)):
        cut = math.exp((logs[k] + logs[k + 1]) / 2)
        out["group"] = [GROUPS[0] if x > cut else GROUPS[1] for x in out["ratio"]]
        out["split"] = True
    return out


def dump_cpu_model(source: str) -> str:
    """The CPU model a dump's own ``proc/cpuinfo`` names ("" when the dump
    has none): for a record written before the benchmark stored its host.
    ``source``: a dump folder or ``.tar.bz2`` (``topo.meta["source"]``)."""
    import tarfile
    from pathlib import Path

    p = Path(source)
    text = ""
    try:
        if p.is_dir():
            hits = sorted(p.glob("*/proc/cpuinfo")) + sorted(p.glob("proc/cpuinfo"))
            text = hits[0].read_text(errors="replace") if hits else ""
        elif tarfile.is_tarfile(p):
            with tarfile.open(p) as tf:
                m = next((m for m in tf.getmembers() if m.name.endswith("/proc/cpuinfo")
                          and m.isfile()), None)
                text = tf.extractfile(m).read().decode(errors="replace") if m else ""
    except (OSError, tarfile.TarError):
        return ""
    return host_cpu(text).get("model_name", "") if text else ""


def median_latency(record: dict) -> dict:
    """The round-trip matrix of a record, element by element the median over
    its runs (``{"cpus", "round_trip_ns"}``; None where any run has none).

    >>> median_latency({"runs": [{"latency": {"cpus": [0, 1], "round_trip_ns": [[None, 1.0], [1.0, None]]}},
    ...                          {"latency": {"cpus": [0, 1], "round_trip_ns": [[None, 3.0], [3.0, None]]}},
    ...                          {"latency": {"cpus": [0, 1], "round_trip_ns": [[None, 9.0], [9.0, None]]}}]})
    {'cpus': [0, 1], 'round_trip_ns': [[None, 3.0], [3.0, None]]}
    """
    import statistics

    lats = [r.get("latency") or {} for r in runs_of(record)]
    cpus = lats[0].get("cpus", [])
    mats = [x.get("round_trip_ns", []) for x in lats if x.get("cpus", []) == cpus]
    out = [[None if any(m[i][j] is None for m in mats) else statistics.median(m[i][j] for m in mats)
            for j in range(len(cpus))] for i in range(len(cpus))]
    return {"cpus": cpus, "round_trip_ns": out}


def spread_over_runs(record: dict):
    """Per configuration (threads, work_ns, arm): the median over runs of the
    runs' medians (``mops``), the lowest and highest run median
    (``run_low``, ``run_high``), the lowest and highest single trial of any
    run (``trial_low``, ``trial_high``) and the number of runs (``runs``).

    Role: measured. A configuration a run lacks is left out of that run."""
    import pandas as pd

    t = runs_table(record)
    t = t[t["trials"] > 0]
    g = t.groupby(["threads", "work_ns", "arm"], sort=True)
    return pd.DataFrame({"mops": g["mops_median"].median(), "run_low": g["mops_median"].min(),
                         "run_high": g["mops_median"].max(), "trial_low": g["mops_low"].min(),
                         "trial_high": g["mops_high"].max(), "runs": g["run"].nunique()}
                        ).reset_index()


def runs_below(record: dict, work_ns: float, arm: str, than: str = "percpu add",
               threads: int = 2) -> tuple[int, int]:
    """In how many runs of a one-set record ``threads`` threads of ``arm``
    ran wholly below ``than``: every accepted trial of ``arm`` slower than
    every accepted trial of ``than`` (the highest trial below the lowest).
    Returns ``(runs below, runs with both configurations)``. Role: measured.

    >>> row = lambda c, op, lo, hi: {"threads": 2, "work_ns": 150, "counter": c, "op": op,
    ...     "ops_per_s": {"median": (lo + hi) / 2, "low": lo, "high": hi, "n": 10},
    ...     "accepted": [], "rejected": [], "ns_per_op_per_thread": 1.0}
    >>> rec = {"runs": [{"refops": {"rows": [row("refcount_t", "get", 7e6, 9e6), row("percpu", "get", 12e6, 13e6)]}},
    ...                 {"refops": {"rows": [row("refcount_t", "get", 7e6, 12.5e6), row("percpu", "get", 12e6, 13e6)]}}]}
    >>> runs_below(rec, 150, "refcount_t get")
    (1, 2)
    """
    t = runs_table(record)
    t = t[(t["threads"] == threads) & (t["work_ns"] == work_ns) & (t["trials"] > 0)]
    t = t.set_index(["run", "arm"])
    both = sorted(r for r in {r for r, _ in t.index} if (r, arm) in t.index and (r, than) in t.index)
    below = sum(1 for r in both if t.loc[(r, arm), "mops_high"] < t.loc[(r, than), "mops_low"])
    return below, len(both)


def _med_range(values: list[float], digits: int = 1) -> str:
    """'median (low-high)' of a list, or the one value, '' when empty."""
    import statistics

    v = [float(x) for x in values if x == x]
    if not v:
        return ""
    f = lambda x: f"{x:.{digits}f}"  # noqa: E731
    if len(v) == 1 or min(v) == max(v):
        return f(v[0])
    return f"{f(statistics.median(v))} ({f(min(v))}-{f(max(v))})"


#: The configurations :func:`compare_sets` shows: (label, threads, work_ns,
#: arm, unit). One thread without work is a cost (ns per operation); two
#: threads are a rate (millions of operations per second, both together).
COMPARED = (("one thread, no work: refcount_t get (ns)", 1, 0, "refcount_t get", "ns"),
            ("one thread, no work: per-CPU add (ns)", 1, 0, "percpu add", "ns"),
            ("two threads, 40 ns work: refcount_t get (M/s)", 2, 40, "refcount_t get", "mops"),
            ("two threads, 40 ns work: refcount_t put (M/s)", 2, 40, "refcount_t put", "mops"),
            ("two threads, 40 ns work: refcount_t split (M/s)", 2, 40, "refcount_t split", "mops"),
            ("two threads, 40 ns work: per-CPU add (M/s)", 2, 40, "percpu add", "mops"),
            ("two threads, 150 ns work: refcount_t get (M/s)", 2, 150, "refcount_t get", "mops"),
            ("two threads, 150 ns work: refcount_t put (M/s)", 2, 150, "refcount_t put", "mops"),
            ("two threads, 150 ns work: refcount_t split (M/s)", 2, 150, "refcount_t split", "mops"),
            ("two threads, 150 ns work: per-CPU add (M/s)", 2, 150, "percpu add", "mops"))


def compare_sets(sets: dict[str, dict]):
    """Stored run sets side by side: one row per quantity, one column per
    set, each cell the median over the set's runs with the lowest and
    highest run in brackets ("116.3 (116.3-151.1)"; a one-run set shows its
    value with its trials' range, "31.1 (30.6-32.4 trials)"; "" where the
    set lacks the configuration). The run count belongs in the caller's
    column labels. Rows: load average (one minute, before and after every run), round trip (ns,
    median over CPU pairs per run), and the configurations of
    :data:`COMPARED`, each run's value its median over trials.

    ``sets``: ``{label: one-set record}`` (:func:`run_sets`). Role: measured.

    >>> rec = {"runs": [{"loadavg": [0.1], "latency": {"cpus": [0, 1],
    ...          "round_trip_ns": [[None, 100.0], [100.0, None]]}, "refops": {}}]}
    >>> compare_sets({"a": rec}).set_index("quantity").loc["round trip (ns)", "a"]
    '100.0'
    >>> row = {"threads": 2, "work_ns": 40, "counter": "refcount_t", "op": "get",
    ...        "ops_per_s": {"median": 31e6, "low": 30e6, "high": 32e6, "n": 10},
    ...        "accepted": [], "rejected": [], "ns_per_op_per_thread": 1.0}
    >>> rec["runs"][0]["refops"] = {"rows": [row]}
    >>> compare_sets({"a": rec}).set_index("quantity").loc["two threads, 40 ns work: refcount_t get (M/s)", "a"]
    '31.0 (30.0-32.0 trials)'
    """
    import statistics

    import pandas as pd

    rows: dict[str, dict[str, str]] = {"load average (1 min)": {}, "round trip (ns)": {}}
    rows.update({c[0]: {} for c in COMPARED})
    for name, rec in sets.items():
        rs = runs_of(rec)
        loads = [float(v[0]) for r in rs for v in (r.get("loadavg_before"), r.get("loadavg")) if v]
        rows["load average (1 min)"][name] = (
            "" if not loads else f"{min(loads):.2f}" if min(loads) == max(loads)
            else f"{min(loads):.2f}-{max(loads):.2f}")
        per_run = [statistics.median(lat["round_trip_ns"]) for lat in
                   (bench_tables(r)[0] for r in rs) if len(lat)]
        rows["round trip (ns)"][name] = _med_range(per_run)
        t = runs_table(rec)
        t = t[t["trials"] > 0] if len(t) else t
        for label, threads, work, arm, unit in COMPARED:
            sel = t[(t["threads"] == threads) & (t["work_ns"] == work) & (t["arm"] == arm)] \
                if len(t) else t
            vals = list(sel["mops_median"]) if len(sel) else []
            conv = (lambda v: 1e3 * threads / v) if unit == "ns" else (lambda v: v)  # noqa: E731
            digits = 2 if unit == "ns" else 1
            vals = [conv(v) for v in vals if v > 0]
            rows[label][name] = _med_range(vals, digits)
            if len(vals) == 1 and len(rs) == 1:     # one run: its trials' range is the spread
                lo, hi = sorted(conv(v) for v in (sel["mops_low"].iloc[0], sel["mops_high"].iloc[0]))
                rows[label][name] += f" ({lo:.{digits}f}-{hi:.{digits}f} trials)"
    return pd.DataFrame([{"quantity": q, **{n: v.get(n, "") for n in sets}}
                         for q, v in rows.items()]).assign(role="measured")


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
                   help=f"largest thread count of the reference-operation table, "
                        f"1..{MAX_THREADS} "
                        f"(default: the CPUs this process may use, at least 2)")


def _bench_run(args) -> dict:
    if args.max_threads is not None:
        integer("--max-threads", args.max_threads, 1, MAX_THREADS)
    return run_atomics(max_threads=args.max_threads, quick=args.quick)


def render(result: dict) -> str:
    """The benchmark dict as text: the round-trip matrix, then the increments.

    >>> print(render({"latency": {"cpus": [0, 1], "round_trip_ns": [[None, 80.0], [80.0, None]]},
    ...               "refops": {"min_overlap": 0.9, "rows": [{"threads": 1, "work_ns": 40,
    ...                 "counter": "percpu", "op": "get", "ns_per_op_per_thread": 50.0,
    ...                 "ops_per_s": {"median": 2e7, "low": 1.9e7, "high": 2.1e7, "n": 10},
    ...                 "accepted": [{"ops_per_s": 2e7, "overlap": 1.0}] * 10,
    ...                 "rejected": [0.5]}]}, "seconds": 1}))
    ... # doctest: +NORMALIZE_WHITESPACE
    core-to-core round trip (ns, median of blocks; one transfer is about half)
      cpu      0      1
        0      -   80.0
        1   80.0      -
    reference operations (millions per second, all threads together; median [low-high] of
    accepted trials; a trial is accepted when its threads ran together >= 0.9 of it)
      threads  work ns  arm                median  [low-high]        trials  rejected
            1       40  percpu add           20.0  [19.0-21.0]           10         1
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
    if result.get("increments"):
        lines.append("increments (old record: lock add per thread, best of 3, no overlap "
                     "check; millions per second, all threads together)")
        lines.append("  threads  one shared counter  one counter per thread  ratio")
        for r in result.get("increments", []):
            s, p = r["shared_ops_per_s"] / 1e6, r["percpu_ops_per_s"] / 1e6
            lines.append(f"  {r['threads']:>7}  {s:>18.1f}  {p:>22.1f}  "
                         f"{p / s if s else 0:>5.2f}")
    if result.get("refops"):
        ref = result["refops"]
        lines.append("reference operations (millions per second, all threads together; median "
                     f"[low-high] of accepted trials; a trial is accepted when its threads ran "
                     f"together >= {ref.get('min_overlap', MIN_OVERLAP):g} of it)")
        lines.append("  threads  work ns  arm                median  [low-high]        "
                     "trials  rejected")
        for r in refops_table(ref).itertuples():
            rng = f"[{r.mops_low:.1f}-{r.mops_high:.1f}]" if r.trials else "[-]"
            lines.append(f"  {r.threads:>7}  {r.work_ns:>7g}  {r.arm:<17} {r.mops_median:>7.1f}  "
                         f"{rng:<16}  {r.trials:>6}  {r.rejected:>8}")
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
        help="cache-line round trips between CPU pairs, and refcount_t's get/put "
             "(cmpxchg loop, release fetch_sub) against a per-CPU add, 1..N threads "
             "released together (the cost behind refcount_t vs percpu_ref)",
        add_arguments=_bench_arguments, run=_bench_run, render=render))


_register()
