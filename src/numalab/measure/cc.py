"""Compile a benchmark's C source once and load it (shared by the atomics and
bitmap benchmarks).

The source is compiled with the C compiler of ``$CC`` (or ``cc``/``gcc``)
into ``$XDG_CACHE_HOME/numalab/NAME-DIGEST.so`` (``~/.cache`` by default),
where DIGEST is the source's sha256: a changed source is compiled again, an
unchanged one is loaded from the cache. Every failure a user can meet (no
Linux, no compiler, a ``$CC`` that is not a command, a compile error, a
library that does not load) is the caller's one-line error type.
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
from pathlib import Path

from ..errors import NumalabError

__all__ = ["PRELUDE", "cache_dir", "compile_shared"]

#: What every benchmark source starts with: the headers, a monotonic clock in
#: nanoseconds, and pinning the calling thread to one CPU.
PRELUDE = r"""#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

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
"""

FLAGS = ("-O2", "-std=c11", "-shared", "-fPIC", "-pthread")


def cache_dir() -> Path:
    """Where compiled benchmarks are kept: ``$XDG_CACHE_HOME/numalab``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "numalab"


def _compiler(error: type[NumalabError], what: str) -> list[str]:
    cc_env = os.environ.get("CC", "").strip()
    try:
        cc_cmd = shlex.split(cc_env) if cc_env else []
    except ValueError as e:
        raise error(f"CC={cc_env!r} cannot be read as a command: {e}") from None
    if not cc_cmd:
        found = shutil.which("cc") or shutil.which("gcc")
        cc_cmd = [found] if found else []
    if not cc_cmd:
        raise error(f"no C compiler (cc or gcc) on PATH; install one to run the {what}")
    return cc_cmd


def compile_shared(name: str, source: str, error: type[NumalabError], what: str) -> ctypes.CDLL:
    """Compile ``source`` (once per its sha256) and load it.

    Inputs: a file-name stem (``"atomics"``), the C source, the error type
    to raise, and what to call the benchmark in messages. Output: the loaded
    library, argument types not yet declared. The cache entry appears by a
    rename only once compiled.
    """
    if not sys.platform.startswith("linux"):
        raise error(f"the {what} pins threads with Linux affinity calls")
    cc_cmd = _compiler(error, what)
    cc = " ".join(cc_cmd)
    out = cache_dir() / f"{name}-{hashlib.sha256(source.encode()).hexdigest()[:16]}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src, so = Path(tmp) / f"{name}.c", Path(tmp) / f"{name}.so"
            src.write_text(source)
            try:
                r = subprocess.run([*cc_cmd, *FLAGS, str(src), "-o", str(so)],
                                   capture_output=True, text=True)
            except OSError as e:       # CC names no program, or one that cannot run
                raise error(f"cannot run the C compiler {cc!r} (CC): {e.strerror or e}") from None
            if r.returncode != 0:
                why = (r.stderr.strip().splitlines()[-1] if r.stderr.strip()
                       else f"exit status {r.returncode}")
                raise error(f"compiling the {what} with {cc} failed: {why}")
            os.replace(so, out)
    try:
        return ctypes.CDLL(str(out))
    except OSError as e:
        raise error(f"cannot load the compiled {what} {out}: {e}") from None
