"""The corpus of bad inputs, as a declarative table.

Every entry is one input that someone could feed ``numalab show`` (a sysfs
dump as a folder or a tarball, hwloc XML, ``lscpu -p`` output, a ``.toml``
description, a synthetic string) and what numalab must answer: the error
(the end of the path it names and a piece of the problem) or, for inputs
that are odd but legitimate, the note the reader attaches.

Text inputs that read well as files are committed in ``tests/data/bad/``;
everything binary, large, or dangerous (tarballs with device nodes,
links out, 2 GiB headers) is *built* here, into a test's ``tmp_path``, at
test time -- nothing dangerous is ever committed, and the 2 GiB member
is a 512-byte header.

``python tests/bad_corpus.py`` prints the table that ``tests/data/bad/README.md``
holds (the test suite checks that the README lists every case).
"""

from __future__ import annotations

import bz2
import gzip
import io
import os
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from numalab.errors import one_line

DATA = Path(__file__).resolve().parent / "data" / "bad"

# -- a small good sysfs dump: every sysfs case is this dump with one change ----

CPU = "sys/devices/system/cpu"
NODE = "sys/devices/system/node"
X86_CPUINFO = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n"
               "flags\t\t: fpu\n")


def good_files() -> dict[str, bytes]:
    """4 CPUs (two SMT pairs), 2 nodes of one pair each, a SLIT, x86."""
    f: dict[str, bytes] = {
        f"{CPU}/possible": b"0-3\n", f"{CPU}/present": b"0-3\n", f"{CPU}/online": b"0-3\n",
        "proc/cpuinfo": X86_CPUINFO.encode(),
        "proc/version": b"Linux version 6.8.0-bad (x@y) #1 SMP\n",
    }
    for c in range(4):
        t = f"{CPU}/cpu{c}/topology"
        pair = c - c % 2
        f[f"{t}/core_id"] = f"{c // 2}\n".encode()
        f[f"{t}/physical_package_id"] = b"0\n"
        f[f"{t}/thread_siblings_list"] = f"{pair}-{pair + 1}\n".encode()
        f[f"{t}/core_siblings_list"] = b"0-3\n"
    for n, (cl, dist) in enumerate([("0-1", "10 20"), ("2-3", "20 10")]):
        f[f"{NODE}/node{n}/cpulist"] = f"{cl}\n".encode()
        f[f"{NODE}/node{n}/distance"] = f"{dist}\n".encode()
        f[f"{NODE}/node{n}/meminfo"] = f"Node {n} MemTotal:  1048576 kB\n".encode()
    return f


def good_links() -> dict[str, str]:
    """The cpuN/nodeM links a NUMA kernel makes (cpu_to_node())."""
    return {f"{CPU}/cpu{c}/node{c // 2}": f"../../node/node{c // 2}" for c in range(4)}


# -- the table ------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One bad (or odd-but-legitimate) input.

    ``make(folder)`` creates the input under ``folder`` and returns the
    argument for ``load()`` / ``numalab show``. ``path`` is how the error's
    path must end, ``problem`` a piece of its problem text; for an accepted
    input ``problem`` is None and ``note`` is a piece of one of the notes in
    ``meta["notes"]``. ``options`` go to ``load()`` (the CLI case is skipped
    when they are not empty, since ``show`` has no such flags).
    """

    id: str
    kind: str
    what: str
    make: Callable[[Path], str] = field(compare=False, repr=False)
    path: str = ""
    problem: str | None = None
    note: str | None = None
    options: dict[str, Any] = field(default_factory=dict, compare=False)
    check: Callable[[Any], None] | None = field(default=None, compare=False, repr=False)


def _write_tree(base: Path, files: dict[str, bytes], links: dict[str, str]) -> None:
    for rel, data in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    for rel, target in links.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, p)


def _tar_of_tree(files: dict[str, bytes], links: dict[str, str], top: str = "box",
                 fmt=tarfile.GNU_FORMAT) -> bytes:
    """Uncompressed tar bytes of a dump folder ``top/`` (parents first)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        dirs = set()
        for rel in list(files) + list(links):
            parts = f"{top}/{rel}".split("/")[:-1]
            for k in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:k]))
        for d in sorted(dirs):
            ti = tarfile.TarInfo(d)
            ti.type, ti.mode = tarfile.DIRTYPE, 0o755
            tf.addfile(ti)
        for rel, data in files.items():
            ti = tarfile.TarInfo(f"{top}/{rel}")
            ti.size, ti.mode = len(data), 0o644
            tf.addfile(ti, io.BytesIO(data))
        for rel, target in links.items():
            ti = tarfile.TarInfo(f"{top}/{rel}")
            ti.type, ti.linkname = tarfile.SYMTYPE, target
            tf.addfile(ti)
    return buf.getvalue()


def _sysfs_variant(set_: dict[str, bytes | str] | None, drop: tuple[str, ...],
                   links: dict[str, str | None] | None):
    files = good_files()
    lk: dict[str, str] = good_links()
    for prefix in drop:
        files = {k: v for k, v in files.items() if not (k == prefix or k.startswith(prefix + "/"))}
        lk = {k: v for k, v in lk.items() if not (k == prefix or k.startswith(prefix + "/"))}
    for k, v in (set_ or {}).items():
        files[k] = v.encode() if isinstance(v, str) else v
    for k, v in (links or {}).items():
        if v is None:
            lk.pop(k, None)
        else:
            lk[k] = v
    return files, lk


def sysfs_cases(id: str, what: str, *, set: dict | None = None, drop: tuple = (),
                links: dict | None = None, path: str = "", problem: str | None = None,
                note: str | None = None, options: dict | None = None,
                forms: tuple[str, ...] = ("dir", "tar.bz2"), check=None) -> list[Case]:
    """The good dump with one change, as a folder and as a tarball.

    ``path`` is relative to the dump folder ``box/``.
    """
    out = []
    for form in forms:
        def make(folder: Path, form=form) -> str:
            files, lk = _sysfs_variant(set, drop, links)
            if form == "dir":
                base = folder / "box"
                _write_tree(base, files, lk)
                return str(base)
            p = folder / f"box.{form}"
            p.write_bytes(_compress(_tar_of_tree(files, lk), form))
            return str(p)
        out.append(Case(f"{id}[{form}]", "sysfs", what, make,
                        path=f"box/{path}" if path else "", problem=problem, note=note,
                        options=options or {}, check=check))
    return out


def _compress(raw: bytes, form: str) -> bytes:
    if form.endswith("bz2"):
        return bz2.compress(raw)
    if form.endswith("gz"):
        return gzip.compress(raw, mtime=0)
    return raw


# -- tar members built by hand --------------------------------------------------

def _checksum(hdr: bytearray) -> bytearray:
    hdr[148:156] = b" " * 8
    hdr[148:156] = b"%06o\0 " % sum(hdr)
    return hdr


def _gnu_sparse_header(name: str, realsize: int) -> bytes:
    """A GNU old-style sparse member ('S') claiming ``realsize`` bytes while
    storing none: one map entry (offset 0, 0 bytes)."""
    ti = tarfile.TarInfo(name)
    ti.size = 0
    hdr = bytearray(ti.tobuf(tarfile.GNU_FORMAT))
    hdr[156:157] = tarfile.GNUTYPE_SPARSE
    hdr[386:398] = b"%011o\0" % 0
    hdr[398:410] = b"%011o\0" % 0
    hdr[482:483] = b"\0"                               # no extension headers
    hdr[483:495] = b"%011o\0" % realsize
    return bytes(_checksum(hdr))


def _member_bytes(kind: str, name: str, arg: Any = None) -> bytes:
    """One member's header (and data) as tar bytes."""
    ti = tarfile.TarInfo(name)
    data = b""
    if kind == "file":
        data = arg if isinstance(arg, bytes) else b"x\n"
        ti.size = len(data)
    elif kind == "dir":
        ti.type = tarfile.DIRTYPE
    elif kind in ("sym", "hard"):
        ti.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
        ti.linkname = arg
    elif kind in ("chr", "blk", "fifo"):
        ti.type = {"chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
        ti.devmajor, ti.devminor = 1, 3
    elif kind == "huge":
        # the header says ``arg`` bytes; none follow (a 512-byte fake)
        ti.size = arg
        return ti.tobuf(tarfile.GNU_FORMAT)
    elif kind == "gnusparse":
        return _gnu_sparse_header(name, arg)
    elif kind == "paxsparse":
        ti.pax_headers = {"GNU.sparse.map": "0,0", "GNU.sparse.numblocks": "1",
                          "GNU.sparse.name": name, "GNU.sparse.size": str(arg)}
        return ti.tobuf(tarfile.PAX_FORMAT)
    else:
        raise ValueError(kind)
    out = ti.tobuf(tarfile.GNU_FORMAT) + data
    return out + b"\0" * (-len(out) % 512)


def tar_case(id: str, what: str, members: list[tuple], *, path: str, problem: str,
             form: str = "tar.bz2") -> Case:
    """The good dump followed by hand-built ``members`` ((kind, name, arg))."""
    def make(folder: Path) -> str:
        raw = _tar_of_tree(good_files(), good_links())
        body = raw.rstrip(b"\0")
        body += b"\0" * (-len(body) % 512)
        body += b"".join(_member_bytes(*m) for m in members) + b"\0" * 1024
        p = folder / f"box.{form}"
        p.write_bytes(_compress(body, form))
        return str(p)
    return Case(id, "tar", what, make, path=path, problem=problem)


def raw_tar_case(id: str, what: str, transform: Callable[[bytes], bytes], *,
                 form: str = "tar.bz2", path: str | None = None, problem: str) -> Case:
    """The good dump's archive bytes passed through ``transform``."""
    def make(folder: Path) -> str:
        raw = _compress(_tar_of_tree(good_files(), good_links()), form)
        p = folder / f"box.{form}"
        p.write_bytes(transform(raw))
        return str(p)
    return Case(id, "tar", what, make, path=path or f"box.{form}", problem=problem)


def _truncate(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _corrupt(data: bytes) -> bytes:
    mid = len(data) // 2
    return data[:mid] + bytes(b ^ 0x5A for b in data[mid:mid + 64]) + data[mid + 64:]


def _cut_member(raw: bytes) -> bytes:
    """A plain tar stopped in the middle of its last file's data."""
    return raw.rstrip(b"\0")[:-3]


# -- committed and generated files ------------------------------------------------

def file_case(id: str, what: str, name: str, *, path: str | None = None,
              problem: str | None = None, note: str | None = None, siblings: tuple = (),
              content: bytes | None = None, options: dict | None = None) -> Case:
    """A file: copied from tests/data/bad (with ``siblings``), or written
    from ``content`` when given."""
    def make(folder: Path) -> str:
        dst = folder / name
        if content is not None:
            dst.write_bytes(content)
        else:
            shutil.copy(DATA / name, dst)
        for s in siblings:
            shutil.copy(DATA / s, folder / s)
        return str(dst)
    kind = name.rsplit(".", 1)[-1]
    return Case(id, kind, what, make, path=path if path is not None else name, problem=problem,
                note=note, options=options or {})


def synthetic_case(id: str, what: str, text: str, *, problem: str,
                   options: dict | None = None) -> Case:
    return Case(id, "synthetic", what, lambda folder: text, path="", problem=problem,
                options=options or {})


def dir_case(id: str, what: str, build: Callable[[Path], None], *, path: str,
             problem: str) -> Case:
    """A folder ``box/`` built by ``build(box)``."""
    def make(folder: Path) -> str:
        box = folder / "box"
        box.mkdir()
        build(box)
        return str(box)
    return Case(id, "dir", what, make, path=path, problem=problem)


def _two_dumps(box: Path) -> None:
    for top in ("a", "b"):
        _write_tree(box / top, good_files(), good_links())


def _only_proc(box: Path) -> None:
    _write_tree(box, {"proc/cpuinfo": X86_CPUINFO.encode()}, {})


def _fifo_online(box: Path) -> None:
    _write_tree(box, {k: v for k, v in good_files().items() if k != f"{CPU}/online"},
                good_links())
    os.mkfifo(box / CPU / "online")


def _online_to_dev_zero(box: Path) -> None:
    _write_tree(box, {k: v for k, v in good_files().items() if k != f"{CPU}/online"},
                {**good_links(), f"{CPU}/online": "/dev/zero"})


def _node_dir_loop(box: Path) -> None:
    files = {k: v for k, v in good_files().items() if not k.startswith(NODE)}
    _write_tree(box, files, {NODE: "node"})


def _is_one_node(topo) -> None:
    assert topo.node_ids == [0] and topo.nodes[0].cpus == 0xF and topo.distances == []


def _cpu1_in_node0(topo) -> None:
    assert topo.cpus[1].node == 0 and topo.nodes[1].cpus == 0b1100


def _two_good_nodes(topo) -> None:
    assert topo.node_ids == [0, 1] and topo.nodes[1].cpus == 0b1100


def _no_blk_mq(topo) -> None:
    assert topo.blk_mq == {}


def _kept_asymmetric(topo) -> None:
    assert topo.distances == [[10, 20], [30, 10]]


def _no_matrix(topo) -> None:
    assert topo.node_ids == [0, 1] and topo.distances == []
    assert topo.distance(0, 1) == 20          # the kernel's default


def _all_online(topo) -> None:
    assert topo.online == 0xF and sorted(topo.cpus) == [0, 1, 2, 3]


def _one_node_matrix(topo) -> None:
    assert topo.node_ids == [0] and topo.distances == [[10]] and topo.nodes[0].cpus == 0xF


def _two_of_three(topo) -> None:
    assert topo.node_ids == [0, 1] and topo.distances == [[10, 20], [20, 10]]


def _core_id_zero(topo) -> None:
    assert topo.cpus[0].core == 0 and topo.cpus[0].thread_siblings == 0b11


XML_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n'


def build_cases() -> list[Case]:
    """Every case, in a stable order."""
    cases: list[Case] = []
    S = sysfs_cases
    # -- missing parts of a dump ------------------------------------------------------
    cases += S("no-node-dir", "sys/devices/system/node absent, no cpuN/nodeM links: a "
               "kernel without CONFIG_NUMA; accepted as one node 0, with a note",
               drop=(NODE,), links={k: None for k in good_links()},
               note="no node folders: one node 0 holding all CPUs", check=_is_one_node)
    cases += S("no-node-dir-but-links", "sys/devices/system/node absent while the cpuN/nodeM "
               "links say the kernel had NUMA nodes: the dump lost a folder",
               drop=(NODE,), path=NODE, problem="missing, but cpu0/node0 shows")
    cases += S("no-cpu-dir", "sys/devices/system/cpu absent", drop=(CPU,), path=CPU,
               problem="missing: not a sysfs dump")
    # -- cpulist syntax ----------------------------------------------------------------
    for fname, text, msg in [("online", "0-", "bad cpulist region '0-'"),
                             ("possible", "3-1", "end before start"),
                             ("present", "0,,3", "bad cpulist region ''")]:
        cases += S(f"cpulist-{fname}-{text}", f"cpu/{fname} holds {text!r}",
                   set={f"{CPU}/{fname}": text + "\n"}, path=f"{CPU}/{fname}", problem=msg)
    cases += S("cpulist-node-a", "node0/cpulist holds 'a'", set={f"{NODE}/node0/cpulist": "a\n"},
               path=f"{NODE}/node0/cpulist", problem="bad cpulist region 'a'")
    cases += S("cpulist-huge", "cpu/online names CPU 4294967295 (a 512 MiB mask if built)",
               set={f"{CPU}/online": "0-4294967295\n"}, path=f"{CPU}/online",
               problem="beyond the 65536 CPUs")
    cases += S("cpu-dir-huge", "a cpu99999999999 folder",
               set={f"{CPU}/cpu99999999999/online": "1\n"}, path=f"{CPU}/cpu99999999999",
               problem="beyond the 65536 CPUs")
    cases += S("hexmask-bad", "thread_siblings (hex form) holds 'zz'",
               set={f"{CPU}/cpu0/topology/thread_siblings": "zz\n"},
               links={}, drop=(f"{CPU}/cpu0/topology/thread_siblings_list",),
               path=f"{CPU}/cpu0/topology/thread_siblings", problem="bad hex mask chunk 'zz'")
    cases += S("online-empty", "cpu/online is empty: no CPU would be online",
               set={f"{CPU}/online": ""}, path=f"{CPU}/online",
               problem="empty: a running kernel has at least one online CPU")
    # -- CPUs in two nodes ----------------------------------------------------------------
    cases += S("cpu-two-nodes-no-link", "CPU 1 in node0's and node1's cpulist, no cpu1/nodeM "
               "link to say which", set={f"{NODE}/node1/cpulist": "1-3\n"},
               links={f"{CPU}/cpu1/node0": None}, path=f"{CPU}/cpu1",
               problem="CPU 1 is in the cpulists of node0 and node1")
    cases += S("cpu-two-nodes-two-links", "CPU 1 in two nodes' cpulists and linked to both",
               set={f"{NODE}/node1/cpulist": "1-3\n"},
               links={f"{CPU}/cpu1/node1": "../../node/node1"}, path=f"{CPU}/cpu1",
               problem="CPU 1 is in the cpulists of node0 and node1")
    cases += S("cpu-two-nodes-linked", "CPU 1 in two nodes' cpulists, its cpu1/node0 link "
               "says node0 (a firmware bug two real hwloc dumps have): accepted with a note",
               set={f"{NODE}/node1/cpulist": "1-3\n"}, note="node cpu masks overlap",
               check=_cpu1_in_node0)
    cases += S("node-dir-leading-zero", "a node01 folder beside node1 (the same id twice if "
               "read as a number): not a kernel name, ignored like any other",
               set={f"{NODE}/node01/cpulist": "0-3\n", f"{NODE}/node01/distance": "5 5 5\n"},
               check=_two_good_nodes)
    # -- distances ----------------------------------------------------------------------------
    cases += S("distance-not-square", "node1/distance has 3 entries for 2 nodes",
               set={f"{NODE}/node1/distance": "20 10 30\n"}, path=f"{NODE}/node1/distance",
               problem="has 3 entries, expected 2")
    cases += S("distance-asymmetric", "node0->node1 is 20, node1->node0 is 30",
               set={f"{NODE}/node1/distance": "30 10\n"}, path="",
               problem="distance matrix is not symmetric: node0->node1 is 20 but "
                       "node1->node0 is 30")
    cases += S("distance-asymmetric-allowed", "the same, with allow_asymmetric=True: kept, "
               "with a note", set={f"{NODE}/node1/distance": "30 10\n"},
               options={"allow_asymmetric": True}, note="not symmetric",
               check=_kept_asymmetric)
    cases += S("distance-zero", "a zero off-diagonal distance",
               set={f"{NODE}/node0/distance": "10 0\n", f"{NODE}/node1/distance": "0 10\n"},
               path="", problem="distance node0->node1 is 0")
    cases += S("distance-words", "node0/distance holds 'ten twenty'",
               set={f"{NODE}/node0/distance": "ten twenty\n"}, path=f"{NODE}/node0/distance",
               problem="not a list of integers")
    # what hwloc reads, numalab reads (hwloc's topology-linux.c), with a note
    cases += S("distance-one-missing", "node1 has no distance file while node0 has one: "
               "hwloc drops the matrix; accepted without one (10/20 default), with a note",
               drop=(f"{NODE}/node1/distance",), note="distance file missing or empty for "
               "node(s) 1", check=_no_matrix)
    cases += S("distance-empty-file", "node1/distance is empty (a copy that lost its "
               "content): as a missing file", set={f"{NODE}/node1/distance": ""},
               note="distance file missing or empty for node(s) 1", check=_no_matrix)
    cases += S("distance-per-possible-node", "node1 offline (node/online 0, node/possible "
               "0-1, no node1 folder) and node0/distance still has one entry per possible "
               "node, '10 20' (a real hwloc test dump): node0's own entry kept, with a note",
               set={f"{NODE}/online": "0\n", f"{NODE}/possible": "0-1\n",
                    f"{NODE}/node0/cpulist": "0-3\n"},
               drop=(f"{NODE}/node1",),
               links={f"{CPU}/cpu2/node1": None, f"{CPU}/cpu3/node1": None,
                      f"{CPU}/cpu2/node0": "../../node/node0",
                      f"{CPU}/cpu3/node0": "../../node/node0"},
               note="one per possible node", check=_one_node_matrix)
    cases += S("node-online-no-folder", "node/online lists node 2, which has no folder; the "
               "rows have one entry per online node: the two nodes read, with a note",
               set={f"{NODE}/online": "0-2\n", f"{NODE}/possible": "0-2\n",
                    f"{NODE}/node0/distance": "10 20 30\n",
                    f"{NODE}/node1/distance": "20 10 30\n"},
               note="node/online lists node(s) 2 that have no folder", check=_two_of_three)
    cases += S("distance-unexplained", "node/online and node/possible say 2 nodes, every "
               "row has 3 entries: nothing says which entry is whose",
               set={f"{NODE}/online": "0-1\n", f"{NODE}/possible": "0-1\n",
                    f"{NODE}/node0/distance": "10 20 30\n",
                    f"{NODE}/node1/distance": "20 10 30\n"},
               path=f"{NODE}/node0/distance", problem="has 3 entries, expected 2")
    cases += S("node-offline-with-cpus", "node/online says 0 while the node1 folder lists "
               "CPUs 2-3: a contradiction that changes each CPU's node",
               set={f"{NODE}/online": "0\n"}, path=f"{NODE}/node1",
               problem="node1 is not in node/online (0) but its cpulist holds CPUs 2-3")
    # -- CPUs online ----------------------------------------------------------------------
    cases += S("cpu-online-file-empty", "no cpu/online; cpu0/online is empty (an Itanium "
               "Superdome dump): read as online, as hwloc does, with a note",
               drop=(f"{CPU}/online",),
               set={f"{CPU}/cpu0/online": "", **{f"{CPU}/cpu{c}/online": "1\n"
                                                 for c in (1, 2, 3)}},
               note="empty cpuN/online file for CPU(s) 0", check=_all_online)
    cases += S("no-online-cpu", "no cpu/online and every cpuN/online says 0: no CPU at all",
               drop=(f"{CPU}/online",), set={f"{CPU}/cpu{c}/online": "0\n" for c in range(4)},
               path=CPU, problem="no online CPU")
    cases += S("core-id-empty", "cpu0/topology/core_id is empty: read as missing (0), as "
               "hwloc does, with a note", set={f"{CPU}/cpu0/topology/core_id": ""},
               note="empty file(s) where the kernel prints a number", check=_core_id_zero)
    cases += S("topology-file-missing", "cpu0/topology/core_id is absent (the PS3 dump has "
               "no core_id at all): 0, with a note", drop=(f"{CPU}/cpu0/topology/core_id",),
               note="topology files missing: core_id for CPU(s) 0", check=_core_id_zero)
    # -- bytes that are not text ----------------------------------------------------------
    cases += S("non-utf8-online", "cpu/online holds byte 0xff",
               set={f"{CPU}/online": b"0-3\xff\n"}, path=f"{CPU}/online",
               problem="not UTF-8 text (byte 0xff at offset 3)")
    cases += S("non-utf8-cpuinfo", "proc/cpuinfo holds Latin-1 bytes",
               set={"proc/cpuinfo": X86_CPUINFO.encode() + b"model name\t: Pentium\xae\n"},
               path="proc/cpuinfo", problem="not UTF-8 text")
    cases += S("core-id-words", "cpu0/topology/core_id holds 'abc'",
               set={f"{CPU}/cpu0/topology/core_id": "abc\n"},
               path=f"{CPU}/cpu0/topology/core_id", problem="not an integer: 'abc'")
    cases += S("meminfo-bad", "node0/meminfo has a MemTotal without a number",
               set={f"{NODE}/node0/meminfo": "Node 0 MemTotal: lots kB\n"},
               path=f"{NODE}/node0/meminfo", problem="bad MemTotal line")
    cases += S("interrupts-bad-header", "proc/interrupts header is not CPU columns",
               set={"proc/interrupts": "hello world\n 0: 1 2 IO-APIC timer\n"},
               path="proc/interrupts", problem="bad header column 'hello'")
    cases += S("unicode-digit-hctx", "a blk-mq folder named '²' (str.isdigit() says yes, "
               "int() says no): not a hardware queue, skipped like any other name",
               set={"sys/block/sda/mq/\u00b2/cpu_list": "0-3\n"}, check=_no_blk_mq)
    # -- folders that are not one dump ----------------------------------------------------
    cases.append(dir_case("no-sys", "a folder with proc/ but no sys/", _only_proc, path="box",
                          problem="no NAME/sys/ folder"))
    cases.append(dir_case("empty-dir", "an empty folder", lambda box: None, path="box",
                          problem="no NAME/sys/ folder"))
    cases.append(dir_case("two-dumps", "a folder holding two dump folders", _two_dumps,
                          path="box", problem="several dump folders (a, b)"))
    cases.append(dir_case("fifo-file", "cpu/online is a FIFO (reading it would block forever)",
                          _fifo_online, path=f"box/{CPU}/online",
                          problem="not a regular file"))
    cases.append(dir_case("link-to-dev-zero", "cpu/online is a link to /dev/zero (reading "
                          "it would never end)", _online_to_dev_zero, path=f"box/{CPU}/online",
                          problem="not a regular file"))
    cases.append(dir_case("node-dir-loop", "sys/devices/system/node is a symlink to itself",
                          _node_dir_loop, path=f"box/{NODE}", problem="cannot list"))
    # -- archives ----------------------------------------------------------------------------
    cases.append(raw_tar_case("truncated-bz2", "the .tar.bz2 cut in half", _truncate,
                              problem="truncated or corrupt archive"))
    cases.append(raw_tar_case("corrupt-bz2", "64 bytes in the middle of the bz2 stream "
                              "flipped", _corrupt, problem="truncated or corrupt archive"))
    cases.append(raw_tar_case("corrupt-gz", "64 bytes in the middle of the gzip stream flipped",
                              _corrupt, form="tar.gz", problem="truncated or corrupt archive"))
    cases.append(raw_tar_case("truncated-tar", "a plain .tar whose last member's data stops "
                              "short", _cut_member, form="tar", path="box.tar",
                              problem="truncated or corrupt archive (no valid header"))
    cases.append(raw_tar_case("garbage-tar", "random bytes named .tar.bz2",
                              lambda data: bytes(range(256)) * 8,
                              problem="truncated or corrupt archive"))
    cases.append(raw_tar_case("empty-tar", "an empty file named .tar.bz2", lambda data: b"",
                              problem="truncated or corrupt archive"))
    for id, what, member, problem in [
        ("member-absolute", "a member named /etc/evil", ("file", "/etc/evil"),
         "absolute member path refused"),
        ("member-dotdot", "a member named box/../../evil", ("file", "box/../../evil"),
         "member path with '..' refused"),
        ("member-chr", "a character device member", ("chr", "box/dev/null"),
         "device file member refused"),
        ("member-blk", "a block device member", ("blk", "box/dev/sda"),
         "device file member refused"),
        ("member-fifo", "a FIFO member", ("fifo", "box/fifo"), "FIFO member refused"),
        ("symlink-absolute", "a symlink to /etc/passwd", ("sym", "box/sys/passwd", "/etc/passwd"),
         "symlink to absolute path '/etc/passwd' refused"),
        ("symlink-outside", "a symlink climbing out of the archive",
         ("sym", "box/sys/up", "../../../etc/passwd"), "leaves the archive"),
        ("hardlink-outside", "a hard link to ../outside", ("hard", "box/hl", "../outside"),
         "hard link target '../outside' leaves the archive"),
        ("hardlink-absolute", "a hard link to /etc/shadow", ("hard", "box/hl", "/etc/shadow"),
         "hard link target '/etc/shadow' leaves the archive"),
        ("member-2g", "a member whose header claims 2 GiB (no data follows)",
         ("huge", "box/sys/devices/system/cpu/big", 2 << 30), "per-member cap"),
        ("member-2g-gnu-sparse", "a GNU sparse member claiming 2 GiB",
         ("gnusparse", "box/sparse", 2 << 30), "per-member cap"),
        ("member-2g-pax-sparse", "a PAX (GNU 0.1) sparse member claiming 2 GiB",
         ("paxsparse", "box/sparse", 2 << 30), "per-member cap"),
    ]:
        name = member[1]
        cases.append(tar_case(id, what, [member], path=f":{name}", problem=problem))
    cases.append(tar_case("symlink-loop", "sys/devices/system/cpu is a symlink to itself "
                          "inside the archive", [("sym", "box/sys/devices/system/cpu", "cpu")],
                          path=f"box/{CPU}", problem="missing: not a sysfs dump"))
    # -- lscpu ------------------------------------------------------------------------------
    L = file_case
    cases.append(L("lscpu-dup-cpu", "CPU 1 listed twice", "lscpu-dup-cpu.lscpu",
                   problem="line 4: CPU 1 listed twice"))
    cases.append(L("lscpu-bad-field", "a Core field 'a'", "lscpu-bad-field.lscpu",
                   problem="line 3: core field 'a' is not a non-negative integer"))
    cases.append(L("lscpu-unicode-digit", "a Node field '²'", "lscpu-unicode-digit.lscpu",
                   problem="line 2: node field '²' is not a non-negative integer"))
    cases.append(L("lscpu-no-header", "CPU rows without the '# CPU,...' header",
                   "lscpu-no-header.lscpu", problem="no column header"))
    cases.append(L("lscpu-field-count", "a row with 3 fields under a 4-column header",
                   "lscpu-field-count.lscpu", problem="line 3: 3 fields, but the header names 4"))
    cases.append(L("lscpu-core-two-nodes", "two threads of one core in different nodes",
                   "lscpu-core-two-nodes.lscpu",
                   problem="CPU 1 is in node 1 but another thread of its core is in node 0"))
    cases.append(L("lscpu-huge-cpu", "CPU 99999999999", "lscpu-huge-cpu.lscpu",
                   problem="line 3: CPU 99999999999 is beyond the 65536 CPUs"))
    cases.append(L("lscpu-numactl-asymmetric", "numactl distances 20 one way, 30 the other",
                   "lscpu-asym.lscpu", siblings=("lscpu-asym.numactl",), path="lscpu-asym.numactl",
                   problem="distance matrix is not symmetric"))
    cases.append(L("lscpu-numactl-zero", "a numactl distance of 0", "lscpu-zero.lscpu",
                   siblings=("lscpu-zero.numactl",), path="lscpu-zero.numactl",
                   problem="distance node0->node1 is 0"))
    cases.append(L("lscpu-numactl-not-square", "a numactl distance row with 3 values for 2 "
                   "nodes", "lscpu-notsquare.lscpu", siblings=("lscpu-notsquare.numactl",),
                   path="lscpu-notsquare.numactl", problem="distance table is not square"))
    cases.append(L("lscpu-numactl-disagree", "numactl puts CPU 1 in node 1, lscpu in node 0",
                   "lscpu-disagree.lscpu", siblings=("lscpu-disagree.numactl",),
                   path="lscpu-disagree.numactl",
                   problem="numactl lists CPUs that lscpu puts elsewhere (first: CPU 1)"))
    cases.append(L("lscpu-numactl-huge-cpu", "numactl lists CPU 99999999999",
                   "lscpu-numactl-huge.lscpu", siblings=("lscpu-numactl-huge.numactl",),
                   path="lscpu-numactl-huge.numactl", problem="beyond the 65536 CPUs"))
    cases.append(L("lscpu-empty", "an empty .lscpu file", "empty.lscpu", content=b"",
                   problem="no column header"))
    cases.append(L("lscpu-non-utf8", "Latin-1 bytes in an lscpu file", "latin1.csv",
                   content=b"# CPU,Core,Socket,Node\n0,0,0,0\xe9\n", problem="not UTF-8 text"))
    # -- hwloc XML --------------------------------------------------------------------------
    X = file_case
    cases.append(X("xml-dup-pu", "two PUs with os_index 1", "xml-dup-pu.xml",
                   problem="two PUs with os_index 1"))
    cases.append(X("xml-dup-numa", "two NUMANodes with os_index 0", "xml-dup-numa.xml",
                   problem="two NUMANode objects with os_index 0"))
    cases.append(X("xml-not-hwloc", "an SVG picture", "xml-not-hwloc.xml",
                   problem="not an hwloc topology (root element is "))
    cases.append(X("xml-malformed", "hwloc XML cut off mid-element", "xml-malformed.xml",
                   problem="not well-formed XML at line"))
    cases.append(X("xml-entity-bomb", "a billion-laughs entity bomb", "xml-entity-bomb.xml",
                   problem="refusing XML with a DOCTYPE internal subset"))
    cases.append(X("xml-asymmetric", "distances2 20 one way, 30 the other", "xml-asym.xml",
                   problem="distance matrix is not symmetric: node0->node1 is 20 but "
                           "node1->node0 is 30"))
    cases.append(X("xml-zero-distance", "a zero off-diagonal distance", "xml-zero.xml",
                   problem="distance node0->node1 is 0"))
    cases.append(X("xml-not-square", "distances2 with 3 values for nbobjs=2",
                   "xml-notsquare.xml", problem="<distances2> holds 3 values, not 2x2"))
    cases.append(X("xml-bad-cpuset", "a cpuset 'banana'", "xml-bad-cpuset.xml",
                   problem="bad cpuset on a Core object"))
    cases.append(X("xml-no-pu", "a topology without PUs", "xml-no-pu.xml",
                   problem="no PU objects"))
    cases.append(X("xml-huge-pu", "a PU with os_index 99999999999", "xml-huge-pu.xml",
                   problem="os_index 99999999999 is beyond the 65536 CPUs"))
    cases.append(X("xml-huge-cpuset", "a cpuset of 100000 chunks", "huge-cpuset.xml",
                   content=XML_HEAD + b'<topology><object type="Machine" cpuset="0x1'
                   + b",0x0" * 100_000 + b'"><object type="PU" os_index="0"/></object>'
                   b"</topology>", problem="beyond the 65536 CPUs"))
    cases.append(X("xml-v1-deep-distance", "v1 distances with relative_depth 10^12",
                   "xml-v1-deep.xml", problem="relative_depth 1000000000000 is deeper than"))
    cases.append(X("xml-v1-inf-latency", "v1 distances with latency_base 'inf'",
                   "xml-v1-inf.xml", problem="latency that is not a finite number"))
    cases.append(X("xml-unknown-encoding", "an XML declaration naming an unknown encoding "
                   "(found by fuzzing: LookupError)", "encoding.xml",
                   content=b'<?xml version="1.0" encoding="NUMANode"?>\n<topology/>\n',
                   problem="cannot decode the XML: unknown encoding: NUMANode"))
    cases.append(X("file-name-newline", "a file whose name holds a newline and an escape "
                   "sequence (found by fuzzing: a two-line message)", "bad\n\x1b[2Jname.xml",
                   content=b"", problem="not well-formed XML"))
    cases.append(X("xml-empty", "an empty .xml file", "empty.xml", content=b"",
                   problem="not well-formed XML"))
    cases.append(X("xml-non-utf8", "a Latin-1 byte in a file that says UTF-8", "latin1.xml",
                   content=XML_HEAD + b'<topology><object type="Machine" name="caf\xe9"/>'
                   b"</topology>", problem="not well-formed XML"))
    # -- .toml descriptions ---------------------------------------------------------------
    T = file_case
    for id, name, problem in [
        ("toml-asymmetric", "toml-asym.toml", "distance matrix is not symmetric"),
        ("toml-zero-distance", "toml-zero.toml", "distance node0->node1 is 0; a remote "
                                                 "distance must be more than 10"),
        ("toml-not-square", "toml-notsquare.toml", "distance matrix is not 2x2"),
        ("toml-bad-synthetic", "toml-bad-synthetic.toml", "unknown level 'frob'"),
        ("toml-unknown-key", "toml-unknown-key.toml", "unknown key 'distance'"),
        ("toml-wrong-type", "toml-wrong-type.toml", "key 'synthetic' has the wrong type (int)"),
        ("toml-not-toml", "toml-not-toml.toml", "not valid TOML"),
        ("toml-no-synthetic", "toml-no-synthetic.toml", "missing key 'synthetic'"),
        ("toml-huge-possible", "toml-huge-possible.toml", "beyond the 65536 CPUs"),
    ]:
        cases.append(T(id, name.removesuffix(".toml").replace("toml-", "description: "), name,
                       problem=problem))
    cases.append(T("toml-infinite-memory", "memory_gib = 1e999 (found by fuzzing: "
                   "OverflowError)", "inf.toml", content=b'synthetic = "numa:2 core:2"\n'
                   b"memory_gib = 1e999\n", problem="node memory inf is not a finite"))
    cases.append(T("toml-empty", "an empty .toml file", "empty.toml", content=b"",
                   problem="missing key 'synthetic'"))
    cases.append(T("toml-non-utf8", "a Latin-1 byte in a .toml file", "latin1.toml",
                   content=b'name = "caf\xe9"\nsynthetic = "core:2"\n', problem="not UTF-8 text"))
    cases.append(file_case("unknown-format", "a .json file", "machine.json", content=b"{}",
                           problem="unknown topology format"))
    # -- synthetic strings --------------------------------------------------------------
    Y = synthetic_case
    cases.append(Y("synthetic-zero", "a count of 0", "numa:0 core:2",
                   problem="count of level 'numa:0' must be at least 1"))
    cases.append(Y("synthetic-order", "core above package", "core:2 pack:2",
                   problem="levels out of order"))
    cases.append(Y("synthetic-pu-not-last", "pu above core", "pu:2 core:2",
                   problem="pu must be the last level"))
    cases.append(Y("synthetic-twice", "core twice", "core:2 core:2",
                   problem="level 'core' appears twice"))
    cases.append(Y("synthetic-unknown", "an unknown level", "frob:2 core:2",
                   problem="unknown level 'frob'"))
    cases.append(Y("synthetic-attributes", "hwloc's attribute syntax", "numa:2(memory=1GB) core:2",
                   problem="no such file or directory, and not a synthetic description"))
    cases.append(Y("synthetic-too-big", "10^10 PUs", "pack:100000 core:100000",
                   problem="10000000000 PUs is more than this model handles"))
    cases.append(Y("synthetic-newline", "a newline inside the string (found by fuzzing: "
                   "the message took two lines)", "numa:2\ncore:0",
                   problem="count of level 'core:0' must be at least 1"))
    cases.append(Y("synthetic-asymmetric", "distances 20 one way, 30 the other (API)",
                   "numa:2 core:1", options={"distances": [[10, 20], [30, 10]]},
                   problem="distance matrix is not symmetric"))
    cases.append(Y("synthetic-huge-possible", "possible_extra=10^12 (API)", "core:2",
                   options={"possible_extra": 10 ** 12}, problem="beyond the 65536 CPUs"))
    return cases


CASES = build_cases()


def readme_table() -> str:
    """The Markdown table of the corpus (``tests/data/bad/README.md`` holds it)."""
    rows = ["| case | kind | input | expected |", "|---|---|---|---|"]
    for c in CASES:
        if c.problem is not None:
            exp = f"error: `{c.path}`: ...{c.problem}..." if c.path else f"error: ...{c.problem}..."
        else:
            exp = f"accepted, note: ...{c.note}..."
        if c.options:
            exp += f" (options {c.options})"
        rows.append(one_line(f"| {c.id} | {c.kind} | {c.what} | {exp.replace('|', '/')} |"))
    return "\n".join(rows)


if __name__ == "__main__":
    print(readme_table())
