"""``numalab lab sweep MATRIX.toml -o RESULTS/``: many lab boots as tasks
on Dask distributed.

The matrix (a TOML file, checked like every lab file: one line naming the
file, the key and what was expected, exit 2)::

    machines = ["../../hwloc/linux/16amd64-8n2c.tar.bz2", "pack:2 numa:1 core:4 pu:2"]
    kernels  = ["7.2"]                 # Debian versions or releases, or built:NAME
    nvme     = ["per-node:1:8"]        # NVMe layouts, see parse_layout()
    cmdline  = [""]                    # optional: extra kernel command lines
    timeout  = 600                     # optional: seconds per boot
    trace    = "nvme_probe"            # optional: as lab run --trace
    boot_trace = ""                    # optional: as lab run --boot-trace

Dump paths are relative to the matrix file's folder. Every machine is
expressed by :func:`numalab.lab.express.express`; one that QEMU cannot
build exactly is reported (``unexpressible`` in the summary, with its
reasons), never booted as an approximation. Every (machine, kernel,
layout, cmdline) is one task: one QEMU through
:func:`numalab.lab.run.run_lab` (the same checks as ``lab run``).

Results are content-addressed: a task's key is the sha256 of its
normalised spec (machine source and its sha256, the lab's machine, the
kernel release and its packages' sha256, the NVMe options, the command
line, the traces); its dump is ``RESULTS/LABEL-KERNEL-KEY12.tar.bz2``,
written by the client (workers send the bytes back: they need no shared
folder) by a rename, so a rerun skips every task whose dump is there. A
failed boot is retried once on its worker; a task that fails twice is in
``RESULTS/failures.json`` and the summary, never dropped. ``RESULTS/sweep.json``
holds every task with its status (``booted``, ``existing``, ``failed``,
``unexpressible``), seconds, attempts and worker.

Dask: a ``LocalCluster`` of one single-threaded worker process per usable
CPU (one QEMU each: TCG runs single-threaded), or ``--scheduler
tcp://HOST:PORT`` for a cluster started by hand (``dask scheduler``,
``dask worker tcp://HOST:PORT --nthreads 1``); each worker needs QEMU,
busybox-static and the lab's kernel cache (``$NUMALAB_CACHE``, fetched on
demand when missing).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import NumalabError, one_line
from . import LabError
from .schema import Int, LabFileError, List, Num, Obj, Str, check, show

__all__ = ["Matrix", "Layout", "load_matrix", "parse_layout", "scaled_queues", "spread_options", "plan_sweep", "run_sweep",
           "run_task", "lab_boot", "resolve_kernel", "task_key", "MATRIX", "usable_cpus"]

FORMAT = "numalab-sweep/1"
MAX_TASKS = 100_000

MATRIX = Obj({"machines": List(Str(max_len=4096, min_len=1, what="a dump path or a synthetic "
                                   "string"), 1, 4096),
              "kernels": List(Str(r"[A-Za-z0-9][A-Za-z0-9.+~_:-]{0,127}", "a kernel (7.2, "
                                  "a release, or built:NAME)", max_len=128), 1, 64),
              "nvme": List(Str(max_len=1024, min_len=1, what="an NVMe layout (3@0:8, "
                               "per-node:1:8)"), 1, 64)},
             optional={"cmdline": List(Str(max_len=1024, what="kernel parameters"), 1, 64),
                       "timeout": Num(1, 86400),
                       "trace": Str(max_len=8192, what="function names separated by commas"),
                       "boot_trace": Str(max_len=8192, what="function names separated by "
                                         "commas"),
                       "retries": Int(0, 3)})


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# -- NVMe layouts -----------------------------------------------------------------------

_EXPLICIT = re.compile(r"\d{1,2}@\d{1,3}:\d{1,3}")
_PER_NODE = re.compile(r"per-node:(\d{1,2})(?::(\d{1,3}|cpus))?")
_SPREAD = re.compile(r"spread:(\d{1,2}):(\d{1,3})/(\d{1,3})")


@dataclass(frozen=True)
class Layout:
    """An NVMe layout of the matrix: ``text`` as written; ``explicit``
    (``N@NODE:QUEUES`` options) or ``per_node`` (controllers on every node
    with CPUs) with ``queues`` (None: one per CPU of the machine, at most
    128, as nvme asks for one I/O queue per possible CPU), or ``spread``
    (that many controllers dealt over the nodes with CPUs) with ``ratio``
    ``(Q, C)``: Q I/O queues per C CPUs of the machine."""

    text: str
    explicit: tuple[str, ...] = ()
    per_node: int = 0
    queues: int | None = None
    spread: int = 0
    ratio: tuple[int, int] | None = None

    def options(self, machine) -> list[str]:
        """The ``--nvme`` options for a LabMachine."""
        if self.explicit:
            return list(self.explicit)
        if self.spread:
            return spread_options(self.spread, self.ratio, machine.ncpus,
                                  [n for n in range(machine.nnodes) if machine.node_cpus(n)])
        q = self.queues or min(machine.ncpus, 128)
        return [f"{self.per_node}@{n}:{q}" for n in range(machine.nnodes) if machine.node_cpus(n)]


def scaled_queues(ncpus: int, ratio: tuple[int, int]) -> int:
    """I/O queues per controller for a machine of ``ncpus`` CPUs at ``ratio``
    ``(Q, C)`` (Q queues per C CPUs): ``ncpus * Q / C`` rounded half up,
    at least 1, at most 128 and at most ``ncpus``.

    >>> [scaled_queues(n, (62, 96)) for n in (2, 4, 8, 16, 64, 96)]
    [1, 3, 5, 10, 41, 62]
    """
    q, c = ratio
    return max(1, min(128, ncpus, (2 * ncpus * q + c) // (2 * c)))


def spread_options(count: int, ratio: tuple[int, int], ncpus: int, nodes: list[int]) -> list[str]:
    """``--nvme`` options for ``count`` controllers dealt round-robin over
    ``nodes`` (controller i on ``nodes[i % len(nodes)]``), each with
    :func:`scaled_queues` I/O queues.

    >>> spread_options(6, (62, 96), 16, [0, 1, 2, 3])
    ['2@0:10', '2@1:10', '1@2:10', '1@3:10']
    >>> spread_options(6, (62, 96), 64, list(range(16)))
    ['1@0:41', '1@1:41', '1@2:41', '1@3:41', '1@4:41', '1@5:41']
    """
    q = scaled_queues(ncpus, ratio)
    per = [0] * len(nodes)
    for i in range(count):
        per[i % len(nodes)] += 1
    return [f"{k}@{n}:{q}" for n, k in zip(nodes, per) if k]


def parse_layout(text: str) -> Layout:
    """One NVMe layout of the matrix.

    * ``"3@0:8"`` or ``"3@0:8 3@1:8"``: ``lab run --nvme`` options,
      separated by spaces (the same on every machine);
    * ``"per-node:N"``: N controllers on every node that has CPUs, each with
      one I/O queue per CPU of the machine (at most 128);
      ``"per-node:N:Q"``: Q I/O queues each;
    * ``"spread:N:Q/C"``: N controllers in all, dealt round-robin over the
      nodes that have CPUs, each with Q I/O queues per C CPUs of the
      machine (:func:`scaled_queues`; ``spread:6:62/96`` is patch 004's
      example, 6 disks of 62 I/O queues on 96 CPUs, scaled to each machine).

    >>> parse_layout("per-node:1:8").options(__import__("numalab.lab.spec").lab.spec.machine_from_text("numa:2 core:2"))
    ['1@0:8', '1@1:8']
    >>> parse_layout("spread:6:62/96").options(__import__("numalab.lab.spec").lab.spec.machine_from_text("numa:2 core:8"))
    ['3@0:10', '3@1:10']
    >>> parse_layout("3@0:8 1@1:4").explicit
    ('3@0:8', '1@1:4')
    """
    t = " ".join(text.split())
    m = _PER_NODE.fullmatch(t)
    if m:
        n = int(m.group(1))
        q = None if m.group(2) in (None, "cpus") else int(m.group(2))
        if not 1 <= n <= 31:
            raise LabError(f"{show(t)}: 1 to 31 controllers per node")
        if q is not None and not 1 <= q <= 128:
            raise LabError(f"{show(t)}: 1 to 128 I/O queues")
        return Layout(t, per_node=n, queues=q)
    m = _SPREAD.fullmatch(t)
    if m:
        n, q, c = (int(x) for x in m.groups())
        if not 1 <= n <= 31:
            raise LabError(f"{show(t)}: 1 to 31 controllers")
        if not (1 <= q <= 128 and 1 <= c <= 128):
            raise LabError(f"{show(t)}: Q/C with 1 to 128 each")
        return Layout(t, spread=n, ratio=(q, c))
    words = t.split()
    if words and all(_EXPLICIT.fullmatch(w) for w in words):
        from .spec import parse_nvme
        for w in words:
            parse_nvme(w)          # counts and queues in range
        return Layout(t, explicit=tuple(words))
    raise LabError(f"{show(text)}: expected N@NODE:QUEUES options separated by spaces "
                   "(3@0:8 3@1:8), per-node:N[:QUEUES] or spread:N:Q/C")


# -- the matrix -------------------------------------------------------------------------

@dataclass(frozen=True)
class Matrix:
    """A checked matrix: machine sources (paths resolved), kernel queries,
    layouts, command lines, and the per-boot options."""

    path: str
    machines: tuple[str, ...]
    kernels: tuple[str, ...]
    layouts: tuple[Layout, ...]
    cmdlines: tuple[str, ...] = ("",)
    timeout: float = 600.0
    trace: tuple[str, ...] = ("nvme_probe",)
    boot_trace: tuple[str, ...] = ()
    retries: int = 1


def load_matrix(path: str | os.PathLike, built: dict | None = None) -> Matrix:
    """Read and check a matrix file. Raises :class:`LabFileError` (one line:
    the file, the key, what was expected) for anything wrong: not TOML, a
    missing or mistyped key, a machine that cannot be read, a kernel name
    that is not one, a layout that does not parse, bad kernel parameters."""
    from ..datasets import load_cached
    from ..topology import is_synthetic
    from .args import check_cmdline, check_functions, check_kernel
    p = Path(path)
    file = str(path)
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise LabFileError(file, "", f"cannot read: {e.strerror or e}") from None
    if len(raw) > 1 << 20:
        raise LabFileError(file, "", f"{len(raw)} bytes; a matrix is at most {1 << 20}")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise LabFileError(file, "", f"not UTF-8 text (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise LabFileError(file, "", f"not valid TOML: {e}") from None
    check(data, MATRIX, file)

    def bad(key: str, e: Exception):
        msg = re.sub(r"^--[a-z-]+ '[^']*': ", "", one_line(str(e)))
        raise LabFileError(file, key, msg) from None
    machines = []
    for i, m in enumerate(data["machines"]):
        src = m.strip()
        local = p.parent / src
        if not (is_synthetic(src) and not local.exists()):
            src = str(local)
        try:
            load_cached(src)
        except NumalabError as e:
            bad(f"machines[{i}]", e)
        machines.append(src)
    kernels = []
    for i, k in enumerate(data["kernels"]):
        try:
            kernels.append(check_kernel(k, built))
        except LabError as e:
            bad(f"kernels[{i}]", e)
    layouts = []
    for i, text in enumerate(data["nvme"]):
        try:
            layouts.append(parse_layout(text))
        except LabError as e:
            bad(f"nvme[{i}]", e)
    cmdlines = []
    for i, c in enumerate(data.get("cmdline", [""])):
        try:
            cmdlines.append(check_cmdline(c))
        except LabError as e:
            bad(f"cmdline[{i}]", e)
    try:
        trace = check_functions(data.get("trace", "nvme_probe"), "trace")
    except LabError as e:
        bad("trace", e)
    try:
        boot = check_functions(data.get("boot_trace", ""), "boot_trace")
    except LabError as e:
        bad("boot_trace", e)
    n = len(machines) * len(kernels) * len(layouts) * len(cmdlines)
    if n > MAX_TASKS:
        raise LabFileError(file, "", f"{n} boots; a matrix holds at most {MAX_TASKS}")
    for key, values in (("machines", machines), ("kernels", kernels),
                        ("nvme", [x.text for x in layouts]), ("cmdline", cmdlines)):
        dup = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if dup is not None:
            raise LabFileError(file, key, f"{show(dup)} is listed twice")
    return Matrix(path=file, machines=tuple(machines), kernels=tuple(kernels),
                  layouts=tuple(layouts), cmdlines=tuple(cmdlines),
                  timeout=float(data.get("timeout", 600)), trace=trace, boot_trace=boot,
                  retries=data.get("retries", 1))


# -- planning ---------------------------------------------------------------------------

def resolve_kernel(query: str, progress=None) -> dict:
    """A kernel query -> ``{"kernel": what the worker boots (the exact
    release, or built:NAME), "upstream", "packages": [sha256...]}``,
    fetching a Debian kernel into the cache if needed (once, in the client,
    so LocalCluster workers find it there)."""
    if query.startswith("built:"):
        from .build import find_built
        k = find_built(query[len("built:"):])
        run = query
    else:
        from .kernels import fetch_kernel
        k = fetch_kernel(query, progress=progress)
        run = k.release
    out = {"kernel": run, "upstream": k.upstream,
           "packages": sorted(p["sha256"] for p in k.packages)}
    if k.build:
        # a built kernel is its source package AND its fragment and patch: a
        # rebuild with another fragment must not reuse the old results
        out["build"] = {f: k.build.get(f) for f in ("key", "fragment_sha256", "patch_sha256")}
    return out


def task_key(spec: dict) -> str:
    """sha256 of a task's normalised spec (sorted keys, no spaces)."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _slug(text: str, limit: int = 48) -> str:
    s = re.sub(r"[^A-Za-z0-9.+-]+", "_", text).strip("_")
    return s[:limit] or "machine"


def _source_sha(src: str) -> str:
    p = Path(src)
    data = p.read_bytes() if p.is_file() else src.encode()
    return hashlib.sha256(data).hexdigest()


def plan_sweep(matrix: Matrix, kernels: dict[str, dict]) -> tuple[list[dict], list[dict]]:
    """Every task of the matrix, and every (machine or layout) the lab cannot
    build. Inputs: the matrix, ``{query: resolve_kernel(query)}``. Output:
    ``(tasks, unexpressible)``; a task is a JSON-able dict (``key``,
    ``name``, ``spec``, ``args``, ``command``)."""
    from ..datasets import label, load_cached
    from .args import check_nvme
    from .express import express, lab_run_arguments
    tasks, refused = [], []
    for src in matrix.machines:
        name = label(src)
        e = express(load_cached(src), name)
        if not e.exact:
            refused.append({"machine": name, "source": src, "reasons": list(e.reasons)})
            continue
        sha = _source_sha(src)
        for q in matrix.kernels:
            k = kernels[q]
            for layout in matrix.layouts:
                opts = layout.options(e.machine)
                try:
                    check_nvme(opts, e.machine.nnodes)
                except LabError as err:
                    refused.append({"machine": name, "source": src, "nvme": layout.text,
                                    "reasons": [one_line(str(err))]})
                    continue
                for cmd in matrix.cmdlines:
                    spec = {"format": FORMAT, "machine": name, "machine_sha256": sha,
                            "lab": e.args, "kernel": k["kernel"],
                            "kernel_packages": k["packages"], "nvme": opts, "cmdline": cmd,
                            "trace": list(matrix.trace), "boot_trace": list(matrix.boot_trace)}
                    if "build" in k:
                        spec["kernel_build"] = k["build"]
                    key = task_key(spec)
                    short = (k["upstream"].rsplit(".", 1)[0] if not k["kernel"].startswith("built:")
                             else k["kernel"][6:])
                    fname = f"{_slug(name)}-{_slug(short, 24)}-{key[:12]}.tar.bz2"
                    argv = ["numalab", "lab", "run", "--kernel", k["kernel"],
                            *lab_run_arguments(e.args),
                            *[a for o in opts for a in ("--nvme", o)],
                            "--trace", ",".join(matrix.trace)]
                    if matrix.boot_trace:
                        argv += ["--boot-trace", ",".join(matrix.boot_trace)]
                    if cmd:
                        argv += ["--append", cmd]
                    argv += ["-o", fname]
                    tasks.append({"key": key, "name": fname, "spec": spec,
                                  "args": {**e.args, "kernel": k["kernel"], "nvme": opts,
                                           "append": cmd, "trace": list(matrix.trace),
                                           "boot_trace": list(matrix.boot_trace),
                                           "timeout": matrix.timeout},
                                  "command": shlex.join(argv), "layout": layout.text})
    return tasks, refused


# -- the task (runs on a worker) ----------------------------------------------------------

def lab_boot(task: dict, workdir: Path) -> Path:
    """Boot one task with :func:`numalab.lab.run.run_lab` into ``workdir``;
    check the dump reads and booted the planned kernel packages. Output:
    the dump's path. Raises LabError."""
    from .dump import read_lab_dump
    from .run import LabOptions, run_lab
    from .spec import machine_from_text, parse_nvme
    a = task["args"]
    machine = machine_from_text(a["topology"], distances=a["distances"],
                                node_cpus=a["node_cpus"], node_memory=a["node_memory"])
    opts = LabOptions(devices=[parse_nvme(x, machine.nnodes) for x in a["nvme"]],
                      trace=tuple(a["trace"]), boot_trace=tuple(a["boot_trace"]),
                      timeout=a["timeout"], append=a["append"])
    path = run_lab(a["kernel"], machine, opts, output=workdir / task["name"],
                   command=task["command"],
                   manifest_extra={"sweep": {"key": task["key"], "spec": task["spec"]}})
    d = read_lab_dump(path)
    got = sorted(p["sha256"] for p in d.manifest["kernel"]["packages"])
    if got != task["spec"]["kernel_packages"]:
        raise LabError(f"the worker booted kernel packages {[g[:12] for g in got]}, the sweep "
                       f"planned {[g[:12] for g in task['spec']['kernel_packages']]}")
    return path


def run_task(task: dict, boot: Callable[[dict, Path], Path] = lab_boot, tries: int = 2) -> dict:
    """One task on a worker: ``boot`` (retried until ``tries`` attempts);
    never raises. Output: ``{"key", "ok", "dump" (bytes, when ok),
    "attempts": [{"ok", "seconds", "error"}], "worker"}``."""
    attempts = []
    try:                       # the Dask worker's address (no host name: results are shared)
        from distributed import get_worker
        worker = get_worker().address
    except (ImportError, ValueError):
        worker = f"pid {os.getpid()}"
    for _ in range(max(1, tries)):
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="numalab-sweep-") as tmp:
            try:
                path = boot(task, Path(tmp))
                data = Path(path).read_bytes()
            except Exception as e:     # a failed boot is reported, never lost
                attempts.append({"ok": False, "seconds": round(time.monotonic() - t0, 1),
                                 "error": one_line(f"{type(e).__name__}: {e}")[:2000]})
                continue
        attempts.append({"ok": True, "seconds": round(time.monotonic() - t0, 1), "error": ""})
        return {"key": task["key"], "ok": True, "dump": data, "attempts": attempts,
                "worker": worker}
    return {"key": task["key"], "ok": False, "attempts": attempts, "worker": worker}


# -- the client ---------------------------------------------------------------------------

def _eta(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else (
        f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s")


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def check_results(results) -> Path:
    """``-o RESULTS``: a folder that exists and can be written, or a new one
    in such a folder."""
    from .args import _writable_dir
    text = str(results)
    if not text or "\0" in text or len(text) > 4096:
        raise LabError(f"-o {text[:40]!r}: expected a folder")
    p = Path(text)
    if p.exists() and not p.is_dir():
        raise LabError(f"-o {text!r}: not a folder")
    _writable_dir(p if p.is_dir() else (p.parent if str(p.parent) else Path(".")), "-o", text)
    return p


def check_scheduler(address: str) -> str:
    """``--scheduler``: ``tcp://HOST:PORT``."""
    if not isinstance(address, str) or not re.fullmatch(
            r"(tcp|tls)://[A-Za-z0-9.\-\[\]:]{1,255}:\d{1,5}", address):
        raise LabError(f"--scheduler {address!r:.60}: expected tcp://HOST:PORT")
    return address


def run_sweep(matrix_path, results, scheduler: str | None = None, workers: int | None = None,
              boot: Callable[[dict, Path], Path] = lab_boot,
              resolve: Callable[[str], dict] | None = None,
              say: Callable[[str], None] = lambda m: print(m, file=sys.stderr, flush=True),
              dashboard: bool = True, connect_timeout: float = 30.0) -> dict:
    """Run a matrix; output the summary (also ``RESULTS/sweep.json``).

    Inputs: the matrix file; the results folder (created); ``scheduler``
    (an address, or None for a LocalCluster of ``workers`` single-threaded
    processes, default :func:`usable_cpus`); ``boot`` (the task's boot
    function: :func:`lab_boot`, or a fake in tests); ``resolve`` (kernel
    query -> :func:`resolve_kernel`'s dict). Raises LabError (one line)
    for bad input, before any cluster starts."""
    from .args import check_count
    matrix = load_matrix(matrix_path)
    out = check_results(results)
    if scheduler is not None:
        check_scheduler(scheduler)
    nworkers = check_count("--workers", workers if workers is not None else usable_cpus(), 1, 256)
    resolve = resolve or (lambda q: resolve_kernel(q, progress=lambda m: say(f"kernel: {m}")))
    kernels = {q: resolve(q) for q in matrix.kernels}
    tasks, refused = plan_sweep(matrix, kernels)
    out.mkdir(exist_ok=True)
    rows = {t["key"]: {"key": t["key"], "name": t["name"], "machine": t["spec"]["machine"],
                       "kernel": t["spec"]["kernel"], "nvme": t["layout"],
                       "cmdline": t["spec"]["cmdline"], "command": t["command"],
                       "status": "planned"} for t in tasks}
    todo = []
    for t in tasks:
        if (out / t["name"]).is_file():
            rows[t["key"]]["status"] = "existing"
        else:
            todo.append(t)
    for r in refused:
        say(f"not expressible: {r['machine']}" + (f" with {r['nvme']}" if r.get("nvme") else "")
            + f": {r['reasons'][0]}")
    say(f"{len(tasks)} boot(s) planned, {len(tasks) - len(todo)} already in {out}, "
        f"{len(todo)} to run; {len(refused)} not expressible")
    t0 = time.monotonic()
    failures = []
    cluster_info = {"scheduler": scheduler, "workers": None, "dashboard": None}
    if todo:
        from dask.distributed import Client, LocalCluster, as_completed
        cluster = None
        if scheduler is None:
            import logging
            cluster = LocalCluster(n_workers=nworkers, threads_per_worker=1, processes=True,
                                   host="127.0.0.1",
                                   dashboard_address="127.0.0.1:0" if dashboard else None,
                                   silence_logs=logging.ERROR)
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout=connect_timeout)
            except OSError as e:
                raise LabError(f"--scheduler {scheduler}: cannot connect: {e}") from None
        try:
            if scheduler is not None:
                try:
                    client.wait_for_workers(1, timeout=connect_timeout)
                except Exception:
                    raise LabError(f"--scheduler {scheduler}: no worker joined in "
                                   f"{connect_timeout:.0f} s (start one: dask worker "
                                   f"{scheduler} --nthreads 1)") from None
            n = len(client.scheduler_info(n_workers=-1)["workers"]) if scheduler else nworkers
            cluster_info.update(workers=n, dashboard=client.dashboard_link if dashboard else None)
            say(f"dask: {'scheduler ' + scheduler if scheduler else 'LocalCluster'}, {n} "
                f"worker(s); dashboard {cluster_info['dashboard'] or 'off'}")
            futures = [client.submit(run_task, t, boot, 1 + matrix.retries, pure=False,
                                     key=f"boot-{t['key'][:20]}") for t in todo]
            by_future = dict(zip((f.key for f in futures), todo))
            done = 0
            for fut in as_completed(futures):
                t = by_future[fut.key]
                row = rows[t["key"]]
                try:
                    res = fut.result()
                except Exception as e:       # the worker died: report it, never drop it
                    res = {"ok": False, "worker": "?", "attempts": [
                        {"ok": False, "seconds": 0, "error": one_line(f"{type(e).__name__}: {e}")}]}
                row.update(attempts=res["attempts"], worker=res["worker"],
                           seconds=round(sum(a["seconds"] for a in res["attempts"]), 1))
                if res["ok"]:
                    _write_atomic(out / t["name"], res["dump"])
                    row["status"] = "booted"
                else:
                    row["status"] = "failed"
                    failures.append({"key": t["key"], "name": t["name"], "machine": row["machine"],
                                     "kernel": row["kernel"], "nvme": row["nvme"],
                                     "command": t["command"], "attempts": res["attempts"]})
                done += 1
                elapsed = time.monotonic() - t0
                eta = _eta(elapsed / done * (len(todo) - done))
                say(f"{done}/{len(todo)} boots done ({len(failures)} failed), "
                    f"{elapsed:.0f} s, ETA {eta}: {t['name']} {row['status']} in "
                    f"{row['seconds']:.0f} s")
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    wall = time.monotonic() - t0
    summary = {"format": FORMAT, "matrix": str(matrix_path), "wall_seconds": round(wall, 1),
               **cluster_info, "tasks": list(rows.values()), "unexpressible": refused,
               "counts": {s: sum(1 for r in rows.values() if r["status"] == s)
                          for s in ("booted", "existing", "failed")}
               | {"unexpressible": len(refused)}}
    _write_atomic(out / "sweep.json", (json.dumps(summary, indent=1) + "\n").encode())
    _write_atomic(out / "failures.json", (json.dumps(failures, indent=1) + "\n").encode())
    return summary


def render_summary(summary: dict) -> str:
    """The summary as text: counts, then one line per task and per refusal."""
    c = summary["counts"]
    lines = [f"{c['booted']} booted, {c['existing']} already there, {c['failed']} failed, "
             f"{c['unexpressible']} not expressible; {summary['wall_seconds']:.0f} s wall"]
    for r in summary["tasks"]:
        lines.append(f"  {r['status']:<9} {r['name']}" + (
            f"  ({r.get('seconds', 0):.0f} s on {r.get('worker')})" if r["status"] in
            ("booted", "failed") else ""))
        if r["status"] == "failed":
            for a in r["attempts"]:
                lines.append(f"      attempt: {a['error']}")
    for r in summary["unexpressible"]:
        lines.append(f"  refused   {r['machine']}" + (f" {r['nvme']}" if r.get("nvme") else "")
                     + f": {'; '.join(r['reasons'])}")
    return "\n".join(lines)
