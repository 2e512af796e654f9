"""blk-mq and managed-IRQ ports against real dumps (models/irq/blkmq.py)."""

from pathlib import Path

import pytest

from numalab.datasets import hwloc_dir, project_datasets
from numalab.kernel.lib.group_cpus import group_cpus_evenly
from numalab.models.irq.blkmq import (blk_mq_map_queues, blk_mq_map_queues_legacy, compare_blk_mq,
                                  compare_irqs, hctx_masks, irq_create_affinity_masks,
                                  managed_vectors)
from numalab.topology import load
from numalab.topology.model import IRQ, PCIDevice

SEED = "numa:2 cluster:24 core:2 pu:1"


def test_map_is_the_groups():
    t = load(SEED)
    g = group_cpus_evenly(62, t)
    assert hctx_masks(blk_mq_map_queues(62, t), 62) == list(g)
    mq = blk_mq_map_queues(62, t, queue_offset=5)
    assert set(mq) == set(range(96)) and min(mq.values()) == 5


def test_more_queues_than_cpus_wrap_onto_groups():
    t = load("numa:1 core:4 pu:1")
    g = group_cpus_evenly(6, t)
    assert g.nummasks == 4 and list(g[:4]) == [0b10, 0b1000, 0b100, 0b1]   # 7.2's heapsort order
    # 4 masks only: queue q takes group q % 4, the later queue wins (CPU 1: queues 0 then 4)
    assert blk_mq_map_queues(6, t) == {0: 3, 1: 4, 2: 2, 3: 5}
    assert blk_mq_map_queues(0, t, queue_offset=2) == {0: 2, 1: 2, 2: 2, 3: 2}


def test_legacy_map():
    t = load("numa:1 core:4 pu:1")
    assert blk_mq_map_queues_legacy(2, t) == {0: 0, 1: 1, 2: 0, 3: 1}
    assert blk_mq_map_queues_legacy(8, t) == {0: 0, 1: 1, 2: 2, 3: 3}


def test_affinity_masks_pre_post_and_sets():
    t = load("numa:2 core:4 pu:1")
    out = irq_create_affinity_masks(10, t, pre_vectors=1, post_vectors=1, set_size=[4, 4])
    assert len(out) == 10
    assert out[0] == (t.possible, False) and out[9] == (t.possible, False)
    assert [k for _, k in out] == [False] + [True] * 8 + [False]
    assert [m for m, _ in out[1:5]] == list(group_cpus_evenly(4, t))
    assert irq_create_affinity_masks(2, t, pre_vectors=1, post_vectors=1) is None
    # fewer CPUs than vectors: the groups stop at nummasks, the rest get the default
    small = load("numa:1 core:2 pu:1")
    out = irq_create_affinity_masks(5, small, pre_vectors=1, default_affinity=0b1)
    assert [m for m, _ in out][3:] == [0b1, 0b1]


def test_managed_vectors_from_names():
    t = load("numa:1 core:2 pu:1")
    t = t.replace(pci=[PCIDevice("0000:01:00.0", msi_vectors=3, driver="nvme")], irqs=[
        IRQ("30", chip="PCI-MSIX-0000:01:00.0", name="nvme0q0", smp_affinity=3),
        IRQ("31", chip="PCI-MSIX-0000:01:00.0", name="nvme0q1", smp_affinity=2),
        IRQ("32", chip="PCI-MSIX-0000:01:00.0", name="nvme0q2", smp_affinity=1)])
    assert managed_vectors(t) == {"0000:01:00.0": {1: 2, 2: 1}}
    df = compare_irqs(t)
    assert df["match"].all() and len(df) == 2
    bad = t.replace(irqs=[IRQ("31", chip="PCI-MSIX-0000:01:00.0", name="nvme0q1", smp_affinity=3)])
    assert not compare_irqs(bad)["match"].any()


def test_project_dump_matches():
    dumps = [p for p in project_datasets() if p.endswith(".tar.bz2")]
    if not dumps:
        pytest.skip("no collected dump")
    for p in dumps:
        t = load(p)
        b = compare_blk_mq(t)
        assert len(b) > 0 and b["match"].all()
        i = compare_irqs(t)
        assert i["match"].all()


def test_shared_dumps_with_blk_mq_match():
    p = hwloc_dir() / "linux" / "2pa-pcidomain32bits.tar.bz2"
    b = compare_blk_mq(load(str(p)))
    assert list(b.disk) == ["vda"] and b["match"].all() and b["match_legacy"].all()


def test_empty_mask_fails_alloc_descs_on_the_hybrid_dump():
    """Rotate's empty group reaches alloc_descs() through
    irq_create_affinity_masks() and fails the first MSI-X attempt; mainline's
    masks of the same call pass. The retry then grants the vectors before the
    first empty mask (or fewer), never more, and never an error when that is
    at least one."""
    from pathlib import Path

    from numalab.models.irq.blkmq import EINVAL, alloc_descs, msix_allocation
    from numalab.topology import load
    p = Path(__file__).resolve().parents[1] / "data" / "hwloc" / "linux" / \
        "20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2"
    if not p.exists():
        import pytest
        pytest.skip("hybrid dump not present")
    t = load(str(p))
    assert alloc_descs([(1, True), (0, True)]) == -EINVAL
    fails = [v for v in range(2, 22) if msix_allocation(v + 1, t, 1, "rotate", 0)["errno"]]
    assert fails and all(msix_allocation(v + 1, t, 1)["errno"] == 0 for v in range(2, 22))
    r = msix_allocation(fails[0] + 1, t, 1, "rotate", 0)
    assert r["empty"] and all(i >= 1 for i in r["empty"])      # never the admin vector
    assert 1 <= r["vectors"] <= r["empty"][0] < fails[0] + 1
    assert len(r["attempts"]) >= 2 and r["attempts"][-1]["errno"] == 0
    offs = [a["spread_offset"] for a in r["attempts"]]
    assert offs == list(range(offs[0], offs[0] + len(offs)))   # one global counter
    assert msix_allocation(fails[0] + 1, t, 1)["vectors"] == fails[0] + 1


def test_msix_retry_gives_enospc_when_nothing_was_allocated():
    """msi_handle_pci_fail() returns -ENOSPC when the first descriptor fails;
    the admin vector is never empty, so force it: an empty default mask."""
    from numalab.models.irq import blkmq as B
    from numalab.models.irq.sweep import clustered_view
    v = clustered_view(1, (4, 1))
    assert B.irq_calc_affinity_vectors(2, 9, 3) == 0          # more reserved than minvec
    r = B.msix_allocation(6, v, 1, "rotate", 1, minvec=6)     # retry below minvec
    assert r["vectors"] == -B.ENOSPC and r["errno"] == -B.EINVAL


def test_msix_losses_on_the_hybrid_dump():
    """Mainline grants every vector; rotate loses some at the top of the
    range, never grants more than asked, and the table counts offsets."""
    from pathlib import Path

    from numalab.models.irq.blkmq import msix_losses
    from numalab.topology import load
    p = Path(__file__).resolve().parents[1] / "data" / "hwloc" / "linux" / \
        "20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2"
    if not p.exists():
        import pytest
        pytest.skip("hybrid dump not present")
    df = msix_losses(load(str(p)), range(2, 21), range(6))
    assert (df["mainline: vectors granted"] == df["vectors spread"] + 1).all()
    lost = df["rotate: I/O queues lost"].str.split(" or ").map(lambda xs: [int(x) for x in xs])
    assert all(min(x) >= 0 for x in lost) and (df["max lost"] == lost.map(max)).all()
    losing = df[df["max lost"] > 0]
    assert len(losing) and (losing["rotate: offsets losing vectors"] <= 6).all()
