"""The kernel lab (numalab.lab): spec parsing, the QEMU command line, the
initramfs, the kernel package handling and the dump pipeline, all without
QEMU (a fake QEMU stands in for the host-side pipeline); plus checks of the
committed lab dumps in data/lab/ and one real boot (slow) when QEMU and a
cached kernel are there."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from numalab.cli import main
from numalab.cpumask import format_cpulist, parse_cpulist
from numalab.lab import LabError
from numalab.lab import kernels as K
from numalab.lab.dump import (HEAD_MARK, build_tree, decode_channel, interrupt_deltas,
                              parse_links, parse_trace, read_lab_dump, split_head_stream)
from numalab.lab.initramfs import (DUMP_BEGIN, DUMP_END, Entry, InitConfig, build_initramfs,
                                   cpio_newc, init_script, initramfs_entries)
from numalab.lab.qemu import nvme_layout, qemu_command
from numalab.lab.spec import (NvmeSpec, UnexpressibleTopology, machine_from_text,
                              max_apic_id, parse_nvme)

REPO = Path(__file__).resolve().parents[1]
LAB_DATA = REPO / "data" / "lab"


# -- spec ------------------------------------------------------------------------------

def test_machine_from_synthetic_shapes():
    m = machine_from_text("pack:2 numa:1 core:24 pu:2")
    assert (m.sockets, m.dies, m.cores, m.threads, m.ncpus, m.nnodes) == (2, 1, 24, 2, 96, 2)
    assert format_cpulist(m.node_cpus(0)) == "0-47"
    m = machine_from_text("pack:2 numa:2 core:4 pu:2")
    assert (m.sockets, m.cores, m.threads, m.nnodes) == (2, 8, 2, 4)
    assert [format_cpulist(m.node_cpus(n)) for n in range(4)] == ["0-7", "8-15", "16-23",
                                                                  "24-31"]
    m = machine_from_text("numa:2 pack:1 die:2 l3:1 core:2 pu:1")
    assert (m.sockets, m.dies, m.cores) == (2, 2, 2)


def test_uneven_nodes_cpuless_memoryless_and_distances():
    m = machine_from_text("pack:1 core:6 pu:2", node_cpus="0-5;6-9;10-11;",
                          node_memory="512M,256M,0,256M",
                          distances="10,16,32,32;16,10,22,22;32,22,10,22;32,22,22,10")
    assert [format_cpulist(m.node_cpus(n)) for n in range(4)] == ["0-5", "6-9", "10-11", ""]
    assert m.memory_mib == (512, 256, 0, 256)
    assert m.distances[0][2] == 32
    cmd = qemu_command(m, [NvmeSpec(1, 3, 2)], "K", "I", "c", "d")
    nodes = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-numa" and
             cmd[i + 1].startswith("node,")]
    assert nodes == ["node,nodeid=0,memdev=m0,cpus=0-5", "node,nodeid=1,memdev=m1,cpus=6-9",
                     "node,nodeid=2,cpus=10-11", "node,nodeid=3,memdev=m3"]
    dists = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-numa" and
             cmd[i + 1].startswith("dist,")]
    assert len(dists) == 12 and "dist,src=2,dst=0,val=32" in dists
    assert cmd[cmd.index("-m") + 1] == "1024M"


@pytest.mark.parametrize("text, kwargs, part", [
    ("pack:1 cluster:2 core:2", {}, "cluster"),
    ("pack:2 numa:1 core:33 pu:2", {}, "132 vCPUs"),
    ("pack:1 l2:2 core:2 pu:2", {}, "l2 level"),
    ("pack:2 l3:2 core:2", {}, "l3 level"),
    ("pack:1 core:4 pu:2", {"node_cpus": "0;1-7"}, "split over nodes"),
    ("pack:1 core:4", {"node_cpus": "0-3;", "node_memory": "384,0"}, "neither CPUs"),
    ("pack:5 core:5 pu:5", {}, "APIC ids up to 292 need x2APIC"),
])
def test_unexpressible_topologies_name_the_part(text, kwargs, part):
    with pytest.raises(UnexpressibleTopology, match=part):
        machine_from_text(text, **kwargs)


def test_toml_description(tmp_path):
    p = tmp_path / "m.toml"
    p.write_text('synthetic = "pack:1 core:6"\nnode_cpus = ["0-3", "4-5"]\n'
                 'distances = [[10, 30], [30, 10]]\nname = "x"\n')
    m = machine_from_text(str(p))
    assert m.nnodes == 2 and m.distances == ((10, 30), (30, 10))
    p.write_text('synthetic = "pack:1 core:2 pu:2"\nnumbering = "smt-apart"\n')
    with pytest.raises(UnexpressibleTopology, match="smt-apart"):
        machine_from_text(str(p))


def test_bad_specs():
    with pytest.raises(LabError, match="not both"):
        machine_from_text("numa:2 core:2", node_cpus="0;1;2;3")
    with pytest.raises(LabError, match="in no node"):
        machine_from_text("core:4", node_cpus="0-2")
    with pytest.raises(LabError, match="not symmetric"):
        machine_from_text("numa:2 core:2", distances="10,20;21,10")
    with pytest.raises(LabError, match="N@NODE:QUEUES"):
        parse_nvme("3:0@62")
    with pytest.raises(UnexpressibleTopology, match="node 2 does not exist"):
        parse_nvme("1@2:4", nnodes=2)
    assert parse_nvme("6@node1:62") == NvmeSpec(6, 1, 62)


def test_apic_ids():
    assert max_apic_id(2, 1, 24, 2) == 111        # 1<<6 | 23<<1 | 1
    assert max_apic_id(1, 1, 1, 1) == 0
    assert max_apic_id(4, 1, 17, 1) == 3 << 5 | 16


# -- QEMU command line ----------------------------------------------------------------

def test_qemu_command_example_shape():
    m = machine_from_text("pack:2 numa:1 core:24 pu:2")
    devs = [NvmeSpec(3, 0, 62), NvmeSpec(3, 1, 62)]
    cmd = qemu_command(m, devs, "/k/vmlinux", "/i.cpio.gz", "/r/con", "/r/dump")
    assert cmd[0] == "qemu-system-x86_64"
    assert cmd[cmd.index("-accel") + 1] == "tcg,thread=single"
    assert cmd[cmd.index("-cpu") + 1] == "max"
    assert cmd[cmd.index("-smp") + 1] == "cpus=96,sockets=2,dies=1,cores=24,threads=2"
    assert cmd[cmd.index("-nic") + 1] == "none" and "-netdev" not in cmd
    assert "-no-reboot" in cmd
    devices = [cmd[i + 1] for i, a in enumerate(cmd) if a == "-device"]
    assert devices[:2] == ["pxb,bus_nr=16,id=pxb0,numa_node=0,bus=pci.0",
                           "pxb,bus_nr=32,id=pxb1,numa_node=1,bus=pci.0"]
    nvme = [d for d in devices if d.startswith("nvme,")]
    assert len(nvme) == 6
    assert all("max_ioqpairs=62,msix_qsize=63" in d for d in nvme)
    assert sum("bus=pxb1" in d for d in nvme) == 3
    assert len({d.split("serial=")[1].split(",")[0] for d in nvme}) == 6
    assert "file,id=con,path=/r/con" in cmd and "file,id=dump,path=/r/dump" in cmd
    kvm = qemu_command(m, devs, "k", "i", "c", "d", accel="kvm")
    assert kvm[kvm.index("-accel") + 1] == "kvm" and kvm[kvm.index("-cpu") + 1] == "host"


def test_nvme_layout_slots_and_limits():
    lay = nvme_layout([NvmeSpec(2, 1, 4), NvmeSpec(1, 0, 8), NvmeSpec(1, 1, 2)])
    assert [(d.node, d.bus, d.slot) for d in lay] == [(1, 16, 1), (1, 16, 2), (0, 32, 1),
                                                      (1, 16, 3)]
    with pytest.raises(UnexpressibleTopology, match="31 NVMe"):
        nvme_layout([NvmeSpec(31, 0, 2), NvmeSpec(1, 0, 2)])
    with pytest.raises(UnexpressibleTopology, match="node 2"):
        qemu_command(machine_from_text("numa:2 core:2"), [NvmeSpec(1, 2, 2)], "k", "i", "c", "d")


# -- initramfs ----------------------------------------------------------------------------

def read_newc(blob: bytes) -> list[dict]:
    """A small independent reader of newc cpio archives (for the tests)."""
    out, pos = [], 0
    while True:
        assert blob[pos:pos + 6] == b"070701", f"bad magic at {pos}"
        f = [int(blob[pos + 6 + 8 * i:pos + 14 + 8 * i], 16) for i in range(13)]
        namesize, filesize = f[11], f[6]
        name = blob[pos + 110:pos + 110 + namesize - 1].decode()
        pos += 110 + namesize
        pos += (4 - pos % 4) % 4
        data = blob[pos:pos + filesize]
        pos += filesize
        pos += (4 - pos % 4) % 4
        if name == "TRAILER!!!":
            return out
        out.append({"name": name, "mode": f[1], "data": data, "rdev": (f[9], f[10])})


def test_cpio_newc_round_trip():
    entries = [Entry("bin", "dir", mode=0o755), Entry("bin/x", "file", b"abc", 0o755),
               Entry("bin/sh", "link", b"x", 0o777), Entry("dev/console", "chr", mode=0o600,
                                                        rdev=(5, 1))]
    got = read_newc(cpio_newc(entries))
    assert [g["name"] for g in got] == ["bin", "bin/x", "bin/sh", "dev/console"]
    assert stat.S_ISDIR(got[0]["mode"]) and stat.S_ISREG(got[1]["mode"])
    assert got[1]["data"] == b"abc" and got[1]["mode"] & 0o777 == 0o755
    assert stat.S_ISLNK(got[2]["mode"]) and got[2]["data"] == b"x"
    assert stat.S_ISCHR(got[3]["mode"]) and got[3]["rdev"] == (5, 1)


def test_initramfs_contents_and_cache(tmp_path):
    bb = tmp_path / "busybox"
    bb.write_bytes(b"\x7fELF fake busybox")
    mods = {"nvme-core": b"core", "nvme": b"nvme"}
    cfg = InitConfig(modules=("nvme-core", "nvme"), trace=("nvme_probe",), nvme=3, io=True)
    path = build_initramfs(mods, cfg, bb, cache=tmp_path)
    assert path.parent == tmp_path / "initramfs"
    got = {e["name"]: e for e in read_newc(gzip.decompress(path.read_bytes()))}
    assert got["lib/modules/nvme.ko"]["data"] == b"nvme"
    assert got["bin/busybox"]["data"] == bb.read_bytes()
    assert got["dev/console"]["rdev"] == (5, 1)
    init = got["init"]["data"].decode()
    assert got["init"]["mode"] & 0o111 and init.startswith("#!/bin/busybox sh")
    assert 'MODULES="nvme-core nvme"' in init and "NVME=3" in init and "IO=1" in init
    # ftrace is armed before the first insmod
    assert init.index("echo function > $T/current_tracer") < init.index("insmod /lib/modules")
    # same inputs, same file; other inputs, another file
    assert build_initramfs(mods, cfg, bb, cache=tmp_path) == path
    other = build_initramfs(mods, InitConfig(modules=("nvme-core", "nvme")), bb, cache=tmp_path)
    assert other != path
    with pytest.raises(LabError, match="not in the kernel"):
        initramfs_entries(b"", {"nvme": b""}, cfg)


def test_init_script_is_valid_shell_and_refuses_odd_names():
    text = init_script(InitConfig(modules=("nvme",), trace=("nvme_probe", "local_pci_probe")))
    sh = shutil.which("busybox")
    cmd = [sh, "sh", "-n"] if sh else ["sh", "-n"]
    proc = subprocess.run(cmd, input=text, text=True, capture_output=True)
    assert proc.returncode == 0, proc.stderr
    with pytest.raises(LabError, match="trace function"):
        init_script(InitConfig(modules=("nvme",), trace=("x;reboot",)))


# -- kernels ----------------------------------------------------------------------------------

SID_STANZAS = """\
Package: linux-image-7.2.13+deb14-amd64
Version: 7.2.13-1
Depends: initramfs-tools, linux-base-7.2.13+deb14-amd64 (= 7.2.13-1), linux-binary-7.2.13+deb14-amd64 (= 7.2.13-1), linux-modules-7.2.13+deb14-amd64 (= 7.2.13-1)
SHA256: aa
Size: 1892

Package: linux-binary-7.2.13+deb14-amd64
Version: 7.2.13-1
SHA256: bb
Size: 14252084
Filename: pool/b.deb

Package: linux-modules-7.2.13+deb14-amd64
Version: 7.2.13-1
SHA256: cc
Size: 110095088
Filename: pool/m.deb

Package: linux-image-7.2.13+deb14-cloud-amd64
Version: 7.2.13-1

Package: linux-image-6.1.0-56-amd64
Version: 6.1.192-2
SHA256: dd
Size: 70550672

Package: linux-image-6.1.0-50-amd64
Version: 6.1.176-1
SHA256: ee
Size: 70305560

Package: linux-image-6.12-amd64
Version: 6.12.100-1
"""


def test_kernel_candidates_and_resolution():
    cands = K.kernel_candidates(K.parse_stanzas(SID_STANZAS))
    assert [c.release for c in cands] == ["7.2.13+deb14-amd64", "6.1.0-56-amd64",
                                          "6.1.0-50-amd64"]
    assert list(cands[0].packages) == ["linux-binary-7.2.13+deb14-amd64",
                                       "linux-modules-7.2.13+deb14-amd64"]
    assert cands[0].packages["linux-modules-7.2.13+deb14-amd64"]["sha256"] == "cc"
    assert list(cands[1].packages) == ["linux-image-6.1.0-56-amd64"]
    triples = [(c.release, c.upstream, c.image) for c in cands]
    assert K.resolve_kernel("6.1", triples) == "6.1.0-56-amd64"          # newest 6.1
    assert K.resolve_kernel("6.1.176", triples) == "6.1.0-50-amd64"
    assert K.resolve_kernel("6.1.0-50-amd64", triples) == "6.1.0-50-amd64"
    assert K.resolve_kernel("7.2", triples) == "7.2.13+deb14-amd64"
    assert K.resolve_kernel("linux-modules-7.2.13+deb14-amd64", triples) == "7.2.13+deb14-amd64"
    with pytest.raises(LabError) as e:
        K.resolve_kernel("6.7", triples)
    assert "unknown kernel '6.7'" in str(e.value) and "6.1.192 (6.1.0-56-amd64)" in str(e.value)
    assert "\n" not in str(e.value)


def fake_module(info: dict[str, str]) -> bytes:
    """A minimal ELF64 relocatable with a .modinfo section."""
    modinfo = b"".join(f"{k}={v}".encode() + b"\0" for k, v in info.items())
    shstr = b"\0.modinfo\0.shstrtab\0"
    body_off = 64
    modinfo_off = body_off
    shstr_off = modinfo_off + len(modinfo)
    shoff = (shstr_off + len(shstr) + 7) // 8 * 8
    ehdr = bytearray(64)
    ehdr[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", ehdr, 0x28, shoff)
    struct.pack_into("<HHH", ehdr, 0x3A, 64, 3, 2)
    sh = bytearray(64 * 3)
    struct.pack_into("<IIQQQQ", sh, 64, 1, 1, 0, 0, modinfo_off, len(modinfo))
    struct.pack_into("<IIQQQQ", sh, 128, 10, 3, 0, 0, shstr_off, len(shstr))
    blob = bytes(ehdr) + modinfo + shstr
    return blob + b"\0" * (shoff - len(blob)) + bytes(sh)


def test_modinfo_and_dependency_closure(tmp_path):
    assert K.modinfo(fake_module({"depends": "nvme-core", "license": "GPL"})) == {
        "depends": ["nvme-core"], "license": ["GPL"]}
    with pytest.raises(LabError):
        K.modinfo(b"not an elf at all, not at all........................................")
    mods = tmp_path / "kernel"
    (mods / "a").mkdir(parents=True)
    (mods / "a/nvme.ko").write_bytes(fake_module({"depends": "nvme-core"}))
    (mods / "a/nvme-core.ko").write_bytes(fake_module({"depends": "t10-pi"}))
    (mods / "a/t10-pi.ko").write_bytes(fake_module({"depends": "crc-t10dif,crc64-rocksoft"}))
    (mods / "a/crc-t10dif.ko").write_bytes(fake_module({"softdep": "pre: crct10dif",
                                                        "depends": "crct10dif_common"}))
    (mods / "a/crct10dif_common.ko").write_bytes(fake_module({"depends": ""}))
    (mods / "a/crc64-rocksoft.ko").write_bytes(fake_module({"softdep": "pre: crc64",
                                                            "depends": "crc64"}))
    (mods / "a/crc64.ko").write_bytes(fake_module({}))
    order, blobs = K._module_deps(tmp_path, ["nvme"])
    assert order[-2:] == ["nvme-core", "nvme"] and set(order) == set(blobs)
    for mod, need in [("t10-pi", "crc-t10dif"), ("t10-pi", "crc64-rocksoft"),
                      ("crc-t10dif", "crct10dif-common"), ("crc64-rocksoft", "crc64")]:
        assert order.index(need) < order.index(mod)
    with pytest.raises(LabError, match="not among"):
        K.module_closure({"nvme": []}, ["virtio_blk"])


def fake_elf_with_note(ntype: int) -> bytes:
    note = struct.pack("<III", 4, 4, ntype) + b"Xen\0" + b"\0\0\0\0"
    ehdr = bytearray(64)
    ehdr[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", ehdr, 0x20, 64)
    struct.pack_into("<HH", ehdr, 0x36, 56, 1)
    ph = struct.pack("<IIQQQQQQ", 4, 0, 120, 0, 0, len(note), len(note), 4)
    return bytes(ehdr) + ph + note


def test_pvh_note_and_bzimage_payload():
    assert K.has_pvh_note(fake_elf_with_note(18))
    assert not K.has_pvh_note(fake_elf_with_note(17))
    elf = fake_elf_with_note(18)
    import lzma
    payload = lzma.compress(elf, format=lzma.FORMAT_XZ) + struct.pack("<I", len(elf))
    img = bytearray(0x250 + 5 * 512 + len(payload))
    img[0x1F1] = 4                                   # 4 setup sectors + the boot sector
    img[0x202:0x206] = b"HdrS"
    struct.pack_into("<II", img, 0x248, 0, len(payload))
    img[5 * 512:5 * 512 + len(payload)] = payload
    fmt, blob = K.bzimage_payload(bytes(img))
    assert fmt == "xz" and K._decompress(fmt, blob) == elf


def test_cached_kernel_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    fake_cached_kernel(tmp_path, "6.1.0-56-amd64", "6.1.192")
    fake_cached_kernel(tmp_path, "7.2.13+deb14-amd64", "7.2.13")
    assert [k.release for k in K.cached_kernels()] == ["7.2.13+deb14-amd64", "6.1.0-56-amd64"]
    assert K.find_cached("6.1").release == "6.1.0-56-amd64"
    assert K.find_cached("linux-image-6.1.0-56-amd64").release == "6.1.0-56-amd64"
    assert K.find_cached("6.12") is None


# -- the dump pipeline without QEMU ------------------------------------------------------------

def fake_cached_kernel(cache: Path, release: str, upstream: str) -> Path:
    d = cache / "kernels" / release
    (d / "modules").mkdir(parents=True)
    (d / "vmlinuz").write_bytes(b"not a real kernel")
    (d / "modules" / "nvme.ko").write_bytes(b"fake nvme")
    (d / "kernel.json").write_text(json.dumps({
        "release": release, "upstream": upstream, "modules": ["nvme"],
        "packages": [{"name": f"linux-image-{release}", "version": upstream + "-1",
                      "sha256": "0" * 64}]}))
    return d


def fake_guest(ncpus: int = 4, queues: int = 2, with_io: bool = False) -> bytes:
    """What a guest with ``ncpus`` CPUs on 2 nodes and one NVMe on node 0
    (``queues`` I/O queues) would send: the tar.gz of /lab."""
    half = ncpus // 2
    files: dict[str, str] = {
        "/sys/devices/system/cpu/possible": f"0-{ncpus - 1}\n",
        "/sys/devices/system/cpu/present": f"0-{ncpus - 1}\n",
        "/sys/devices/system/cpu/online": f"0-{ncpus - 1}\n",
        "/sys/devices/system/node/possible": "0-1\n",
        "/sys/devices/system/node/online": "0-1\n",
        "/proc/version": "Linux version 7.2.13+deb14-amd64 (fake) #1 SMP\n",
        "/proc/sys/kernel/osrelease": "7.2.13+deb14-amd64\n",
    }
    links: dict[str, str] = {}
    for c in range(ncpus):
        t = f"/sys/devices/system/cpu/cpu{c}/topology"
        node = c // half
        files.update({f"{t}/physical_package_id": "0\n", f"{t}/core_id": f"{c}\n",
                      f"{t}/die_id": "0\n", f"{t}/thread_siblings_list": f"{c}\n",
                      f"{t}/cluster_cpus_list": f"{c}\n",
                      f"{t}/core_siblings_list": f"0-{ncpus - 1}\n"})
        links[f"/sys/devices/system/cpu/cpu{c}/node{node}"] = f"../../node/node{node}"
        links[f"/sys/bus/cpu/devices/cpu{c}"] = f"../../../devices/system/cpu/cpu{c}"
    for n in range(2):
        nd = f"/sys/devices/system/node/node{n}"
        files[f"{nd}/cpulist"] = f"{n * half}-{n * half + half - 1}\n"
        files[f"{nd}/distance"] = "10 20\n" if n == 0 else "20 10\n"
        files[f"{nd}/meminfo"] = f"Node {n} MemTotal:       393216 kB\n"
    dev = "/sys/devices/pci0000:10/0000:11:01.0"
    files.update({f"{dev}/class": "0x010802\n", f"{dev}/numa_node": "0\n",
                  f"{dev}/vendor": "0x1b36\n", f"{dev}/device": "0x0010\n"})
    links["/sys/bus/pci/devices/0000:11:01.0"] = "../../../devices/pci0000:10/0000:11:01.0"
    links[f"{dev}/driver"] = "../../../bus/pci/drivers/nvme"
    links["/sys/block/nvme0n1"] = "../devices/pci0000:10/0000:11:01.0/nvme/nvme0/nvme0n1"
    links["/sys/class/block/nvme0n1"] = "../../devices/pci0000:10/0000:11:01.0/nvme/nvme0/nvme0n1"
    per_q = ncpus // queues
    header = "      " + "".join(f"CPU{c:<7}" for c in range(ncpus)) + "\n"
    rows = []
    for q in range(queues + 1):
        irq = 24 + q
        files[f"{dev}/msi_irqs/{irq}"] = "msix\n"
        mask = f"0-{ncpus - 1}" if q == 0 else f"{(q - 1) * per_q}-{q * per_q - 1}"
        files[f"/proc/irq/{irq}/smp_affinity_list"] = mask + "\n"
        eff = str(parse_cpulist(mask).bit_length() - 1)
        files[f"/proc/irq/{irq}/effective_affinity_list"] = eff + "\n"
        rows.append(f" {irq}: " + " ".join("0" for _ in range(ncpus))
                    + f"  PCI-MSIX-0000:11:01.0 {q}-edge      nvme0q{q}\n")
        if q:
            files[f"{dev}/nvme/nvme0/nvme0n1/mq/{q - 1}/cpu_list"] = ", ".join(
                str(c) for c in range((q - 1) * per_q, q * per_q)) + "\n"
    before = header + "".join(rows)
    files["/proc/interrupts"] = before
    lab: dict[str, bytes] = {}
    if with_io:
        after_rows = [r.replace(" 0 ", " 7 ", 1) if "nvme0q1" in r else r for r in rows]
        lab["interrupts.before"] = before.encode()
        lab["interrupts.after"] = (header + "".join(after_rows)).encode()
        lab["io"] = b"cpus=4 count=16 bs=4096\n"
    stream = HEAD_MARK + b"\n".join(f"==> {p} <==\n{c}".encode() for p, c in files.items())
    lab["files"] = stream
    lab["links"] = "".join(f"'{k}' -> '{v}'\n" for k, v in links.items()).encode()
    lab["trace"] = (b"# tracer: function\n"
                    b"     kworker/0:1-40      [000] .....     3.141: nvme_probe <-local_pci_probe\n")
    lab["uname-r"] = b"7.2.13+deb14-amd64\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in lab.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def channel(blob: bytes) -> bytes:
    b64 = base64.encodebytes(blob).replace(b"\n", b"\r\n")
    return (f"{DUMP_BEGIN} {len(blob)} {hashlib.sha256(blob).hexdigest()}\r\n".encode() + b64
            + f"{DUMP_END}\r\n".encode())


def test_decode_channel_checks_the_transfer():
    blob = fake_guest()
    assert decode_channel(b"boot noise\n" + channel(blob)) == blob
    with pytest.raises(LabError, match="no begin marker"):
        decode_channel(b"nothing")
    cut = channel(blob)
    with pytest.raises(LabError, match="cut"):
        decode_channel(cut[:len(cut) // 2])
    head, _, body = channel(blob).partition(b"\n")
    flip = body.index(b"A")
    bad = head + b"\n" + body[:flip] + b"B" + body[flip + 1:]
    with pytest.raises(LabError, match="corrupt"):
        decode_channel(bad)


def test_head_stream_and_links():
    s = (HEAD_MARK + b"==> /proc/cpuinfo <==\nprocessor: 0\n\n\n==> /sys/x <==\n\n==> /sys/y <==\n1\n"
         + HEAD_MARK + b"==> /sys/z <==\n2\n")
    assert split_head_stream(s) == {"proc/cpuinfo": b"processor: 0\n\n", "sys/x": b"",
                                    "sys/y": b"1\n", "sys/z": b"2\n"}
    assert parse_links("'/sys/a b' -> '../c'\nstat: can't stat '/x'\n") == {"sys/a b": "../c"}


def test_build_tree_follows_links_and_refuses_escapes(tmp_path):
    build_tree(tmp_path / "t", {"sys/bus/pci/devices/X/class": b"1\n"},
               {"sys/bus/pci/devices/X": "../../../devices/pci0/X"})
    assert (tmp_path / "t/sys/devices/pci0/X/class").read_bytes() == b"1\n"
    (tmp_path / "u").mkdir()
    with pytest.raises(LabError, match="outside"):
        build_tree(tmp_path / "u", {}, {"sys/a": "../../../etc"})
    with pytest.raises(LabError):
        build_tree(tmp_path / "u", {"../x": b""}, {})


def test_trace_and_interrupt_parsers():
    lines = parse_trace("# tracer: function\n#\n"
                        "   kworker/0:2-51   [003] d..1.  5.25: nvme_probe <-local_pci_probe\n"
                        "  modprobe-77 [001] .....  6.5: nvme_probe <-local_pci_probe\n")
    assert [(t.cpu, t.comm, t.function) for t in lines] == [(3, "kworker/0:2", "nvme_probe"),
                                                           (1, "modprobe", "nvme_probe")]
    before = "   CPU0 CPU1\n 24: 1 2 PCI-MSIX x nvme0q1\nLOC: 5 5 Local timer interrupts\n"
    after = "   CPU0 CPU1\n 24: 1 9 PCI-MSIX x nvme0q1\nLOC: 6 5 Local timer interrupts\n"
    assert interrupt_deltas(before, after) == {"24": (0, 7), "LOC": (1, 0)}


def test_write_lab_dump_reads_back(tmp_path):
    from numalab.lab.run import write_lab_dump
    from numalab.topology import load
    out = tmp_path / "fake.tar.bz2"
    from bad_corpus import lab_manifest
    manifest = lab_manifest(ncpus=4, queues=2, io=True)
    path = write_lab_dump(fake_guest(with_io=True), out, manifest, "NUMALAB: init\n", tmp_path)
    assert path == out
    d = read_lab_dump(out)
    assert d.kernel_release == "7.2.13+deb14-amd64" and d.kernel_version == "7.2"
    assert d.manifest["io"]["guest"] == "cpus=4 count=16 bs=4096"
    [c] = d.nvme
    assert (c.address, c.node, c.controller, c.disks, c.msi_vectors) == (
        "0000:11:01.0", 0, "nvme0", ["nvme0n1"], 3)
    assert [(i.queue, i.smp_affinity, i.effective_affinity) for i in c.irqs] == [
        (0, 0b1111, 0b1000), (1, 0b0011, 0b0010), (2, 0b1100, 0b1000)]
    assert d.blk_mq == {"nvme0n1": {0: 0b0011, 1: 0b1100}}
    assert [(t.cpu, t.comm) for t in d.trace] == [(0, "kworker/0:1")]
    assert d.io_deltas == {"25": (7, 0, 0, 0)}
    topo = load(out)
    assert topo.node_ids == [0, 1] and topo.nodes[1].cpus == 0b1100
    assert topo.blk_mq["nvme0n1"] == [0b0011, 0b1100]
    # never overwrites
    from numalab.errors import NumalabError
    with pytest.raises(NumalabError, match="exists"):
        write_lab_dump(fake_guest(), out, manifest, "", tmp_path)


FAKE_QEMU = r'''#!PYTHON
import os, sys, time
args = sys.argv[1:]
if args == ["--version"]:
    print("QEMU emulator version 0.0 (fake)"); sys.exit(0)
paths = {a.split("id=")[1].split(",")[0]: a.split("path=")[1] for a in args if a.startswith("file,id=")}
mode = os.environ["FAKE_QEMU_MODE"]
count = os.environ["FAKE_QEMU_COUNT"]
n = int(open(count).read()) + 1 if os.path.exists(count) else 1
open(count, "w").write(str(n))
con = open(paths["con"], "w")
con.write("NUMALAB: init fake cpus=4\n"); con.flush()
if mode == "hang":
    time.sleep(60)
elif mode == "panic" or (mode == "panic-once" and n == 1):
    con.write("[    1.0] Kernel panic - not syncing: fake\n"); con.flush()
    sys.exit(0)
con.write("NUMALAB: collecting\n"); con.flush()
open(paths["dump"], "wb").write(open(os.environ["FAKE_QEMU_GUEST"], "rb").read())
'''


@pytest.fixture
def fake_lab(tmp_path, monkeypatch):
    """A cache with a fake kernel, a fake busybox and a fake QEMU script."""
    import numalab.lab.run as R
    cache = tmp_path / "cache"
    monkeypatch.setenv("NUMALAB_CACHE", str(cache))
    fake_cached_kernel(cache, "7.2.13+deb14-amd64", "7.2.13")
    bb = tmp_path / "busybox"
    bb.write_bytes(b"fake")
    qemu = tmp_path / "qemu-system-x86_64"
    qemu.write_text(FAKE_QEMU.replace("PYTHON", sys.executable))
    qemu.chmod(0o755)
    guest = tmp_path / "guest.chan"
    guest.write_bytes(channel(fake_guest()))
    monkeypatch.setattr(R, "find_busybox", lambda progress=None: bb)
    monkeypatch.setattr(R, "find_qemu", lambda: str(qemu))
    monkeypatch.setenv("FAKE_QEMU_GUEST", str(guest))
    monkeypatch.setenv("FAKE_QEMU_COUNT", str(tmp_path / "count"))
    return tmp_path


def _run(fake_lab, mode, out="out.tar.bz2", **kw):
    from numalab.lab.run import LabOptions, run_lab
    os.environ["FAKE_QEMU_MODE"] = mode
    msgs = []
    opts = LabOptions(devices=[NvmeSpec(1, 0, 2)], **kw)
    path = run_lab("7.2", machine_from_text("numa:2 core:2"), opts,
                   output=fake_lab / out, progress=msgs.append)
    return path, msgs


def test_run_lab_with_a_fake_qemu(fake_lab):
    path, msgs = _run(fake_lab, "ok")
    assert path.is_file() and any(m.startswith("done in") for m in msgs)
    assert any("guest: init fake" in m for m in msgs)
    d = read_lab_dump(path)
    m = d.manifest
    assert m["kernel"]["release"] == "7.2.13+deb14-amd64"
    assert m["qemu"]["version"] == "QEMU emulator version 0.0 (fake)"
    assert "-smp" in m["qemu"]["command"] and m["devices"][0]["io_queues"] == 2
    assert not any(str(fake_lab) in a for a in m["qemu"]["command"] if "cache" in a)
    assert m["attempts"] == [{"accel": "tcg", "seconds": m["attempts"][0]["seconds"],
                              "result": "ok", "message": ""}]


def test_run_lab_retries_once_after_a_panic(fake_lab):
    path, msgs = _run(fake_lab, "panic-once")
    assert any("booting once more" in m for m in msgs)
    assert [a["result"] for a in read_lab_dump(path).manifest["attempts"]] == ["oops", "ok"]
    os.unlink(fake_lab / "count")
    with pytest.raises(LabError, match="last console lines in"):
        _run(fake_lab, "panic", out="second.tar.bz2")
    assert not (fake_lab / "second.tar.bz2").exists()
    assert (fake_lab / "count").read_text() == "2"


def test_run_lab_timeout_leaves_no_output_and_a_log(fake_lab):
    with pytest.raises(LabError) as e:
        _run(fake_lab, "hang", timeout=1.5)
    msg = str(e.value)
    assert "did not finish in 2 s" in msg and "no output written" in msg
    log = Path(msg.rsplit(" ", 1)[1])
    assert log.is_file() and "NUMALAB: init fake" in log.read_text()
    assert not (fake_lab / "out.tar.bz2").exists()
    assert not list(fake_lab.glob("*.tmp")) and not list(fake_lab.glob(".out*"))


# -- the command line ----------------------------------------------------------------------------

def test_cli_errors_are_one_line(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    assert main(["lab", "run", "--kernel", "7.2", "--topology", "pack:1 cluster:2 core:2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cluster level" in err
    assert main(["lab", "run", "--kernel", "7.2", "--topology", "pack:2 core:40 pu:2"]) == 2
    assert "guests above 128 vCPUs are refused" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["lab", "run", "--kernel", "7.2", "--topology", "numa:2 core:2",
                 "--nvme", "1@0:2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt-get install qemu-system-x86" in err


def test_cli_unknown_kernel_lists_what_exists(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    cands = K.kernel_candidates(K.parse_stanzas(SID_STANZAS))
    monkeypatch.setattr(K.AptCache, "update", lambda self, force=False: False)
    monkeypatch.setattr(K.AptCache, "kernels", lambda self: cands)
    assert main(["lab", "kernels", "--fetch", "5.10"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown kernel '5.10'" in err and "7.2.13" in err
    assert main(["lab", "kernels"]) == 0
    out = capsys.readouterr().out
    assert "(none)" in out and "linux-binary-7.2.13+deb14-amd64" in out


# -- the committed lab dumps -----------------------------------------------------------------------

COMMITTED = sorted(LAB_DATA.glob("*.tar.bz2"))


@pytest.mark.skipif(not COMMITTED, reason="no lab dumps in data/lab")
@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.name)
def test_committed_lab_dump(path):
    """Each committed dump is what its manifest says it is: the kernel, the
    machine (nodes and their CPUs, distances), every NVMe controller on its
    node with an admin vector plus one per I/O queue, a blk-mq map covering
    every CPU, one probe per controller in the trace."""
    from numalab.topology import load
    d = read_lab_dump(path)
    m = d.manifest
    assert d.kernel_release == m["kernel"]["release"]
    assert all(len(p["sha256"]) == 64 for p in m["kernel"]["packages"])
    topo = load(path)
    spec_nodes = m["topology"]["nodes"]
    assert topo.node_ids == [n["node"] for n in spec_nodes]
    for n in spec_nodes:
        assert topo.nodes[n["node"]].cpus == parse_cpulist(n["cpus"])
    if m["topology"]["distances"]:
        assert topo.distances == m["topology"]["distances"]
    ncpus = m["topology"]["cpus"]
    assert topo.online == (1 << ncpus) - 1
    want = sorted(dev["node"] for dev in m["devices"])
    assert sorted(c.node for c in d.nvme) == want
    queues = {dev["pci_address"]: dev["io_queues"] for dev in m["devices"]}
    from numalab.kernel.sched.isolation import from_cmdline
    iso = from_cmdline((m.get("qemu") or {}).get("append", ""), topo.possible).isolcpus
    for c in d.nvme:
        nq = min(queues[c.address], ncpus)
        assert c.msi_vectors == nq + 1, c.address
        assert sorted(i.queue for i in c.irqs) == list(range(nq + 1))
        for disk in c.disks:
            hctx = d.blk_mq[disk]
            assert len(hctx) == nq
            union = 0
            for mask in hctx.values():
                assert union & mask == 0
                union |= mask
            # block/blk-mq.c (7.2:4275-4282) rules cpu_is_isolated() CPUs out of
            # hctx->cpumask: a boot with isolcpus=domain lists only the others
            assert union == ((1 << ncpus) - 1) & ~iso
    if "nvme_probe" in m["trace"]:
        assert sum(t.function == "nvme_probe" for t in d.trace) == len(d.nvme)
    if m["io"]:
        assert d.io_deltas and any(d.irq_names[i].startswith("nvme") for i in d.io_deltas)


@pytest.mark.skipif(not shutil.which("lstopo-no-graphics") or not COMMITTED,
                    reason="needs hwloc's lstopo-no-graphics and a lab dump")
def test_lstopo_reads_a_lab_dump(tmp_path):
    path = COMMITTED[0]
    with tarfile.open(path) as tf:
        tf.extractall(tmp_path, filter="data")
    [top] = [p for p in tmp_path.iterdir() if p.is_dir()]
    out = subprocess.run(["lstopo-no-graphics", "-i", str(top), "--of", "console"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    topo_nodes = len(read_lab_dump(path).manifest["topology"]["nodes"])
    assert out.stdout.count("NUMANode L#") == topo_nodes


# -- one real boot -----------------------------------------------------------------------------------

def _cached_61():
    try:
        return K.find_cached("6.1")
    except Exception:                                   # noqa: BLE001 - any cache trouble: skip
        return None


@pytest.mark.slow
def test_boot_a_real_kernel(tmp_path):
    """Boot Debian's 6.1 on 4 vCPUs, 2 nodes, one NVMe with 4 queues on
    node 1 (about 20 s): the dump says what was asked."""
    if not shutil.which("qemu-system-x86_64"):
        pytest.skip("qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)")
    k = _cached_61()
    if k is None:
        pytest.skip("no cached 6.1 kernel (numalab lab kernels --fetch 6.1)")
    from numalab.lab.initramfs import find_busybox
    try:
        find_busybox()
    except Exception as e:                              # noqa: BLE001
        pytest.skip(f"no static busybox: {e}")
    from numalab.lab.run import LabOptions, run_lab
    out = tmp_path / "boot.tar.bz2"
    run_lab(k.release, machine_from_text("numa:2 core:2 pu:1"),
            LabOptions(devices=[NvmeSpec(1, 1, 4)], timeout=300), output=out,
            command="numalab lab run --kernel 6.1 --topology 'numa:2 core:2 pu:1' --nvme 1@1:4")
    d = read_lab_dump(out)
    assert d.kernel_release == k.release
    from numalab.lab.oracle import reproduce
    assert reproduce(out) == ["numalab lab run --kernel 6.1 --topology 'numa:2 core:2 pu:1' --nvme 1@1:4"]
    [c] = d.nvme
    assert c.node == 1 and c.msi_vectors == 5
    assert sorted(d.blk_mq[c.disks[0]]) == [0, 1, 2, 3]
    assert [t.function for t in d.trace] == ["nvme_probe"]


@pytest.mark.skipif(not COMMITTED, reason="no lab dumps in data/lab")
def test_lab_show_says_how_to_make_the_dump_again(capsys, tmp_path):
    from numalab.cli import main
    built = next(p for p in COMMITTED if p.name.startswith("lab-built-"))
    assert main(["lab", "show", str(built)]) == 0
    out = capsys.readouterr().out
    assert "to make it again: numalab lab build-kernel --source" in out
    assert "to make it again: numalab lab run --kernel built:" in out and built.name in out
    copy = tmp_path / built.name                     # no README beside it, no record
    shutil.copy(built, copy)
    assert main(["lab", "show", str(copy)]) == 0
    assert "to make it again: not recorded" in capsys.readouterr().out
