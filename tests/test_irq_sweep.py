"""Sweeps (models/irq/sweep.py)."""

import pytest

from numalab.datasets import hwloc_datasets, project_datasets
from numalab.models.irq.load import crossing_groups
from numalab.models.irq.sweep import (VARIANTS, crossing, device_groups, evaluate, machine_devices,
                                      per_cpu_table, sweep_datasets, sweep_machine_devices,
                                      sweep_synthetic, synthetic_configs)
from numalab.topology import load

SEED = "numa:2 cluster:24 core:2 pu:1"


def test_seed_example_figures():
    t = load(SEED)
    m = evaluate(t, 62, 6, "mainline")
    # 7 clusters per node get 2 groups: 14 CPUs per node, 28 in all, carry all 6 devices
    assert m["max_dedicated"] == 6 and m["cpus_at_max_dedicated"] == 28
    assert m["cross_cluster_groups"] == 0 and m["cross_node_groups"] == 0
    assert m["empty_groups"] == 0
    r = evaluate(t, 62, 6, "rotate")
    assert r["max_dedicated"] == 2 and r["mean_dedicated"] == pytest.approx(6 * 28 / 96)
    assert r["dedicated_cv"] < m["dedicated_cv"]


def test_rows_are_tidy_and_ordered():
    df = sweep_synthetic(nodes=[1, 2], clusters=[4], cluster_sizes=[1, 2], vectors=[3, 8],
                         devices=[1, 3], processes=1)
    assert len(df) == 2 * 2 * 2 * 2 * len(VARIANTS)
    assert list(df["variant"][:4]) == list(VARIANTS)
    assert (df["max_dedicated"] >= df["bound"]).all()
    assert (df["gap"] == df["max_dedicated"] - df["bound"]).all()
    one = df[(df.devices == 1)]
    # one device: every rule gives the same number of dedicated groups in total
    tot = one.assign(t=one.mean_dedicated * one.cpus).groupby(["shape", "vectors"])["t"].nunique()
    assert (tot == 1).all()


def test_parallel_equals_serial():
    kw = dict(nodes=[2], clusters=[3, 4], cluster_sizes=[2, 3], vectors_per_cpu=[0.5, 1.0],
              devices=[2, 5])
    a = sweep_synthetic(processes=1, **kw)
    b = sweep_synthetic(processes=2, **kw)
    assert a.equals(b)


def test_vectors_per_cpu_config():
    cfgs = synthetic_configs([2], [4], [2], None, [1], ["mainline"], vectors_per_cpu=[0.5, 2])
    assert [c[4] for c in cfgs] == [8, 32]


def test_crossing_matches_irq_load():
    t = load("numa:2 core:3 pu:1")
    devs = device_groups(t, 2, 1) + [[0b000111, 0b011000, 0b100000]]
    doms = [0b000111, 0b111000]
    per_cpu = [0b000111] * 3 + [0b111000] * 3
    assert crossing(devs, per_cpu) == crossing_groups(devs, doms)


def test_offset_step_three_undoes_rotate():
    df = sweep_synthetic(nodes=[2], clusters=[24], cluster_sizes=[2], vectors=[62], devices=[6],
                         variants=["rotate"], offset_step=3, processes=1)
    assert df["max_dedicated"].iloc[0] == 6


def test_per_cpu_table():
    t = load(SEED)
    df = per_cpu_table(t, device_groups(t, 62, 6), "mainline")
    assert len(df) == 96 and set(df.node) == {0, 1}
    assert (df.dedicated == 6).sum() == 28
    assert set(df.loc[df.dedicated == 6, "cluster"]) <= set(range(0, 96, 2))


def test_bad_variant():
    with pytest.raises(ValueError):
        device_groups(load(SEED), 4, 1, "nope")


def test_the_ten_thousand_config_grid_runs_every_config():
    """The issue's 10,000-configuration sweep: its grid has that many
    configurations, and a sweep returns one row per configuration, in order.
    How fast it runs is a benchmark (``numalab bench group-cpus --sweep
    --configs 10000``), not a timed test; here a slice of the grid runs."""
    grid = dict(nodes=[1, 2, 4, 8], clusters=[4, 8], cluster_sizes=range(1, 9),
                devices=[1, 2, 4, 8, 16], vectors_per_cpu=[0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2])
    configs = synthetic_configs(grid["nodes"], grid["clusters"], grid["cluster_sizes"], None,
                                grid["devices"], VARIANTS, grid["vectors_per_cpu"])
    assert len(configs) >= 10_000
    small = dict(grid, nodes=[2], cluster_sizes=[2, 3], devices=[4], vectors_per_cpu=[0.5, 1])
    df = sweep_synthetic(**small, processes=1)
    expect = synthetic_configs([2], grid["clusters"], [2, 3], None, [4], VARIANTS, [0.5, 1])
    assert len(df) == len(expect) > 0
    assert (df.max_dedicated >= df.bound).all()


def test_real_datasets_and_their_devices():
    paths = [p for p in hwloc_datasets() if "32em64t-2n8c+dax+nvme" in p] + project_datasets()[:1]
    if not paths:
        pytest.skip("no datasets")
    df = sweep_datasets(paths, vectors=[8], devices=[2], processes=1)
    assert "error" not in df or df["error"].isna().all()
    assert (df.max_dedicated >= df.bound).all()
    for p in paths:
        t = load(p)
        devs = machine_devices(t)
        out = sweep_machine_devices(t, label="x")
        if devs:
            assert len(out) == len(VARIANTS) and (out.devices == len(devs)).all()
        else:
            assert out.empty
    # the 2-CPU VM's only managed queue device is its virtio-blk disk (2 vectors)
    own = [p for p in project_datasets() if p.endswith(".tar.bz2")]
    if own:
        assert [d[2] for d in machine_devices(load(own[0]))] == [2]


def test_uneven_clusters_make_rotate_lose_groups_and_mainline_never():
    from numalab.models.irq.sweep import sweep_uneven
    df = sweep_uneven([(4, 4, 2, 2), (8, 1), (2, 2, 2, 2)], nodes=[1, 2])
    main = df[df.variant == "mainline"]
    rot = df[df.variant == "rotate"]
    assert (main.empty_masks == 0).all()
    assert (rot.empty_masks > 0).any()
    assert (rot[rot.clusters == "2+2+2+2"].empty_masks == 0).all()   # equal clusters: none lost


def test_offset_distribution_spans_bound_to_mainline():
    from numalab.models.irq.sweep import offset_distribution
    t = load("numa:2 cluster:24 core:2 pu:1")
    od = offset_distribution(t, 62, 6, sets=60, seed=1)
    assert od.equals(offset_distribution(t, 62, 6, sets=60, seed=1))
    assert od.max_dedicated.min() >= 2 and od.max_dedicated.max() <= 6
    assert od.max_dedicated.nunique() > 1
