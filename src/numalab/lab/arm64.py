"""The arm64 runs: uneven CPU clusters on a real kernel (issue 18, item 6).

An x86 guest cannot be given clusters of unequal size; an arm64 guest reads
its clusters from the device tree's ``/cpus/cpu-map``. ``tools/lab_arm64/``
builds Debian's Linux 7.2 for arm64 with and without the rotate patch,
edits QEMU's device tree, and boots each kernel with one NVMe controller;
the guest's ``/init`` prints the cluster lists, the NVMe queue count, and
every vector's affinity to the serial console. The console logs and the
description of each run (``runs.toml``) are in ``data/lab/arm64/``.

This module reads those logs (:func:`read_console`) and puts each run next
to the port (:func:`compare`): NVMe asks ``1 + min(possible CPUs,
max_ioqpairs)`` vectors, one of them the admin queue's (``pre_vectors``),
and :func:`numalab.models.irq.blkmq.msix_allocation` follows
``__pci_enable_msix_range()`` through ``group_cpus_evenly()`` and
``alloc_descs()``, retry included. The first ``group_cpus_evenly()`` call of
a boot is blk-mq's map of the admin queue (offset 0 under rotate), so the
NVMe allocation starts at spread offset 1: the debug build's log shows both.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ..cpumask import CpumaskSyntaxError, format_cpulist, parse_cpulist
from . import LabError

__all__ = ["Arm64Run", "read_console", "runs", "view_of", "predict", "compare", "debug_calls",
           "warnings", "warning_messages", "table", "configurations", "default_folder"]

#: Warnings about the devices and interrupts the runs test (any such warning
#: in a boot would be the error the book says is missing).
IRQ_WORDS = re.compile(r"nvme|msi|irq|interrupt|vector", re.I)

_QUEUES = re.compile(r"nvme nvme0: (\d+)/(\d+)/(\d+) default/read/poll queues")
_IRQ_NAME = re.compile(r"^\s*(\d+):.*\snvme0q(\d+)\s*$", re.M)
_AFFINITY = re.compile(r"^irq (\d+) smp_affinity_list: ([\d,\-]*)\s*$", re.M)
_CLUSTER = re.compile(r"^cpu(\d+) cluster_cpus_list: ([\d,\-]+)\s*$", re.M)
_DBG_CALL = re.compile(r"numalab-dbg: group_cpus_evenly\(numgrps=(\d+)\) spread_offset=(\d+) "
                       r"nummasks=(\d+) caller (\w+)")


def default_folder() -> Path:
    """``data/lab/arm64`` of this checkout."""
    from ..datasets import repo_root
    return repo_root() / "data" / "lab" / "arm64"


@dataclass(frozen=True)
class Arm64Run:
    """One boot: what ``runs.toml`` says was booted, and what the console showed."""
    log: Path
    kernel: str
    nodes: tuple[int, ...]
    clusters: tuple[int, ...]
    max_ioqpairs: int
    command: str
    debug: bool = False
    measured: dict = field(default_factory=dict, compare=False)


def _console_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        raise LabError(f"{path}: cannot read: {e.strerror or e}") from None


def _line_of(text: str, pos: int) -> str:
    return f"line {text.count(chr(10), 0, pos) + 1}"


def _console_mask(text: str, m: re.Match, group: int, path: Path, ncpus: int | None) -> int:
    """The cpulist of ``m.group(group)`` (empty: 0), checked against ``ncpus``."""
    from .schema import LabFileError
    lst = m.group(group)
    try:
        mask = parse_cpulist(lst) if lst else 0
    except CpumaskSyntaxError:
        raise LabFileError(str(path), _line_of(text, m.start()), f"expected a CPU list, not "
                                                                 f"{lst[:40]!r}") from None
    if ncpus is not None and mask >> ncpus:
        raise LabFileError(str(path), _line_of(text, m.start()),
                           f"names CPU {mask.bit_length() - 1}, but the run has {ncpus} CPUs")
    return mask


MAX_IO_QUEUES = 65535       # QEMU's nvme max_ioqpairs is a 16-bit count


def read_console(path: str | Path, ncpus: int | None = None) -> dict:
    """What a console log of ``tools/lab_arm64/init.c`` shows: ``io_queues``
    (the NVMe driver's default queues), ``queue_masks`` (the smp_affinity of
    I/O queues 1..N, cpumask ints), ``admin_mask`` and ``clusters`` ({cpu:
    cluster mask}). Raises LabError if the log lacks the NVMe line, and a
    :class:`~numalab.lab.schema.LabFileError` (file and line) for a CPU
    list that does not parse or names a CPU at or above ``ncpus`` (when
    given), or a queue count out of range."""
    from .schema import LabFileError
    path = Path(path)
    text = _console_text(path)
    m = _QUEUES.search(text)
    if not m:
        raise LabError(f"{path.name}: no 'nvme nvme0: N/0/0 default/read/poll queues' line")
    n = int(m.group(1))
    if not 1 <= n <= MAX_IO_QUEUES:
        raise LabFileError(str(path), _line_of(text, m.start()),
                           f"{n} default queues; expected 1 to {MAX_IO_QUEUES}")
    irq_queue = {int(i): int(q) for i, q in _IRQ_NAME.findall(text)}
    aff = {int(a.group(1)): _console_mask(text, a, 2, path, ncpus)
           for a in _AFFINITY.finditer(text)}
    by_queue = {q: aff.get(i) for i, q in irq_queue.items()}
    clusters = {}
    for c in _CLUSTER.finditer(text):
        cpu = int(c.group(1))
        if ncpus is not None and cpu >= ncpus:
            raise LabFileError(str(path), _line_of(text, c.start()),
                               f"cpu{cpu}, but the run has {ncpus} CPUs")
        clusters[cpu] = _console_mask(text, c, 2, path, ncpus)
    return {"io_queues": n, "queue_masks": [by_queue.get(q) for q in range(1, n + 1)],
            "admin_mask": by_queue.get(0), "clusters": clusters}


def debug_calls(path: str | Path) -> list[tuple[int, int, str]]:
    """``(numgrps, spread_offset, caller)`` of every ``group_cpus_evenly()``
    call a debug build (``debug-prints.patch``) logged, in order (each line
    appears twice in a log, once on the console and once in dmesg: the
    first copy is kept)."""
    from .schema import LabFileError
    text = _console_text(Path(path))
    console = text.split("=== LAB BEGIN ===", 1)[0]
    out = []
    for m in _DBG_CALL.finditer(console):
        g, o = int(m.group(1)), int(m.group(2))
        # numgrps and spread_offset are unsigned ints in group_cpus_evenly()
        if not 1 <= g < 1 << 32 or not 0 <= o < 1 << 32:
            raise LabFileError(str(path), _line_of(console, m.start()),
                               f"numgrps {g} / spread_offset {o}: expected unsigned 32-bit values, "
                               "numgrps at least 1")
        out.append((g, o, m.group(4)))
    return out


_LEVEL = re.compile(r"^<([0-7])>\[[^\]]*\] (.*)$", re.M)


def warnings(path: str | Path, worst: int = 4) -> list[str]:
    """The kernel log lines of a console log at level ``worst`` or more
    severe (``KERN_WARNING`` = 4 by default: warnings, errors, worse), and
    any line that mentions nvme with "fail" or "error", debug prints left out.

    >>> import tempfile, os
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)
    >>> _ = f.write("<6>[ 0.1] ok\\n<3>[ 0.2] nvme: bad\\n"); f.close()
    >>> w = warnings(f.name); os.unlink(f.name)
    >>> w
    ['<3> nvme: bad']
    """
    text = _console_text(Path(path))
    out = [f"<{lvl}> {msg}" for lvl, msg in _LEVEL.findall(text)
           if int(lvl) <= worst and "numalab-dbg" not in msg]
    out += [line.strip() for line in text.splitlines()
            if "nvme" in line and re.search(r"fail|error", line, re.I)
            and not line.startswith("<") and "numalab-dbg" not in line]
    return out


def runs(folder: str | Path | None = None) -> list[Arm64Run]:
    """The runs of ``runs.toml`` with their consoles read.

    ``runs.toml`` is checked against :data:`numalab.lab.schema.ARM64_RUNS`
    (types, required keys, ranges), each run's node CPU lists and cluster
    CPU lists must cover the same CPUs 0..N-1 once each, and its log must be
    in ``logs/``; each console is read with the run's CPU count
    (:func:`read_console`). A bad file raises
    :class:`~numalab.lab.schema.LabFileError` naming it and the key."""
    from .schema import ARM64_RUNS, LabFileError, check, cover_once
    folder = Path(folder) if folder is not None else default_folder()
    file = folder / "runs.toml"
    try:
        spec = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise LabError(f"{file}: {getattr(e, 'strerror', None) or e}") from None
    check(spec, ARM64_RUNS, str(file))
    out = []
    for i, r in enumerate(spec["run"]):
        nodes = cover_once(r["nodes"], f"run[{i}].nodes", str(file))
        clusters = cover_once(r["clusters"], f"run[{i}].clusters", str(file))
        if nodes != clusters:
            raise LabFileError(str(file), f"run[{i}].clusters", "cover CPUs "
                               f"{format_cpulist(clusters)}, but the nodes cover "
                               f"{format_cpulist(nodes)}")
        log = folder / "logs" / r["log"]
        if not log.is_file():
            raise LabFileError(str(file), f"run[{i}].log", f"{r['log']!r}: no such file in "
                                                           f"{folder / 'logs'}")
        out.append(Arm64Run(log=log, kernel=r["kernel"],
                            nodes=tuple(parse_cpulist(n) for n in r["nodes"]),
                            clusters=tuple(parse_cpulist(c) for c in r["clusters"]),
                            max_ioqpairs=r["max_ioqpairs"], command=r["command"],
                            debug=r.get("debug", False),
                            measured=read_console(log, nodes.bit_length())))
    return out


def view_of(nodes, clusters):
    """The ``group_cpus.c`` view of a machine given as node CPU masks and
    cluster CPU masks (one CPU per core, no SMT), CPUs 0..N-1 all present.

    >>> v = view_of([0b11111], [0b01111, 0b10000])
    >>> v.nr_cpu_ids, format_cpulist(v.cluster[4])
    (5, '4')
    """
    from ..kernel.lib.group_cpus import CpuTopo, build_node_to_cpumask
    full = 0
    for n in nodes:
        full |= n
    ncpu = full.bit_length()
    if full != (1 << ncpu) - 1:
        raise LabError(f"CPUs {format_cpulist(full)}: expected CPUs 0 to N-1")
    node_of = {c: i for i, n in enumerate(nodes) for c in range(ncpu) if n >> c & 1}
    cluster_of = {c: m for m in clusters for c in range(ncpu) if m >> c & 1}
    if set(cluster_of) != set(range(ncpu)):
        raise LabError("the clusters do not cover every CPU once")
    base = CpuTopo(nr_cpu_ids=ncpu, nr_node_ids=len(nodes), possible=full, present=full,
                   node_possible=tuple(range(len(nodes))),
                   cpu_to_node=tuple(node_of[c] for c in range(ncpu)),
                   sibling=tuple(1 << c for c in range(ncpu)),
                   cluster=tuple(cluster_of[c] for c in range(ncpu)))
    return CpuTopo(**{**base.__dict__, "node_to_cpumask": tuple(build_node_to_cpumask(base))})


def predict(run: Arm64Run) -> dict:
    """The port's answer for a run: the vectors NVMe asks for, the
    allocation path (:func:`numalab.models.irq.blkmq.msix_allocation`,
    starting at spread offset 1), the I/O queues it ends with and their masks."""
    from ..models.irq.blkmq import msix_allocation
    view = view_of(run.nodes, run.clusters)
    asked = 1 + min(view.nr_cpu_ids, run.max_ioqpairs)
    variant = "rotate" if run.kernel.endswith("-rotate") else "mainline"
    r = msix_allocation(asked, view, 1, variant, first_offset=1)
    # nvme_setup_io_queues(): one vector is the admin queue's, at least one I/O queue
    return {"vectors_asked": asked, "variant": variant, "io_queues": max(r["vectors"] - 1, 1),
            "queue_masks": r["masks"][1:], "attempts": r["attempts"], "first_errno": r["errno"]}


def compare(run: Arm64Run) -> dict:
    """One row: the run, measured against predicted queue count and masks."""
    p, m = predict(run), run.measured
    return {"log": run.log.name, "kernel": run.kernel,
            "clusters": " / ".join(format_cpulist(c) for c in run.clusters),
            "nodes": len(run.nodes), "vectors asked": p["vectors_asked"],
            "I/O queues (measured)": m["io_queues"], "I/O queues (predicted)": p["io_queues"],
            "masks (measured)": " | ".join(format_cpulist(x) if x is not None else "?"
                                          for x in m["queue_masks"]),
            "masks (predicted)": " | ".join(format_cpulist(x) for x in p["queue_masks"]),
            "allocation attempts (predicted)": len(p["attempts"]),
            "equal": m["io_queues"] == p["io_queues"] and m["queue_masks"] == p["queue_masks"]}


def warning_messages(runs_: list[Arm64Run]) -> list[str]:
    """The distinct messages (without level, time and subsystem prefix) that
    the compared boots logged at warning level or worse."""
    return sorted({w.split("] ", 1)[-1].split(": ", 1)[-1]
                   for r in runs_ if not r.debug for w in warnings(r.log)})


def table(runs_: list[Arm64Run]):
    """:func:`compare` for every boot but the debug build's, as a DataFrame."""
    import pandas as pd
    return pd.DataFrame([compare(r) for r in runs_ if not r.debug])


def configurations(df) -> "pd.DataFrame":
    """One row per machine and request of a :func:`table`: nodes, clusters,
    ``asked`` (I/O queues), then per kernel (``7.2``, ``7.2-rotate``) the
    measured queue counts (``queues ...``, distinct values joined by "or")
    and the number of boots (``boots ...``), in the table's order.

    >>> import pandas as pd
    >>> df = pd.DataFrame({"nodes": [1, 1, 1], "clusters": ["0-3 / 4"] * 3, "vectors asked": [6] * 3,
    ...                    "kernel": ["7.2", "7.2-rotate", "7.2-rotate"], "I/O queues (measured)": [5, 4, 4]})
    >>> configurations(df).iloc[0].to_dict()["queues 7.2-rotate"], configurations(df).iloc[0].to_dict()["boots 7.2-rotate"]
    ('4', 2)
    """
    g = (df.assign(asked=df["vectors asked"] - 1)
         .groupby(["nodes", "clusters", "asked", "kernel"], sort=False)["I/O queues (measured)"]
         .agg(boots="size", queues=lambda q: " or ".join(map(str, sorted(set(q))))))
    wide = g.unstack("kernel")
    wide.columns = [f"{what} {kernel}" for what, kernel in wide.columns]
    return wide.reset_index()
