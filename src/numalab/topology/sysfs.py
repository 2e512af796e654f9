"""Read a Linux sysfs/procfs snapshot (hwloc-gather-topology layout).

A snapshot is one folder ``NAME/`` holding copies of ``sys/...`` and
``proc/...`` from the machine, as a directory or a tarball. The folder name
may differ a little from the file name (``20s390-2g6s4c.tar.bz2`` holds
``20s390-2g2g2s4co/``), so the reader looks for the folder that has a
``sys/`` inside.

The parsing code is written once over :class:`Dump`, which reads relative
paths from a *file source*: :class:`DirSource` (a folder on disk) or
:class:`~numalab.topology.safetar.MemTree` (a tarball read into memory,
never extracted). Both answer ``read``, ``listdir``, ``is_dir``,
``readlink``.

What is read, and from where (all paths inside the dump):

* CPU masks: ``sys/devices/system/cpu/{possible,present,online}``.
* Per CPU: ``cpuN/topology/*`` and ``cpuN/cache/indexK/*``.
* NUMA: ``sys/devices/system/node/nodeN/{cpulist|cpumap,distance,meminfo}``.
* arch: ``proc/cpuinfo`` (else ``proc/hwloc-nofile-info``'s Architecture).
* I/O: ``sys/bus/pci/devices/*``, ``sys/block/*/mq/*/cpu_list``,
  ``proc/interrupts``, ``proc/irq/N/*affinity_list``.

Every input problem is a :class:`~numalab.errors.TopologyError` naming the
file inside the dump. Real dumps carry quirks that hwloc's Linux backend
(``hwloc/topology-linux.c``) tolerates: an empty ``cpuN/online``, a
``distance`` row with one entry per possible node, a missing ``distance``
or ``topology/`` file, empty number files. Those are read, each with a note
in ``meta["notes"]`` (``numalab show`` prints them, chapter 1's machine
table lists them); only a dump with no online CPU, or one that contradicts
itself in a way that changes the answer, is refused.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from ..cpumask import (MAX_CPUS, CpumaskSyntaxError, cpus, format_cpulist, parse_cpulist,
                       parse_hexmask)
from ..errors import TopologyError
from .model import CPU, IRQ, Node, PCIDevice, Topology
from .safetar import MAX_MEMBER_BYTES, MemTree, read_archive

__all__ = ["read_dir", "read_tar", "read_source", "DirSource", "Dump",
           "arch_from_cpuinfo", "parse_interrupts", "distance_columns"]

# ASCII digits only: int() also reads other scripts' digits ("cpu\u0661");
# no leading zero: the kernel never writes one, and "node01" beside "node1"
# would be a second folder for the same id
_CPU_DIR = re.compile(r"^cpu(0|[1-9]\d*)$", re.ASCII)
_NODE_DIR = re.compile(r"^node(0|[1-9]\d*)$", re.ASCII)
_INDEX_DIR = re.compile(r"^index(0|[1-9]\d*)$", re.ASCII)
_PCI_ADDR = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_TAR_EXT = (".tar.bz2", ".tar.gz", ".tar.xz", ".tbz2", ".tgz", ".tar")


# -- file sources -------------------------------------------------------------

class DirSource:
    """A dump folder on disk, answering the same questions as a MemTree.

    Paths are relative, ``/``-separated. Symlinks are followed by the OS:
    a folder on disk is the user's own, unlike an archive from elsewhere.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _p(self, rel: str) -> str:
        return os.path.join(self.root, rel) if rel else str(self.root)

    def read(self, rel: str) -> bytes | None:
        """The file's bytes; None when absent. Only regular files are read,
        at most MAX_MEMBER_BYTES: a FIFO would block forever and a link to
        /dev/zero would never end (O_NONBLOCK keeps the open of a FIFO from
        blocking before fstat() can tell)."""
        path = self._p(rel)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        except OSError as e:
            raise TopologyError(path, f"cannot read: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                return None
            if not stat.S_ISREG(st.st_mode):
                raise TopologyError(path, "not a regular file (a device, FIFO or socket); "
                                          "refused")
            with os.fdopen(fd, "rb", closefd=False) as f:
                data = f.read(MAX_MEMBER_BYTES + 1)
        except OSError as e:
            raise TopologyError(path, f"cannot read: {e.strerror}") from None
        finally:
            os.close(fd)
        if len(data) > MAX_MEMBER_BYTES:
            raise TopologyError(path, f"file is over the {MAX_MEMBER_BYTES >> 20} MiB cap; "
                                      "refused")
        return data

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self._p(rel)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            raise TopologyError(self._p(rel), f"cannot list: {e.strerror}") from None

    def is_dir(self, rel: str) -> bool:
        return os.path.isdir(self._p(rel))

    def readlink(self, rel: str) -> str | None:
        try:
            return os.readlink(self._p(rel))
        except OSError:
            return None


class Dump:
    """Typed reads of one dump's files, relative to its ``NAME/`` folder.

    ``label`` prefixes every error path, so that a message names the file
    inside the dump: ``"x.tar.bz2:NAME/sys/devices/system/cpu/online: ..."``.
    """

    def __init__(self, source, root: str, label: str):
        self.source = source
        self.root = root.strip("/")
        self.label = label
        self.empty: list[str] = []     # integer files found empty (see integer())

    def rel(self, path: str) -> str:
        return f"{self.root}/{path}" if self.root else path

    def where(self, path: str) -> str:
        return f"{self.label}/{path}"

    def bytes(self, path: str) -> bytes | None:
        return self.source.read(self.rel(path))

    def text(self, path: str) -> str | None:
        """The file as text without the trailing newline/NULs (hwloc's
        gatherer pads some files with a NUL), or None when absent."""
        data = self.bytes(path)
        if data is None:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TopologyError(self.where(path),
                                f"not UTF-8 text (byte 0x{data[e.start]:02x} at offset "
                                f"{e.start})") from None
        return text.strip("\x00 \t\r\n")

    def integer(self, path: str) -> int | None:
        """The file as an int; None when absent -- or empty: the kernel never
        prints an empty number, so an empty copy lost its content, and hwloc
        reads it as missing too (``hwloc_read_path_as_int()`` fails on it).
        Empty files are listed in ``self.empty`` for the reader's note."""
        text = self.text(path)
        if text is None:
            return None
        if text == "":
            if path not in self.empty:
                self.empty.append(path)
            return None
        try:
            return int(text, 0) if text.lower().startswith("0x") else int(text)
        except ValueError:
            raise TopologyError(self.where(path), f"not an integer: {text[:40]!r}") from None

    def cpulist(self, path: str) -> int | None:
        text = self.text(path)
        if text is None:
            return None
        try:
            return parse_cpulist(text)
        except CpumaskSyntaxError as e:
            raise TopologyError(self.where(path), str(e)) from None

    def hexmask(self, path: str) -> int | None:
        """The file as a hex mask; None when absent or empty (the kernel
        prints at least one ``0`` digit group: an empty copy lost its
        content, listed in ``self.empty`` like an empty number)."""
        text = self.text(path)
        if text is None:
            return None
        if text == "":
            if path not in self.empty:
                self.empty.append(path)
            return None
        try:
            return parse_hexmask(text)
        except CpumaskSyntaxError as e:
            raise TopologyError(self.where(path), str(e)) from None

    def mask(self, base: str, *names: str) -> int | None:
        """The first of ``names`` present under ``base``: a ``*_list`` name is
        read as a cpulist, any other as a hex mask. None when none is there."""
        for n in names:
            p = f"{base}/{n}"
            m = self.cpulist(p) if n.endswith("list") else self.hexmask(p)
            if m is not None:
                return m
        return None

    def listdir(self, path: str) -> list[str]:
        return self.source.listdir(self.rel(path))

    def is_dir(self, path: str) -> bool:
        return self.source.is_dir(self.rel(path))

    def readlink(self, path: str) -> str | None:
        return self.source.readlink(self.rel(path))


def _numbered(names: list[str], pattern: re.Pattern) -> list[tuple[int, str]]:
    """(number, name) for the names matching ``pattern``, by number.

    >>> _numbered(["cpu10", "cpu2", "cpufreq"], _CPU_DIR)
    [(2, 'cpu2'), (10, 'cpu10')]
    """
    out = []
    for n in names:
        m = pattern.match(n)
        if m:
            out.append((int(m.group(1)), n))
    return sorted(out)


# -- arch ---------------------------------------------------------------------

_UNAME_ARCH = {
    "x86_64": "x86", "i386": "x86", "i486": "x86", "i586": "x86", "i686": "x86",
    "aarch64": "arm64", "arm64": "arm64", "ia64": "ia64", "s390": "s390", "s390x": "s390",
    "ppc": "powerpc", "ppc64": "powerpc", "ppc64le": "powerpc", "riscv64": "riscv",
    "loongarch64": "loongarch", "mips": "mips", "mips64": "mips", "parisc": "parisc",
    "parisc64": "parisc", "sparc64": "sparc",
}


def arch_from_cpuinfo(text: str) -> str:
    """The architecture that wrote a ``/proc/cpuinfo``, from the keys each
    arch's ``show_cpuinfo()`` prints; ``"unknown"`` when none fits.

    >>> arch_from_cpuinfo("processor\\t: 0\\nvendor_id\\t: GenuineIntel\\nflags\\t: fpu\\n")
    'x86'
    >>> arch_from_cpuinfo("processor\\t: 0\\nCPU implementer\\t: 0x48\\nCPU architecture: 8\\n")
    'arm64'
    """
    keys: dict[str, str] = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            keys.setdefault(k.strip().lower(), v.strip())
    vendor = keys.get("vendor_id", "")
    # s390 also prints vendor_id, so it is tested before x86
    if "s390" in vendor.lower() or "# processors" in keys:
        return "s390"
    if vendor or ("flags" in keys and "cpu family" in keys):
        return "x86"
    if "cpu implementer" in keys or "cpu architecture" in keys:
        archv = keys.get("cpu architecture", "")
        return "arm64" if archv in ("8", "9", "AArch64") or "aarch64" in archv.lower() else "arm"
    if keys.get("arch", "").upper().startswith("IA-64") or "archrev" in keys:
        return "ia64"
    if "cpu" in keys and ("timebase" in keys or "platform" in keys):
        return "powerpc"
    if "isa" in keys and keys["isa"].startswith("rv"):
        return "riscv"
    if "cpu model" in keys and "mips" in keys["cpu model"].lower():
        return "mips"
    return "unknown"


# -- /proc/interrupts ----------------------------------------------------------

def _is_number(s: str) -> bool:
    """ASCII digits only: ``"\u00b2".isdigit()`` is true but int() refuses it."""
    return s.isascii() and s.isdigit()


def parse_interrupts(text: str, where: str) -> tuple[list[int], list[IRQ]]:
    """Parse ``/proc/interrupts``: the CPU ids of the count columns and one
    IRQ per row (counts, chip, action names).

    >>> ids, rows = parse_interrupts(
    ...     "           CPU0       CPU2\\n 24:   5   7   PCI-MSI 1-edge   nvme0q1\\n", "x")
    >>> ids, rows[0].counts, rows[0].chip, rows[0].name
    ([0, 2], (5, 7), 'PCI-MSI', 'nvme0q1')
    """
    lines = text.splitlines()
    if not lines:
        return [], []
    header = lines[0].split()
    ids = []
    for h in header:
        if not h.startswith("CPU") or not _is_number(h[3:]):
            raise TopologyError(where, f"bad header column {h!r}")
        ids.append(int(h[3:]))
    rows = []
    for line in lines[1:]:
        if not line.strip():
            continue
        irq, sep, rest = line.partition(":")
        if not sep:
            raise TopologyError(where, f"line without ':': {line.strip()[:60]!r}")
        irq = irq.strip()
        toks = rest.split()
        counts = []
        for t in toks[: len(ids)]:
            if not _is_number(t):
                break
            counts.append(int(t))
        tail = toks[len(counts):]
        if irq.isdigit():
            chip = tail[0] if tail else ""
            # after the chip come the hwirq (often "N-edge") and the actions
            name = " ".join(tail[2:]) if len(tail) > 2 else (tail[1] if len(tail) == 2 else "")
        else:
            chip, name = "", " ".join(tail)
        rows.append(IRQ(irq=irq, counts=tuple(counts), chip=chip, name=name))
    return ids, rows


# -- the reader ------------------------------------------------------------------

_CPU = "sys/devices/system/cpu"
_NODE = "sys/devices/system/node"


def _read_cpu_masks(d: Dump, notes: list[str]) -> tuple[int, int, int]:
    """possible/present/online, derived from the cpuN folders when absent.

    Without ``cpu/online`` (old kernels had none) each CPU's own
    ``cpuN/online`` flag says, as hwloc's ``look_sysfscpu()`` reads it: a
    CPU without the file is online (the kernel creates it only for a
    hot-pluggable CPU, ``register_cpu_control()`` in drivers/base/cpu.c, and
    cpu0 often is not), and so is a CPU whose file is *empty*: the kernel's
    ``show_online()`` always prints ``0`` or ``1``, so an empty copy lost
    its content (an Itanium Superdome dump has an empty ``cpu0/online``);
    hwloc reads 0 bytes as "no information" and keeps the CPU. Both cases
    are noted. No online CPU at all is refused: nothing in the book can run
    on such a machine.
    """
    possible = d.cpulist(f"{_CPU}/possible")
    present = d.cpulist(f"{_CPU}/present")
    online = d.cpulist(f"{_CPU}/online")
    for kind, m in (("possible", possible), ("present", present), ("online", online)):
        if m == 0:
            raise TopologyError(d.where(f"{_CPU}/{kind}"),
                                f"empty: a running kernel has at least one {kind} CPU")
    dirs = 0
    for cpu, name in _numbered(d.listdir(_CPU), _CPU_DIR):
        if cpu >= MAX_CPUS:
            raise TopologyError(d.where(f"{_CPU}/{name}"),
                                f"CPU {cpu} is beyond the {MAX_CPUS} CPUs numalab handles")
        dirs |= 1 << cpu
    if online is None:
        online = 0
        empty = []
        for cpu in cpus(dirs):
            path = f"{_CPU}/cpu{cpu}/online"
            if d.text(path) == "":
                empty.append(cpu)
                online |= 1 << cpu
                continue
            flag = d.integer(path)
            # cpu0 often has no 'online' file: it cannot be unplugged
            if flag is None or flag == 1:
                online |= 1 << cpu
        notes.append("no cpu/online file: online CPUs derived from the cpuN folders "
                     "and their 'online' flags")
        if empty:
            notes.append(f"empty cpuN/online file for CPU(s) {_ids(empty)}: "
                         "read as online, as hwloc does (the kernel prints 0 or 1: the "
                         "copy in the dump lost its content)")
        if not online:
            raise TopologyError(d.where(_CPU), "no online CPU: no cpu/online file, and every "
                                               "cpuN folder's 'online' flag is 0 (or there is "
                                               "no cpuN folder)")
    if present is None:
        present = dirs | online
        notes.append("no cpu/present file: present CPUs = the cpuN folders")
    if possible is None:
        possible = present
        notes.append("no cpu/possible file: possible CPUs = present CPUs")
    return possible, present, online


def _caches(d: Dump, cpu: int) -> dict[int, int]:
    """{level: shared CPU mask} of the CPU's data/unified caches."""
    base = f"{_CPU}/cpu{cpu}/cache"
    out: dict[int, int] = {}
    for _, name in _numbered(d.listdir(base), _INDEX_DIR):
        p = f"{base}/{name}"
        ctype = d.text(f"{p}/type")
        if ctype is not None and ctype.lower().startswith("instruction"):
            continue
        level = d.integer(f"{p}/level")
        m = d.mask(p, "shared_cpu_list", "shared_cpu_map")
        if level is None or m is None:
            continue
        out[level] = out.get(level, 0) | m
    return out


def _read_cpu(d: Dump, cpu: int, arch: str, node: int) -> tuple[CPU, bool, list[str]]:
    """One CPU from its topology and cache folders; the flag says whether
    the topology folder was there, the list names the files missing from
    it (a kernel that did not export them, e.g. the PS3's, or a partial
    dump); each then takes its default, as hwloc's ``look_sysfscpu()``
    skips the level whose file it cannot read."""
    base = f"{_CPU}/cpu{cpu}/topology"
    self_mask = 1 << cpu
    has_topo = d.is_dir(base)
    caches = _caches(d, cpu)
    l2 = caches.get(2, 0)
    llc = caches[max(caches)] if caches else 0

    def _int(name: str, default: int) -> int:
        v = d.integer(f"{base}/{name}")
        return default if v is None else v

    package_id = d.integer(f"{base}/physical_package_id")
    package = 0 if package_id is None else package_id
    die_id = d.integer(f"{base}/die_id")
    core_id = d.integer(f"{base}/core_id")
    core = 0 if core_id is None else core_id
    cluster = _int("cluster_id", -1)
    threads = d.mask(base, "thread_siblings_list", "thread_siblings",
                     "core_cpus_list", "core_cpus")
    package_cpus = d.mask(base, "package_cpus_list", "package_cpus",
                          "core_siblings_list", "core_siblings")
    missing = [name for name, v in (("physical_package_id", package_id), ("core_id", core_id),
                                    ("thread_siblings", threads),
                                    ("core_siblings", package_cpus)) if v is None]
    threads = threads or self_mask
    package_cpus = package_cpus or self_mask
    die_cpus = d.mask(base, "die_cpus_list", "die_cpus") or 0
    if die_id is not None and die_id < 0:
        # arm64 and others have no die level: sysfs shows die_id -1 and the
        # generic topology_die_cpumask() (the CPU alone). Record "no die"
        # (0) so that Topology.dies() counts one die per package.
        die_cpus = 0
    cluster_cpus = d.mask(base, "cluster_cpus_list", "cluster_cpus")
    if cluster_cpus is not None:
        source = "sysfs"
    elif arch == "x86":
        # Kernels before 5.16 have no cluster_cpus file. A current x86 kernel
        # reports cpu_clustergroup_mask() = cpu_l2c_shared_mask(), the CPUs
        # sharing the L2 (arch/x86/kernel/smpboot.c); when the L2 id is
        # unknown match_l2c() falls back to match_smt(), the SMT siblings.
        if l2:
            cluster_cpus, source = l2, "l2"
        else:
            cluster_cpus, source = threads, "smt"
    else:
        # Elsewhere topology_cluster_cpumask() is either the arch's cluster
        # from firmware (arm64/riscv via drivers/base/arch_topology.c, which
        # a dump without the file cannot tell us) or the generic default of
        # include/linux/topology.h, cpumask_of(cpu): the CPU alone.
        cluster_cpus, source = self_mask, "self"
    die = die_id if die_id is not None and die_id >= 0 else 0
    c = CPU(id=cpu, node=node, package=package, die=die, core=core, cluster=cluster,
            thread_siblings=threads, cluster_cpus=cluster_cpus,
            die_cpus=die_cpus, package_cpus=package_cpus, llc_cpus=llc, l2_cpus=l2,
            cluster_source=source)
    return c, has_topo, (missing if has_topo else [])


def _meminfo_total(d: Dump, path: str) -> int | None:
    """MemTotal of a node's meminfo in bytes (``Node 0 MemTotal: 123 kB``)."""
    text = d.text(path)
    if text is None:
        return None
    for line in text.splitlines():
        if "MemTotal:" in line:
            toks = line.split("MemTotal:", 1)[1].split()
            try:
                val = int(toks[0])
            except (IndexError, ValueError):
                raise TopologyError(d.where(path), f"bad MemTotal line {line.strip()!r}") from None
            unit = toks[1].lower() if len(toks) > 1 else "b"
            return val * {"kb": 1024, "mb": 1 << 20, "gb": 1 << 30}.get(unit, 1)
    return None


def distance_columns(node_ids: list[int], entries: int, online: int | None = None,
                     possible: int | None = None) -> tuple[str, list[int]] | None:
    """Which entries of a node's ``distance`` row belong to the nodes read.

    The kernel prints one entry per *online* node, in node-id order
    (``node_read_distance()`` in drivers/base/node.c loops
    ``for_each_online_node()``, from the 2.6 series to 6.x), so a row normally
    has one entry per node folder. A longer row is read when a set of node
    ids of exactly that size, holding every node read, says which entry is
    whose, tried in this order: ``node/online`` (an online node whose
    folder the dump lost), ``node/possible`` (a dump with an offline node
    whose kernel printed one entry per possible node), and, only when the
    dump has no ``node/possible``, the ids ``0..entries-1`` (the usual
    possible set, and what the patch that added the file, LKML, November
    2004, looped over: ``for (i = 0; i < numnodes; i++)``). hwloc's
    ``hwloc_parse_nodes_distances()`` simply keeps the first entries; this
    keeps the right ones when they are not the first.

    Inputs: the node ids read (sorted), the entries per row, the
    ``node/online`` and ``node/possible`` masks (None when absent).
    Output: (which set explained the row: ``"online"``, ``"possible"`` or
    ``"ids"``; the position of each node's entry), or None when nothing
    explains the row.

    >>> distance_columns([0], 2, online=0b1, possible=0b11)
    ('possible', [0])
    >>> distance_columns([0, 8], 3, online=0b1_0000_0011)
    ('online', [0, 2])
    >>> distance_columns([0, 2], 3)
    ('ids', [0, 2])
    >>> distance_columns([0], 2, online=0b1)
    ('ids', [0])
    >>> distance_columns([0, 5], 3) is None
    True
    >>> distance_columns([0, 1], 3, online=0b11, possible=0b11) is None
    True
    """
    wanted = set(node_ids)
    for what, mask in (("online", online), ("possible", possible)):
        if mask is not None and mask.bit_count() == entries:
            order = cpus(mask)
            if wanted <= set(order):
                return what, [order.index(n) for n in node_ids]
    if possible is None and node_ids and max(node_ids) < entries:
        return "ids", list(node_ids)
    return None


def _node_set(d: Dump, name: str, notes: list[str]) -> int | None:
    """``node/online`` or ``node/possible`` as a mask of node ids (the kernel's
    ``print_nodes_state()`` prints a nodemask list, the cpulist syntax);
    None when absent. An empty one says nothing (node 0 is always
    possible and online): ignored, with a note."""
    m = d.cpulist(f"{_NODE}/{name}")
    if m == 0:
        notes.append(f"node/{name} is empty (a kernel always has one {name} node): ignored")
        return None
    return m


def _ids(ids) -> str:
    """Node (or CPU) ids as a list in the kernel's ``%*pbl`` form, without
    building a mask (a fuzzed ``node99999999999`` folder is a legal name).

    >>> _ids([5, 0, 1, 2, 7])
    '0-2,5,7'
    """
    out: list[str] = []
    run: list[int] = []
    for i in sorted(set(ids)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
        run = [i]
    if run:
        out.append(str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}")
    return ",".join(out)


def _read_nodes(d: Dump, present: int, notes: list[str]):
    """Nodes and the distance matrix (rows in node-id order).

    The nodes are the ``nodeN`` folders; when ``node/online`` exists, a
    folder it does not list is an offline node and is not read, as hwloc's
    ``list_sysfsnode()`` takes its node set from that file ("offline nodes
    don't exist at all under /sys"), unless that folder lists CPUs: the
    dump then contradicts itself, and it is refused. An online node without
    a folder is noted.

    Distances follow hwloc's ``hwloc_parse_nodes_distances()``: a node whose
    ``distance`` file is missing or empty drops the whole matrix (the
    kernel's 10/20 default applies), with a note. Rows of different lengths
    are refused (one kernel prints every row over the same online nodes);
    rows longer than the node count are read through
    :func:`distance_columns`, with a note, or refused when nothing says
    which entry belongs to which node.
    """
    found = _numbered(d.listdir(_NODE), _NODE_DIR)
    if not found:
        # A kernel without CONFIG_NUMA has no node folder and no cpuN/nodeM
        # links: one node 0, as the kernel's own fallback. With the links
        # there, the kernel had nodes and the dump lost them.
        for cpu, name in _numbered(d.listdir(_CPU), _CPU_DIR):
            links = _numbered(d.listdir(f"{_CPU}/{name}"), _NODE_DIR)
            if links:
                raise TopologyError(d.where(_NODE), f"missing, but {name}/{links[0][1]} shows "
                                                    "the kernel had NUMA nodes: a partial dump")
        notes.append("no node folders: one node 0 holding all CPUs, no distances "
                     "(a kernel without CONFIG_NUMA)")
        return {0: Node(id=0, cpus=present)}, []
    online_nodes = _node_set(d, "online", notes)
    possible_nodes = _node_set(d, "possible", notes)
    nodes: dict[int, Node] = {}
    offline, no_mask = [], []
    for nid, name in found:
        base = f"{_NODE}/{name}"
        m = d.mask(base, "cpulist", "cpumap")
        if online_nodes is not None and not (online_nodes >> nid) & 1:
            if m:
                raise TopologyError(d.where(base), f"node{nid} is not in node/online "
                                    f"({format_cpulist(online_nodes)}) but its cpulist holds "
                                    f"CPUs {format_cpulist(m)}")
            offline.append(nid)
            continue
        if m is None:
            no_mask.append(nid)
        nodes[nid] = Node(id=nid, cpus=m or 0,
                          memory_bytes=_meminfo_total(d, f"{base}/meminfo"))
    if not nodes:
        raise TopologyError(d.where(f"{_NODE}/online"),
                            f"lists node(s) {format_cpulist(online_nodes)}, none of which has "
                            "a folder in the dump")
    if offline:
        notes.append(f"node folder(s) {_ids(offline)} not in node/online "
                     f"({format_cpulist(online_nodes)}): offline nodes, not read (as hwloc "
                     "does)")
    if online_nodes is not None:
        lost = [n for n in cpus(online_nodes) if n not in nodes]
        if lost:
            notes.append(f"node/online lists node(s) {_ids(lost)} that have no folder in the "
                         "dump: not read")
    if no_mask:
        notes.append(f"node(s) {_ids(no_mask)} have no cpulist or cpumap file: read as "
                     "CPU-less nodes")
    ids = sorted(nodes)
    rows: dict[int, list[int]] = {}
    absent = []
    for nid in ids:
        path = f"{_NODE}/node{nid}/distance"
        text = d.text(path)
        if not text:
            absent.append(nid)
            continue
        try:
            rows[nid] = [int(t) for t in text.split()]
        except ValueError:
            raise TopologyError(d.where(path),
                                f"not a list of integers: {text[:60]!r}") from None
    if not rows:
        notes.append("no node distance files: no distance matrix")
        return nodes, []
    k = len(ids)
    lengths = {len(r) for r in rows.values()}
    if len(lengths) > 1:
        expected = k if k in lengths else len(rows[min(rows)])
        bad = next(n for n in ids if n in rows and len(rows[n]) != expected)
        raise TopologyError(d.where(f"{_NODE}/node{bad}/distance"),
                            f"has {len(rows[bad])} entries, expected {expected}: one kernel "
                            "prints every node's row over the same nodes")
    if absent:
        # hwloc_parse_nodes_distances() fails on the first unreadable file
        # and its caller drops the matrix; a partial matrix means nothing
        notes.append(f"distance file missing or empty for node(s) {_ids(absent)} while "
                     "other nodes have one: no distance matrix (as hwloc does); the "
                     "kernel's default, 10 local and 20 remote, applies")
        return nodes, []
    entries = lengths.pop()
    if entries == k and (online_nodes is None or online_nodes.bit_count() == k):
        return nodes, [rows[nid] for nid in ids]
    cols = distance_columns(ids, entries, online_nodes, possible_nodes)
    if cols is None:
        expected = k if online_nodes is None else online_nodes.bit_count()
        raise TopologyError(d.where(f"{_NODE}/node{ids[0]}/distance"),
                            f"has {entries} entries, expected {expected} (one per online "
                            "node); neither node/online, node/possible nor the node ids say "
                            "which entry is whose")
    what, pos = cols
    why = {"online": f"one per online node (node/online {format_cpulist(online_nodes or 0)})",
           "possible": f"one per possible node (node/possible "
                       f"{format_cpulist(possible_nodes or 0)}), offline ones included",
           "ids": f"one per node id 0-{entries - 1} (no node/possible file to say "
                  "more)"}[what]
    notes.append(f"node distance rows have {entries} entries for {k} node(s) read: {why}; "
                 f"the entries of node(s) {_ids(ids)} are kept")
    return nodes, [[rows[nid][p] for p in pos] for nid in ids]


def _untangle_nodes(d: Dump, nodes: dict[int, Node], notes: list[str],
                    allow_overlap: bool = False):
    """Give every CPU one node, as ``cpu_to_node()`` does.

    Buggy firmware can make node masks overlap (8em64t-2s2ca2c-buggynuma
    lists CPUs 0-7 in all eight nodes). The CPU's own ``cpuN/nodeM`` link is
    the kernel's cpu_to_node() answer; without exactly one such link to one
    of the nodes listing the CPU, nothing says which is right: an error,
    unless ``allow_overlap`` (hwloc's HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS,
    which its hand-made fakeheterocpunuma dump needs): then the lowest node.
    The CPU is then removed from the other nodes' masks, and a note says so.
    Output: (nodes, {cpu: node}).
    """
    owners: dict[int, list[int]] = {}
    for nid in sorted(nodes):
        for c in cpus(nodes[nid].cpus):
            owners.setdefault(c, []).append(nid)
    node_of: dict[int, int] = {}
    moved = []
    unlinked = 0
    for c, ns in owners.items():
        if len(ns) == 1:
            node_of[c] = ns[0]
            continue
        linked = [n for n, _ in _numbered(d.listdir(f"{_CPU}/cpu{c}"), _NODE_DIR) if n in ns]
        if len(linked) != 1 and allow_overlap:
            linked = [ns[0]]
            unlinked += 1
        if len(linked) != 1:
            listed = " and ".join(f"node{n}" for n in ns)
            said = (f"has no cpu{c}/nodeM link to say which is its node" if not linked else
                    "links to " + " and ".join(f"node{n}" for n in linked) +
                    ": which is its node is unknown")
            raise TopologyError(d.where(f"{_CPU}/cpu{c}"),
                                f"CPU {c} is in the cpulists of {listed} and {said}")
        node_of[c] = linked[0]
        moved.append(c)
    if moved:
        fixed = {}
        for nid, n in nodes.items():
            keep = sum(1 << c for c in cpus(n.cpus) if node_of[c] == nid)
            fixed[nid] = Node(id=nid, cpus=keep, memory_bytes=n.memory_bytes)
        nodes = fixed
        notes.append(f"node cpu masks overlap for {len(moved)} CPU(s) (firmware bug): each "
                     "kept only in its cpuN/nodeM link's node" +
                     (f"; {unlinked} without a link kept in their lowest node "
                      "(allow_overlapping_nodes)" if unlinked else ""))
    return nodes, node_of


def _or(value: int | None, default: int) -> int:
    """``value``, or ``default`` when it is None (0 is a value).

    >>> _or(None, -1), _or(0, -1)
    (-1, 0)
    """
    return default if value is None else value


def _read_pci(d: Dump) -> list[PCIDevice]:
    """PCI functions from sys/bus/pci/devices (links), else sys/devices/pci*."""
    paths: list[tuple[str, str]] = []
    listed = d.listdir("sys/bus/pci/devices")
    if listed:
        paths = [(a, f"sys/bus/pci/devices/{a}") for a in listed if _PCI_ADDR.match(a)]
    else:
        todo = [f"sys/devices/{r}" for r in d.listdir("sys/devices") if r.startswith("pci")]
        seen = set()
        while todo:
            p = todo.pop()
            for n in d.listdir(p):
                if _PCI_ADDR.match(n) and n not in seen:
                    seen.add(n)
                    paths.append((n, f"{p}/{n}"))
                    todo.append(f"{p}/{n}")
    out = []
    for addr, p in sorted(paths):
        if not d.is_dir(p):
            continue   # a link whose target the dump did not keep
        link = d.readlink(f"{p}/driver")
        out.append(PCIDevice(
            address=addr,
            class_code=d.integer(f"{p}/class") or 0,
            numa_node=_or(d.integer(f"{p}/numa_node"), -1),
            msi_vectors=len(d.listdir(f"{p}/msi_irqs")),
            vendor=d.integer(f"{p}/vendor"),
            device=d.integer(f"{p}/device"),
            driver=link.rstrip("/").rsplit("/", 1)[-1] if link else None,
        ))
    return out


def _read_blk_mq(d: Dump) -> dict[str, list[int]]:
    out = {}
    for disk in d.listdir("sys/block"):
        hctxs = [(int(h), h) for h in d.listdir(f"sys/block/{disk}/mq") if _is_number(h)]
        if not hctxs:
            continue
        masks = []
        for _, h in sorted(hctxs):
            # old kernels print "0, 1, 2"; parse_cpulist strips the spaces
            masks.append(d.cpulist(f"sys/block/{disk}/mq/{h}/cpu_list") or 0)
        out[disk] = masks
    return out


def _read_irqs(d: Dump, meta: dict) -> list[IRQ]:
    text = d.text("proc/interrupts")
    rows: list[IRQ] = []
    if text is not None:
        ids, rows = parse_interrupts(text, d.where("proc/interrupts"))
        meta["interrupt_cpus"] = ids
    by_irq = {r.irq: r for r in rows}
    for irq in sorted((n for n in d.listdir("proc/irq") if _is_number(n)), key=int):
        base = f"proc/irq/{irq}"
        aff = d.cpulist(f"{base}/smp_affinity_list")
        if aff is None:
            aff = d.hexmask(f"{base}/smp_affinity")
        eff = d.cpulist(f"{base}/effective_affinity_list")
        if eff is None:
            eff = d.hexmask(f"{base}/effective_affinity")
        row = by_irq.get(irq, IRQ(irq=irq))
        by_irq[irq] = IRQ(irq=row.irq, counts=row.counts, chip=row.chip, name=row.name,
                          smp_affinity=aff, effective_affinity=eff)
    return list(by_irq.values())


def _kernel_release(d: Dump) -> str | None:
    text = d.text("proc/version")
    if text and text.startswith("Linux version "):
        return text.split()[2]
    rel = d.text("proc/sys/kernel/osrelease")
    if rel:
        return rel
    info = d.text("proc/hwloc-nofile-info") or ""
    for line in info.splitlines():
        if line.startswith("OSRelease:"):
            return line.split(":", 1)[1].strip()
    return None


def _arch(d: Dump, notes: list[str]) -> str:
    text = d.text("proc/cpuinfo")
    if text is not None:
        arch = arch_from_cpuinfo(text)
        if arch != "unknown":
            return arch
    info = d.text("proc/hwloc-nofile-info") or ""
    for line in info.splitlines():
        if line.startswith("Architecture:"):
            arch = _UNAME_ARCH.get(line.split(":", 1)[1].strip())
            if arch:
                notes.append("arch from hwloc-nofile-info's Architecture (cpuinfo did not say)")
                return arch
    notes.append("arch unknown: no recognisable proc/cpuinfo")
    return "unknown"


def read_source(source, root: str, label: str, *, name: str, path: str,
                allow_asymmetric: bool = False,
                allow_overlapping_nodes: bool = False) -> Topology:
    """Build a Topology from a file source whose dump folder is ``root``.

    Inputs: a file source (DirSource or MemTree), the dump folder inside it,
    the error-path prefix, the topology's name and the source path;
    ``allow_asymmetric`` keeps an asymmetric SLIT (see Topology.validate);
    ``allow_overlapping_nodes`` puts a CPU listed by several nodes and linked
    to none of them in the lowest one instead of refusing the dump.
    """
    d = Dump(source, root, label)
    notes: list[str] = []
    meta: dict = {"name": root.rsplit("/", 1)[-1] if root else name, "source": path,
                  "notes": notes}
    if not d.is_dir(_CPU):
        raise TopologyError(d.where(_CPU), "missing: not a sysfs dump")
    arch = _arch(d, notes)
    possible, present, online = _read_cpu_masks(d, notes)
    nodes, distances = _read_nodes(d, present, notes)

    nodes, node_of = _untangle_nodes(d, nodes, notes, allow_overlapping_nodes)

    # The model describes online CPUs (as hwloc's PUs do); offline and
    # not-present CPUs appear only in the possible/present masks.
    cpu_objs: dict[int, CPU] = {}
    missing_topo = []
    missing_files: dict[str, int] = {}
    for cpu in cpus(online):
        c, has_topo, missing = _read_cpu(d, cpu, arch, node_of.get(cpu, -1))
        if not has_topo:
            missing_topo.append(cpu)
        for fname in missing:
            missing_files[fname] = missing_files.get(fname, 0) | (1 << cpu)
        cpu_objs[cpu] = c
    if missing_topo:
        notes.append(f"{len(missing_topo)} online CPU(s) without a topology folder "
                     f"(treated as alone in their core/package): {missing_topo[:8]}")
    if missing_files:
        what = "; ".join(f"{fname} for CPU(s) {format_cpulist(m)}"
                         for fname, m in missing_files.items())
        notes.append(f"topology files missing: {what} (an id missing reads as 0; without "
                     "thread_siblings a CPU is its own core, without core_siblings its own "
                     "package)")
    sources = sorted({c.cluster_source for c in cpu_objs.values()})
    if sources and sources != ["sysfs"]:
        notes.append(f"no cluster_cpus files (kernel before 5.16): clusters filled in as a "
                     f"current kernel would report them ({', '.join(sources)})")

    kernel = _kernel_release(d)
    pci = _read_pci(d)
    if d.empty:
        notes.append(f"{len(d.empty)} empty file(s) where the kernel prints a number or a "
                     f"hex mask, read as missing: {', '.join(d.empty[:4])}"
                     + (" ..." if len(d.empty) > 4 else ""))
    if kernel:
        meta["kernel"] = kernel
    _read_bench(d, meta, notes)
    topo = Topology(
        name=name, source=path, arch=arch, possible=possible, present=present, online=online,
        cpus=cpu_objs, nodes=nodes, distances=distances, pci=pci,
        blk_mq=_read_blk_mq(d), irqs=_read_irqs(d, meta), meta=meta)
    return topo.validate(allow_asymmetric=allow_asymmetric)


# -- benchmark results stored by ``numalab collect --bench`` (chapter 5) --------

def _read_bench(d: Dump, meta: dict, notes: list[str]) -> None:
    """Put ``NAME/numalab/bench.json`` (when the dump has one) into
    ``meta["bench"]``; an unreadable file becomes a note, never an error,
    because the topology itself is fine without it."""
    import json

    raw = d.text("numalab/bench.json")
    if raw is None:
        return
    try:
        bench = json.loads(raw)
    except ValueError as e:
        notes.append(f"numalab/bench.json is not JSON ({e}); benchmark ignored")
        return
    if isinstance(bench, dict):
        meta["bench"] = bench
    else:
        notes.append("numalab/bench.json is not a JSON object; benchmark ignored")


def _label(path: Path) -> str:
    n = path.name
    for ext in _TAR_EXT:
        if n.endswith(ext):
            return n[: -len(ext)]
    return n


def _find_root(source, label: str, where: str) -> str:
    """The dump folder inside a source: the source itself when it holds
    ``sys/``, else its one sub-folder that does (preferring ``label``)."""
    if source.is_dir("sys/devices"):
        return ""
    cands = [n for n in source.listdir("") if source.is_dir(f"{n}/sys")]
    if len(cands) == 1:
        return cands[0]
    if label in cands:
        return label
    if not cands:
        raise TopologyError(where, "no NAME/sys/ folder: not an hwloc-gather-topology dump")
    raise TopologyError(where, f"several dump folders ({', '.join(sorted(cands)[:4])}); "
                               "give one of them")


def read_dir(path: str | Path, **options) -> Topology:
    """Read a dump folder: either ``NAME/`` itself or a folder holding it.

    Options: ``name`` (default: the folder's name), ``allow_asymmetric``,
    ``allow_overlapping_nodes`` (see :func:`read_source`).
    Others are ignored.

    >>> read_dir("/tmp/16amd64-8n2c").counts()["numa"]    # doctest: +SKIP
    8
    """
    p = Path(path)
    if not p.is_dir():
        raise TopologyError(str(p), "not a directory")
    src = DirSource(p)
    root = _find_root(src, p.name, str(p))
    label = str(p / root) if root else str(p)
    name = options.get("name") or (root or p.name)
    return read_source(src, root, label, name=name, path=str(p),
                       allow_asymmetric=bool(options.get("allow_asymmetric")),
                       allow_overlapping_nodes=bool(options.get("allow_overlapping_nodes")))


def read_tar(path: str | Path, **options) -> Topology:
    """Read a dump tarball in memory (see :mod:`.safetar`), never extracting.

    Options: ``name`` (default: the file name without its extensions),
    ``allow_asymmetric``, ``allow_overlapping_nodes`` (see :func:`read_source`).
    """
    p = Path(path)
    if not p.is_file():
        raise TopologyError(str(p), "no such file")
    tree: MemTree = read_archive(p)
    label = _label(p)
    root = _find_root(tree, label, str(p))
    name = options.get("name") or label
    return read_source(tree, root, f"{p}:{root}", name=name, path=str(p),
                       allow_asymmetric=bool(options.get("allow_asymmetric")),
                       allow_overlapping_nodes=bool(options.get("allow_overlapping_nodes")))
