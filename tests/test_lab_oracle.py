"""The port against real kernels: every committed lab dump (data/lab/, made by
``numalab lab run`` on Debian kernels in QEMU) is replayed against the port of
the kernel version the dump recorded. No QEMU needed.

For each NVMe controller, the managed interrupt masks of its I/O queues (the
admin queue is nvme's one ``pre_vectors`` entry and is not spread) must be
what ``group_cpus_evenly(nr_io_queues)`` gives for that kernel, and every
namespace's blk-mq map must send each hardware queue's CPUs to that queue's
interrupt mask (``blk_mq_map_hw_queues()`` / ``blk_mq_pci_map_queues()`` read
the masks back).

Dumps of kernels built by ``numalab lab build-kernel`` name their patch in the
manifest: the rotate build (patch 004) is replayed with ``variant="rotate"``
and the ``spread_offset`` of its traced ``group_cpus_evenly()`` call, and the
PF_WQ_WORKER pair (patch 001 on 6.12) is compared with the probe model's
policies (a) and (b) on the same machine.
"""

from pathlib import Path

import pytest

from numalab.cpumask import format_cpulist
from numalab.datasets import lab_datasets
from numalab.kernel import versions
from numalab.lab.dump import read_lab_dump
from numalab.lab.build import FRAGMENT, fragment_file
from numalab.lab.oracle import (build_command, calls_per_probe, dedicated_counts, dump_build, group_cpus_calls,
                                port_masks,
                                probe_vs_model, rotate_offsets)
from numalab.topology import load

from numalab.kernel.sched.isolation import from_cmdline

REPO = Path(__file__).resolve().parents[1]
DUMPS = lab_datasets(REPO)


def test_the_lab_dumps_are_committed():
    names = {Path(p).name for p in DUMPS}
    assert len(names) >= 5
    kernels = {versions.parse_release(read_lab_dump(p).kernel_release) for p in DUMPS}
    assert {"6.1", "7.2"} <= kernels


@pytest.mark.parametrize("dump", DUMPS, ids=lambda p: Path(p).stem)
def test_port_equals_the_real_kernel(dump):
    d = read_lab_dump(dump)
    kernel = versions.parse_release(d.kernel_release)
    topo = load(dump)
    assert d.nvme, "a lab dump without NVMe tests nothing"
    for ctrl in d.nvme:
        io = sorted((q for q in ctrl.irqs if q.queue >= 1), key=lambda q: q.queue)
        assert io, ctrl.address
        masks = port_masks(d, ctrl, topo)     # mainline, or rotate with the traced offset
        real = [q.smp_affinity for q in io]
        assert real == masks, (
            f"{ctrl.controller} on Linux {kernel}: kernel "
            f"{[format_cpulist(m) for m in real]} port {[format_cpulist(m) for m in masks]}")
        for q in io:   # the interrupt is delivered on one CPU of its mask
            assert q.effective_affinity and q.effective_affinity & ~q.smp_affinity == 0
        # booted with isolcpus=domain, 7.2's hctx cpu_list leaves out the isolated
        # CPUs (block/blk-mq.c 7.2:4275-4282, cpu_is_isolated()); the IRQ masks
        # above keep them
        iso = from_cmdline((d.manifest.get("qemu") or {}).get("append", ""),
                           topo.possible).isolcpus
        for disk in ctrl.disks:
            hctx = d.blk_mq[disk]
            assert hctx == {i: m & ~iso for i, m in enumerate(masks)}, disk


def test_tables_for_the_book():
    from numalab.lab.oracle import dedicated_counts, mask_table, probe_table
    ex = [p for p in DUMPS if "ex004" in p][0]
    t = mask_table(ex)
    assert t["equal"].all() and len(t) == 6 * 62
    counts = dedicated_counts(ex)
    six = [c for c, n in counts.items() if n == 6]
    # the patch's example on a real 7.2 kernel: 28 CPUs carry 6 dedicated vectors each
    assert len(six) == 28
    from numalab.cpumask import format_cpulist, mask_of
    assert format_cpulist(mask_of(six)) == "0-1,4-5,38-49,52-53,86-95"
    probes = probe_table([p for p in DUMPS if "6.1-16cpu" in p][0])
    assert len(probes) == 3 and set(probes["cpu"]) == {0}
    assert all(c.startswith("kworker/0:") for c in probes["comm"])


def _built(patch_prefix, source):
    """Dumps of numalab-built kernels of ``source`` with a patch whose file
    name starts with ``patch_prefix`` (None: the unpatched build)."""
    out = []
    for p in DUMPS:
        b = dump_build(p)
        if b and b["source_package"] == f"linux-source-{source}":
            patch = b.get("patch")
            if (patch is None) if patch_prefix is None else (patch or "").startswith(patch_prefix):
                out.append(p)
    return out


def test_rotate_pair_on_the_patch_example():
    """Patch 004 on 7.2 next to the unpatched build of the same source and
    fragment: every controller's masks are the rotate port's for the
    spread_offset its traced group_cpus_evenly() call got, the offsets are
    the call counts since boot, and the stacking of dedicated vectors drops."""
    (plain,), (rot,) = _built(None, "7.2"), _built("004-", "7.2")
    bp, br = dump_build(plain), dump_build(rot)
    assert (bp["source_sha256"], bp["fragment_sha256"]) == (br["source_sha256"],
                                                            br["fragment_sha256"])
    assert bp["patch_sha256"] is None and len(br["patch_sha256"]) == 64
    dr, dp = read_lab_dump(rot), read_lab_dump(plain)
    assert dr.manifest["topology"] == dp.manifest["topology"]
    assert dr.manifest["devices"] == dp.manifest["devices"]
    calls = group_cpus_calls(dr)
    offsets = rotate_offsets(dr)
    # each controller's interrupt spread is one traced call, matched one to one
    irq_calls = [k for k, c in enumerate(calls) if c.function == "irq_create_affinity_masks"]
    assert len(irq_calls) == len(dr.nvme)
    assert sorted(offsets.values()) == irq_calls
    # the calls between devices moved the counter: the offsets are not 0..5
    assert len(calls) > len(irq_calls)
    assert len(group_cpus_calls(dp)) == len(calls)     # the same calls without the patch
    # every traced probe's thread made one admin-tag-set map and one interrupt spread, in that order,
    # and those are all the calls (the NVMe probes count twice each)
    per = calls_per_probe(dr)
    assert len(per) == len(dr.nvme)
    assert all([f for _, f in c] == ["blk_mq_map_queues", "irq_create_affinity_masks"] for c in per.values())
    assert sorted(k for c in per.values() for k, _ in c) == list(range(len(calls)))
    # the unpatched build gives every controller the same masks...
    same = {tuple(q.smp_affinity for q in c.irqs if q.queue >= 1) for c in dp.nvme}
    assert len(same) == 1
    # ...the patched one does not, and no CPU carries as many dedicated vectors
    differ = {tuple(q.smp_affinity for q in c.irqs if q.queue >= 1) for c in dr.nvme}
    assert len(differ) == len(dr.nvme)
    assert dedicated_counts(rot).max() < dedicated_counts(plain).max()


def test_pf_wq_worker_pair_against_the_probe_model():
    """Patch 001 on 6.12 next to the unpatched build: the real probe thread
    and CPU against the probe model's policy (a) "mainline" (6.12's
    work_on_cpu(): a bound kworker on the node's first CPU) and (b)
    "pf-wq-worker" (the probe stays in its unbound async worker on the
    device's node)."""
    (plain,), (fixed,) = _built(None, "6.12"), _built("001-", "6.12")
    a = probe_vs_model(plain, "mainline")
    b = probe_vs_model(fixed, "pf-wq-worker")
    n = len(read_lab_dump(plain).nvme)
    assert len(a) == len(b) == n == 3
    assert a["same_kind"].all() and a["same_cpu"].all() and a["same_node"].all()
    assert (a["real_kind"] == "bound kworker").all()
    assert b["same_kind"].all() and b["same_node"].all()
    assert (b["real_kind"] == "unbound kworker").all()
    # and the other way round they differ: the fix changed where probes run
    assert not probe_vs_model(fixed, "mainline")["same_kind"].any()


# -- every measured figure says how to measure it again -------------------------------

def test_every_committed_dump_says_how_to_redo_it():
    from numalab.lab.oracle import build_command, dump_build, reproduce
    readme = (REPO / "data" / "lab" / "README.md").read_text()
    for p in DUMPS:
        cmds = reproduce(p)
        assert cmds[-1].startswith("numalab lab run ") and cmds[-1].endswith(f"-o {Path(p).name}")
        build = dump_build(p)
        if build:
            assert len(cmds) == 2 and cmds[0] == build_command(build)
            assert cmds[0] in readme, f"{cmds[0]} is not the README's build command"
            kernel = cmds[1].split("--kernel ", 1)[1].split()[0]
            assert kernel == f"built:{build['name']}"
        else:
            assert len(cmds) == 1


def test_a_dump_without_a_record_is_an_error(tmp_path):
    import shutil
    from numalab.lab import LabError
    from numalab.lab.oracle import reproduce
    src = next(p for p in DUMPS if "io" in Path(p).name)
    copy = tmp_path / Path(src).name
    shutil.copy(src, copy)
    with pytest.raises(LabError, match="no record of the command"):
        reproduce(copy)


def test_built_dumps_were_made_with_a_committed_fragment():
    """A changed fragment builds other kernels than the ones the committed
    dumps booted: every built dump's fragment is still committed
    (src/numalab/lab/kconfig/), and the command that remakes it names it."""
    built = [p for p in DUMPS if dump_build(p)]
    assert built
    for p in built:
        b = dump_build(p)
        frag = fragment_file(b["fragment_sha256"])
        assert frag is not None, p
        cmd = build_command(b)
        assert (frag == FRAGMENT) == ("--fragment" not in cmd), cmd
    assert fragment_file("0" * 64) is None


@pytest.mark.parametrize("name, want_local", [("isolcpus", True), ("nohzfull", False)])
def test_pci_call_probe_port_with_isolcpus_and_nohz_full_on_7_2(name, want_local):
    """Linux 7.2 booted with isolcpus=domain over the NVMe's whole node, and with
    nohz_full= over it: pci_call_probe()'s port, given the boot's housekeeping
    masks, names the traced CPU (bound kworker) or "probe here" (the traced
    probe runs in the unbound async worker, on an HK_TYPE_DOMAIN CPU)."""
    from numalab.kernel.drivers.pci.pci_driver import pci_call_probe_cpu
    from numalab.kernel.sched.isolation import from_cmdline
    from numalab.kernel.workqueue import wq_unbound_cpumask
    from numalab.models.probe.calibrate import thread_kind
    path = [p for p in DUMPS if f"3nvme-node1-{name}" in p]
    if not path:
        pytest.skip("the isolation dumps are not in this checkout")
    d = read_lab_dump(path[0])
    topo = load(path[0])
    hk = from_cmdline(d.manifest["qemu"]["append"], topo.possible)
    assert (hk.isolcpus if name == "isolcpus" else hk.nohz_full) == topo.cpumask_of_node(1)
    traced = [t for t in d.trace if t.function == "nvme_probe"]
    assert len(traced) == len(d.nvme) == 3
    for ctrl, t in zip(d.nvme, sorted(traced, key=lambda t: t.timestamp)):
        cpu = pci_call_probe_cpu(topo, hk, ctrl.node, in_wq_worker=True, kernel="7.2")
        if want_local:
            assert cpu == topo.nr_cpu_ids                     # no HK_TYPE_DOMAIN CPU on node 1
            assert thread_kind(t.comm) == "unbound kworker"
            assert (wq_unbound_cpumask(topo, hk, "7.2") >> t.cpu) & 1
        else:
            assert cpu == t.cpu == 8                          # nohz_full is not read in 7.2
            assert thread_kind(t.comm) == "bound kworker"
    # 6.12's rule would have kept the nohz_full node's CPUs out
    if not want_local:
        assert pci_call_probe_cpu(topo, hk, 1, kernel="6.12") == topo.nr_cpu_ids
