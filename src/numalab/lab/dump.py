"""Lab dumps: rebuild the guest's tree from what it sent, and read a lab
dump back for comparison with the ports.

Guest side to host side (:mod:`.run` uses these):

* :func:`decode_channel` -- the base64 tarball between ``NUMALAB-DUMP-BEGIN
  SIZE SHA256`` and ``NUMALAB-DUMP-END`` on the dump serial port, checked
  against its size and sha256;
* :func:`split_head_stream` -- the ``head -v`` stream (``==> PATH <==``
  before each file) back into ``{path: bytes}``;
* :func:`parse_links` -- ``stat -c %N`` lines back into ``{link: target}``;
* :func:`build_tree` -- both written under a folder, which
  :func:`numalab.collect.collect` then snapshots like a live system.

Reading a finished dump: :func:`read_lab_dump` returns a :class:`LabDump`
with the kernel release, per NVMe controller its PCI address, node and
interrupts (``smp_affinity_list`` and ``effective_affinity_list``, also as
cpumask ints, see :mod:`numalab.cpumask`), per block device its blk-mq map
``{hctx: mask}``, the ftrace lines (CPU, COMM, function), and with
``--io`` the per-CPU interrupt deltas.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import posixpath
import re
from dataclasses import dataclass, field

from ..cpumask import CpumaskSyntaxError, parse_cpulist
from . import LabError
from .initramfs import DUMP_BEGIN, DUMP_END

__all__ = ["decode_channel", "split_head_stream", "parse_links", "build_tree",
           "parse_interrupts", "parse_trace", "interrupt_deltas", "read_lab_dump",
           "LabDump", "NvmeController", "NvmeIrq", "TraceLine", "HEAD_MARK"]

HEAD_MARK = b"@@NUMALAB-HEAD@@\n"


# -- guest output to files --------------------------------------------------------------

def decode_channel(text: bytes) -> bytes:
    """The tarball the guest sent on its dump port.

    Input: the bytes written to the dump port (``\\r`` from the tty's
    newline translation is ignored). Output: the decoded bytes. Raises
    LabError when the markers are missing or the size or sha256 differ
    (a cut transfer).

    >>> import base64, hashlib
    >>> body = b"hello"
    >>> line = f"NUMALAB-DUMP-BEGIN 5 {hashlib.sha256(body).hexdigest()}\\n".encode()
    >>> decode_channel(line + base64.b64encode(body) + b"\\r\\nNUMALAB-DUMP-END\\n")
    b'hello'
    """
    text = text.replace(b"\r", b"")
    m = re.search(rb"^" + DUMP_BEGIN.encode() + rb" (\d+) ([0-9a-f]{64})\n", text, re.M)
    if not m:
        raise LabError("the guest sent no dump (no begin marker on the dump port)")
    end = text.find(b"\n" + DUMP_END.encode(), m.end() - 1)
    if end < 0:
        raise LabError("the dump transfer was cut (no end marker)")
    try:
        data = base64.b64decode(b"".join(text[m.end():end].split()), validate=True)
    except ValueError as e:
        raise LabError(f"the dump transfer is corrupt ({e})") from None
    if len(data) != int(m.group(1)) or hashlib.sha256(data).hexdigest() != m.group(2).decode():
        raise LabError(f"the dump transfer is corrupt ({len(data)} bytes received, "
                       f"{int(m.group(1))} sent, or a sha256 mismatch)")
    return data


_HEADER = re.compile(rb"(?:^|\n)==> (/[^\n]*?) <==\n")


def split_head_stream(data: bytes) -> dict[str, bytes]:
    """Files from the guest's ``head -v`` stream.

    The stream is segments, each starting with :data:`HEAD_MARK` and
    holding one ``head -v`` run: ``==> PATH <==`` then the file, with one
    extra newline before every header but the first. Output: ``{path
    without the leading "/": bytes}``.

    >>> s = HEAD_MARK + b"==> /a <==\\n1\\n\\n==> /b <==\\n" + HEAD_MARK + b"==> /c <==\\nx\\n"
    >>> split_head_stream(s)
    {'a': b'1\\n', 'b': b'', 'c': b'x\\n'}
    """
    out: dict[str, bytes] = {}
    for seg in data.split(HEAD_MARK):
        heads = list(_HEADER.finditer(seg))
        for i, h in enumerate(heads):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(seg)
            path = h.group(1).decode("utf-8", "replace").lstrip("/")
            if path and not path.endswith("/"):
                out[path] = seg[h.end():end]
    return out


_LINK = re.compile(r"^'(/[^']+)' -> '([^']+)'$")


def parse_links(text: str) -> dict[str, str]:
    """Symbolic links from ``stat -c %N`` lines (``'PATH' -> 'TARGET'``);
    other lines (files, errors) are skipped. Paths lose their leading
    ``/``.

    >>> parse_links("'/sys/block/nvme0n1' -> '../devices/x/nvme0n1'\\n'/sys/a'\\n")
    {'sys/block/nvme0n1': '../devices/x/nvme0n1'}
    """
    out = {}
    for line in text.splitlines():
        m = _LINK.match(line.strip())
        if m:
            out[m.group(1).lstrip("/")] = m.group(2)
    return out


def _inside(root: str, rel: str) -> str:
    """``root/rel`` with links inside ``root`` followed, refused if it leaves ``root``."""
    path = os.path.realpath(os.path.join(root, rel))
    if path != root and not path.startswith(root + os.sep):
        raise LabError(f"guest path {rel!r} leaves the dump")
    return path


def build_tree(root: str | os.PathLike, files: dict[str, bytes], links: dict[str, str]) -> None:
    """Write ``links`` then ``files`` under ``root`` (an empty folder), so
    that ``sys/bus/pci/devices/X/class`` lands in the device's real folder
    as on the guest. Paths and link targets that would leave ``root`` are
    refused (LabError)."""
    root = os.path.realpath(root)
    for rel in sorted(links):
        if rel.startswith("/") or ".." in rel.split("/"):
            raise LabError(f"guest link {rel!r} is not a relative path")
        target = links[rel]
        if target.startswith("/"):
            raise LabError(f"guest link {rel!r} has an absolute target")
        where = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if where.startswith(".."):
            raise LabError(f"guest link {rel!r} points outside the dump")
        parent = _inside(root, posixpath.dirname(rel))
        os.makedirs(parent, exist_ok=True)
        dst = os.path.join(parent, posixpath.basename(rel))
        if not os.path.lexists(dst):
            os.symlink(target, dst)
    for rel in sorted(files):
        if rel.startswith("/") or ".." in rel.split("/"):
            raise LabError(f"guest file {rel!r} is not a relative path")
        path = _inside(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(files[rel])


# -- reading kernel text ------------------------------------------------------------------

def _bad(file: str, key: str, problem: str):
    from .schema import LabFileError
    raise LabFileError(file, key, problem)


_COUNT = re.compile(r"\s*([0-9]{1,20})(?=\s|$)")
_IRQ_HEAD = re.compile(r"\s*([A-Za-z0-9_]{1,16})\s*")
_CPU_COL = re.compile(r"CPU([0-9]{1,5})")


def parse_interrupts(text: str, file: str = "/proc/interrupts",
                     ncpus: int | None = None) -> tuple[int, dict[str, tuple[tuple[int, ...], str]]]:
    """``/proc/interrupts``: ``(ncpus, {irq: (per-CPU counts, rest of the
    line)})``; ``irq`` is the first column without its colon (``"24"``,
    ``"LOC"``).

    The file is checked as the kernel writes it (``show_interrupts()``): a
    header of ``CPUn`` columns in increasing order (as many as ``ncpus``
    when given), then one row per interrupt, a numbered one with one count
    per column, an architecture row (``LOC``) with one count per column or
    a single total (``ERR``, ``MIS``). Anything else raises
    :class:`~numalab.lab.schema.LabFileError` naming ``file`` and the line.

    >>> parse_interrupts("      CPU0  CPU1\\n 24:  3  4  PCI-MSIX-0000:10:01.0  0-edge  nvme0q0\\n")
    (2, {'24': ((3, 4), 'PCI-MSIX-0000:10:01.0  0-edge  nvme0q0')})
    >>> parse_interrupts("      CPU0  CPU1\\n 24:  3  PCI-MSIX\\n", "x")
    Traceback (most recent call last):
    numalab.lab.schema.LabFileError: x: line 2: 1 count for interrupt 24, expected 2 (one per CPU column)
    """
    lines = text.splitlines()
    if not lines or not lines[0].strip():
        _bad(file, "line 1", "expected a header of CPU columns (CPU0 CPU1 ...), not an empty line")
    cols = lines[0].split()
    last = -1
    for c in cols:
        m = _CPU_COL.fullmatch(c)
        if not m or int(m.group(1)) <= last:
            _bad(file, "line 1", f"expected CPU columns in increasing order (CPU0 CPU1 ...), "
                                 f"not {c[:40]!r}")
        last = int(m.group(1))
    n = len(cols)
    if ncpus is not None and n != ncpus:
        _bad(file, "line 1", f"{n} CPU columns, but the manifest's machine has {ncpus} CPUs")
    out: dict[str, tuple[tuple[int, ...], str]] = {}
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        head, sep, rest = line.partition(":")
        m = _IRQ_HEAD.fullmatch(head)
        if not sep or not m:
            _bad(file, f"line {lineno}", f"expected 'IRQ: counts...', not {line.strip()[:40]!r}")
        irq = m.group(1)
        counts: list[int] = []
        pos = 0
        while len(counts) < n:
            c = _COUNT.match(rest, pos)
            if not c:
                break
            counts.append(int(c.group(1)))
            pos = c.end()
        if len(counts) != n and not (not irq.isdigit() and len(counts) == 1):
            _bad(file, f"line {lineno}", f"{len(counts)} count{'s' * (len(counts) != 1)} for "
                                         f"interrupt {irq}, expected {n} (one per CPU column)")
        if irq in out:
            _bad(file, f"line {lineno}", f"interrupt {irq} listed twice")
        out[irq] = (tuple(counts), rest[pos:].strip())
    return n, out


def interrupt_deltas(before: str, after: str, files: tuple[str, str] = (
        "interrupts.before", "interrupts.after"), ncpus: int | None = None) -> dict[str, tuple[int, ...]]:
    """Per-CPU increase of every interrupt row between two
    ``/proc/interrupts`` texts; only rows that changed. Both must have the
    same CPU columns, and no count may go down (the kernel's counters only
    grow): else :class:`~numalab.lab.schema.LabFileError` naming the file
    (``files``: names of the two texts for messages).

    >>> b = "  CPU0 CPU1\\n 24: 1 0 x nvme0q1\\n 25: 0 0 x nvme0q2\\n"
    >>> a = "  CPU0 CPU1\\n 24: 5 0 x nvme0q1\\n 25: 0 0 x nvme0q2\\n"
    >>> interrupt_deltas(b, a)
    {'24': (4, 0)}
    """
    nb, b = parse_interrupts(before, files[0], ncpus)
    na, a = parse_interrupts(after, files[1], ncpus)
    if before.splitlines()[0].split() != after.splitlines()[0].split():
        _bad(files[1], "line 1", f"CPU columns differ from those of {files[0]}: the two "
                                 "snapshots must have the same CPUs")
    out = {}
    for irq, (counts, _) in a.items():
        old = b.get(irq, ((0,) * len(counts), ""))[0]
        if len(old) != len(counts):
            _bad(files[1], f"interrupt {irq}", f"{len(counts)} counts, but {files[0]} has "
                                               f"{len(old)}")
        d = tuple(x - y for x, y in zip(counts, old))
        down = [i for i, x in enumerate(d) if x < 0]
        if down:
            i = down[0]
            _bad(files[1], f"interrupt {irq}", f"went down on CPU column {i} ({old[i]} before, "
                                               f"{counts[i]} after); counters only grow")
        if any(d):
            out[irq] = d
    return out


@dataclass(frozen=True)
class TraceLine:
    """One ftrace ``function`` tracer line."""

    comm: str
    pid: int
    cpu: int
    timestamp: float
    function: str
    parent: str


_TRACE = re.compile(r"^\s*(.+)-(\d+)\s+\[(\d+)\]\s+(?:\S+\s+)?(\d+\.\d+):\s+(\S+)\s+<-(\S+)\s*$")
# ftrace's own notes between entries (kernel/trace/trace.c): lost events, buffers started
_TRACE_NOTE = re.compile(r"^\s*CPU:\d+ \[LOST \d+ EVENTS\]\s*$")
PID_MAX_LIMIT = 4 * 1024 * 1024      # include/linux/threads.h on 64-bit


def parse_trace(text: str, file: str = "trace", ncpus: int | None = None) -> list[TraceLine]:
    """The lines of ftrace's ``trace`` file (``function`` tracer).

    Comment lines (``#``), blank lines and ftrace's ``CPU:N [LOST M
    EVENTS]`` notes are skipped; every other line must be ``TASK-PID [CPU]
    FLAGS TIMESTAMP: FUNCTION <-CALLER`` with a CPU below ``ncpus`` (when
    given), a PID below the kernel's ``PID_MAX_LIMIT`` and a finite
    timestamp, else :class:`~numalab.lab.schema.LabFileError` names
    ``file`` and the line.

    >>> parse_trace("# tracer: function\\n  kworker/0:1-20  [000] .....  2.5: nvme_probe <-local_pci_probe\\n")
    [TraceLine(comm='kworker/0:1', pid=20, cpu=0, timestamp=2.5, function='nvme_probe', parent='local_pci_probe')]
    """
    out = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.startswith("#") or not line.strip() or _TRACE_NOTE.match(line):
            continue
        m = _TRACE.match(line)
        if not m:
            _bad(file, f"line {lineno}", "expected a function-tracer line (TASK-PID [CPU] FLAGS "
                                         f"TIMESTAMP: FUNCTION <-CALLER), not {line.strip()[:40]!r}")
        pid, cpu, ts = int(m.group(2)), int(m.group(3)), float(m.group(4))
        if ncpus is not None and cpu >= ncpus:
            _bad(file, f"line {lineno}", f"CPU {cpu}, but the manifest's machine has {ncpus} CPUs")
        if pid >= PID_MAX_LIMIT:
            _bad(file, f"line {lineno}", f"PID {pid} is beyond the kernel's PID_MAX_LIMIT "
                                         f"({PID_MAX_LIMIT})")
        if not math.isfinite(ts):
            _bad(file, f"line {lineno}", f"timestamp {m.group(4)[:20]!r} is not a finite number")
        out.append(TraceLine(comm=m.group(1).strip(), pid=pid, cpu=cpu, timestamp=ts,
                             function=m.group(5), parent=m.group(6)))
    return out


# -- a finished dump -------------------------------------------------------------------------

@dataclass(frozen=True)
class NvmeIrq:
    """One interrupt of an NVMe controller. ``queue`` is Y of ``nvmeXqY``
    (0 = admin), None when the name says nothing; masks are cpumask ints
    (None when the file is missing)."""

    irq: int
    name: str
    queue: int | None
    smp_affinity_list: str | None
    effective_affinity_list: str | None
    smp_affinity: int | None
    effective_affinity: int | None


@dataclass
class NvmeController:
    """An NVMe controller: PCI ``address``, ``node`` (``numa_node``),
    ``controller`` name (``nvme0``), its namespaces' disks, ``msi_vectors``
    (entries of ``msi_irqs/``) and ``irqs`` (by queue: admin ``q0`` first,
    then ``q1``...; the IRQ numbers need not follow that order)."""

    address: str
    node: int
    controller: str | None
    disks: list[str]
    msi_vectors: int
    irqs: list[NvmeIrq]


@dataclass
class LabDump:
    """What :func:`read_lab_dump` returns (see the module doc)."""

    path: str
    name: str
    kernel_release: str | None
    manifest: dict
    nvme: list[NvmeController]
    blk_mq: dict[str, dict[int, int]]
    blk_mq_lists: dict[str, dict[int, str]]
    trace: list[TraceLine]
    io_deltas: dict[str, tuple[int, ...]] | None
    irq_names: dict[str, str] = field(default_factory=dict)
    boot_trace: list[TraceLine] = field(default_factory=list)
    boot_tracer: str | None = None    # the "# tracer: X" of trace.boot (None: no boot trace)

    @property
    def kernel_version(self) -> str | None:
        """``"7.2"`` from ``"7.2.13+deb14-amd64"``."""
        m = re.match(r"(\d+\.\d+)", self.kernel_release or "")
        return m.group(1) if m else None


def _text(tree, path: str) -> str | None:
    data = tree.read(path)
    return data.decode("utf-8", "replace") if data is not None else None


def _mask(text: str, file: str, ncpus: int) -> int:
    """A cpulist file's mask; LabFileError for bad syntax or a CPU the
    machine does not have."""
    try:
        mask = parse_cpulist(text.strip())
    except CpumaskSyntaxError:
        _bad(file, "", f"expected a CPU list, not {text.strip()[:40]!r}")
    if mask >> ncpus:
        _bad(file, "", f"names CPU {mask.bit_length() - 1}, but the manifest's machine has "
                       f"{ncpus} CPUs")
    return mask


MAX_VECTORS = 2048        # MSI-X allows 2048 vectors per function


def read_lab_dump(path: str | os.PathLike) -> LabDump:
    """Read a lab dump (``.tar.bz2`` written by ``numalab lab run``).

    Every lab file is checked as it is read: the manifest against
    :func:`numalab.lab.schema.check_manifest`, the kernel release against
    the manifest's, ``/proc/interrupts`` and the ``--io`` snapshots with as
    many CPU columns as the machine has CPUs (:func:`parse_interrupts`,
    :func:`interrupt_deltas`), the ftrace output line by line
    (:func:`parse_trace`), every NVMe vector's affinity lists, the
    controllers' ``numa_node`` and the blk-mq CPU lists against the
    machine. Output: a :class:`LabDump`. Raises TopologyError for an
    unreadable archive and LabError (a
    :class:`~numalab.lab.schema.LabFileError` naming the member, the key
    and what was expected, for a bad file) for an archive that is not a
    good lab dump.
    """
    from ..topology.safetar import read_archive
    from .schema import check_manifest, load_json, KERNEL_RELEASE, Mismatch
    tree = read_archive(path)
    tops = sorted(tree.children.get("", ()))
    if len(tops) != 1:
        raise LabError(f"{path}: expected one top folder, found {tops}")
    top = tops[0]

    def member(rel: str) -> str:
        return f"{path}:{top}/{rel}"
    raw = tree.read(f"{top}/numalab/lab/manifest.json")
    if raw is None:
        raise LabError(f"{path}: not a lab dump (no numalab/lab/manifest.json)")
    mfile = member("numalab/lab/manifest.json")
    manifest = check_manifest(load_json(raw, mfile), mfile)
    ncpus = manifest["topology"]["cpus"]
    nnodes = len(manifest["topology"]["nodes"])

    release = None
    for rel in ("proc/sys/kernel/osrelease", "numalab/lab/uname-r"):
        text = _text(tree, f"{top}/{rel}")
        if text is not None and text.strip():
            release = text.strip()
            try:
                KERNEL_RELEASE.check(release, "")
            except Mismatch as e:
                _bad(member(rel), "", e.problem)
            if release != manifest["kernel"]["release"]:
                _bad(member(rel), "", f"{release[:40]!r}, but the manifest's kernel.release is "
                                      f"{manifest['kernel']['release']!r}")
            break
    if release is None:
        _bad(member("proc/sys/kernel/osrelease"), "", "missing or empty (and no "
                                                       "numalab/lab/uname-r): which kernel ran?")

    irq_text = _text(tree, f"{top}/proc/interrupts")
    if irq_text is None:
        _bad(member("proc/interrupts"), "", "missing: every lab dump has it")
    _, rows = parse_interrupts(irq_text, member("proc/interrupts"), ncpus)
    # numbered rows end with the action name (nvme0q1); arch rows (LOC) with a description
    names = {irq: (rest.split()[-1] if irq.isdigit() and rest.split() else rest)
             for irq, (_, rest) in rows.items()}

    # block devices: disk -> (controller folder, pci address)
    disks: dict[str, tuple[str, str | None]] = {}
    blk: dict[str, dict[int, int]] = {}
    blk_lists: dict[str, dict[int, str]] = {}
    for disk in tree.listdir(f"{top}/sys/block"):
        real = tree.resolve(f"{top}/sys/block/{disk}") or ""
        m = re.search(r"/([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])/nvme/(nvme\d+)/", real + "/")
        if m:
            disks[disk] = (m.group(2), m.group(1))
        hctxs = {}
        lists = {}
        for h in tree.listdir(f"{top}/sys/block/{disk}/mq"):
            if h.isdigit() and len(h) <= 5:
                rel = f"sys/block/{disk}/mq/{h}/cpu_list"
                t = _text(tree, f"{top}/{rel}")
                if t is not None:
                    hctxs[int(h)] = _mask(t, member(rel), ncpus)
                    lists[int(h)] = t.strip()
        if hctxs:
            blk[disk] = dict(sorted(hctxs.items()))
            blk_lists[disk] = dict(sorted(lists.items()))

    nvme = []
    for addr in tree.listdir(f"{top}/sys/bus/pci/devices"):
        base = f"{top}/sys/bus/pci/devices/{addr}"
        cls = _text(tree, f"{base}/class")
        if cls is None or not cls.strip().startswith("0x0108"):
            continue
        rel = f"sys/bus/pci/devices/{addr}/numa_node"
        node_t = (_text(tree, f"{top}/{rel}") or "").strip()
        if not re.fullmatch(r"-?[0-9]{1,4}", node_t) or not -1 <= int(node_t) < nnodes:
            _bad(member(rel), "", f"expected a node from -1 to {nnodes - 1}, not {node_t[:40]!r}")
        vectors = sorted(int(v) for v in tree.listdir(f"{base}/msi_irqs")
                         if v.isdigit() and len(v) <= 9)
        if len(vectors) > MAX_VECTORS:
            _bad(member(f"sys/bus/pci/devices/{addr}/msi_irqs"), "",
                 f"{len(vectors)} vectors; MSI-X has at most {MAX_VECTORS}")
        irqs = []
        for v in vectors:
            name = names.get(str(v), "")
            q = re.search(r"q(\d{1,5})$", name)
            lists = {}
            for kind in ("smp_affinity_list", "effective_affinity_list"):
                rel = f"proc/irq/{v}/{kind}"
                t = _text(tree, f"{top}/{rel}")
                if t is None:
                    _bad(member(rel), "", f"missing: a lab dump has it for every NVMe vector "
                                          f"({addr})")
                lists[kind] = (t.strip(), _mask(t, member(rel), ncpus))
            sl, el = lists["smp_affinity_list"], lists["effective_affinity_list"]
            irqs.append(NvmeIrq(irq=v, name=name, queue=int(q.group(1)) if q else None,
                                smp_affinity_list=sl[0], effective_affinity_list=el[0],
                                smp_affinity=sl[1], effective_affinity=el[1]))
        irqs.sort(key=lambda i: (i.queue is None, i.queue or 0, i.irq))
        mine = sorted(d for d, (_, a) in disks.items() if a == addr)
        ctrl = next((c for d, (c, a) in disks.items() if a == addr), None)
        nvme.append(NvmeController(address=addr, node=int(node_t), controller=ctrl, disks=mine,
                                   msi_vectors=len(vectors), irqs=irqs))

    trace = parse_trace(_text(tree, f"{top}/numalab/lab/trace") or "",
                        member("numalab/lab/trace"), ncpus)
    before = _text(tree, f"{top}/numalab/lab/interrupts.before")
    after = _text(tree, f"{top}/numalab/lab/interrupts.after")
    if (before is None) != (after is None):
        gone = "before" if before is None else "after"
        _bad(member(f"numalab/lab/interrupts.{gone}"), "", "missing, while the other --io "
                                                           "snapshot is there")
    if manifest["io"] is not None and before is None:
        _bad(member("numalab/lab/interrupts.before"), "", "missing, while the manifest's io "
                                                          "says the run read with --io")
    io = (interrupt_deltas(before, after, (member("numalab/lab/interrupts.before"),
                                           member("numalab/lab/interrupts.after")), ncpus)
          if before is not None and after is not None else None)
    boot = _text(tree, f"{top}/numalab/lab/trace.boot")
    m = re.search(r"^# tracer: (\S+)", boot or "", re.M)
    return LabDump(path=str(path), name=top, kernel_release=release, manifest=manifest,
                   nvme=nvme, blk_mq=blk, blk_mq_lists=blk_lists, trace=trace,
                   io_deltas=io, irq_names=names,
                   boot_trace=parse_trace(boot or "", member("numalab/lab/trace.boot"), ncpus),
                   boot_tracer=m.group(1) if m else None)


def summary(d: LabDump) -> dict:
    """A JSON-able digest of a lab dump (what ``numalab lab show`` prints)."""
    return {
        "name": d.name, "kernel": d.kernel_release,
        "nvme": [{"address": c.address, "node": c.node, "controller": c.controller,
                  "disks": c.disks, "msi_vectors": c.msi_vectors,
                  "irqs": [[i.irq, i.name, i.smp_affinity_list, i.effective_affinity_list]
                           for i in c.irqs]} for c in d.nvme],
        "blk_mq": d.blk_mq_lists,
        "trace": [[t.cpu, t.comm, t.function, t.parent] for t in d.trace],
        "io_deltas": {k: list(v) for k, v in (d.io_deltas or {}).items()} or None,
    }
