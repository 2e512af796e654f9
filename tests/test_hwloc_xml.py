"""The hwloc XML reader against hwloc's own XML files (counted independently here)."""

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from numalab.datasets import hwloc_dir
from numalab.errors import TopologyError
from numalab.topology import load
from numalab.topology.hwloc_xml import parse_xml, read_xml

SHARED = hwloc_dir()
XMLS = sorted(SHARED.glob("xml/*.xml")) + sorted(SHARED.glob("linux/*.xml"))
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="data/hwloc is missing from the checkout")


# -- an independent reading of the XML, kept deliberately naive ----------------------

def hexmask(text):
    """hwloc bitmap text -> int (empty chunks are zero)."""
    value = 0
    for chunk in text.split(","):
        chunk = chunk.strip().removeprefix("0x") or "0"
        value = (value << 32) | int(chunk, 16)
    return value


def objects(root, *types):
    return [o for o in root.iter("object") if o.get("type") in types]


def with_pus(root, *types):
    """Objects of these types holding at least one PU (a cgroup-restricted
    dump keeps packages whose CPUs were all removed)."""
    return [o for o in objects(root, *types) if len(objects(o, "PU")) > 0]


def raw_counts(root):
    pkgs = len(with_pus(root, "Package", "Socket"))
    return {"pu": len(objects(root, "PU")), "core": len(with_pus(root, "Core")),
            "package": pkgs or 1, "numa": len(objects(root, "NUMANode")) or 1}


# -- every real file ----------------------------------------------------------------

@needs_shared
@pytest.mark.parametrize("path", XMLS, ids=lambda p: p.name)
def test_counts_and_node_cpusets_match_the_xml(path):
    # fakeheterocpunuma.xml's matrix is asymmetric on purpose
    t = read_xml(path, allow_asymmetric=True)
    root = ET.parse(path).getroot()
    raw = raw_counts(root)
    got = t.counts()
    for level in ("pu", "core", "package", "numa"):
        if level == "core" and raw["core"] == 0:
            continue
        assert got[level] == raw[level], level
    pus = sum(1 << int(o.get("os_index")) for o in objects(root, "PU"))
    assert sum(1 << c for c in t.cpus) == pus
    nodes = {int(o.get("os_index")): hexmask(o.get("cpuset", "0x0")) & pus
             for o in objects(root, "NUMANode")}
    if not nodes:
        return
    assert set(t.nodes) == set(nodes)
    union = 0
    for n, mask in nodes.items():
        assert t.nodes[n].cpus & ~mask == 0, f"node{n} has CPUs outside its XML cpuset"
        union |= mask
    assert sum(t.nodes[n].cpus for n in t.nodes) == union
    overlapping = sum(m.bit_count() for m in nodes.values()) != union.bit_count()
    if not overlapping:
        for n, mask in nodes.items():
            assert t.nodes[n].cpus == mask, f"node{n}"
    for o in objects(root, "NUMANode"):
        if o.get("local_memory"):
            assert t.nodes[int(o.get("os_index"))].memory_bytes == int(o.get("local_memory"))


def numa_matrix_from_file(root):
    """{(a, b): distance} from the first NUMANode <distances2>, straight from the text."""
    d = next(d for d in root.iter("distances2") if d.get("type") == "NUMANode")
    idx = [int(x) for i in d.findall("indexes") for x in i.text.split()]
    vals = [int(x) for v in d.findall("u64values") for x in v.text.split()]
    n = len(idx)
    return {(idx[i], idx[j]): vals[i * n + j] for i in range(n) for j in range(n)}


@needs_shared
@pytest.mark.parametrize("name, nnodes", [("16amd64-4distances.xml", 8),
                                          ("192em64t-24n8c2t.xml", 24)])
def test_distance_matrices(name, nnodes):
    path = SHARED / "xml" / name
    t = read_xml(path)
    expected = numa_matrix_from_file(ET.parse(path).getroot())
    assert len(t.distances) == nnodes and all(len(r) == nnodes for r in t.distances)
    for (a, b), v in expected.items():
        assert t.distance(a, b) == v
    symmetric_in_file = all(expected[a, b] == expected[b, a] for a, b in expected)
    assert symmetric_in_file
    assert all(t.distances[i][j] == t.distances[j][i]
               for i in range(nnodes) for j in range(nnodes))
    assert {t.distances[i][i] for i in range(nnodes)} == {10}


@needs_shared
def test_pci_devices_have_node_locality():
    path = SHARED / "xml" / "24em64t-2n6c2t-pci.xml"
    t = read_xml(path)
    root = ET.parse(path).getroot()
    parent = {c: p for p in root.iter() for c in p}
    node_sets = {int(o.get("os_index")): hexmask(o.get("cpuset"))
                 for o in objects(root, "NUMANode")}
    devs = objects(root, "PCIDev")
    assert len(t.pci) == len(devs) > 0
    by_addr = {p.address: p for p in t.pci}
    for dev in devs:
        a = parent[dev]
        while a.get("cpuset") is None:
            a = parent[a]
        local = hexmask(a.get("cpuset"))
        near = [n for n, m in node_sets.items() if m & local]
        expect = near[0] if len(near) == 1 else -1
        got = by_addr[dev.get("pci_busid")]
        assert got.numa_node == expect
        assert got.class_code >> 8 == int(dev.get("pci_type")[:4], 16)
    assert any(p.numa_node >= 0 for p in t.pci)


@needs_shared
def test_cluster_fallback_on_x86_is_l2():
    # the KNL-like machine shares one L2 between two cores
    t = read_xml(SHARED / "xml" / "64intel64-heteromem.xml")
    assert t.arch == "x86"
    c0 = t.cpus[0]
    assert c0.cluster_source == "l2" and c0.cluster_cpus == c0.l2_cpus
    assert c0.cluster_cpus.bit_count() == 2 * c0.thread_siblings.bit_count()
    # the HBM nodes share the DRAM nodes' cpusets but own no CPU (as the kernel shows them)
    assert [n for n in t.node_ids if t.nodes[n].cpus == 0] == [4, 5, 6, 7]


def test_x86_without_l2_falls_back_to_smt():
    doc = (b'<topology version="2.0"><object type="Machine" cpuset="0xf">'
           b'<info name="Architecture" value="x86_64"/>'
           b'<object type="Core" os_index="0" cpuset="0x3"><object type="PU" os_index="0"/>'
           b'<object type="PU" os_index="1"/></object>'
           b'<object type="Core" os_index="1" cpuset="0xc"><object type="PU" os_index="2"/>'
           b'<object type="PU" os_index="3"/></object></object></topology>')
    t = parse_xml(doc, "nol2.xml")
    assert t.cpus[2].cluster_cpus == 0xC and t.cpus[2].cluster_source == "smt"
    other = parse_xml(doc, "nol2.xml", arch="arm64")          # the caller overrides the XML
    assert other.arch == "arm64" and other.cpus[2].cluster_cpus == 0x4
    assert list(t.nodes) == [0] and t.nodes[0].cpus == 0xF      # no NUMANode: node 0


@needs_shared
def test_show_192em64t():
    t = load(str(SHARED / "xml" / "192em64t-24n8c2t.xml"))
    assert t.counts()["numa"] == 24 and len(t.cpus) == 384


# -- v1 and hand-made documents ------------------------------------------------------

V1 = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc.dtd">
<topology>
  <object type="Machine" os_index="0" cpuset="0x000000ff" complete_cpuset="0x000003ff"
          online_cpuset="0x0000007f" allowed_cpuset="0x000000ff">
    <info name="Architecture" value="x86_64"/>
    <distances nbobjs="2" relative_depth="1" latency_base="10.000000">
      <latency value="1.000000"/><latency value="2.100000"/>
      <latency value="2.100000"/><latency value="1.000000"/>
    </distances>
    %s
  </object>
</topology>
"""


def v1_node(n):
    base = 4 * n
    cores = "".join(
        f'<object type="Cache" cpuset="0x{3 << (base + 2 * k):08x}" depth="2" cache_type="0">'
        f'<object type="Core" os_index="{k}" cpuset="0x{3 << (base + 2 * k):08x}">'
        f'<object type="PU" os_index="{base + 2 * k}"/>'
        f'<object type="PU" os_index="{base + 2 * k + 1}"/></object></object>'
        for k in range(2))
    return (f'<object type="NUMANode" os_index="{n}" cpuset="0x{0xF << base:08x}" '
            f'local_memory="{(n + 1) << 30}"><object type="Socket" os_index="{n}" '
            f'cpuset="0x{0xF << base:08x}">{cores}</object></object>')


def test_v1_document():
    t = parse_xml(V1 % (v1_node(0) + v1_node(1)).encode(), "v1.xml")
    assert t.meta["format"] == "hwloc-xml-v1"
    assert t.counts() == {"pu": 8, "core": 4, "cluster": 4, "die": 2, "package": 2, "numa": 2}
    assert t.nodes[1].cpus == 0xF0 and t.nodes[1].memory_bytes == 2 << 30
    assert t.distances == [[10, 21], [21, 10]]
    assert t.possible == 0x3FF and t.present == 0xFF and t.online == 0x7F
    assert t.cpus[5].cluster_source == "l2" and t.cpus[5].cluster_cpus == 0b110000


def test_v1_distances_in_the_root():
    doc = (V1 % (v1_node(0) + v1_node(1)).encode()).replace(b"2.100000", b"3.200000")
    # move the <distances> block from the Machine object to the <topology> root
    start = doc.index(b"<distances")
    end = doc.index(b"</distances>") + len(b"</distances>")
    block = doc[start:end]
    doc = (doc[:start] + doc[end:]).replace(b"</topology>", block + b"\n</topology>")
    t = parse_xml(doc, "v1root.xml")
    assert t.distances == [[10, 32], [32, 10]]


def test_cluster_group_is_used():
    doc = (b'<topology version="2.0"><object type="Machine" cpuset="0xf">'
           b'<object type="NUMANode" os_index="0" cpuset="0xf"/>'
           b'<object type="Group" subtype="Cluster" os_index="7" cpuset="0x3">'
           b'<object type="Core" os_index="0" cpuset="0x1"><object type="PU" os_index="0"/></object>'
           b'<object type="Core" os_index="1" cpuset="0x2"><object type="PU" os_index="1"/></object>'
           b'</object><object type="Group" subtype="Cluster" os_index="9" cpuset="0xc">'
           b'<object type="Core" os_index="2" cpuset="0x4"><object type="PU" os_index="2"/></object>'
           b'<object type="Core" os_index="3" cpuset="0x8"><object type="PU" os_index="3"/></object>'
           b'</object></object><info name="Architecture" value="aarch64"/></topology>')
    t = parse_xml(doc, "arm.xml")
    assert t.arch == "arm64" and t.counts()["cluster"] == 2
    assert t.cpus[3].cluster_cpus == 0xC and t.cpus[3].cluster == 9
    assert t.cpus[3].cluster_source == "xml"


# -- bad inputs ---------------------------------------------------------------------

BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE topology [
 <!ENTITY a "aaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
]>
<topology><object type="Machine" name="&c;"/></topology>
"""


@pytest.mark.parametrize("data, message", [
    (b'<?xml version="1.0"?><foo><object type="PU"/></foo>',
     "not an hwloc topology (root element is <foo>)"),
    (BOMB, "refusing XML"),
    (b'<!DOCTYPE topology [<!ELEMENT topology ANY>]><topology/>', "refusing XML"),
    (b"", "not well-formed"),
    (b"\xff\xfe garbage", "not well-formed"),
    (b'<topology version="2.0"><object type="Machine" cpuset="0xzz"/></topology>', "bad cpuset"),
    (b'<topology version="2.0"><object type="Machine" cpuset="0x1"/></topology>', "no PU"),
    (b'<topology version="2.0"><object type="Machine"><object type="PU" os_index="0"/>'
     b'<object type="PU" os_index="0"/></object></topology>', "two PUs"),
    (b'<topology version="2.0"><object type="Machine"><object type="PU" os_index="x"/>'
     b'</object></topology>', "not an integer"),
    (b'<topology version="2.0"><object type="Machine">'
     b'<object type="NUMANode" os_index="0" cpuset="0x1"/>'
     b'<object type="PU" os_index="0"/></object>'
     b'<distances2 type="NUMANode" nbobjs="1" kind="5" indexing="os">'
     b'<indexes length="2">0 </indexes><u64values length="6">10 20 </u64values>'
     b'</distances2></topology>', "2 values, not 1x1"),
])
def test_bad_documents(tmp_path, data, message):
    p = tmp_path / "x.xml"
    p.write_bytes(data)
    with pytest.raises(TopologyError) as e:
        read_xml(p)
    assert message in str(e.value)
    assert str(e.value).startswith(str(p))


@needs_shared
def test_truncated_real_file(tmp_path):
    data = (SHARED / "xml" / "24em64t-2n6c2t-pci.xml").read_bytes()
    p = tmp_path / "cut.xml"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(TopologyError, match="not well-formed"):
        read_xml(p)


def test_missing_file_and_unknown_option(tmp_path):
    with pytest.raises(TopologyError, match="cannot read"):
        read_xml(tmp_path / "absent.xml")
    with pytest.raises(TopologyError, match="unknown option"):
        read_xml(Path("whatever.xml"), colour="red")


def test_die_objects():
    doc = (b'<topology version="2.0"><object type="Machine" cpuset="0xf">'
           b'<object type="Package" os_index="0" cpuset="0xf">'
           b'<object type="NUMANode" os_index="0" cpuset="0xf"/>'
           b'<object type="Die" os_index="0" cpuset="0x3"><object type="PU" os_index="0"/>'
           b'<object type="PU" os_index="1"/></object>'
           b'<object type="Die" os_index="1" cpuset="0xc"><object type="PU" os_index="2"/>'
           b'<object type="PU" os_index="3"/></object></object></object></topology>')
    t = parse_xml(doc, "dies.xml")
    assert t.counts()["die"] == 2 and t.counts()["package"] == 1
    assert t.cpus[2].die == 1 and t.cpus[2].die_cpus == 0xC and t.cpus[2].package_cpus == 0xF


@needs_shared
def test_mutated_documents_raise_only_topology_errors():
    """Seeded random damage to a real file: a Topology or a TopologyError, nothing else."""
    import random
    rng = random.Random(20240601)
    data = (SHARED / "xml" / "16amd64-4distances.xml").read_bytes()
    alphabet = b'<>"=/ 0x1f,:&![]-PUNMAode'
    for _ in range(300):
        d = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            i = rng.randrange(len(d))
            op = rng.randrange(3)
            if op == 0:
                d[i] = rng.choice(alphabet)
            elif op == 1:
                del d[i:i + rng.randint(1, 20)]
            else:
                d[i:i] = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
        try:
            parse_xml(bytes(d), "m.xml")
        except TopologyError:
            pass


@needs_shared
@pytest.mark.parametrize("stem", ["32em64t-2n8c+dax+nvme+mic+dimms", "40intel64-2g2n4c+pcilocality",
                                  "2i386-2c-nohugepage"])
def test_agrees_with_the_sysfs_dump_it_was_made_from(stem):
    """lstopo's expected XML and the sysfs snapshot describe the same machine."""
    dump = load(str(SHARED / "linux" / f"{stem}.tar.bz2"))
    xml = read_xml(SHARED / "linux" / f"{stem}.xml", arch=dump.arch)
    assert xml.counts() == dump.counts()
    assert {n: xml.nodes[n].cpus for n in xml.nodes} == {n: dump.nodes[n].cpus for n in dump.nodes}
    assert xml.distances == dump.distances
    assert all(xml.cpus[c].cluster_cpus == dump.cpus[c].cluster_cpus for c in xml.cpus)
