"""The arm64 runs (issue 18, item 6): uneven clusters on real Linux 7.2
kernels, with and without the rotate patch, replayed against the port.

The logs in data/lab/arm64/logs are real serial consoles (tools/lab_arm64,
see the README there); no QEMU is needed here.
"""

from __future__ import annotations

import pytest

from numalab.cpumask import parse_cpulist
from numalab.lab import LabError
from numalab.lab import arm64 as A

RUNS = A.runs()
COMPARED = [r for r in RUNS if not r.debug]


def test_the_runs_are_committed():
    assert len(COMPARED) >= 10
    kernels = {r.kernel for r in COMPARED}
    assert kernels == {"7.2", "7.2-rotate"}
    assert all(r.log.is_file() for r in RUNS)


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r.log.stem)
def test_the_guest_saw_the_clusters_the_run_describes(run):
    clusters = run.measured["clusters"]
    assert sorted(clusters) == list(range(len(clusters)))
    assert {m for m in clusters.values()} == set(run.clusters)


@pytest.mark.parametrize("run", COMPARED, ids=lambda r: r.log.stem)
def test_port_equals_the_real_kernel(run):
    row = A.compare(run)
    assert row["equal"], row


def test_rotate_loses_queues_on_uneven_clusters_and_says_nothing():
    """Measured: with clusters {0-3} and {4} the patched kernel gets fewer I/O
    queues than the unpatched one from the same request; with QEMU's single
    cluster both get all of them. No line of those boots reports an error."""
    by = {(r.kernel, r.clusters, r.nodes, r.max_ioqpairs): r.measured["io_queues"] for r in COMPARED}
    uneven = (parse_cpulist("0-3"), parse_cpulist("4"))
    one = (parse_cpulist("0-4"),)
    node = (parse_cpulist("0-4"),)
    assert by[("7.2-rotate", uneven, node, 8)] < by[("7.2", uneven, node, 8)] == 5
    assert by[("7.2-rotate", one, node, 8)] == by[("7.2", one, node, 8)] == 5
    for r in COMPARED:
        text = r.log.read_text(errors="replace")
        assert "EINVAL" not in text and "nvme0: probe with driver nvme failed" not in text
        assert A.warnings(r.log)                      # the reader sees the PCI host's warning ...
        assert not [w for w in A.warnings(r.log) if "nvme" in w.lower() or "msi" in w.lower()]


def test_the_debug_build_shows_the_retry_the_port_follows():
    [dbg] = [r for r in RUNS if r.debug]
    calls = A.debug_calls(dbg.log)
    assert calls[0] == (1, 0, "blk_mq_map_queues")          # the admin queue's map: offset 0
    nvme = [(g, o) for g, o, caller in calls if caller == "irq_create_affinity_masks"]
    p = A.predict(dbg)
    assert nvme == [(a["vectors"] - 1, a["spread_offset"]) for a in p["attempts"]]
    assert p["first_errno"] == -22 and len(p["attempts"]) == 2
    assert dbg.measured["io_queues"] == p["io_queues"] == 4


def test_a_log_without_the_nvme_line_is_an_error(tmp_path):
    bad = tmp_path / "x.log"
    bad.write_text("=== LAB BEGIN ===\nnothing\n")
    with pytest.raises(LabError, match="no 'nvme nvme0"):
        A.read_console(bad)


def test_configurations_pair_the_kernels_per_machine_and_request():
    cfg = A.configurations(A.table(RUNS))
    assert len(cfg) == 4 and cfg[["boots 7.2", "boots 7.2-rotate"]].to_numpy().sum() == len(COMPARED)
    uneven = cfg[(cfg.nodes == 1) & (cfg.clusters == "0-3 / 4") & (cfg.asked == 5)].iloc[0]
    assert (uneven["queues 7.2"], uneven["queues 7.2-rotate"]) == ("5", "4")


def test_the_only_warnings_are_not_about_devices_or_interrupts():
    msgs = A.warning_messages(RUNS)
    assert msgs and not [m for m in msgs if A.IRQ_WORDS.search(m)]
    assert A.IRQ_WORDS.search("nvme 0000:00:01.0: MSI-X vector allocation failed")
