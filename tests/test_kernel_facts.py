"""The kernel facts chapters 3, 4 and 5 state about where work runs and what a
reference costs (numalab/data/kernel_facts/placement-7.2.toml): the orderings
the prose states hold in the record (the chapters' builds check the same and
fail otherwise), and the record holds in Linux 7.2's source whenever a tree
with its files is here ($NUMALAB_LINUX_7_2, or the lab cache unpacked with
``python -m numalab.kernel.facts --unpack 7.2``)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from numalab.kernel import facts as KF

PLACEMENT = KF.load("placement-7.2")

# (what the prose says, the facts in the order it says them)
ORDERS = [
    ("chapter 3: a new unbound worker is bound to its pool's CPUs, then woken "
     "(the scheduler's wake-up path picks its CPU)", ("wq.create_worker.bind", "wq.create_worker.wake")),
    ("chapter 3: queue_work_node() tries the queuing CPU if it is on the node, then "
     "the node's first online CPU", ("wq.select_numa.local", "wq.select_numa.first")),
    ("chapter 4: the NUMA step of the flat policy is gated on per-node masks being off, "
     "then on LLCs and nodes differing", ("scx.selcpu.per_node", "scx.selcpu.mismatch")),
    ("chapter 5: refcount_inc_not_zero() reads the counter, then loops on cmpxchg",
     ("refcount.read", "refcount.cmpxchg")),
]


@pytest.mark.parametrize("what,ids", ORDERS, ids=[o[1][0] for o in ORDERS])
def test_the_orders_the_chapters_state_hold_in_the_record(what, ids):
    lines = KF.in_order(PLACEMENT, *ids)
    assert lines == sorted(lines)


def test_every_record_loads_and_names_its_kernel():
    assert {"devmem-7.2", "placement-7.2"} <= set(KF.records())
    for name in KF.records():
        rec = KF.load(name)
        assert rec["source"]["kernel"] == "7.2" and rec["facts"], name


def test_a_reversed_order_fails():
    with pytest.raises(KF.FactError):
        KF.in_order(PLACEMENT, "wq.create_worker.wake", "wq.create_worker.bind")


def _tree() -> Path | None:
    env = os.environ.get("NUMALAB_LINUX_7_2")
    if env:
        return Path(env)
    tree = KF.find_tree("7.2")
    return tree if KF.has_files(tree, PLACEMENT) else None


def test_the_record_holds_in_linux_7_2():
    tree = _tree()
    if tree is None:
        pytest.skip("no Linux 7.2 tree with the record's files: set NUMALAB_LINUX_7_2 or run "
                    "python -m numalab.kernel.facts --unpack 7.2")
    assert KF.check_tree(tree, PLACEMENT) == []
    # a fact moved by one line is caught
    f = PLACEMENT["facts"]["wq.create_worker.wake"]
    moved = {"source": PLACEMENT["source"],
             "facts": {f.id: dataclasses.replace(f, line=f.line + 1)}}
    assert len(KF.check_tree(tree, moved)) == 1


def test_has_files_needs_every_file(tmp_path):
    assert not KF.has_files(None, PLACEMENT)
    assert not KF.has_files(tmp_path, PLACEMENT)
    for f in PLACEMENT["facts"].values():
        (tmp_path / f.file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f.file).write_text("")
    assert KF.has_files(tmp_path, PLACEMENT)


def test_check_record_fails_the_build_when_a_fact_no_longer_holds(tmp_path, monkeypatch):
    """What the chapters' builds call: None without a tree holding the
    record's files, FactError when one is there and a fact does not hold."""
    monkeypatch.setattr(KF, "find_tree", lambda version="7.2": None)
    assert KF.check_record("placement-7.2") is None
    for f in PLACEMENT["facts"].values():          # every file there, every function gone
        (tmp_path / f.file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f.file).write_text("int unrelated(void)\n{\n}\n")
    monkeypatch.setattr(KF, "find_tree", lambda version="7.2": tmp_path)
    with pytest.raises(KF.FactError, match="no longer hold"):
        KF.check_record("placement-7.2")
