"""Fuzz the topology readers: whatever the bytes, the only failure allowed is
a NumalabError (TopologyError) -- never another exception, never a hang.

Five targets, each a hypothesis test with a fixed example count and a
fixed seed (``derandomize=True``: CI sees the same inputs every run; no
example database is written):

* a sysfs dump folder whose files hold fuzzed text or bytes;
* a dump tarball (plain and bz2) with fuzzed byte edits;
* hwloc XML: attribute values and bytes of real small files mutated;
* ``lscpu -p`` text (with ``numactl --hardware`` text) from fuzzed fields;
* synthetic strings and ``.toml`` descriptions.

When a reader accepts an input, the result must be a valid Topology that
``numalab show`` can print (``render`` and ``to_dict``).

Every example runs under a 10 s alarm, so a reader that hangs fails the
test instead of the CI job. The whole file takes about a minute on a
2-core machine (``pytest --durations=0 tests/test_fuzz_readers.py``).
"""

from __future__ import annotations

import bz2
import io
import json
import os
import re
import tarfile
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bad_corpus import CPU, NODE, XML_HEAD, _tar_of_tree, good_files, good_links
from numalab.commands.show import render
from numalab.datasets import hwloc_dir
from numalab.errors import NumalabError
from numalab.topology import load
from numalab.topology.hwloc_xml import parse_xml
from numalab.topology.lscpu import parse_lscpu
from numalab.topology.synthetic import from_synthetic

from conftest import deadline

FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def accept_or_refuse(read):
    """Run ``read()``: a NumalabError is a fine answer; a Topology must
    print. Anything else propagates and fails the test."""
    try:
        with deadline("a reader", 10):
            topo = read()
    except NumalabError as e:
        # the CLI prints it as one line
        assert str(e) and "\n" not in str(e), repr(str(e))
        return None
    with deadline("a reader", 10):
        topo.validate(allow_asymmetric=True)
        render(topo)
        json.dumps(topo.to_dict())
    return topo


# -- text that looks like what sysfs holds, and what it should not ------------------

TOKENS = ["0", "1", "3", "7", "10", "20", "255", "4096", "65535", "65536", "4294967295",
          "99999999999999999999", "-1", "0x10", "0xff", "ff,ffffffff", "0-3", "0-", "3-1",
          "0-7:2/4", "0-7:0/0", "1,,2", "a", "\u00b2", "\u0661", " ", "", ",", "-", ":", "kB",
          "MemTotal:", "Node", "CPU0", "CPU1", "\x00", "\t", "\n", "nan", "inf", "1e309",
          "Unified", "Instruction", "Data"]
token_text = st.lists(st.sampled_from(TOKENS), max_size=6).map(" ".join)
junk_text = st.text(max_size=30)
# mostly plausible values (a cpulist, a number, a distance row), so that
# the reader gets past the first file and the checks further on run too
small = st.integers(0, 5)
cpulist = st.lists(st.one_of(small.map(str), st.tuples(small, small).map(
    lambda ab: f"{min(ab)}-{max(ab)}")), min_size=1, max_size=3).map(",".join)
plausible = st.one_of(cpulist, small.map(str), st.sampled_from(["10 20", "20 10", "10 21 31",
                                                               "10", "0x3", "f", "3,ffffffff"]))
file_text = st.one_of(plausible, plausible, plausible, token_text, junk_text,
                      st.binary(max_size=24).map(lambda b: b.decode("latin-1")))

# the files the sysfs reader looks at, in the small good dump
FUZZ_PATHS = [
    f"{CPU}/possible", f"{CPU}/present", f"{CPU}/online", f"{CPU}/cpu1/online",
    f"{CPU}/cpu0/topology/core_id", f"{CPU}/cpu0/topology/physical_package_id",
    f"{CPU}/cpu0/topology/thread_siblings_list", f"{CPU}/cpu0/topology/core_siblings_list",
    f"{CPU}/cpu2/topology/thread_siblings", f"{CPU}/cpu0/topology/die_id",
    f"{CPU}/cpu0/topology/cluster_cpus_list", f"{CPU}/cpu0/cache/index2/level",
    f"{CPU}/cpu0/cache/index2/type", f"{CPU}/cpu0/cache/index2/shared_cpu_list",
    f"{CPU}/cpu0/cache/index3/shared_cpu_map",
    f"{NODE}/node0/cpulist", f"{NODE}/node1/cpumap", f"{NODE}/node0/distance",
    f"{NODE}/node1/distance", f"{NODE}/node0/meminfo",
    "proc/cpuinfo", "proc/interrupts", "proc/version", "proc/hwloc-nofile-info",
    "proc/irq/24/smp_affinity_list", "proc/irq/24/effective_affinity",
    "sys/block/sda/mq/0/cpu_list", "sys/bus/pci/devices/0000:00:01.0/numa_node",
    "sys/bus/pci/devices/0000:00:01.0/class", "numalab/bench.json",
]
# extra entries: odd names where the reader lists folders
FUZZ_NAMES = [f"{CPU}/cpu{{}}/online", f"{NODE}/node{{}}/cpulist", "sys/block/sda/mq/{}/cpu_list",
              "proc/irq/{}/smp_affinity_list", f"{CPU}/cpu0/cache/index{{}}/level"]
odd_name = st.one_of(st.sampled_from(["4", "70000", "99999999999", "\u00b2", "\u0661", "-1",
                                      "0x1", "01", " 1"]),
                     st.text(alphabet="0123456789", min_size=1, max_size=12))


@st.composite
def fuzzed_dump(draw):
    files = good_files()
    changes = draw(st.dictionaries(st.sampled_from(FUZZ_PATHS), file_text, min_size=1,
                                   max_size=5))
    drops = draw(st.lists(st.sampled_from(sorted(files)), max_size=2))
    extra = draw(st.lists(st.tuples(st.sampled_from(FUZZ_NAMES), odd_name, file_text),
                          max_size=2))
    for k in drops:
        files.pop(k, None)
    for k, v in changes.items():
        files[k] = v.encode("utf-8", "surrogatepass") if draw(st.booleans()) \
            else v.encode("latin-1", "replace")
    for pattern, name, text in extra:
        if "/" in name or name in ("", ".", ".."):
            continue
        files[pattern.format(name)] = text.encode("utf-8", "replace")
    links = good_links()
    if draw(st.booleans()):
        links.pop(draw(st.sampled_from(sorted(links))))
    return files, links


def _write(base: Path, files: dict[str, bytes], links: dict[str, str]) -> None:
    for rel, data in files.items():
        p = base / rel
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)
        except (OSError, ValueError):
            pass      # a name the file system refuses: not the reader's business
    for rel, target in links.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists():
            os.symlink(target, p)


@settings(FUZZ, max_examples=200)
@given(fuzzed_dump())
def test_fuzz_sysfs_dir(dump):
    files, links = dump
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "box"
        _write(base, files, links)
        accept_or_refuse(lambda: load(base))


LINK_AT = [CPU, NODE, f"{CPU}/online", f"{CPU}/cpu1", f"{CPU}/cpu0/topology",
           f"{CPU}/cpu0/node0", f"{NODE}/node1", f"{NODE}/node0/cpulist", "sys/devices",
           "sys/bus/pci/devices/0000:00:02.0", "sys/block/sda", "proc/cpuinfo", "proc/irq/7"]
LINK_TO = [".", "..", "../..", "../../..", "cpu", "node", "../cpu", "../node/node0",
           "cpu0", "online", "../../../../..", "a/b/c", "../../node/node1", "x", ""]


@st.composite
def linked_dump(draw):
    """The good dump in a tarball, with fuzzed file text and symlinks
    (loops, climbs to the root, links to links) placed where the reader looks."""
    files, links = draw(fuzzed_dump())
    for at, to in draw(st.lists(st.tuples(st.sampled_from(LINK_AT), st.sampled_from(LINK_TO)),
                                min_size=1, max_size=3)):
        files = {k: v for k, v in files.items() if not (k == at or k.startswith(at + "/"))}
        links = {k: v for k, v in links.items() if not (k == at or k.startswith(at + "/"))}
        links[at] = to
    return files, links


@settings(FUZZ, max_examples=500)
@given(linked_dump())
def test_fuzz_sysfs_tar_links(dump):
    files, links = dump
    # links placed under other links are not representable in a real tree
    links = {k: v for k, v in links.items()
             if not any(k.startswith(o + "/") for o in links if o != k)}
    files = {k: v for k, v in files.items() if not any(k.startswith(o + "/") for o in links)}
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "box.tar"
        p.write_bytes(_tar_of_tree(files, links))
        accept_or_refuse(lambda: load(p))


# -- tarballs: byte edits ------------------------------------------------------------

GOOD_TAR = _tar_of_tree(good_files(), good_links())
GOOD_TAR_USTAR = _tar_of_tree(good_files(), good_links(), fmt=tarfile.PAX_FORMAT)


@st.composite
def byte_edits(draw, data: bytes, max_edits: int = 4):
    """``data`` with a few bytes replaced, removed or inserted, or cut short."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, max_edits))):
        kind = draw(st.sampled_from(["set", "set", "set", "delete", "insert", "cut"]))
        pos = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "set" and out:
            out[pos] = draw(st.sampled_from([0, 0xFF, ord("0"), ord("7"), ord("/"), ord("."),
                                             ord("1"), ord("2"), ord("5"), ord("6"),
                                             draw(st.integers(0, 255))]))
        elif kind == "delete" and out:
            del out[pos:pos + draw(st.integers(1, 600))]
        elif kind == "insert":
            out[pos:pos] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "cut":
            del out[pos:]
    return bytes(out)


def _header_offsets(raw: bytes) -> list[int]:
    """Where the tar headers are (type, size and link fields are worth hitting)."""
    with tarfile.open(fileobj=io.BytesIO(raw)) as tf:
        return [m.offset for m in tf]


HEADER_FIELDS = [(100, 8), (124, 12), (148, 8), (156, 1), (157, 100), (345, 155)]


@st.composite
def header_edit(draw, raw: bytes):
    """One tar header field (mode, size, checksum, type, link name, prefix)
    overwritten with plausible or hostile text."""
    out = bytearray(raw)
    off = draw(st.sampled_from(_header_offsets(raw)))
    start, width = draw(st.sampled_from(HEADER_FIELDS))
    value = draw(st.one_of(
        st.sampled_from([b"0", b"7", b"3", b"4", b"6", b"S", b"K", b"L", b"x", b"g",
                         b"77777777777", b"17777777777", b"\x80\x00\x00\x01\x00\x00\x00\x00",
                         b"../../../etc", b"/etc/passwd", b"..", b"box/../..", b"\xff" * 12]),
        st.binary(max_size=width)))
    value = value[:width]
    out[off + start: off + start + len(value)] = value
    return bytes(out)


@settings(FUZZ, max_examples=800)
@given(st.one_of(byte_edits(GOOD_TAR), header_edit(GOOD_TAR), header_edit(GOOD_TAR_USTAR)),
       st.booleans())
def test_fuzz_tarball(raw, compress):
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / ("box.tar.bz2" if compress else "box.tar")
        p.write_bytes(bz2.compress(raw, 1) if compress else raw)
        before = sorted(os.listdir(tmp))
        accept_or_refuse(lambda: load(p))
        assert sorted(os.listdir(tmp)) == before       # nothing extracted


GOOD_BZ2 = bz2.compress(GOOD_TAR)


@settings(FUZZ, max_examples=100)
@given(byte_edits(GOOD_BZ2, max_edits=2))
def test_fuzz_compressed_stream(raw):
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "box.tar.bz2"
        p.write_bytes(raw)
        accept_or_refuse(lambda: load(p))


# -- hwloc XML -------------------------------------------------------------------------

XML_V2 = XML_HEAD + b"""<topology version="2.0">
 <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000000f" gp_index="1">
  <object type="Package" os_index="0" cpuset="0x00000003" gp_index="2">
   <object type="NUMANode" os_index="0" cpuset="0x00000003" gp_index="3" local_memory="1073741824"/>
   <object type="L2Cache" cpuset="0x00000003" gp_index="12" cache_size="1048576" depth="2"/>
   <object type="Core" os_index="0" cpuset="0x00000003" gp_index="4">
    <object type="PU" os_index="0" cpuset="0x00000001" gp_index="5"/>
    <object type="PU" os_index="1" cpuset="0x00000002" gp_index="6"/>
   </object>
  </object>
  <object type="Package" os_index="1" cpuset="0x0000000c" gp_index="7">
   <object type="NUMANode" os_index="1" cpuset="0x0000000c" gp_index="8" local_memory="1073741824"/>
   <object type="Group" subtype="Cluster" os_index="0" cpuset="0x0000000c" gp_index="13">
    <object type="Core" os_index="1" cpuset="0x0000000c" gp_index="9">
     <object type="PU" os_index="2" cpuset="0x00000004" gp_index="10"/>
     <object type="PU" os_index="3" cpuset="0x00000008" gp_index="11"/>
    </object>
   </object>
   <object type="Bridge" gp_index="14" bridge_type="0-1" depth="0">
    <object type="PCIDev" gp_index="15" pci_busid="0000:01:00.0" pci_type="0108 [144d:a808] [144d:a801] 00"/>
   </object>
  </object>
 </object>
 <distances2 type="NUMANode" nbobjs="2" kind="5" indexing="gp">
  <indexes length="4">3 8 </indexes>
  <u64values length="12">10 20 20 10 </u64values>
 </distances2>
 <info name="Architecture" value="x86_64"/>
</topology>
"""
XML_V1 = XML_HEAD + b"""<topology>
 <object type="Machine" os_index="0" cpuset="0x00000003" complete_cpuset="0x00000003" online_cpuset="0x00000003">
  <object type="NUMANode" os_index="0" cpuset="0x00000001" local_memory="1073741824">
   <object type="Socket" os_index="0" cpuset="0x00000001">
    <object type="Cache" cpuset="0x00000001" depth="2" cache_type="0">
     <object type="PU" os_index="0" cpuset="0x00000001"/>
    </object>
   </object>
  </object>
  <object type="NUMANode" os_index="1" cpuset="0x00000002" local_memory="1073741824">
   <object type="PU" os_index="1" cpuset="0x00000002"/>
  </object>
  <distances nbobjs="2" relative_depth="1" latency_base="10.000000">
   <latency value="1.000000"/><latency value="2.000000"/>
   <latency value="2.000000"/><latency value="1.000000"/>
  </distances>
 </object>
</topology>
"""


def _xml_seeds() -> list[bytes]:
    seeds = [XML_V2, XML_V1]
    seeds.append((hwloc_dir() / "xml" / "8intel64-4n2t-memattrs.xml").read_bytes())
    return seeds


XML_SEEDS = _xml_seeds()
_ATTR = re.compile(rb'(\w+)="([^"]*)"')
XML_VALUES = [b"", b"0", b"-1", b"1", b"2", b"3", b"99999999999", b"1000000000000", b"0x0",
              b"0xf...f", b"0xffffffff,,0x1", b"0x" + b"f" * 64, b"0xzz", b"NUMANode", b"PU",
              b"Core", b"Package", b"Group", b"Cluster", b"PCIDev", b"L3Cache", b"Cache",
              b"gp", b"os", b"nan", b"inf", b"1e308", b"-5", b"\xc2\xb2", b"&amp;", b"10 20",
              b"0108 [144d:a808]", b"zz [1:2]"]


@st.composite
def xml_mutation(draw):
    data = bytearray(draw(st.sampled_from(XML_SEEDS)))
    spans = [m.span(2) for m in _ATTR.finditer(bytes(data))]
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 3)) == 0:
            # a byte edit anywhere
            pos = draw(st.integers(0, len(data) - 1))
            data[pos:pos + draw(st.integers(0, 3))] = draw(st.binary(max_size=3))
            spans = [m.span(2) for m in _ATTR.finditer(bytes(data))]
        elif spans:
            a, b = draw(st.sampled_from(spans))
            value = draw(st.one_of(st.sampled_from(XML_VALUES),
                                   st.text(alphabet="0123456789abcdefx,.- ", max_size=12)
                                   .map(str.encode)))
            data[a:b] = value
            spans = [m.span(2) for m in _ATTR.finditer(bytes(data))]
    return bytes(data)


@settings(FUZZ, max_examples=1500)
@given(xml_mutation())
def test_fuzz_hwloc_xml(data):
    accept_or_refuse(lambda: parse_xml(data, "fuzz.xml"))


def test_xml_seeds_are_good():
    """The mutations start from files the reader accepts."""
    for seed in XML_SEEDS:
        assert parse_xml(seed, "seed.xml").cpus


# -- lscpu -p and numactl --hardware ---------------------------------------------------

COLUMNS = ["Core", "Socket", "Node", "Cluster", "Book", "Drawer", "Online",
           "Configured", "", "L1d", "L1i", "L2", "L3", "L1d:L1i:L2:L3", "Address", "MHz"]
ODD_COLUMNS = ["Frob", "cpu", "Core", "L9"]
FIELDS = ["", "-", "Y", "N", "yes", "maybe", "\u00b2", "-1", "65536", "99999999999",
          "0:0:0:0", "1:1", "a", " 1 "]
field = st.one_of(st.integers(0, 3).map(str), st.integers(0, 3).map(str),
                  st.sampled_from(["Y", "N", "0:0:1:1", ""]), st.sampled_from(FIELDS))


@st.composite
def lscpu_text(draw):
    cols = ["CPU"] + draw(st.lists(st.sampled_from(COLUMNS), max_size=5, unique=True))
    if draw(st.integers(0, 5)) == 0:
        cols.append(draw(st.sampled_from(ODD_COLUMNS)))
    lines = ["# The following is the parsable format", "# " + ",".join(cols)]
    for cpu in range(draw(st.integers(0, 6))):
        n = len(cols) + draw(st.sampled_from([0] * 12 + [-1, 1]))
        first = str(cpu) if draw(st.integers(0, 5)) else draw(field)
        lines.append(",".join([first] + [draw(field) for _ in range(max(n, 1) - 1)]))
    return "\n".join(lines) + "\n"


@st.composite
def numactl_text(draw):
    n = draw(st.integers(1, 3))
    lines = [f"available: {n} nodes (0-{n - 1})"]
    for i in range(n):
        cpus = draw(st.lists(st.sampled_from(["0", "1", "2", "3", "x", "65536"]), max_size=3))
        lines.append(f"node {i} cpus: {' '.join(cpus)}")
        lines.append(f"node {i} size: {draw(st.sampled_from(['1024', 'x', '-1']))} "
                     f"{draw(st.sampled_from(['MB', 'GB', 'parsecs']))}")
    lines.append("node distances:")
    lines.append("node " + " ".join(str(i) for i in range(draw(st.integers(1, 3)))))
    for i in range(draw(st.integers(0, 3))):
        vals = draw(st.lists(st.sampled_from(["10", "20", "0", "-3", "x", "21"]), max_size=4))
        lines.append(f"  {draw(st.sampled_from([str(i), 'x', '7']))}: {' '.join(vals)}")
    return "\n".join(lines) + "\n"


@settings(FUZZ, max_examples=1000)
@given(lscpu_text(), st.one_of(st.none(), numactl_text()),
       st.sampled_from([None, "x86", "arm64"]))
def test_fuzz_lscpu(text, numactl, arch):
    accept_or_refuse(lambda: parse_lscpu(text, "fuzz.lscpu", numactl, "fuzz.numactl",
                                         arch=arch))


# -- synthetic strings and .toml descriptions --------------------------------------------

LEVELS = ["pack", "package", "socket", "die", "numa", "node", "group", "group2", "l3", "l2",
          "l1d", "l2cache", "cluster", "core", "pu", "frob", "Core", "PU"]
COUNTS = ["0", "1", "2", "3", "8", "-1", "x", "99999", "1e3", "٣", "²", "2(memory=1)"]


ORDER = ["pack", "die", "numa", "group", "l3", "l2", "cluster", "core", "pu"]


@st.composite
def synthetic_text(draw):
    """Mostly well-ordered levels with small counts, sometimes perturbed."""
    chosen = [lv for lv in ORDER if draw(st.booleans())]
    words = [(lv, str(draw(st.integers(1, 4)))) for lv in chosen]
    for _ in range(draw(st.sampled_from([0, 0, 1, 2]))):
        kind = draw(st.sampled_from(["level", "count", "swap", "add"]))
        if words and kind in ("level", "count", "swap"):
            i = draw(st.integers(0, len(words) - 1))
            if kind == "level":
                words[i] = (draw(st.sampled_from(LEVELS)), words[i][1])
            elif kind == "count":
                words[i] = (words[i][0], draw(st.sampled_from(COUNTS)))
            else:
                j = draw(st.integers(0, len(words) - 1))
                words[i], words[j] = words[j], words[i]
        else:
            words.append((draw(st.sampled_from(LEVELS)), draw(st.sampled_from(COUNTS))))
    text = " ".join(f"{a}:{b}" for a, b in words)
    return draw(st.one_of(st.just(text), st.just(text), st.just("synthetic:" + text),
                          st.text(max_size=20)))


matrix = st.one_of(
    st.none(), st.none(), st.just([[10, 20], [20, 10]]), st.just([[10]]),
    st.just([[10, 20], [30, 10]]),
    st.lists(st.lists(st.one_of(st.integers(-5, 40), st.sampled_from([10.5, "20", True, None])),
                      max_size=4), max_size=4),
    st.text(alphabet="0123456789 ,;\n", max_size=20))


@settings(FUZZ, max_examples=1000)
@given(synthetic_text(), matrix, st.sampled_from(["linear", "linear", "smt-apart", "zigzag"]),
       st.one_of(st.just(0), st.integers(0, 3), st.integers(-2, 70000), st.just(True)),
       st.booleans())
def test_fuzz_synthetic(text, distances, numbering, extra, allow):
    def read():
        if distances is None and numbering == "linear" and extra == 0:
            return load(text)
        return from_synthetic(text, distances=distances, numbering=numbering,
                              possible_extra=extra, allow_asymmetric=allow)
    accept_or_refuse(read)


TOML_VALUES = ['"numa:2 core:2"', '"numa:2 core:2"', '"pack:2 numa:1 l2:2 core:2 pu:2"',
               "[[10, 21], [21, 10]]", "[2, 3]", "4", '"frob:1"', "42", "true", "[[10, 20], [20, 10]]",
               "[[10, 20], [30, 10]]", "[1, 2]", '"smt-apart"', '"zigzag"', "1e999", "-1",
               "1000000000000", '"x86"', '""', "[]", "{a = 1}", "nan"]
TOML_KEYS = ["name", "synthetic", "numbering", "arch", "distances", "possible_extra",
             "source", "note", "memory_gib", "colour"]


@settings(FUZZ, max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(TOML_KEYS), st.sampled_from(TOML_VALUES)),
                max_size=5))
def test_fuzz_toml(pairs):
    pairs = dict(pairs)                       # a key given twice is refused by TOML itself
    text = 'synthetic = "numa:2 core:2"\n' if "synthetic" not in pairs else ""
    text += "".join(f"{k} = {v}\n" for k, v in pairs.items())
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "m.toml"
        p.write_text(text)
        accept_or_refuse(lambda: load(p))
