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
import json
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


# -- the lab's files and arguments ---------------------------------------------------
#
# Every lab case is one input to ``numalab lab show`` (a lab dump: the small
# good dump above plus the lab's own files, with one change), to ``numalab
# lab run`` / ``build-kernel`` / ``kernels`` (one bad argument or cache file),
# or to numalab.lab.arm64.runs() (data/lab/arm64's runs.toml and consoles,
# read by the book, not by a command). ``error`` is the *exact* line: the
# LabError's text, which the CLI prints after ``numalab lab: error: ``;
# ``{in}`` stands for the folder the input is made in.

LAB_TOP = "lab"
LAB_PCI = "0000:11:01.0"
LAB_DEV = f"sys/devices/pci0000:10/{LAB_PCI}"
LAB_RELEASE = "7.2.13+deb14-amd64"
DUMP = "{in}/lab.tar.bz2:lab"             # how a lab case's errors name the dump's members


def lab_manifest(ncpus: int = 4, queues: int = 2, io: bool = True) -> dict:
    """A manifest as ``numalab lab run`` writes it, for a guest of ``ncpus``
    CPUs (SMT pairs) on 2 nodes and one NVMe of ``queues`` I/O queues on
    node 0 (``io``: the run read with ``--io``)."""
    half = ncpus // 2
    return {
        "format": "numalab-lab/1", "numalab_version": "0.1.0",
        "created_utc": "2026-11-22T22:38:50Z",
        "numalab_command": f"numalab lab run --kernel 7.2 --topology 'numa:2 core:{half // 2} "
                           f"pu:2' --nvme 1@0:{queues} --io -o lab.tar.bz2",
        "kernel": {"release": LAB_RELEASE, "upstream": "7.2.13",
                   "packages": [{"name": f"linux-binary-{LAB_RELEASE}", "version": "7.2.13-1",
                                 "sha256": "ab" * 32, "size": 1000, "file": "linux.deb"}],
                   "modules_loaded": ["nvme-core", "nvme"]},
        "qemu": {"version": "QEMU emulator version 7.2.22", "accel": "tcg",
                 "command": ["/usr/bin/qemu-system-x86_64", "-smp", str(ncpus)],
                 "append": "console=ttyS0 rdinit=/init", "boot": "pvh"},
        "topology": {"description": f"numa:2 core:{half // 2} pu:2", "sockets": 1, "dies": 1,
                     "cores_per_die": half, "threads_per_core": 2, "cpus": ncpus,
                     "nodes": [{"node": 0, "cpus": f"0-{half - 1}", "memory_mib": 384},
                               {"node": 1, "cpus": f"{half}-{ncpus - 1}", "memory_mib": 384}],
                     "distances": [[10, 20], [20, 10]]},
        "devices": [{"id": "nvme0", "node": 0, "io_queues": queues, "pxb_bus_nr": 16,
                     "slot": 1, "pci_address": LAB_PCI}],
        "nvme_options": [f"1@0:{queues}"],
        "trace": ["nvme_probe"],
        "io": ({"reads_per_cpu_per_namespace": 16, "block_bytes": 4096, "method": "dd"}
               if io else None),
        "attempts": [{"accel": "tcg", "seconds": 20.5, "result": "ok", "message": ""}],
        "seconds": {"fetch": 0.0, "boot_and_collect": 20.5},
        "busybox": "/usr/bin/busybox",
    }


IRQ_HEADER = "           CPU0       CPU1       CPU2       CPU3\n"


def _irq_rows(q1_count: int = 0) -> str:
    rows = [f"  {24 + q}: {q1_count if q == 1 else 0:>10} {0:>10} {0:>10} {0:>10}  "
            f"PCI-MSIX-{LAB_PCI} {q}-edge      nvme0q{q}\n" for q in range(3)]
    return ("".join(rows) + "LOC:        100        200        300        400   Local timer "
            "interrupts\nERR:          0\n")


def good_lab_files() -> tuple[dict[str, bytes], dict[str, str]]:
    """The good sysfs dump (4 CPUs, 2 nodes) as a lab dump: one NVMe with 2
    I/O queues on node 0, its vectors, blk-mq map, a probe trace and the
    ``--io`` snapshots."""
    files, links = good_files(), good_links()
    files["proc/sys/kernel/osrelease"] = f"{LAB_RELEASE}\n".encode()
    files["proc/interrupts"] = (IRQ_HEADER + _irq_rows(7)).encode()
    files[f"{LAB_DEV}/class"] = b"0x010802\n"
    files[f"{LAB_DEV}/numa_node"] = b"0\n"
    for q, (aff, eff) in enumerate([("0-3", "3"), ("0-1", "1"), ("2-3", "3")]):
        files[f"{LAB_DEV}/msi_irqs/{24 + q}"] = b"msix\n"
        files[f"proc/irq/{24 + q}/smp_affinity_list"] = f"{aff}\n".encode()
        files[f"proc/irq/{24 + q}/effective_affinity_list"] = f"{eff}\n".encode()
    files[f"{LAB_DEV}/nvme/nvme0/nvme0n1/mq/0/cpu_list"] = b"0, 1\n"
    files[f"{LAB_DEV}/nvme/nvme0/nvme0n1/mq/1/cpu_list"] = b"2, 3\n"
    links[f"sys/bus/pci/devices/{LAB_PCI}"] = f"../../../devices/pci0000:10/{LAB_PCI}"
    links["sys/block/nvme0n1"] = f"../devices/pci0000:10/{LAB_PCI}/nvme/nvme0/nvme0n1"
    lab = "numalab/lab"
    files[f"{lab}/manifest.json"] = json.dumps(lab_manifest(), indent=1).encode()
    files[f"{lab}/uname-r"] = f"{LAB_RELEASE}\n".encode()
    files[f"{lab}/trace"] = (b"# tracer: function\n#\n"
                             b"     kworker/0:1-40      [000] .....     3.141: nvme_probe "
                             b"<-local_pci_probe\n")
    files[f"{lab}/interrupts.before"] = (IRQ_HEADER + _irq_rows(0)).encode()
    files[f"{lab}/interrupts.after"] = (IRQ_HEADER + _irq_rows(7)).encode()
    return files, links


def _edit(obj: dict, key: str, value: Any = ...) -> None:
    """Set (or, with no value, delete) ``key`` ("topology.nodes.1.cpus") in ``obj``."""
    *parents, last = key.split(".")
    for k in parents:
        obj = obj[int(k)] if isinstance(obj, list) else obj[k]
    if isinstance(obj, list):
        last = int(last)
    if value is ...:
        del obj[last]
    else:
        obj[last] = value


@dataclass(frozen=True)
class LabCase:
    """One bad lab input. ``make(folder)`` creates it under ``folder`` and
    returns the input's path (or the folder); ``argv(path)`` is the
    ``numalab`` command that reads it (None: no command reads it), ``api(path)``
    the function that reads it (None: only the command); both must fail
    with exactly ``error`` (``{in}`` replaced by ``folder``)."""

    id: str
    kind: str
    what: str
    make: Callable[[Path], str] = field(compare=False, repr=False)
    error: str = ""
    argv: Callable[[str], list[str]] | None = field(default=None, compare=False, repr=False)
    api: Callable[[str], Any] | None = field(default=None, compare=False, repr=False)


def _read_lab_dump(path: str):
    from numalab.lab.dump import read_lab_dump
    return read_lab_dump(path)


def dump_case(id: str, what: str, error: str, *, manifest: dict | None = None,
              raw_manifest: bytes | None = None, set: dict | None = None,
              drop: tuple = (), kind: str = "dump") -> LabCase:
    """The good lab dump with one change: ``manifest`` edits (``{key:
    value}``, ``...`` deletes), a whole ``raw_manifest``, files to ``set``
    (relative to the dump's top folder) or to ``drop``."""
    def make(folder: Path) -> str:
        files, links = good_lab_files()
        if manifest is not None:
            m = lab_manifest()
            for key, value in manifest.items():
                _edit(m, key, value)
            files["numalab/lab/manifest.json"] = json.dumps(m, indent=1).encode()
        if raw_manifest is not None:
            files["numalab/lab/manifest.json"] = raw_manifest
        for k, v in (set or {}).items():
            files[k] = v.encode() if isinstance(v, str) else v
        for k in drop:
            files.pop(k)
        p = folder / "lab.tar.bz2"
        p.write_bytes(_compress(_tar_of_tree(files, links, top=LAB_TOP), "tar.bz2"))
        return str(p)
    return LabCase(id, kind, what, make, error.replace("{dump}", DUMP),
                   argv=lambda p: ["lab", "show", p], api=_read_lab_dump)


def arg_case(id: str, what: str, argv: list[str], error: str, *, kind: str = "lab run",
             prepare: Callable[[Path], None] | None = None) -> LabCase:
    """A ``numalab lab ...`` command line (``{in}`` is the input folder)."""
    def make(folder: Path) -> str:
        if prepare:
            prepare(folder)
        return str(folder)
    return LabCase(id, kind, what, make, error,
                   argv=lambda f: [a.replace("{in}", f) for a in argv])


RUN = ["lab", "run", "--kernel", "7.2", "--topology", "numa:2 core:2"]
BUILD = ["lab", "build-kernel", "--source", "7.2"]

ARM64_RUN_TOML = """\
[[run]]
log = "boot.log"
kernel = "7.2"
nodes = ["0-4"]
clusters = ["0-3", "4"]
max_ioqpairs = 8
command = "tools/lab_arm64/run.sh Image-7.2 virt.dtb boot.log"
"""
ARM64_CONSOLE = """\
[    1.0] nvme nvme0: 5/0/0 default/read/poll queues
=== LAB BEGIN ===
cpu0 cluster_cpus_list: 0-3
cpu4 cluster_cpus_list: 4
 30: 0 0 0 0 0 GICv3 nvme0q0
 31: 0 0 0 0 0 GICv3 nvme0q1
irq 30 smp_affinity_list: 0-4
irq 31 smp_affinity_list: 0
"""


def _arm64_runs(path: str):
    from numalab.lab.arm64 import runs
    return runs(path)


def arm64_case(id: str, what: str, error: str, *, toml: str = ARM64_RUN_TOML,
               console: str = ARM64_CONSOLE) -> LabCase:
    """``data/lab/arm64``'s layout (runs.toml, logs/boot.log) with one change."""
    def make(folder: Path) -> str:
        d = folder / "arm64"
        (d / "logs").mkdir(parents=True)
        (d / "runs.toml").write_text(toml)
        (d / "logs" / "boot.log").write_text(console)
        return str(d)
    return LabCase(id, "arm64", what, make, error.replace("{runs}", "{in}/arm64/runs.toml")
                   .replace("{log}", "{in}/arm64/logs/boot.log"), api=_arm64_runs)


def _file(rel: str, data: bytes) -> Callable[[Path], None]:
    def prepare(folder: Path) -> None:
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return prepare


def build_lab_cases() -> list[LabCase]:
    """Every lab case, in a stable order."""
    cases: list[LabCase] = []
    M, D = "{dump}/numalab/lab/manifest.json", dump_case
    # -- the manifest: wrong types, missing keys, huge numbers, not JSON ------------------
    cases += [
        D("manifest-kernel-int", "the whole manifest is {\"kernel\": 5} (issue 29's example: "
          "was an AttributeError)", f"{M}: kernel: expected an object, not 5",
          raw_manifest=b'{"kernel": 5}'),
        D("manifest-list", "the manifest is a JSON list", f"{M}: expected an object, not []",
          raw_manifest=b"[]"),
        D("manifest-not-json", "the manifest stops after '{'",
          f"{M}: not valid JSON (line 1 column 2: Expecting property name enclosed in double "
          "quotes)", raw_manifest=b"{"),
        D("manifest-empty", "an empty manifest", f"{M}: not valid JSON (line 1 column 1: "
          "Expecting value)", raw_manifest=b""),
        D("manifest-non-utf8", "a Latin-1 byte in the manifest", f"{M}: not UTF-8 text (byte 11)",
          raw_manifest=b'{"format":"\xe9"}'),
        D("manifest-nan", "NaN for a number (Python's json reads it; JSON has no NaN)",
          f"{M}: not valid JSON: NaN is not JSON",
          raw_manifest=json.dumps({**lab_manifest(), "seconds": {"fetch": float("nan"),
                                                                 "boot_and_collect": 1}}).encode()),
        D("manifest-duplicate-key", "the key kernel twice (which one is meant?)",
          f"{M}: not valid JSON: duplicate key \"kernel\"",
          raw_manifest=b'{"kernel": {}, "kernel": 5}'),
        D("manifest-deep", "5000 nested lists (found by fuzzing: a RecursionError)",
          f"{M}: not valid JSON: nested more than 32 levels deep",
          raw_manifest=b"[" * 5000 + b"]" * 5000),
        D("manifest-long-number", "an integer of 5000 digits (Python refuses to convert it)",
          f"{M}: not valid JSON: a number too long to read",
          raw_manifest=b'{"kernel": ' + b"7" * 5000 + b"}"),
        D("manifest-no-format", "the format key is missing",
          f"{M}: format: missing (expected \"numalab-lab/1\")", manifest={"format": ...}),
        D("manifest-format-2", "a format numalab does not know",
          f"{M}: format: expected \"numalab-lab/1\", not \"numalab-lab/2\"",
          manifest={"format": "numalab-lab/2"}),
        D("manifest-no-release", "kernel.release is missing", f"{M}: kernel.release: missing "
          "(expected a kernel release such as 7.2.13+deb14-amd64)",
          manifest={"kernel.release": ...}),
        D("manifest-release-number", "kernel.release is the number 7.2",
          f"{M}: kernel.release: expected a kernel release such as 7.2.13+deb14-amd64, not 7.2",
          manifest={"kernel.release": 7.2}),
        D("manifest-release-path", "kernel.release holds a path",
          f"{M}: kernel.release: expected a kernel release such as 7.2.13+deb14-amd64, not "
          "\"../../etc\"", manifest={"kernel.release": "../../etc"}),
        D("manifest-no-packages", "kernel.packages is empty",
          f"{M}: kernel.packages: expected 1 to 16 entries, not 0",
          manifest={"kernel.packages": []}),
        D("manifest-short-sha", "a package's sha256 has 8 digits",
          f"{M}: kernel.packages[0].sha256: expected a sha256 (64 hex digits), not \"abababab\"",
          manifest={"kernel.packages.0.sha256": "ab" * 4}),
        D("manifest-cpus-huge", "topology.cpus is 10^30",
          f"{M}: topology.cpus: expected an integer in [1, 128], not "
          "1000000000000000000000000000000", manifest={"topology.cpus": 10 ** 30}),
        D("manifest-cpus-bool", "topology.cpus is true",
          f"{M}: topology.cpus: expected an integer in [1, 128], not true",
          manifest={"topology.cpus": True}),
        D("manifest-cpus-product", "8 CPUs on 1 socket x 1 die x 2 cores x 2 threads",
          f"{M}: topology.cpus: 8, but sockets x dies x cores x threads is 4",
          manifest={"topology.cpus": 8}),
        D("manifest-node-cpulist", "a node's cpus is '2-'",
          f"{M}: topology.nodes[1].cpus: expected a CPU list of CPUs 0-127, not \"2-\"",
          manifest={"topology.nodes.1.cpus": "2-"}),
        D("manifest-node-overlap", "CPU 1 in both nodes",
          f"{M}: topology.nodes[1].cpus: CPUs 1 are in an earlier node too",
          manifest={"topology.nodes.1.cpus": "1-3"}),
        D("manifest-node-gap", "CPU 3 in no node",
          f"{M}: topology.nodes: CPUs 3 are in no node", manifest={"topology.nodes.1.cpus": "2"}),
        D("manifest-node-order", "nodes listed as 1, 0",
          f"{M}: topology.nodes[0].node: expected 0 (nodes in order from 0), not 1",
          manifest={"topology.nodes.0.node": 1, "topology.nodes.1.node": 0}),
        D("manifest-distances-asymmetric", "node0->node1 20, node1->node0 30",
          f"{M}: topology.distances: node0->node1 is 20 but node1->node0 is 30: not symmetric",
          manifest={"topology.distances": [[10, 20], [30, 10]]}),
        D("manifest-distances-diagonal", "a local distance of 0",
          f"{M}: topology.distances: node0->node0 is 0, not 10",
          manifest={"topology.distances": [[0, 20], [20, 10]]}),
        D("manifest-queues-huge", "an NVMe with 100000 I/O queues",
          f"{M}: devices[0].io_queues: expected an integer in [1, 128], not 100000",
          manifest={"devices.0.io_queues": 100000}),
        D("manifest-queues-float", "io_queues is 2.0",
          f"{M}: devices[0].io_queues: expected an integer in [1, 128], not 2.0",
          manifest={"devices.0.io_queues": 2.0}),
        D("manifest-device-node", "an NVMe on node 5 of a 2-node machine",
          f"{M}: devices[0].node: 5, but the machine has 2 node(s)",
          manifest={"devices.0.node": 5}),
        D("manifest-nvme-options", "--nvme options asking for 2 controllers, one device",
          f"{M}: nvme_options: ask for 2 controller(s), but devices lists 1",
          manifest={"nvme_options": ["2@0:2"]}),
        D("manifest-seconds-negative", "a negative boot time",
          f"{M}: seconds.boot_and_collect: expected a finite number in [0, 1e+07], not -1",
          manifest={"seconds.boot_and_collect": -1}),
        D("manifest-patch-path", "kernel.build.patch climbs out of the patches folder",
          f"{M}: kernel.build.patch: expected null or a patch file name (NAME.patch), not "
          "\"../../../etc/passwd\"",
          manifest={"kernel.build": {"recipe": "numalab-lab-build/1", "name": "7.2",
                                     "source_package": "linux-source-7.2",
                                     "source_version": "7.2.13-1", "fragment_sha256": "0" * 64,
                                     "patch": "../../../etc/passwd", "patch_sha256": None}}),
        D("manifest-command-newline", "numalab_command holds a newline",
          f"{M}: numalab_command: expected the command line 'numalab lab run ...', not "
          "\"numalab lab run x\\nrm -rf /\"",
          manifest={"numalab_command": "numalab lab run x\nrm -rf /"}),
        D("manifest-last-attempt-failed", "the last attempt oopsed",
          f"{M}: attempts[0].result: expected \"ok\" (a dump comes from a boot that worked), "
          "not \"oops\"", manifest={"attempts.0.result": "oops"}),
        D("manifest-io-null-no-snapshot", "io says --io, the snapshots are gone",
          "{dump}/numalab/lab/interrupts.before: missing, while the manifest's io says the run "
          "read with --io", drop=("numalab/lab/interrupts.before", "numalab/lab/interrupts.after")),
    ]
    # -- the kernel's text files: ftrace, /proc/interrupts, affinities ---------------------
    T = "numalab/lab/trace"
    cases += [
        D("trace-garbage", "a line of the probe trace that is not ftrace's",
          "{dump}/numalab/lab/trace: line 3: expected a function-tracer line (TASK-PID [CPU] "
          "FLAGS TIMESTAMP: FUNCTION <-CALLER), not 'hello world'",
          set={T: "# tracer: function\n#\nhello world\n"}, kind="trace"),
        D("trace-cpu-out-of-range", "a probe on CPU 7 of a 4-CPU guest",
          "{dump}/numalab/lab/trace: line 1: CPU 7, but the manifest's machine has 4 CPUs",
          set={T: " kworker/7:1-40 [007] ..... 3.1: nvme_probe <-local_pci_probe\n"},
          kind="trace"),
        D("trace-huge-pid", "a PID of 99999999999",
          "{dump}/numalab/lab/trace: line 1: PID 99999999999 is beyond the kernel's "
          "PID_MAX_LIMIT (4194304)",
          set={T: " insmod-99999999999 [000] ..... 3.1: nvme_probe <-local_pci_probe\n"},
          kind="trace"),
        D("trace-infinite-time", "a timestamp of 400 digits (float() makes it infinite)",
          "{dump}/numalab/lab/trace: line 1: timestamp '99999999999999999999' is not a finite "
          "number", set={T: " insmod-4 [000] ..... " + "9" * 400 + ".0: nvme_probe <-x\n"},
          kind="trace"),
        D("trace-boot-garbage", "trace.boot cut in the middle of a line",
          "{dump}/numalab/lab/trace.boot: line 2: expected a function-tracer line (TASK-PID "
          "[CPU] FLAGS TIMESTAMP: FUNCTION <-CALLER), not 'swapper/0-1 [000] ..... 0.5: irq_c'",
          set={"numalab/lab/trace.boot": "# tracer: function\n swapper/0-1 [000] ..... 0.5: "
                                         "irq_c\n"}, kind="trace"),
        D("interrupts-short-row", "a /proc/interrupts row with 3 counts under 4 CPU columns",
          "{dump}/proc/interrupts: line 3: 3 counts for interrupt 25, expected 4 (one per CPU "
          "column)", set={"proc/interrupts": IRQ_HEADER + "  24: 0 0 0 0  x nvme0q0\n"
                          "  25: 0 0 0  x nvme0q1\n"}, kind="interrupts"),
        D("interrupts-cpu-columns", "/proc/interrupts with 8 CPU columns for a 4-CPU guest",
          "{dump}/proc/interrupts: line 1: 8 CPU columns, but the manifest's machine has 4 CPUs",
          set={"proc/interrupts": " ".join(f"CPU{c}" for c in range(8)) + "\n"},
          kind="interrupts"),
        D("interrupts-header-garbage", "/proc/interrupts starts with a row, no header",
          "{dump}/proc/interrupts: line 1: expected CPU columns in increasing order (CPU0 CPU1 "
          "...), not '24:'", set={"proc/interrupts": "  24: 0 0 0 0  x nvme0q0\n"},
          kind="interrupts"),
        D("interrupts-twice", "interrupt 24 listed twice",
          "{dump}/proc/interrupts: line 3: interrupt 24 listed twice",
          set={"proc/interrupts": IRQ_HEADER + "  24: 0 0 0 0  x\n  24: 0 0 0 0  x\n"},
          kind="interrupts"),
        D("interrupts-snapshot-columns", "interrupts.after names CPU4 where before names CPU3",
          "{dump}/numalab/lab/interrupts.after: line 1: CPU columns differ from those of "
          "{in}/lab.tar.bz2:lab/numalab/lab/interrupts.before: the two snapshots must have the "
          "same CPUs", set={"numalab/lab/interrupts.after": IRQ_HEADER.replace("CPU3", "CPU4")
                            + _irq_rows(7)}, kind="interrupts"),
        D("interrupts-went-down", "a count lower after the reads than before",
          "{dump}/numalab/lab/interrupts.after: interrupt 25: went down on CPU column 0 (7 "
          "before, 0 after); counters only grow",
          set={"numalab/lab/interrupts.before": IRQ_HEADER + _irq_rows(7),
               "numalab/lab/interrupts.after": IRQ_HEADER + _irq_rows(0)}, kind="interrupts"),
        D("interrupts-one-snapshot", "interrupts.after without interrupts.before",
          "{dump}/numalab/lab/interrupts.before: missing, while the other --io snapshot is "
          "there", drop=("numalab/lab/interrupts.before",), kind="interrupts"),
        D("affinity-garbage", "an NVMe vector's smp_affinity_list holds 'zz'",
          "{dump}/proc/irq/25/smp_affinity_list: expected a CPU list, not 'zz'",
          set={"proc/irq/25/smp_affinity_list": "zz\n"}, kind="sysfs"),
        D("affinity-out-of-range", "an effective affinity on CPU 9 of 4",
          "{dump}/proc/irq/26/effective_affinity_list: names CPU 9, but the manifest's "
          "machine has 4 CPUs", set={"proc/irq/26/effective_affinity_list": "9\n"},
          kind="sysfs"),
        D("affinity-missing", "an NVMe vector without smp_affinity_list",
          f"{{dump}}/proc/irq/24/smp_affinity_list: missing: a lab dump has it for every NVMe "
          f"vector ({LAB_PCI})", drop=("proc/irq/24/smp_affinity_list",), kind="sysfs"),
        D("numa-node-garbage", "the controller's numa_node holds 'zero'",
          f"{{dump}}/sys/bus/pci/devices/{LAB_PCI}/numa_node: expected a node from -1 to 1, "
          "not 'zero'", set={f"{LAB_DEV}/numa_node": "zero\n"}, kind="sysfs"),
        D("blk-mq-garbage", "a blk-mq cpu_list holds '0-'",
          "{dump}/sys/block/nvme0n1/mq/1/cpu_list: expected a CPU list, not '0-'",
          set={f"{LAB_DEV}/nvme/nvme0/nvme0n1/mq/1/cpu_list": "0-\n"},
          kind="sysfs"),
        D("release-mismatch", "the guest's osrelease is not the manifest's kernel",
          "{dump}/proc/sys/kernel/osrelease: '6.1.0-56-amd64', but the manifest's "
          "kernel.release is '7.2.13+deb14-amd64'",
          set={"proc/sys/kernel/osrelease": "6.1.0-56-amd64\n"}, kind="sysfs"),
    ]
    # -- numalab lab run / build-kernel arguments ------------------------------------------
    A = arg_case
    out = ["-o", "{in}/out.tar.bz2"]
    cases += [
        A("run-timeout-nan", "--timeout nan", RUN + ["--timeout", "nan"] + out,
          "--timeout nan: expected a finite number of seconds in (0, 86400]"),
        A("run-timeout-inf", "--timeout inf", RUN + ["--timeout", "inf"] + out,
          "--timeout inf: expected a finite number of seconds in (0, 86400]"),
        A("run-timeout-zero", "--timeout 0", RUN + ["--timeout", "0"] + out,
          "--timeout 0.0: expected a finite number of seconds in (0, 86400]"),
        A("run-timeout-negative", "--timeout=-5", RUN + ["--timeout=-5"] + out,
          "--timeout -5.0: expected a finite number of seconds in (0, 86400]"),
        A("run-io-count-zero", "--io-count 0", RUN + ["--io", "--io-count", "0"] + out,
          "--io-count 0: expected an integer in [1, 65536]"),
        A("run-kernel-garbage", "a kernel name with a shell command in it",
          ["lab", "run", "--kernel", "7.2;reboot", "--topology", "numa:2 core:2"] + out,
          "--kernel '7.2;reboot': expected a version (7.2), a release (7.2.13+deb14-amd64), a "
          "package name or built:NAME"),
        A("run-kernel-unknown-build", "built:nothing in an empty cache",
          ["lab", "run", "--kernel", "built:nothing", "--topology", "numa:2 core:2"] + out,
          "--kernel 'built:nothing': no built kernel named 'nothing'; built: none (numalab lab "
          "build-kernel)"),
        A("run-trace-name", "--trace with a ';' in a function name",
          RUN + ["--trace", "nvme_probe;reboot"] + out,
          "--trace 'nvme_probe;reboot': a kernel function name is letters, digits, _ and . "
          "(1-128 characters)"),
        A("run-newline", "a newline inside --topology (the manifest records the command on "
          "one line)", ["lab", "run", "--kernel", "7.2", "--topology", "numa:2\ncore:2"] + out,
          "--topology 'numa:2\\ncore:2': a control character in an argument (the manifest "
          "records the command on one line)"),
        A("run-cpus-too-many", "200 vCPUs", ["lab", "run", "--kernel", "7.2", "--topology",
                                             "core:200"] + out,
          "200 vCPUs: guests above 128 vCPUs are refused (beyond 255 APIC ids a guest needs "
          "x2APIC, which this QEMU does not emulate under TCG); reproduce the shape scaled down"),
        A("run-nodes-too-many", "129 nodes (128 of them memory only)",
          ["lab", "run", "--kernel", "7.2", "--topology", "core:4", "--node-cpus",
           "0-3" + ";" * 128, "--node-memory", ",".join(["256M"] + ["4M"] * 128)] + out,
          "129 nodes: QEMU builds at most 128"),
        A("run-memory-huge", "99999999 MiB on a node", RUN + ["--node-memory",
                                                             "99999999M,256M"] + out,
          "--node-memory: 100000255 MiB of guest memory in all; the lab allows at most 65536 "
          "(the guest's RAM comes from this host)"),
        A("run-nvme-count", "40 NVMe in one option", RUN + ["--nvme", "40@0:4"] + out,
          "--nvme '40@0:4': 1 to 31 devices per option"),
        A("run-nvme-queues", "999 I/O queues", RUN + ["--nvme", "1@0:999"] + out,
          "--nvme '1@0:999': 1 to 128 I/O queues"),
        A("run-nvme-node", "an NVMe on node 5 of 2", RUN + ["--nvme", "1@5:4"] + out,
          "--nvme '1@5:4': node 5 does not exist (the machine has 2)"),
        A("run-nvme-one-node-full", "32 NVMe on node 0 (an expander has 31 slots)",
          RUN + ["--nvme", "31@0:1", "--nvme", "1@0:1"] + out,
          "node 0: more than 31 NVMe devices on one expander bridge"),
        A("run-nvme-16-nodes", "NVMe on 16 nodes (the expanders' bus numbers allow 15)",
          ["lab", "run", "--kernel", "7.2", "--topology", "numa:16 core:1"]
          + [a for n in range(16) for a in ("--nvme", f"1@{n}:1")] + out,
          "--nvme: NVMe on 16 nodes; the lab gives each such node a PCI expander bridge, and "
          "bus numbers allow 15"),
        A("run-distances-asymmetric", "--distances 20 one way, 30 the other",
          RUN + ["--distances", "10,20;30,10"] + out,
          "--distances: node0->node1 is 20 but node1->node0 is 30: not symmetric"),
        A("run-distances-diagonal", "--distances with 12 on the diagonal",
          RUN + ["--distances", "12,20;20,10"] + out, "--distances: node0->node0 is 12, not 10"),
        A("run-distances-ten", "--distances with a remote distance of 10",
          RUN + ["--distances", "10,10;10,10"] + out,
          "--distances: node0->node1 is 10; a remote distance must be 11 to 254"),
        A("run-distances-255", "--distances 255 (QEMU's limit is 254)",
          RUN + ["--distances", "10,255;255,10"] + out,
          "--distances: node0->node1 is 255; a remote distance must be 11 to 254"),
        A("run-distances-not-square", "--distances with 3 values in a row for 2 nodes",
          RUN + ["--distances", "10,20,30;20,10"] + out,
          "--distances: expected 2x2 for 2 node(s), not rows of [3, 2]"),
        A("run-distances-words", "--distances 'ten'", RUN + ["--distances", "ten"] + out,
          "--distances: distance \"ten\" in row 0 is not an integer"),
        A("run-output-exists", "-o names a file that exists",
          RUN + ["-o", "{in}/old.tar.bz2"],
          "-o '{in}/old.tar.bz2': exists; lab never overwrites (choose another -o)",
          prepare=_file("old.tar.bz2", b"keep me")),
        A("run-output-no-folder", "-o in a folder that does not exist",
          RUN + ["-o", "{in}/nowhere/x.tar.bz2"],
          "-o '{in}/nowhere/x.tar.bz2': folder '{in}/nowhere' does not exist"),
        A("run-output-under-file", "-o under a regular file",
          RUN + ["-o", "{in}/afile/x.tar.bz2"],
          "-o '{in}/afile/x.tar.bz2': folder '{in}/afile' is not a folder",
          prepare=_file("afile", b"x")),
        A("run-output-not-tar", "-o x.zip", RUN + ["-o", "{in}/x.zip"],
          "-o '{in}/x.zip': the output must end in .tar.bz2 (or be a folder)"),
        A("build-patch-missing", "--patch names no file", BUILD + ["--patch", "{in}/no.patch"],
          "--patch '{in}/no.patch': patch file {in}/no.patch not found", kind="lab build-kernel"),
        A("build-patch-not-diff", "--patch is a text without hunks",
          BUILD + ["--patch", "{in}/notes.patch"],
          "--patch '{in}/notes.patch': not a unified diff (no hunks)", kind="lab build-kernel",
          prepare=_file("notes.patch", b"just some notes\n")),
        A("build-patch-folder", "--patch names a folder", BUILD + ["--patch", "{in}"],
          "--patch '{in}': not a regular file", kind="lab build-kernel"),
        A("build-jobs-zero", "-j 0", BUILD + ["-j", "0"],
          "-j 0: expected an integer in [1, 256]", kind="lab build-kernel"),
        A("build-jobs-huge", "-j 100000", BUILD + ["-j", "100000"],
          "-j 100000: expected an integer in [1, 256]", kind="lab build-kernel"),
        A("build-source-garbage", "--source 7", ["lab", "build-kernel", "--source", "7"],
          "--source '7': a kernel version such as 7.2 or 6.12", kind="lab build-kernel"),
        A("build-name-path", "-o ../x (a build name that would leave the cache)",
          BUILD + ["-o", "../x"], "build name '../x': use 1-64 letters, digits and . _ + - (not "
          "starting with .)", kind="lab build-kernel"),
    ]
    # -- numalab lab sweep: the matrix file and the options ---------------------------------
    SW = ["lab", "sweep", "{in}/m.toml", "-o", "{in}/out"]
    GOOD = 'machines = ["numa:2 core:2"]\nkernels = ["7.2"]\nnvme = ["3@0:8"]\n'
    M2 = "{in}/m.toml"

    def sweep(id: str, what: str, toml: str, error: str, extra: list[str] = ()) -> LabCase:
        return A(id, what, SW + list(extra), error, kind="lab sweep",
                 prepare=_file("m.toml", toml.encode()))
    cases += [
        sweep("sweep-not-toml", "the matrix stops after 'machines = ['",
              "machines = [", f"{M2}: not valid TOML: Invalid value (at end of document)"),
        sweep("sweep-no-machines", "a matrix without machines",
              'kernels = ["7.2"]\nnvme = ["3@0:8"]\n',
              f"{M2}: machines: missing (expected a list of 1 to 4096 entries (a dump path or a "
              "synthetic string))"),
        sweep("sweep-nvme-not-list", "nvme is a string, not a list of layouts",
              GOOD.replace('["3@0:8"]', '"3@0:8"'),
              f"{M2}: nvme: expected a list (an NVMe layout (3@0:8, per-node:1:8)), not \"3@0:8\""),
        sweep("sweep-kernel-garbage", "a kernel with a shell command in it",
              GOOD.replace('"7.2"', '"7.2;reboot"'),
              f"{M2}: kernels[0]: expected a kernel (7.2, a release, or built:NAME), not "
              "\"7.2;reboot\""),
        sweep("sweep-kernel-unknown-build", "built:nothing in an empty cache",
              GOOD.replace('"7.2"', '"built:nothing"'),
              f"{M2}: kernels[0]: no built kernel named 'nothing'; built: none (numalab lab "
              "build-kernel)"),
        sweep("sweep-machine-missing", "a machine that is neither a file nor a synthetic string",
              GOOD.replace('"numa:2 core:2"', '"nothing.tar.bz2"'),
              f"{M2}: machines[0]: {{in}}/nothing.tar.bz2: no such file or directory, and not a "
              "synthetic description (for example \"numa:2 core:8 pu:2\")"),
        sweep("sweep-layout-garbage", "an NVMe layout without queues",
              GOOD.replace('"3@0:8"', '"3@0"'),
              f"{M2}: nvme[0]: \"3@0\": expected N@NODE:QUEUES options separated by spaces "
              "(3@0:8 3@1:8), per-node:N[:QUEUES] or spread:N:Q/C"),
        sweep("sweep-layout-queues", "per-node with 999 I/O queues",
              GOOD.replace('"3@0:8"', '"per-node:1:999"'),
              f"{M2}: nvme[0]: \"per-node:1:999\": 1 to 128 I/O queues"),
        sweep("sweep-cmdline", "a kernel command line with a ';'",
              GOOD + 'cmdline = ["init=/bin/sh;reboot"]\n',
              f"{M2}: cmdline[0]: a kernel parameter is letters, digits and _ . , = : / + - "
              "(words separated by spaces)"),
        sweep("sweep-timeout-zero", "timeout = 0", GOOD + "timeout = 0\n",
              f"{M2}: timeout: expected a finite number in [1, 86400], not 0"),
        sweep("sweep-duplicate", "the same kernel twice (the same boots twice)",
              GOOD.replace('["7.2"]', '["7.2", "7.2"]'),
              f"{M2}: kernels: \"7.2\" is listed twice"),
        sweep("sweep-scheduler", "--scheduler http://x (Dask's address is tcp://HOST:PORT)",
              GOOD, "--scheduler 'http://x': expected tcp://HOST:PORT",
              ["--scheduler", "http://x"]),
        sweep("sweep-workers-zero", "--workers 0", GOOD,
              "--workers 0: expected an integer in [1, 256]", ["--workers", "0"]),
        sweep("sweep-output-file", "-o names a regular file", GOOD,
              "-o '{in}/m.toml': not a folder", ["-o", "{in}/m.toml"]),
    ]
    # -- files of the lab's cache -----------------------------------------------------------
    cases += [
        A("cache-built-name-key", "a built/NAME.json whose key climbs out of the cache",
          ["lab", "build-kernel", "--list"],
          "{in}/cache/built/evil.json: key: expected a build key (16 hex digits), not "
          "\"../../../etc\"", kind="cache",
          prepare=_file("cache/built/evil.json", b'{"key": "../../../etc"}')),
        A("cache-kernel-json", "a cached kernel.json whose release is a number",
          ["lab", "kernels", "--cached"],
          "{in}/cache/kernels/x/kernel.json: release: expected a kernel release such as "
          "7.2.13+deb14-amd64, not 7", kind="cache",
          prepare=_file("cache/kernels/x/kernel.json", b'{"release": 7}')),
    ]
    # -- data/lab/arm64: runs.toml and the consoles --------------------------------------------
    R = arm64_case
    cases += [
        R("arm64-not-toml", "runs.toml is not TOML",
          "{runs}: Expected '=' after a key in a key/value pair (at line 1, column 5)",
          toml="run run\n"),
        R("arm64-no-run", "runs.toml without [[run]] tables",
          "{runs}: run: missing (expected a list of 1 to 1024 entries (an object))", toml=""),
        R("arm64-missing-log", "a run without its log key",
          "{runs}: run[0].log: missing (expected a log file name (NAME.log, no folder))",
          toml=ARM64_RUN_TOML.replace('log = "boot.log"\n', "")),
        R("arm64-log-path", "a log that climbs out of logs/",
          "{runs}: run[0].log: expected a log file name (NAME.log, no folder), not "
          "\"../../x.log\"", toml=ARM64_RUN_TOML.replace('"boot.log"', '"../../x.log"', 1)),
        R("arm64-log-absent", "a log named but not in logs/",
          "{runs}: run[0].log: 'other.log': no such file in {in}/arm64/logs",
          toml=ARM64_RUN_TOML.replace('"boot.log"', '"other.log"', 1)),
        R("arm64-kernel", "a kernel the runs do not build",
          "{runs}: run[0].kernel: expected one of \"7.2\", \"7.2-rotate\", not \"7.3\"",
          toml=ARM64_RUN_TOML.replace('kernel = "7.2"', 'kernel = "7.3"')),
        R("arm64-queues-negative", "max_ioqpairs = -8",
          "{runs}: run[0].max_ioqpairs: expected an integer in [1, 65535], not -8",
          toml=ARM64_RUN_TOML.replace("max_ioqpairs = 8", "max_ioqpairs = -8")),
        R("arm64-clusters-overlap", "CPU 3 in two clusters",
          "{runs}: run[0].clusters[1]: CPUs 3 are listed twice",
          toml=ARM64_RUN_TOML.replace('["0-3", "4"]', '["0-3", "3-4"]')),
        R("arm64-clusters-nodes", "clusters of CPUs 0-5 on nodes of CPUs 0-4",
          "{runs}: run[0].clusters: cover CPUs 0-5, but the nodes cover 0-4",
          toml=ARM64_RUN_TOML.replace('["0-3", "4"]', '["0-3", "4-5"]')),
        R("arm64-console-affinity", "a console whose affinity list is '0-'",
          "{log}: line 8: expected a CPU list, not '0-'",
          console=ARM64_CONSOLE.replace("irq 31 smp_affinity_list: 0\n",
                                        "irq 31 smp_affinity_list: 0-\n")),
        R("arm64-console-cpu", "a console naming CPU 9 of a 5-CPU run",
          "{log}: line 8: names CPU 9, but the run has 5 CPUs",
          console=ARM64_CONSOLE.replace("irq 31 smp_affinity_list: 0\n",
                                        "irq 31 smp_affinity_list: 9\n")),
        R("arm64-console-queues", "a console claiming 99999 NVMe queues",
          "{log}: line 1: 99999 default queues; expected 1 to 65535",
          console=ARM64_CONSOLE.replace("5/0/0", "99999/0/0")),
    ]
    return cases


LAB_CASES = build_lab_cases()


def lab_readme_table() -> str:
    """The Markdown table of the lab corpus (``tests/data/bad/README.md``)."""
    rows = ["| case | kind | input | exact error |", "|---|---|---|---|"]
    for c in LAB_CASES:
        err = c.error.replace("{in}", "IN").replace("|", "/")
        rows.append(one_line(f"| {c.id} | {c.kind} | {c.what.replace('|', '/')} | `{err}` |"))
    return "\n".join(rows)


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
    import sys
    print(lab_readme_table() if sys.argv[1:] == ["lab"] else readme_table())
