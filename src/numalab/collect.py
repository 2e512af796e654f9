"""Snapshot the running machine's topology into a ``.tar.bz2``.

``collect()`` copies the sysfs and procfs files that describe where CPUs,
memory, PCI devices, blk-mq queues and interrupts are into one archive in
the layout of hwloc's ``hwloc-gather-topology``: a top folder ``NAME/``
holding ``sys/...`` and ``proc/...`` exactly where they are on a live
system, symbolic links kept as links. So both numalab's own reader
(:mod:`numalab.topology.sysfs`) and hwloc (``tar xjf NAME.tar.bz2;
lstopo -i NAME/``) can read it.

What is collected, and why only that (relative to ``root``):

* ``sys/devices/system/cpu``: ``possible present online offline kernel_max
  isolated nohz_full``, ``smt/``, and for each ``cpuN``: ``online``,
  ``topology/*``, ``cache/index*/*``, ``cpu_capacity`` and the ``nodeM``
  link -- the scheduler's and hwloc's view of the CPUs.
* ``sys/devices/system/node``: the ``possible online has_*`` masks and for
  each ``nodeN``: ``cpulist cpumap distance meminfo numastat``, its ``cpuM``
  links and per-node huge page counts -- but not its thousands of
  ``memoryK`` links, which say nothing about placement.
* ``sys/bus/{cpu,node,pci}/devices/*`` links, and for each PCI device the
  small text attributes (``class vendor device numa_node local_cpulist
  ...``), ``msi_irqs/`` and the ``driver`` link. Binary or large
  attributes (``config``, ``resource*``, ``rom``, ``vpd``) are never read.
* ``sys/block/*`` and ``sys/class/block/*`` links for whole disks, each
  disk's ``dev size queue/hw_sector_size`` and ``mq/*/{cpu_list,nr_tags}``:
  how blk-mq spread its hardware queues over CPUs.
* ``proc/interrupts`` and ``proc/irq/*/{smp_affinity,...,node}``: where
  each interrupt may and does fire.
* ``proc/cpuinfo meminfo version cmdline`` and ``sys/kernel/mm/hugepages``.
* On the live machine, ``proc/hwloc-nofile-info`` as hwloc writes it (OS
  name, release, version, architecture, CPU count, page size), minus the
  host name: ``lstopo -i`` reads it instead of calling ``uname``.

What is *not* collected, on purpose: the host name, DMI serial numbers and
UUIDs, ``/proc/mounts``, anything under ``/proc/self``, environment
variables. The kernel command line is kept (``isolcpus=``, ``nohz_full=``
matter), but the words after a lone ``--`` are cut: the kernel hands them to
init unread, and they can carry a site's private settings.

The archive's ``NAME/numalab-manifest.json`` records the numalab version,
the UTC time, the kernel release, counts, and every file that existed but
could not be read (with the error), so an unprivileged run is never fatal
and never silently partial.
"""

from __future__ import annotations

import bz2  # noqa: F401  (tarfile's "w:bz2" needs it; fail early if missing)
import errno
import io
import json
import os
import posixpath
import re
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from . import __version__
from .errors import NumalabError

__all__ = ["collect", "default_name", "MAX_FILE_BYTES", "MANIFEST"]

MANIFEST = "numalab-manifest.json"
MAX_FILE_BYTES = 1 << 20
# /proc/interrupts and /proc/cpuinfo grow with the CPU count: on a
# 1024-CPU machine they pass 1 MiB, and they are the point of the dump.
_BIG_TABLE_BYTES = 32 << 20
_BIG_TABLES = {"proc/interrupts", "proc/cpuinfo"}
_PROGRESS_EVERY = 2.0  # seconds between "still collecting" lines

_CPU = re.compile(r"^cpu\d+$")
_NODE = re.compile(r"^node\d+$")
_INDEX = re.compile(r"^index\d+$")
_HUGEPAGES = re.compile(r"^hugepages-\d+kB$")
_IRQ = re.compile(r"^\d+$")
_PCI_ROOT = re.compile(r"^pci[0-9a-fA-F]{4}:[0-9a-fA-F]{2}$")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_+][A-Za-z0-9._+-]*$")

_CPU_TOP_FILES = ("possible", "present", "online", "offline", "kernel_max",
                  "isolated", "nohz_full")
_NODE_TOP_FILES = ("possible", "online", "has_cpu", "has_memory", "has_normal_memory",
                   "has_high_memory", "has_generic_initiator")
_NODE_FILES = ("cpulist", "cpumap", "distance", "meminfo", "numastat")
_HUGEPAGE_FILES = ("nr_hugepages", "free_hugepages", "surplus_hugepages")
# Small text attributes of a PCI device; "config", "resource*", "rom" and
# "vpd" are binary (and reading some has side effects), so never listed.
_PCI_FILES = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device",
              "revision", "numa_node", "local_cpulist", "local_cpus", "irq", "enable",
              "current_link_speed", "current_link_width", "max_link_speed",
              "max_link_width")
_MQ_FILES = ("cpu_list", "nr_tags", "nr_reserved_tags")
_IRQ_FILES = ("smp_affinity", "smp_affinity_list", "effective_affinity",
              "effective_affinity_list", "node")
_PROC_FILES = ("proc/cpuinfo", "proc/meminfo", "proc/version", "proc/cmdline",
               "proc/interrupts", "proc/irq/default_smp_affinity")


class _TooLarge(Exception):
    pass


def _read_bytes(path: str, limit: int) -> bytes:
    """Read a whole sysfs/procfs file, refusing more than ``limit`` bytes.

    Sysfs and procfs report sizes of 0 or 4096 whatever the content, so the
    file is read to EOF (as hwloc-gather-topology's ``cat`` does) rather
    than trusting ``stat``. Raises OSError as ``open``/``read`` do, and
    :class:`_TooLarge` past the limit. Tests replace this function to
    simulate unreadable files (they run as root, so ``chmod`` cannot).
    """
    chunks: list[bytes] = []
    total = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            chunk = f.read(65536)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise _TooLarge()
            chunks.append(chunk)


def strip_init_args(cmdline: str) -> tuple[str, bool]:
    """Cut what the kernel passes to init from a kernel command line.

    Input: the text of ``/proc/cmdline``. Output: ``(text, cut)`` where
    ``text`` keeps everything before a lone ``--`` (and the trailing
    newline) and ``cut`` says whether anything was removed.

    >>> strip_init_args("quiet isolcpus=2-3 -- --secret=1\\n")
    ('quiet isolcpus=2-3\\n', True)
    >>> strip_init_args("nohz_full=1\\n")
    ('nohz_full=1\\n', False)
    """
    m = re.search(r"(?:^|\s)--(?:\s|$)", cmdline)
    if not m:
        return cmdline, False
    kept = cmdline[: m.start()].rstrip()
    return kept + "\n", True


@dataclass
class _Snapshot:
    """The files, links and problems gathered so far; paths are relative to
    the root, ``/``-separated, and never start with ``/``."""

    root: str
    progress: Callable[[str], None] | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    unreadable: list[dict] = field(default_factory=list)
    skipped: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _last_report: float = field(default_factory=time.monotonic)

    def real(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def _tick(self) -> None:
        now = time.monotonic()
        if self.progress and now - self._last_report >= _PROGRESS_EVERY:
            self._last_report = now
            self.progress(f"collecting... {len(self.files)} files, {len(self.links)} links")

    def _problem(self, rel: str, err: OSError) -> None:
        self.unreadable.append({"path": rel, "errno": err.errno,
                                "error": err.strerror or str(err)})

    def add_file(self, rel: str) -> bool:
        """Copy one regular file if it exists. A missing file is not an
        error (most attributes are optional); an unreadable one is noted."""
        path = self.real(rel)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return False
        except OSError as e:
            self._problem(rel, e)
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        if not st.st_mode & 0o444:
            return False  # a write-only control (e.g. hugepages "demote"), not data
        limit = _BIG_TABLE_BYTES if rel in _BIG_TABLES else MAX_FILE_BYTES
        try:
            data = _read_bytes(path, limit)
        except _TooLarge:
            self.skipped.append({"path": rel, "reason": f"larger than {limit} bytes"})
            return False
        except OSError as e:
            self._problem(rel, e)
            return False
        self.files[rel] = data
        self._tick()
        return True

    def add_link(self, rel: str) -> str | None:
        """Keep a symbolic link as a link, with a relative target.

        Returns the target resolved lexically inside the root (``"sys/
        devices/..."``), or None when ``rel`` is not a link, cannot be read,
        or would point above the root (then it is left out: readers refuse
        such links, rightly).
        """
        path = self.real(rel)
        try:
            target = os.readlink(path)
        except OSError as e:
            # ENOENT: absent; EINVAL: there but not a link. Neither is a problem.
            if e.errno not in (errno.ENOENT, errno.EINVAL, errno.ENOTDIR):
                self._problem(rel, e)
            return None
        base = posixpath.dirname(rel)
        # An absolute target means "from the root" (chroot view), so that a
        # link is read the same way in the archive as on the machine.
        resolved = posixpath.normpath(target.lstrip("/") if target.startswith("/")
                                      else posixpath.join(base, target))
        if resolved == ".." or resolved.startswith("../") or resolved.startswith("/"):
            self.skipped.append({"path": rel, "reason": f"link points outside the root: {target}"})
            return None
        self.links[rel] = posixpath.relpath(resolved, base or ".")
        self._tick()
        return resolved

    def listdir(self, rel: str) -> list[os.DirEntry]:
        """Entries of a directory sorted by name; [] when missing, noted when
        unreadable."""
        try:
            with os.scandir(self.real(rel)) as it:
                return sorted(it, key=lambda e: e.name)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as e:
            self._problem(rel + "/", e)
            return []

    def add_files_in(self, rel: str, names=None) -> None:
        """Copy the regular files of one directory (all, or those named)."""
        if names is not None:
            for n in names:
                self.add_file(f"{rel}/{n}")
            return
        for e in self.listdir(rel):
            if e.is_file(follow_symlinks=False):
                self.add_file(f"{rel}/{e.name}")

    def add_links_in(self, rel: str, pattern: re.Pattern | None = None) -> list[str]:
        """Keep the links of one directory (names matching ``pattern``);
        return the entries' names."""
        names = []
        for e in self.listdir(rel):
            if (pattern is None or pattern.match(e.name)) and e.is_symlink():
                if self.add_link(f"{rel}/{e.name}") is not None:
                    names.append(e.name)
        return names


# -- what to collect, one subject per function ---------------------------------

def _collect_proc(s: _Snapshot) -> None:
    for rel in _PROC_FILES:
        s.add_file(rel)
    if "proc/cmdline" in s.files:
        text = s.files["proc/cmdline"].decode("utf-8", "replace")
        kept, cut = strip_init_args(text)
        if cut:
            s.files["proc/cmdline"] = kept.encode()
            s.notes.append("proc/cmdline: the arguments after '--' (passed to init, "
                           "not read by the kernel) were removed")


def _collect_cpus(s: _Snapshot) -> list[str]:
    top = "sys/devices/system/cpu"
    s.add_files_in(top, _CPU_TOP_FILES)
    s.add_files_in(f"{top}/smt", ("active", "control"))
    cpus = [e.name for e in s.listdir(top) if _CPU.match(e.name) and e.is_dir()]
    for cpu in cpus:
        d = f"{top}/{cpu}"
        s.add_files_in(d, ("online", "cpu_capacity"))
        s.add_files_in(f"{d}/topology")
        for idx in s.listdir(f"{d}/cache"):
            if _INDEX.match(idx.name):
                s.add_files_in(f"{d}/cache/{idx.name}")
        s.add_links_in(d, _NODE)
    s.add_links_in("sys/bus/cpu/devices", _CPU)
    return cpus


def _collect_nodes(s: _Snapshot) -> list[str]:
    top = "sys/devices/system/node"
    s.add_files_in(top, _NODE_TOP_FILES)
    nodes = [e.name for e in s.listdir(top) if _NODE.match(e.name) and e.is_dir()]
    for node in nodes:
        d = f"{top}/{node}"
        s.add_files_in(d, _NODE_FILES)
        s.add_links_in(d, _CPU)
        for hp in s.listdir(f"{d}/hugepages"):
            if _HUGEPAGES.match(hp.name):
                s.add_files_in(f"{d}/hugepages/{hp.name}", _HUGEPAGE_FILES)
    s.add_links_in("sys/bus/node/devices", _NODE)
    for hp in s.listdir("sys/kernel/mm/hugepages"):
        if _HUGEPAGES.match(hp.name):
            s.add_files_in(f"sys/kernel/mm/hugepages/{hp.name}")
    return nodes


def _collect_pci(s: _Snapshot) -> int:
    bus = "sys/bus/pci/devices"
    count = 0
    for e in s.listdir(bus):
        where = s.add_link(f"{bus}/{e.name}")
        if where is None:
            continue
        count += 1
        s.add_files_in(where, _PCI_FILES)
        s.add_link(f"{where}/driver")
        # msi_irqs/N is a file ("msi"/"msix") on current kernels, a folder
        # holding "mode" on old ones; keep whichever is there.
        for m in s.listdir(f"{where}/msi_irqs"):
            rel = f"{where}/msi_irqs/{m.name}"
            if m.is_dir(follow_symlinks=False):
                s.add_files_in(rel, ("mode",))
            else:
                s.add_file(rel)
    # The host bridges' locality, which hwloc uses when a device has none.
    for root in s.listdir("sys/devices"):
        if _PCI_ROOT.match(root.name):
            for b in s.listdir(f"sys/devices/{root.name}/pci_bus"):
                s.add_files_in(f"sys/devices/{root.name}/pci_bus/{b.name}",
                               ("cpuaffinity", "cpulistaffinity"))
    return count


def _collect_block(s: _Snapshot) -> int:
    disks = 0
    for e in s.listdir("sys/block"):
        where = s.add_link(f"sys/block/{e.name}")
        if where is None:
            continue
        # hwloc finds disks through sys/class/block and sizes them from these.
        s.add_link(f"sys/class/block/{e.name}")
        s.add_files_in(where, ("dev", "size"))
        s.add_file(f"{where}/queue/hw_sector_size")
        hctxs = [h.name for h in s.listdir(f"{where}/mq") if h.name.isdigit()]
        for h in hctxs:
            s.add_files_in(f"{where}/mq/{h}", _MQ_FILES)
        disks += bool(hctxs)
    return disks


def _collect_irqs(s: _Snapshot) -> int:
    irqs = [e.name for e in s.listdir("proc/irq") if _IRQ.match(e.name)]
    for irq in irqs:
        s.add_files_in(f"proc/irq/{irq}", _IRQ_FILES)
    return len(irqs)


# -- naming, manifest, archive ----------------------------------------------------

def _kernel_release(s: _Snapshot, live: bool) -> str | None:
    if live:
        return os.uname().release
    m = re.match(rb"Linux version (\S+)", s.files.get("proc/version", b""))
    return m.group(1).decode("utf-8", "replace") if m else None


def default_name(machine: str, ncpus: int, nnodes: int, when: datetime) -> str:
    """A descriptive name that identifies no one: architecture, CPU and node
    counts, date.

    >>> default_name("x86_64", 2, 1, datetime(2025, 1, 31))
    'x86_64-2cpu-1n-20250131'
    """
    arch = re.sub(r"[^A-Za-z0-9_]", "_", machine) or "unknown"
    return f"{arch}-{ncpus}cpu-{max(nnodes, 1)}n-{when:%Y%m%d}"


def _nofile_info(ncpus: int) -> bytes:
    """hwloc's ``proc/hwloc-nofile-info``: what ``lstopo -i`` cannot find in
    files (it reads this instead of calling uname). HostName is left out."""
    u = os.uname()
    lines = [f"OSName: {u.sysname}", f"OSRelease: {u.release}", f"OSVersion: {u.version}",
             f"Architecture: {u.machine}", f"FallbackNbProcessors: {ncpus}",
             f"PageSize: {os.sysconf('SC_PAGE_SIZE')}"]
    return ("\n".join(lines) + "\n").encode()


def _check_extra(rel: str) -> str:
    norm = posixpath.normpath(rel)
    if (not rel or rel.startswith("/") or norm in (".", "..") or norm.startswith("../")
            or "\0" in rel):
        raise NumalabError(f"extra file name {rel!r} must be a relative path inside numalab/")
    return norm


def _tar_bytes(tf: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, mtime
    tf.addfile(info, io.BytesIO(data))


def _write_archive(fileobj, name: str, s: _Snapshot, extra: dict[str, bytes],
                   manifest: bytes, mtime: int) -> None:
    """Write the tarball: directories first (as hwloc's do), then files and
    links in path order, so that the same snapshot gives the same members."""
    members: dict[str, tuple[str, bytes | str]] = {}
    for rel, data in s.files.items():
        members[f"{name}/{rel}"] = ("file", data)
    for rel, target in s.links.items():
        members[f"{name}/{rel}"] = ("link", target)
    for rel, data in extra.items():
        members[f"{name}/numalab/{rel}"] = ("file", data)
    members[f"{name}/{MANIFEST}"] = ("file", manifest)
    dirs = {name}
    for path in members:
        parent = posixpath.dirname(path)
        while parent and parent not in dirs:
            dirs.add(parent)
            parent = posixpath.dirname(parent)
    with tarfile.open(fileobj=fileobj, mode="w:bz2", format=tarfile.PAX_FORMAT) as tf:
        for d in sorted(dirs, key=lambda p: p.split("/")):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            tf.addfile(info)
        for path in sorted(members, key=lambda p: p.split("/")):
            kind, payload = members[path]
            if kind == "file":
                _tar_bytes(tf, path, payload, mtime)
            else:
                info = tarfile.TarInfo(path)
                info.type, info.linkname, info.mode, info.mtime = (
                    tarfile.SYMTYPE, payload, 0o777, mtime)
                tf.addfile(info)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _exists_error(output: Path) -> NumalabError:
    return NumalabError(f"{output} exists; collect never overwrites (choose another -o)")


def _publish(tmp: str, output: Path) -> None:
    """Give the finished temporary file its final name, only if that name is
    still free: ``os.link`` fails instead of replacing (``rename`` would
    replace)."""
    try:
        os.link(tmp, output)
    except FileExistsError:
        raise _exists_error(output) from None
    except OSError:
        # A file system without hard links: exclusive create, then copy.
        try:
            with open(output, "xb") as dst, open(tmp, "rb") as src:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
        except FileExistsError:
            raise _exists_error(output) from None


def _resolve_output(output: str | os.PathLike | None, name: str | None) -> tuple[Path | None, str | None]:
    """Output path (None: default, decided once the name is known) and the
    name implied by it."""
    if output is None:
        return None, name
    out = Path(output)
    if out.is_dir():
        return out, name  # file name decided from the name later
    if not out.name.endswith(".tar.bz2"):
        raise NumalabError(f"{out}: the output must end in .tar.bz2 (or be a directory)")
    return out, name or out.name[: -len(".tar.bz2")]


def collect(root: str | os.PathLike = "/", output: str | os.PathLike | None = None,
            name: str | None = None, progress: Callable[[str], None] | None = None,
            extra_files: dict[str, bytes] | None = None) -> Path:
    """Snapshot the topology files under ``root`` into a new ``.tar.bz2``.

    Inputs: ``root`` -- the file system to read (``"/"`` for this machine; a
    fake tree in tests); ``output`` -- the archive path, or a directory to
    put ``NAME.tar.bz2`` in (default: ``data/collected/`` of the checkout);
    ``name`` -- the archive's top folder (default: from ``output``, else
    :func:`default_name`); ``progress`` -- called with short status lines;
    ``extra_files`` -- ``{relative path: bytes}`` stored under
    ``NAME/numalab/`` (for example benchmark results).

    Output: the path of the archive written. It never replaces a file:
    an existing output raises NumalabError, before and after collecting.
    Files that exist but cannot be read are listed in the manifest.

    Example: ``collect("/", "/tmp/me.tar.bz2")`` writes ``/tmp/me.tar.bz2``
    holding ``me/sys/devices/system/cpu/...``, ``me/proc/...`` and
    ``me/numalab-manifest.json``.
    """
    root = os.fspath(root)
    live = os.path.realpath(root) == "/"
    if not os.path.isdir(os.path.join(root, "sys/devices/system/cpu")):
        raise NumalabError(f"{root}: no sys/devices/system/cpu here; collect reads a "
                           "Linux system's /sys and /proc")
    out, name = _resolve_output(output, name)
    if name is not None and not _SAFE_NAME.match(name):
        raise NumalabError(f"name {name!r}: use letters, digits and . _ + - only "
                           "(it becomes the archive's top folder)")
    if out is not None and out.exists() and not out.is_dir():
        raise _exists_error(out)
    extra = {_check_extra(k): bytes(v) for k, v in (extra_files or {}).items()}

    started = time.monotonic()
    now = datetime.now(timezone.utc)
    s = _Snapshot(root=root, progress=progress)
    _collect_proc(s)
    cpus = _collect_cpus(s)
    nodes = _collect_nodes(s)
    npci = _collect_pci(s)
    ndisks = _collect_block(s)
    nirqs = _collect_irqs(s)
    if live:
        s.files["proc/hwloc-nofile-info"] = _nofile_info(len(cpus))

    machine = os.uname().machine if live else "unknown"
    if name is None:
        name = default_name(machine, len(cpus), len(nodes), now)
    if out is None:
        from .datasets import repo_root
        out = repo_root() / "data" / "collected" / f"{name}.tar.bz2"
    elif out.is_dir():
        out = out / f"{name}.tar.bz2"
    if out.exists():
        raise _exists_error(out)

    manifest = {
        "format": "numalab-collect/1",
        "numalab_version": __version__,
        "created_utc": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "name": name,
        "root": "/" if live else "(not the live root)",
        "kernel_release": _kernel_release(s, live),
        "machine": machine,
        "counts": {"files": len(s.files), "links": len(s.links),
                   "bytes": sum(len(d) for d in s.files.values()),
                   "cpus": len(cpus), "nodes": len(nodes), "pci_devices": npci,
                   "blk_mq_disks": ndisks, "irqs": nirqs},
        "unreadable": s.unreadable,
        "skipped": s.skipped,
        "notes": s.notes,
        "extra_files": sorted(f"numalab/{k}" for k in extra),
    }
    blob = (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()

    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide a shared dump
        with os.fdopen(fd, "wb") as f:
            _write_archive(f, name, s, extra, blob, int(now.timestamp()))
            f.flush()
            os.fsync(f.fileno())
        _publish(tmp, out)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    if progress:
        size = out.stat().st_size
        progress(f"{len(cpus)} cpus, {len(nodes)} nodes, {npci} pci devices, {nirqs} irqs: "
                 f"{len(s.files)} files, {len(s.links)} links, {len(s.unreadable)} unreadable, "
                 f"{len(s.skipped)} skipped in {time.monotonic() - started:.1f} s "
                 f"-> {out} ({size / 1024:.1f} KiB)")
    return out
