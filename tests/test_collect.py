"""``numalab collect``: a fake sysfs/procfs tree in, an hwloc-layout tarball out."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tarfile
from datetime import datetime
from pathlib import Path

import pytest

import numalab.collect as collect_mod
from numalab.cli import main
from numalab.collect import MANIFEST, collect, default_name, strip_init_args
from numalab.errors import NumalabError

NCPUS = 4
CMDLINE = "BOOT_IMAGE=/vmlinuz root=/dev/vda1 isolcpus=3 nohz_full=3 -- initarg=private\n"
PCI = "sys/devices/pci0000:00/0000:00:04.0"
DISK = f"{PCI}/nvme/nvme0/nvme0n1"
INTERRUPTS = """\
           CPU0       CPU1       CPU2       CPU3
  40:          0          0          0          5  PCI-MSIX-0000:00:04.0   0-edge      nvme0q0
  41:         10          0          0          0  PCI-MSIX-0000:00:04.0   1-edge      nvme0q1
  42:          0          0         12          0  PCI-MSIX-0000:00:04.0   2-edge      nvme0q2
 NMI:          0          0          0          0   Non-maskable interrupts
 LOC:        100        101        102        103   Local timer interrupts
"""


def _w(root: Path, rel: str, text: str | bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text)


def _ln(root: Path, rel: str, target: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.symlink_to(target)


def make_fake_root(root: Path) -> Path:
    """4 CPUs (one package, no SMT), 2 nodes of 2 CPUs, an NVMe device on
    node 1 with 3 MSI-X vectors, a 2-queue blk-mq map, and decoys that must
    not be collected."""
    cpu = "sys/devices/system/cpu"
    for f, v in [("possible", "0-3"), ("present", "0-3"), ("online", "0-3"),
                 ("offline", ""), ("kernel_max", "8191"), ("isolated", "3")]:
        _w(root, f"{cpu}/{f}", v + "\n")
    for i in range(NCPUS):
        node = i // 2
        d = f"{cpu}/cpu{i}"
        if i:
            _w(root, f"{d}/online", "1\n")
        topo = {"physical_package_id": "0", "die_id": "0", "core_id": str(i),
                "cluster_id": str(i // 2), "thread_siblings_list": str(i),
                "thread_siblings": f"{1 << i:x}", "core_cpus_list": str(i),
                "core_siblings_list": "0-3", "core_siblings": "f", "package_cpus_list": "0-3",
                "die_cpus_list": "0-3", "cluster_cpus_list": f"{2 * node}-{2 * node + 1}"}
        for k, v in topo.items():
            _w(root, f"{d}/topology/{k}", v + "\n")
        for idx, (level, typ, size, shared) in enumerate(
                [(1, "Data", "32K", str(i)), (2, "Unified", "1024K", f"{2 * node}-{2 * node + 1}"),
                 (3, "Unified", "8192K", "0-3")]):
            for k, v in [("level", level), ("type", typ), ("size", size),
                         ("shared_cpu_list", shared), ("coherency_line_size", 64)]:
                _w(root, f"{d}/cache/index{idx}/{k}", f"{v}\n")
        _ln(root, f"{d}/node{node}", f"../../node/node{node}")
        _ln(root, f"sys/bus/cpu/devices/cpu{i}", f"../../../devices/system/cpu/cpu{i}")
    # a link escaping the root must be left out, never followed
    _ln(root, "sys/bus/cpu/devices/cpu9", "../../../../../../../../../etc")
    # a file over the size cap must be skipped, not stored
    _w(root, f"{cpu}/cpu0/topology/huge", b"0" * (collect_mod.MAX_FILE_BYTES + 1))

    node = "sys/devices/system/node"
    for f, v in [("possible", "0-1"), ("online", "0-1"), ("has_cpu", "0-1"),
                 ("has_normal_memory", "0-1")]:
        _w(root, f"{node}/{f}", v + "\n")
    for n in range(2):
        d = f"{node}/node{n}"
        _w(root, f"{d}/cpulist", f"{2 * n}-{2 * n + 1}\n")
        _w(root, f"{d}/cpumap", f"{3 << (2 * n):x}\n")
        _w(root, f"{d}/distance", "10 21\n" if n == 0 else "21 10\n")
        _w(root, f"{d}/meminfo", f"Node {n} MemTotal:       8388608 kB\n"
                                 f"Node {n} MemFree:        4194304 kB\n")
        _ln(root, f"{d}/cpu{2 * n}", f"../../cpu/cpu{2 * n}")
        _ln(root, f"{d}/memory{5 + n}", f"../../memory/memory{5 + n}")  # not collected
        _ln(root, f"sys/bus/node/devices/node{n}", f"../../../devices/system/node/node{n}")

    for k, v in [("class", "0x010802"), ("vendor", "0x8086"), ("device", "0x0a54"),
                 ("numa_node", "1"), ("local_cpulist", "2-3"), ("local_cpus", "c")]:
        _w(root, f"{PCI}/{k}", v + "\n")
    _w(root, f"{PCI}/config", b"\x86\x80\x54\x0a" + b"\0" * 252)   # binary: not collected
    _w(root, f"{PCI}/resource0", b"\0" * 64)                       # not collected
    for irq in (40, 41, 42):
        _w(root, f"{PCI}/msi_irqs/{irq}", "msix\n")
    _ln(root, f"{PCI}/driver", "../../../bus/pci/drivers/nvme")
    _ln(root, "sys/bus/pci/devices/0000:00:04.0", "../../../devices/pci0000:00/0000:00:04.0")
    _w(root, "sys/devices/pci0000:00/pci_bus/0000:00/cpulistaffinity", "0-3\n")

    _ln(root, "sys/block/nvme0n1", f"../{DISK.removeprefix('sys/')}")
    _w(root, f"{DISK}/mq/0/cpu_list", "0, 1\n")
    _w(root, f"{DISK}/mq/0/nr_tags", "1023\n")
    _w(root, f"{DISK}/mq/1/cpu_list", "2, 3\n")
    _w(root, f"{DISK}/mq/1/nr_tags", "1023\n")
    _w(root, f"{DISK}/size", "2000409264\n")

    _w(root, "proc/cpuinfo", "".join(f"processor\t: {i}\nmodel name\t: Fake CPU\n\n"
                                     for i in range(NCPUS)))
    _w(root, "proc/meminfo", "MemTotal:       16777216 kB\n")
    _w(root, "proc/version", "Linux version 6.1.0-fake (builder@buildhost) #1 SMP\n")
    _w(root, "proc/cmdline", CMDLINE)
    _w(root, "proc/interrupts", INTERRUPTS)
    _w(root, "proc/irq/default_smp_affinity", "f\n")
    for irq, cpu_ in ((40, 3), (41, 0), (42, 2)):
        d = f"proc/irq/{irq}"
        _w(root, f"{d}/smp_affinity", "f\n")
        _w(root, f"{d}/smp_affinity_list", "0-3\n")
        _w(root, f"{d}/effective_affinity", f"{1 << cpu_:x}\n")
        _w(root, f"{d}/effective_affinity_list", f"{cpu_}\n")
        _w(root, f"{d}/node", "1\n")
        (root / d / f"nvme0q{irq - 40}").mkdir()   # per-action folder: not collected
    _w(root, "proc/self/environ", "SECRET=1\0")   # never collected
    return root


@pytest.fixture
def fake(tmp_path) -> Path:
    return make_fake_root(tmp_path / "root")


def _members(path: Path) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(path) as tf:
        return {m.name: m for m in tf.getmembers()}


def _read(path: Path, member: str) -> bytes:
    with tarfile.open(path) as tf:
        return tf.extractfile(member).read()


def _manifest(path: Path) -> dict:
    name = path.name.removesuffix(".tar.bz2")
    return json.loads(_read(path, f"{name}/{MANIFEST}"))


def test_layout_is_hwloc_gather_topology(fake, tmp_path):
    out = collect(fake, tmp_path / "out" / "fake4.tar.bz2")
    m = _members(out)
    assert all(n == "fake4" or n.startswith("fake4/") for n in m)
    assert m["fake4"].isdir() and m["fake4/sys/devices/system"].isdir()
    for rel in ["sys/devices/system/cpu/online", "sys/devices/system/cpu/isolated",
                "sys/devices/system/cpu/cpu3/topology/core_id",
                "sys/devices/system/cpu/cpu1/cache/index2/shared_cpu_list",
                "sys/devices/system/node/node1/distance", "sys/devices/system/node/node0/meminfo",
                f"{PCI}/class", f"{PCI}/numa_node", f"{PCI}/local_cpulist", f"{PCI}/msi_irqs/42",
                f"{DISK}/mq/1/cpu_list", f"{DISK}/mq/0/nr_tags",
                "sys/devices/pci0000:00/pci_bus/0000:00/cpulistaffinity",
                "proc/interrupts", "proc/irq/41/effective_affinity_list", "proc/irq/40/node",
                "proc/cpuinfo", "proc/meminfo", "proc/version", "proc/cmdline"]:
        assert m[f"fake4/{rel}"].isfile(), rel
    # links stay links, with the same relative targets as in sysfs
    links = {"sys/devices/system/cpu/cpu2/node1": "../../node/node1",
             "sys/bus/pci/devices/0000:00:04.0": "../../../devices/pci0000:00/0000:00:04.0",
             f"{PCI}/driver": "../../../bus/pci/drivers/nvme",
             "sys/block/nvme0n1": "../devices/pci0000:00/0000:00:04.0/nvme/nvme0/nvme0n1",
             "sys/devices/system/node/node1/cpu2": "../../cpu/cpu2",
             "sys/bus/node/devices/node0": "../../../devices/system/node/node0"}
    for rel, target in links.items():
        assert m[f"fake4/{rel}"].issym() and m[f"fake4/{rel}"].linkname == target, rel
    # what must not be there
    for rel in [f"{PCI}/config", f"{PCI}/resource0", "sys/devices/system/node/node0/memory5",
                "proc/irq/40/nvme0q0", "sys/bus/cpu/devices/cpu9", "proc/self/environ",
                "sys/devices/system/cpu/cpu0/topology/huge"]:
        assert f"fake4/{rel}" not in m, rel
    # every parent folder has its own member (hwloc's tarballs do)
    for name in m:
        parent = name.rpartition("/")[0]
        assert not parent or m[parent].isdir(), name
    assert _read(out, f"fake4/{DISK}/mq/1/cpu_list") == b"2, 3\n"
    assert _read(out, "fake4/proc/interrupts").decode() == INTERRUPTS


def test_cmdline_keeps_kernel_words_and_drops_init_args(fake, tmp_path):
    out = collect(fake, tmp_path / "c.tar.bz2")
    text = _read(out, "c/proc/cmdline").decode()
    assert "isolcpus=3" in text and "nohz_full=3" in text and "initarg" not in text
    assert any("proc/cmdline" in n for n in _manifest(out)["notes"])
    assert strip_init_args("a=1 -- b\n") == ("a=1\n", True)
    assert strip_init_args("a=1 b--c\n") == ("a=1 b--c\n", False)


def test_manifest_lists_unreadable_and_skipped(fake, tmp_path, monkeypatch):
    real_read = collect_mod._read_bytes
    denied = str(fake / "sys/devices/system/node/node1/distance")

    def read(path, limit):
        if os.fspath(path) == denied:
            raise PermissionError(13, "Permission denied", path)
        return real_read(path, limit)

    monkeypatch.setattr(collect_mod, "_read_bytes", read)
    out = collect(fake, tmp_path / "m.tar.bz2")
    man = _manifest(out)
    assert man["unreadable"] == [{"path": "sys/devices/system/node/node1/distance",
                                  "errno": 13, "error": "Permission denied"}]
    assert "m/sys/devices/system/node/node1/distance" not in _members(out)
    skipped = {s["path"] for s in man["skipped"]}
    assert skipped == {"sys/devices/system/cpu/cpu0/topology/huge", "sys/bus/cpu/devices/cpu9"}
    assert man["kernel_release"] == "6.1.0-fake"
    assert man["name"] == "m" and man["numalab_version"]
    assert man["created_utc"].endswith("Z")
    c = man["counts"]
    assert (c["cpus"], c["nodes"], c["pci_devices"], c["irqs"], c["blk_mq_disks"]) == (4, 2, 1, 3, 1)
    nfiles = sum(1 for mem in _members(out).values() if mem.isfile())
    assert c["files"] == nfiles - 1          # every member file but the manifest
    assert "hostname" not in json.dumps(man).lower()


def test_refuses_to_overwrite_via_cli(fake, tmp_path, capsys):
    out = tmp_path / "taken.tar.bz2"
    out.write_bytes(b"precious")
    rc = main(["collect", "--root", str(fake), "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "exists; collect never overwrites" in err
    assert "Traceback" not in err
    assert out.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["root", "taken.tar.bz2"]


def test_output_appearing_during_collection_is_not_replaced(fake, tmp_path, monkeypatch):
    out = tmp_path / "race.tar.bz2"
    real_write = collect_mod._write_archive

    def write_then_someone_else_creates(*a, **kw):
        real_write(*a, **kw)
        out.write_bytes(b"theirs")

    monkeypatch.setattr(collect_mod, "_write_archive", write_then_someone_else_creates)
    with pytest.raises(NumalabError, match="never overwrites"):
        collect(fake, out)
    assert out.read_bytes() == b"theirs"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["race.tar.bz2", "root"]


def test_success_leaves_no_temp_file_and_honours_umask(fake, tmp_path):
    d = tmp_path / "outdir"
    d.mkdir()
    old = os.umask(0o022)
    try:
        out = collect(fake, d, name="fakebox")
    finally:
        os.umask(old)
    assert out == d / "fakebox.tar.bz2"
    assert [p.name for p in d.iterdir()] == ["fakebox.tar.bz2"]
    assert out.stat().st_mode & 0o777 == 0o644


def test_default_name_and_cli_prints_path(fake, tmp_path, capsys):
    d = tmp_path / "o"
    d.mkdir()
    assert main(["collect", "--root", str(fake), "-o", str(d)]) == 0
    out = capsys.readouterr()
    path = Path(out.out.strip())
    assert path.parent == d and path.name.startswith("unknown-4cpu-2n-")
    assert "4 cpus, 2 nodes" in out.err and "KiB" in out.err
    assert default_name("aarch64", 128, 4, datetime(2024, 2, 29)) == "aarch64-128cpu-4n-20240229"
    assert default_name("x86_64", 2, 0, datetime(2024, 2, 29)) == "x86_64-2cpu-1n-20240229"


def test_bad_name_and_output_are_one_line_errors(fake, tmp_path, capsys):
    assert main(["collect", "--root", str(fake), "-o", str(tmp_path), "--name", "../evil"]) == 2
    assert main(["collect", "--root", str(fake), "-o", str(tmp_path / "x.zip")]) == 2
    assert main(["collect", "--root", str(tmp_path / "nowhere"), "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 3 and "Traceback" not in err
    assert [p.name for p in tmp_path.iterdir()] == ["root"]


def test_extra_files_go_under_numalab(fake, tmp_path):
    out = collect(fake, tmp_path / "b.tar.bz2",
                  extra_files={"bench/result.json": b'{"ns": 12}'})
    assert _read(out, "b/numalab/bench/result.json") == b'{"ns": 12}'
    assert _manifest(out)["extra_files"] == ["numalab/bench/result.json"]
    for bad in ("../x", "/abs", ""):
        with pytest.raises(NumalabError):
            collect(fake, tmp_path / "bad.tar.bz2", extra_files={bad: b""})
    assert not (tmp_path / "bad.tar.bz2").exists()


def test_round_trip_through_numalab_reader(fake, tmp_path):
    from numalab.topology import load
    topo = load(collect(fake, tmp_path / "rt.tar.bz2"))
    assert sorted(topo.cpus) == [0, 1, 2, 3]
    assert topo.node_ids == [0, 1]
    assert topo.distance(0, 1) == 21 and topo.distance(1, 1) == 10
    assert topo.cpumask_of_node(1) == 0b1100
    assert [c.node for c in sorted(topo.cpus.values(), key=lambda c: c.id)] == [0, 0, 1, 1]
    (dev,) = topo.pci
    assert (dev.address, dev.numa_node, dev.msi_vectors, dev.class_code, dev.driver) == \
        ("0000:00:04.0", 1, 3, 0x010802, "nvme")
    assert topo.blk_mq == {"nvme0n1": [0b0011, 0b1100]}
    irqs = {i.irq: i for i in topo.irqs}
    assert (irqs["41"].smp_affinity, irqs["41"].effective_affinity) == (0b1111, 0b0001)
    assert irqs["42"].counts == (0, 0, 12, 0)


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Path:
    if not os.path.isdir("/sys/devices/system/cpu/cpu0"):
        pytest.skip("no live sysfs here")
    return collect("/", tmp_path_factory.mktemp("live") / "live.tar.bz2")


def test_live_machine(live):
    m = _members(live)
    assert m["live/sys/devices/system/cpu/cpu0/topology/core_id"].isfile()
    assert "live/proc/cpuinfo" in m and "live/proc/self/environ" not in m
    man = _manifest(live)
    assert man["kernel_release"] == os.uname().release and man["root"] == "/"
    ncpu = len([d for d in os.listdir("/sys/devices/system/cpu")
                if d.startswith("cpu") and d[3:].isdigit()])
    assert man["counts"]["cpus"] == ncpu
    host = socket.gethostname()
    if len(host) >= 4:   # shorter names ("vm") match by accident
        blob = json.dumps(man) + _read(live, "live/proc/hwloc-nofile-info").decode()
        assert host not in blob
    assert "HostName" not in _read(live, "live/proc/hwloc-nofile-info").decode()
    assert live.stat().st_size < 4 << 20


def test_live_round_trip_numalab(live):
    from numalab.topology import load
    topo = load(live)
    assert len(topo.cpus) == _manifest(live)["counts"]["cpus"]
    assert 0 in topo.cpus


@pytest.mark.skipif(shutil.which("lstopo-no-graphics") is None, reason="hwloc not installed")
def test_live_round_trip_lstopo(live, tmp_path):
    with tarfile.open(live) as tf:
        tf.extractall(tmp_path, filter="data")
    res = subprocess.run(["lstopo-no-graphics", "-i", str(tmp_path / "live"), "--of", "xml"],
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    ncpu = _manifest(live)["counts"]["cpus"]
    assert res.stdout.count('<object type="PU"') == ncpu


def test_safe_archive_reader_accepts_the_dump(fake, tmp_path):
    from numalab.topology import safetar
    tree = safetar.read_archive(collect(fake, tmp_path / "s.tar.bz2"))
    # the reader follows the kept links inside the archive
    assert tree.read("s/sys/bus/pci/devices/0000:00:04.0/numa_node") == b"1\n"
    assert tree.listdir("s/sys/bus/pci/devices/0000:00:04.0/msi_irqs") == ["40", "41", "42"]
    assert tree.read("s/sys/block/nvme0n1/mq/0/cpu_list") == b"0, 1\n"
    assert tree.read("s/sys/bus/cpu/devices/cpu3/node1/cpulist") == b"2-3\n"


@pytest.mark.skipif(shutil.which("lstopo-no-graphics") is None, reason="hwloc not installed")
def test_fake_round_trip_lstopo(fake, tmp_path):
    with tarfile.open(collect(fake, tmp_path / "h.tar.bz2")) as tf:
        tf.extractall(tmp_path, filter="data")
    res = subprocess.run(["lstopo-no-graphics", "-i", str(tmp_path / "h"), "--of", "xml",
                          "--whole-io"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.count('<object type="PU"') == 4
    assert res.stdout.count('<object type="NUMANode"') == 2
    assert 'pci_busid="0000:00:04.0"' in res.stdout


def test_docstring_examples():
    import doctest
    res = doctest.testmod(collect_mod)
    assert res.attempted >= 3 and res.failed == 0


def test_bench_stores_the_runs_asked_for(fake, tmp_path, monkeypatch):
    """``collect --bench --runs N`` stores N whole runs of the benchmark (the
    benchmark itself is faked here; tests/test_atomics.py runs the real one)."""
    import json

    from numalab.measure import atomics

    seen = {}

    def fake_runs(runs, max_threads=None, quick=False, progress=None, pause_s=1.0):
        seen["runs"] = runs
        one = {"kind": "atomics", "loadavg": [0.1, 0.1, 0.1], "loadavg_before": [0.1, 0.1, 0.1],
               "host": {"model_name": "X", "hypervisor": False}, "seconds": 0.0}
        return {**one, "runs": [one] * runs}
    monkeypatch.setattr(atomics, "run_atomics_repeated", fake_runs)
    import numalab.measure as M
    monkeypatch.setattr(M, "run_idle_inputs", lambda quick=False: {"kind": "idle_inputs"})
    out = tmp_path / "b.tar.bz2"
    assert main(["collect", "--root", str(fake), "-o", str(out), "--bench", "--runs", "3"]) == 0
    rec = json.loads(_read(out, "b/numalab/bench.json"))
    assert seen["runs"] == 3 and len(rec["runs"]) == 3 and rec["host"]["model_name"] == "X"
    assert main(["collect", "--root", str(fake), "-o", str(tmp_path / "c.tar.bz2"), "--bench"]) == 0
    assert seen["runs"] == atomics.RUNS >= 5
