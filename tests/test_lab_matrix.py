"""The book's matrix (data/lab/sweep/book/, issue 28) without QEMU: the scaled
device layout, the matrix file, built kernels in task keys, and the
per-machine table (numalab.lab.matrix) -- on records made up here (the table
is a pure function), then on the committed boots, whose every NVMe mask the
port must equal (tests/test_lab_sweep_oracle.py replays each dump)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numalab.lab import LabError
from numalab.lab.matrix import COLUMNS, book_rows, machine_table
from numalab.lab.sweep import (load_matrix, parse_layout, plan_sweep, scaled_queues,
                               spread_options)

REPO = Path(__file__).resolve().parents[1]
BOOK = REPO / "data" / "lab" / "sweep" / "book"


# -- the scaled layout ----------------------------------------------------------------

def test_scaled_queues_follow_the_patch_example():
    assert scaled_queues(96, (62, 96)) == 62           # the example itself
    assert [scaled_queues(n, (62, 96)) for n in (1, 2, 3, 4, 8, 16, 32, 64, 128)] == \
        [1, 1, 2, 3, 5, 10, 21, 41, 83]
    assert scaled_queues(400, (62, 96)) == 128         # QEMU's nvme: at most 128 queues
    assert scaled_queues(4, (96, 96)) == 4 and scaled_queues(4, (1, 96)) == 1


def test_spread_deals_controllers_over_the_nodes_with_cpus():
    assert spread_options(6, (62, 96), 96, [0, 1]) == ["3@0:62", "3@1:62"]   # the example
    assert spread_options(6, (62, 96), 4, [0]) == ["6@0:3"]
    assert spread_options(6, (62, 96), 16, [0, 2, 3]) == ["2@0:10", "2@2:10", "2@3:10"]
    assert spread_options(2, (62, 96), 16, list(range(8))) == ["1@0:10", "1@1:10"]
    from numalab.lab.spec import machine_from_text
    m = machine_from_text("pack:1 core:4 pu:1", node_cpus="0-1;2-3;", node_memory="384,384,256")
    assert parse_layout("spread:6:62/96").options(m) == ["3@0:3", "3@1:3"]  # not the CPU-less node
    for bad in ("spread:0:62/96", "spread:6:0/96", "spread:6:62/0", "spread:6:62", "spread:6:200/96"):
        with pytest.raises(LabError):
            parse_layout(bad)


# -- the matrix file and built kernels -------------------------------------------------

def _built(name: str, fragment: str) -> dict:
    return {"kernel": f"built:{name}", "upstream": "7.2.13", "packages": ["ab" * 32],
            "build": {"key": fragment[:16], "fragment_sha256": fragment, "patch_sha256": None}}


def test_the_book_matrix_plans_every_expressible_machine_twice():
    m = load_matrix(BOOK / "matrix.toml", built={"7.2": None, "7.2-rotate": None})
    kernels = {"built:7.2": _built("7.2", "1" * 64), "built:7.2-rotate": _built("7.2-rotate", "1" * 64)}
    tasks, refused = plan_sweep(m, kernels)
    # 11 listed; express now refuses the 2 whose guests differ (node order, dies),
    # found on these boots: their committed boots are kept and chapter 2 marks them
    assert len(m.machines) == 11 and len(tasks) == 18
    assert len(refused) == 2 and all("guest differs" in str(r) for r in refused), refused
    for t in tasks:
        opts = t["args"]["nvme"]
        assert sum(int(o.split("@")[0]) for o in opts) == 6
        cpus = t["spec"]["lab"]["topology"]
        assert {o.split(":")[1] for o in opts} == {str(scaled_queues(_ncpus(cpus), (62, 96)))}
        # both callers of group_cpus_evenly() traced from boot: rotate offsets are counted
        assert "--boot-trace irq_create_affinity_masks,blk_mq_map_queues" in t["command"]
    # a built kernel's key covers its fragment: a rebuild with another one boots again
    other = {q: _built(q[6:], "2" * 64) for q in kernels}
    again, _ = plan_sweep(m, other)
    assert not {t["key"] for t in again} & {t["key"] for t in tasks}


def _ncpus(topology: str) -> int:
    n = 1
    for word in topology.split():
        n *= int(word.split(":")[1])
    return n


# -- the table: a pure function of boot records ----------------------------------------

def _rec(variant, machine="m", max_dedicated=1, granted=(3, 3), equal=6, ok=True):
    return {"machine": machine, "variant": variant, "cpus": 4, "nodes": 1, "controllers": 2,
            "asked": [3, 3], "granted": list(granted), "lost": 6 - sum(granted),
            "max_dedicated": max_dedicated, "vectors": sum(granted), "equal": equal,
            "port_granted_ok": ok}


def test_machine_table_columns_and_verdicts():
    t = machine_table([_rec("mainline", max_dedicated=2), _rec("rotate"),
                       _rec("rotate", machine="lossy", granted=(3, 2), equal=5),
                       _rec("mainline", machine="bad", equal=5),
                       _rec("mainline", machine="count", ok=False), _rec("rotate", machine="count")])
    assert list(t.columns) == COLUMNS
    assert set(t.attrs["roles"].values()) == {"measured", "predicted (port) against measured"}
    rows = {r["machine"]: r for r in t.to_dict("records")}
    assert list(rows) == ["m", "lossy", "bad", "count"]
    assert rows["m"]["most dedicated vectors on one CPU, 7.2"] == 2
    assert rows["m"]["most dedicated vectors on one CPU, 7.2 + patch 004"] == 1
    assert rows["m"]["port equals the kernel (I/O vectors)"] == "yes (12 of 12)"
    assert rows["m"]["controllers whose masks the patch changed"] == "-"     # no masks given
    two = machine_table([{**_rec("mainline"), "masks": {"a": (1, 2), "b": (1, 2)}},
                         {**_rec("rotate"), "masks": {"a": (1, 2), "b": (2, 1)}}])
    assert two.iloc[0]["controllers whose masks the patch changed"] == "1 of 2"
    lossy = rows["lossy"]
    assert lossy["I/O queues granted per controller, 7.2 + patch 004"] == "2 or 3"
    assert lossy["I/O queues lost (empty masks), 7.2 + patch 004"] == 1
    assert lossy["I/O queues granted per controller, 7.2"] == "-"
    assert lossy["port equals the kernel (I/O vectors)"] == "yes (5 of 5); 7.2 not booted"
    assert rows["bad"]["port equals the kernel (I/O vectors)"].startswith("no (5 of 6)")
    # equal masks but another queue count than the port's allocation: not agreed
    assert rows["count"]["port equals the kernel (I/O vectors)"] == "no (12 of 12)"


# -- the committed boots ----------------------------------------------------------------

BOOK_DUMPS = sorted(BOOK.glob("*.tar.bz2"))


def test_the_book_sweep_is_committed_with_its_summary():
    summary = json.loads((BOOK / "sweep.json").read_text())
    failures = json.loads((BOOK / "failures.json").read_text())
    booted = {r["name"] for r in summary["tasks"] if r["status"] in ("booted", "existing")}
    assert booted == {p.name for p in BOOK_DUMPS} and BOOK_DUMPS
    assert {f["name"] for f in failures} == {r["name"] for r in summary["tasks"]
                                              if r["status"] == "failed"}
    for p in BOOK_DUMPS:
        assert p.stat().st_size < 200_000


def test_the_book_table_from_the_committed_boots():
    rows = book_rows(BOOK)
    assert len(rows) == len(BOOK_DUMPS)
    t = machine_table(rows)
    assert len(t) == len({r["machine"] for r in rows})
    # the port equals the real kernel on every machine, both variants
    assert t["port equals the kernel (I/O vectors)"].str.startswith("yes (").all(), t.to_string()
    for _, m in t.iterrows():   # a different stacking needs different masks
        if m["most dedicated vectors on one CPU, 7.2"] != m["most dedicated vectors on one CPU, 7.2 + patch 004"]:
            assert not m["controllers whose masks the patch changed"].startswith("0 of")
    for r in rows:
        assert r["controllers"] == 6 and r["equal"] == r["vectors"] == sum(r["granted"])
        assert r["asked"] == [scaled_queues(r["cpus"], (62, 96))] * 6
