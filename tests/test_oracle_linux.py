"""Oracle test: numalab's sysfs reader against hwloc's own expected output.

Every dump in ``shared/topologies/hwloc/linux`` comes with what ``lstopo``
printed for it (``.console``, or ``.xml`` for the XML-output tests). We
compare the object counts (PU, Core, Package, NUMANode) and each NUMA
node's CPUs with what :func:`numalab.topology.sysfs.read_tar` reads.

hwloc and the kernel do not always describe a machine the same way, and
some dumps are run with options that change hwloc's view. Those dumps are
listed in :data:`DISAGREE` with the reason and a piece of *evidence* that
the test checks (a string in the ``.test`` file or a file in the dump), and
the test asserts that they really disagree, so the list cannot go stale.
"""

from __future__ import annotations

import functools
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from numalab.cpumask import cpus as bits
from numalab.cpumask import format_cpulist, parse_cpulist, parse_hexmask
from numalab.datasets import hwloc_dir, load_options
from numalab.topology.safetar import read_archive
from numalab.topology.sysfs import read_tar

LINUX = hwloc_dir() / "linux"


def _dumps() -> list[str]:
    if LINUX is None or not LINUX.is_dir():
        return []
    out = []
    for tb in sorted(LINUX.glob("*.tar.bz2")):
        base = tb.name[: -len(".tar.bz2")]
        if (LINUX / f"{base}.console").exists() or (LINUX / f"{base}.xml").exists():
            out.append(base)
    return out


DUMPS = _dumps()

# dump -> (evidence, reason). Evidence is ("test", text): the .test file
# contains the text. (Dumps taken inside a cpuset cgroup are not listed:
# numalab_view() applies the restriction hwloc applies, see below.)
DISAGREE: dict[str, tuple[tuple[str, str], str]] = {
    "16amd64-4n4c-cgroup-distance-merge": (
        ("test", "--filter all:structure"),
        "the .test options '--filter all:structure' make lstopo merge away the Core "
        "level (one PU per Core); the cgroup restriction itself is reproduced"),
    "4fake-4gr1nu1pu": (
        ("test", "Fake test"),
        "hand-made dump without core_id/thread_siblings files: hwloc then creates no "
        "Core, numalab keeps the kernel's generic topology_sibling_cpumask() default "
        "(each CPU its own core); the cgroup restriction itself is reproduced"),
    "2ps3-2t": (
        ("test", "PS3"),
        "the PS3 kernel exports no physical_package_id/core_siblings: hwloc then creates "
        "no Package, numalab keeps the kernel's generic topology_core_cpumask() "
        "default (each CPU alone)"),
    "40intel64-4n10c+pci-conflicts": (
        ("test", "4th socket conflicts, ignored"),
        "hand-edited dump whose 4th package cpuset conflicts with the others: hwloc "
        "drops that Package (HWLOC_SHOW_ERRORS=none hides the message)"),
    "64amd64-4s2n4ca2co": (
        ("test", "bulldozer"),
        "AMD family 15h compute units: the kernel's thread_siblings pair the two cores "
        "of a compute unit (numalab follows the kernel, like the scheduler's SMT "
        "level), while hwloc's is_amd_with_CU logic in look_sysfscpu() splits them "
        "into one Core per core_id: 64 Cores vs 32"),
    "8em64t-2s2ca2c-buggynuma": (
        ("test", "hence all of them get merged"),
        "Linux lists all CPUs in all 8 nodes: hwloc merges them into one NUMANode; "
        "numalab keeps the kernel's 8 nodes, each CPU in its cpuN/nodeM node"),
    "fakeheterocpunuma": (
        ("test", "HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS"),
        "hand-made overlapping node cpumaps accepted only through the .test env "
        "HWLOC_DEBUG_ALLOW_OVERLAPPING_NODE_CPUSETS=1; numalab gives every CPU one "
        "node as cpu_to_node() does"),
    "fakememinitiators-1np2c+1npp+gi": (
        ("test", "hide CPU-only nodes"),
        "hwloc hides the CPU-only nodes 0-3 and the generic initiator node 4, and "
        "places memory-only nodes by their access1 initiators; numalab keeps the "
        "kernel's 11 nodes"),
    "nvidiagpunumanodes": (
        ("test", "V100 NUMA nodes, ignored"),
        "hwloc ignores the GPU memory nodes 250-255 of a POWER9 with NVLink V100s; "
        "the kernel (and numalab) list them as CPU-less nodes"),
}

# The line of a console tree: indentation, type (with an optional
# "(subtype)"), "L#n", and the "P#n" os index when printed.
_LINE = re.compile(r"^(\s*)([A-Za-z0-9]+)(?:\([^)]*\))?(?: L#(\d+))?(?: \(P#(\d+))?")
# The first line after the tree (verbose outputs add these sections).
_END = re.compile(r"^\s*(depth \d|Special depth|Relative latency|Topology infos|"
                  r"Memory attribute|\d+ processors not)")
_MEMORY = ("NUMANode", "MemCache")
TYPES = ("PU", "Core", "Package", "NUMANode")


def parse_console(text: str) -> tuple[dict[str, int], dict[int, int]]:
    """Counts per type and {NUMA os index: mask of PU os indexes} from an
    lstopo console tree.

    A NUMA node is attached as a memory child of the object whose locality
    it has (hwloc 2), so its CPUs are the PUs below its nearest ancestor that
    is not a memory object (NUMANode/MemCache).
    """
    stack: list[dict] = []
    objs: list[dict] = []
    for line in text.splitlines():
        if _END.match(line):
            break
        m = _LINE.match(line)
        if not m or not (m.group(3) is not None or m.group(2) == "Machine"):
            continue
        o = {"type": m.group(2), "p": int(m.group(4)) if m.group(4) else None,
             "ind": len(m.group(1)), "kids": [], "parent": None}
        while stack and stack[-1]["ind"] >= o["ind"]:
            stack.pop()
        if stack:
            o["parent"] = stack[-1]
            stack[-1]["kids"].append(o)
        stack.append(o)
        objs.append(o)

    def pus(o) -> int:
        mask = (1 << o["p"]) if o["type"] == "PU" else 0
        for k in o["kids"]:
            mask |= pus(k)
        return mask

    counts = {t: sum(1 for o in objs if o["type"] == t) for t in TYPES}
    nodes = {}
    for o in objs:
        if o["type"] == "NUMANode":
            a = o["parent"]
            while a is not None and a["type"] in _MEMORY:
                a = a["parent"]
            nodes[o["p"]] = pus(a) if a is not None else 0
    return counts, nodes


def parse_xml(text: str) -> tuple[dict[str, int], dict[int, int]]:
    """Counts per type and {NUMA os index: cpuset} from hwloc XML (v1 or v2)."""
    root = ET.fromstring(text)
    counts = {t: 0 for t in TYPES}
    nodes = {}
    for o in root.iter("object"):
        t = o.get("type")
        if t in counts:
            counts[t] += 1
        if t == "NUMANode":
            nodes[int(o.get("os_index"))] = parse_hexmask(o.get("cpuset"))
    return counts, nodes


def expected(base: str):
    console = LINUX / f"{base}.console"
    if console.exists():
        return parse_console(console.read_text())
    return parse_xml((LINUX / f"{base}.xml").read_text())


@functools.lru_cache(maxsize=None)
def cgroup_restriction(base: str) -> tuple[int, set[int]] | None:
    """The (cpus mask, mems set) of the cpuset cgroup the dump's
    ``proc/self/cpuset`` names, found under the cpuset (v1) or cgroup2
    mount of ``proc/mounts``; None when the process was not restricted.

    hwloc (topology-linux.c) reads the same files and hides the CPUs and
    NUMA nodes outside them.
    """
    tree = read_archive(LINUX / f"{base}.tar.bz2")
    (top,) = [t for t in tree.listdir("") if tree.is_dir(f"{t}/sys")]

    def text(rel):
        data = tree.read(f"{top}/{rel.strip('/')}")
        return data.decode().strip("\0\n ") if data is not None else None

    cg = text("proc/self/cpuset")
    if not cg or cg == "/":
        return None
    for line in (text("proc/mounts") or "").splitlines():
        _, mnt, fstype, opts = line.split()[:4]
        if not (fstype == "cgroup2" or fstype == "cpuset"
                or (fstype == "cgroup" and "cpuset" in opts.split(","))):
            continue
        d = f"{mnt}/{cg}"
        for cpus_f, mems_f in (("cpuset.cpus.effective", "cpuset.mems.effective"),
                               ("cpuset.cpus", "cpuset.mems"), ("cpus", "mems")):
            cpus, mems = text(f"{d}/{cpus_f}"), text(f"{d}/{mems_f}")
            if cpus is not None and mems is not None:
                return parse_cpulist(cpus), set(bits(parse_cpulist(mems)))
    return None


def numalab_view(base: str) -> tuple[dict[str, int], dict[int, int]]:
    """numalab's counts and node masks, seen the way hwloc shows them.

    hwloc's PUs are the online CPUs, so node masks are taken on online CPUs.
    When the dump's process ran in a cpuset cgroup, hwloc hides CPUs outside
    its ``cpus`` and nodes outside its ``mems``, and keeps a Core or Package
    only when an allowed PU (or, for a Package, an allowed node) remains.
    """
    path = LINUX / f"{base}.tar.bz2"
    topo = read_tar(path, **load_options(str(path)))    # fakeheterocpunuma's leeway
    allowed, mems = topo.online, set(topo.nodes)
    restriction = cgroup_restriction(base)
    if restriction is not None:
        allowed &= restriction[0]
        mems &= restriction[1]
    pus = [c for c in topo.cpus.values() if allowed >> c.id & 1]
    nodes = {n: topo.nodes[n].cpus & allowed for n in mems}
    node_cpus = {n: topo.nodes[n].cpus & topo.online for n in mems}
    packages = {c.package_cpus or 1 << c.id for c in pus}
    packages |= {c.package_cpus or 1 << c.id for c in topo.cpus.values()
                 if any(m >> c.id & 1 for m in node_cpus.values())}
    counts = {"PU": len(pus), "Core": len({c.thread_siblings or 1 << c.id for c in pus}),
              "Package": len(packages), "NUMANode": len(nodes)}
    return counts, nodes


@functools.lru_cache(maxsize=None)
def differences(base: str) -> tuple[str, ...]:
    """What numalab and hwloc's expected output disagree on (empty: agree)."""
    counts, nodes = expected(base)
    mine, my_nodes = numalab_view(base)
    out = [f"{t}: hwloc {counts[t]}, numalab {mine[t]}" for t in TYPES if counts[t] != mine[t]]
    for n in sorted(set(nodes) | set(my_nodes), key=lambda x: (x is None, x)):
        h, m = nodes.get(n), my_nodes.get(n)
        if h != m:
            out.append(f"node{n}: hwloc {format_cpulist(h) if h is not None else '-'}, "
                       f"numalab {format_cpulist(m) if m is not None else '-'}")
    return tuple(out)


def _evidence_holds(base: str, evidence: tuple[str, str]) -> bool:
    kind, text = evidence
    if kind == "test":
        return text.lower() in (LINUX / f"{base}.test").read_text().lower()
    raise AssertionError(f"unknown evidence kind {kind!r}")


needs_shared = pytest.mark.skipif(not DUMPS, reason="shared hwloc topologies not present")


@needs_shared
@pytest.mark.parametrize("base", DUMPS)
def test_agrees_with_hwloc(base):
    diffs = differences(base)
    if base in DISAGREE:
        evidence, reason = DISAGREE[base]
        assert _evidence_holds(base, evidence), f"{base}: evidence {evidence} not found"
        assert diffs, f"{base} now agrees with hwloc: remove it from DISAGREE"
        pytest.xfail(f"{reason} [{'; '.join(diffs[:3])}]")
    assert not diffs, f"{base}: " + "; ".join(diffs)


@needs_shared
def test_disagree_list_names_real_dumps():
    assert set(DISAGREE) <= set(DUMPS)


@needs_shared
def test_cgroup_restrictions_found():
    """The dumps taken inside a cpuset cgroup, and what the cgroup allowed."""
    found = {b: cgroup_restriction(b) for b in DUMPS}
    restricted = {b: (format_cpulist(r[0]), sorted(r[1])) for b, r in found.items() if r}
    assert restricted == {
        "16amd64-4n4c-cgroup-distance-merge": ("0-3", [2, 3]),
        "16amd64-8n2c-cpusets": ("0-6,12-15", [1, 2, 3, 4]),
        "16em64t-4s2ca2c-cpusetreorder": ("2-11,13", [0]),
        "32amd64-4s2n4c-cgroup2": ("0-5", [0, 1, 2, 3, 4, 5]),
        "4fake-4gr1nu1pu": ("0-1", [0, 2]),
        # cgroups that allow the whole machine
        "40intel64-2g2n4c+pcilocality": ("0-39", [0, 1, 2, 3]),
        "40intel64-4n10c+pci-conflicts": ("0-39", [0, 1, 2, 3]),
        "nvidiagpunumanodes": ("0-175", [0, 8, 250, 251, 252, 253, 254, 255]),
    }


@needs_shared
def test_agreement_summary(capsys):
    agree = [b for b in DUMPS if not differences(b)]
    with capsys.disabled():
        print(f"\nhwloc oracle: {len(agree)} of {len(DUMPS)} dumps agree; "
              f"{len(DISAGREE)} documented disagreements")
    assert len(agree) + len(DISAGREE) == len(DUMPS)


def test_console_parser_attaches_numa_to_parent():
    text = ("Machine (P#0 total=2GiB)\n"
            "  Package L#0 (P#0)\n"
            "    NUMANode L#0 (P#0 local=1GiB)\n"
            "    L2Cache L#0 (size=1KiB)\n"
            "      Core L#0 (P#0)\n"
            "        PU L#0 (P#0)\n"
            "        PU L#1 (P#4)\n"
            "  Package L#1 (P#1)\n"
            "    Group0 L#0\n"
            "      MemCache L#0 (size=1GiB)\n"
            "        NUMANode(NVM) L#1 (P#3 local=1GiB)\n"
            "      Core L#1 (P#0)\n"
            "        PU L#2 (P#1)\n"
            "  NUMANode L#2 (P#7)\n"
            "Special depth -3:  3 NUMANode (type #14)\n"
            "  NUMANode L#0 = 131072 from cpuset 0x1 (Group L#0)\n")
    counts, nodes = parse_console(text)
    assert counts == {"PU": 3, "Core": 2, "Package": 2, "NUMANode": 3}
    assert nodes == {0: 0b10001, 3: 0b10, 7: 0b10011}


def test_xml_parser():
    text = ('<topology><object type="Machine" cpuset="0x0000000f">'
            '<object type="NUMANode" os_index="2" cpuset="0x00000003"/>'
            '<object type="Package" cpuset="0x0000000f"><object type="Core">'
            '<object type="PU" os_index="0" cpuset="0x00000001"/></object></object>'
            '</object></topology>')
    counts, nodes = parse_xml(text)
    assert counts == {"PU": 1, "Core": 1, "Package": 1, "NUMANode": 1}
    assert nodes == {2: 3}
