"""The driver-probing model: kernel CPU-choice ports, policy rules, CLI, sweep."""

import dataclasses
import json

import pytest

from numalab.cli import main
from numalab.kernel.drivers.base.dd import driver_allows_async_probing, probe_redirected_to_node
from numalab.kernel.drivers.pci.pci_driver import pci_call_probe_cpu
from numalab.kernel.sched.isolation import (HK_TYPE_DOMAIN, HK_TYPE_WQ, Housekeeping,
                                                   housekeeping_cpumask)
from numalab.kernel.workqueue import (WORK_CPU_UNBOUND, cpumask_any_and,
                                             select_numa_node_cpu, unbound_pod_cpus)
from numalab.models.probe.sim import (POLICIES, Device, Params, ProbeModelError, machine,
                                  policy_name, remote_factor, simulate, thread_table)
from numalab.models.probe.sweep import sweep
from numalab.topology.model import CPU, Node, Topology


def nvmes(k, node=0, cpu=10.0, wait=20.0, rounds=4, prefix="nvme"):
    return [Device(f"{prefix}{node}.{i}", "pci", node, "async", cpu, wait, rounds, driver=prefix)
            for i in range(k)]


# -- ports -------------------------------------------------------------------

def test_pci_call_probe_cpu_rules():
    t = machine(2, 8)
    hk = Housekeeping(possible=t.possible)
    assert pci_call_probe_cpu(t, hk, 1) == 8                  # first CPU of node 1
    assert pci_call_probe_cpu(t, hk, -1) == t.nr_cpu_ids      # no node: local
    assert pci_call_probe_cpu(t, hk, 5) == t.nr_cpu_ids       # offline node: local
    assert pci_call_probe_cpu(t, hk, 1, is_virtfn=True, physfn_is_probed=True) == t.nr_cpu_ids
    # PF_WQ_WORKER only matters with the fix
    assert pci_call_probe_cpu(t, hk, 1, in_wq_worker=True) == 8
    assert pci_call_probe_cpu(t, hk, 1, in_wq_worker=True, pf_wq_worker_fix=True) == t.nr_cpu_ids
    iso = Housekeeping(possible=t.possible, isolcpus=0x300, nohz_full=0x400)   # 8,9 / 10
    assert pci_call_probe_cpu(t, iso, 1) == 11
    every = Housekeeping(possible=t.possible, isolcpus=0xff00)    # node 1 fully isolated
    assert pci_call_probe_cpu(t, every, 1) == t.nr_cpu_ids


def test_housekeeping_and_workqueue_choices():
    hk = Housekeeping(possible=0xff, isolcpus=0xff)
    assert housekeeping_cpumask(hk, HK_TYPE_DOMAIN) == 1      # the boot CPU is kept
    assert housekeeping_cpumask(hk, HK_TYPE_WQ) == 0xff
    assert cpumask_any_and(0b1010, 0b1110, 4) == 1
    t = machine(2, 8, llc_size=4)
    assert select_numa_node_cpu(t, 1, 3) == 8
    assert select_numa_node_cpu(t, 1, 12) == 12
    assert select_numa_node_cpu(t, -1, 3) == WORK_CPU_UNBOUND
    assert unbound_pod_cpus(t, 13, "cache") == 0xf000
    assert unbound_pod_cpus(t, 13, "numa") == 0xff00
    with pytest.raises(ValueError):
        unbound_pod_cpus(t, 1, "bogus")


def test_driver_core_decisions():
    assert driver_allows_async_probing("async", "nvme")
    assert not driver_allows_async_probing("sync", "nvme", "*")          # forced sync wins
    assert driver_allows_async_probing("default", "mlx5_core", "*")
    assert not driver_allows_async_probing("default", "mlx5_core", "*,mlx5_core")
    assert probe_redirected_to_node(1, True, False)
    assert not probe_redirected_to_node(1, True, True)


def test_remote_factor_formula():
    t = machine(2, 4, distance=21)
    assert remote_factor(t, 0, 1, 1.0) == pytest.approx(2.1)
    assert remote_factor(t, 0, 1, 0.0) == 1.0
    assert remote_factor(t, 1, 1, 1.0) == 1.0


# -- policy rules ------------------------------------------------------------

def test_deterministic_for_a_seed():
    t = machine(2, 16)
    devs = nvmes(5, 0) + nvmes(3, 1) + [Device("usb0", "usb", -1, "sync", 0.5, 0.5),
                                        Device("plat0", "platform", -1, "sync", 2, 1)]
    for pol in POLICIES:
        a = simulate(t, devs, pol, seed=7).rows()
        b = simulate(t, devs, pol, seed=7).rows()
        assert a == b
    runs = {s: [(p.device, p.cpu) for p in simulate(t, devs, "mainline", seed=s).probes]
            for s in range(6)}
    assert len({tuple(v) for v in runs.values()}) > 1       # the seed does something


def test_mainline_async_pci_share_first_housekeeping_cpu():
    t = machine(2, 16)
    iso = 0b11 | (0b1 << 16)                  # CPUs 0,1 and 16 isolated
    run = simulate(t, nvmes(6, 0) + nvmes(6, 1), "mainline", params=Params(isolcpus=iso))
    for p in run.probes:
        assert p.cpu == (2 if p.dev_node == 0 else 17)
        assert p.thread.startswith(f"kworker/{p.cpu}:") and p.thread_kind == "bound kworker"
        assert p.holds_device_lock is False         # the async worker holds it
        assert p.lock_holder.startswith("kworker/u")


@pytest.mark.parametrize("policy", ["pf-wq-worker", "driver-core", "bus-opt-in"])
def test_fixed_policies_spread_async_pci_over_housekeeping_cpus(policy):
    t = machine(2, 16, llc_size=8)
    iso = 0b1111                               # CPUs 0-3 isolated
    # the model's node-wide rule: one idle CPU of node 0 each
    run = simulate(t, nvmes(8, 0), policy,
                   params=Params(isolcpus=iso, nohz_full=iso, wakeup="node"))
    cpus = [p.cpu for p in run.probes]
    assert len(set(cpus)) == 8                 # one CPU each
    assert all(4 <= c < 16 for c in cpus)      # node 0, never isolated
    assert all(p.thread_kind == "unbound kworker" and p.holds_device_lock for p in run.probes)
    assert all(p.cost == pytest.approx(30.0) for p in run.probes)
    # the kernel's wake-up path: kick_pool() keeps each worker in its pod (the
    # LLC of CPUs 0-7, of which 4-7 are housekeeping) and select_idle_sibling()
    # searches only that LLC, so the eight probes share CPUs 4-7
    run = simulate(t, nvmes(8, 0), policy, params=Params(isolcpus=iso, nohz_full=iso))
    assert sorted({p.cpu for p in run.probes}) == [4, 5, 6, 7]
    assert max(p.cost for p in run.probes) > 30.0


@pytest.mark.parametrize("policy", POLICIES)
def test_isolated_cpus_never_run_probes(policy):
    t = machine(2, 8, llc_size=4)
    iso = 0x0f0f                               # half of each node
    devs = (nvmes(6, 0) + nvmes(6, 1)
            + [Device(f"mlx{i}", "pci", i % 2, "sync", 5, 5, driver="mlx5_core") for i in range(4)]
            + [Device(f"usb{i}", "usb", -1, "sync", 1, 1) for i in range(4)]
            + [Device("pf", "pci", 1, "sync", 3, 3, driver="pfdrv",
                      vfs=tuple(Device(f"vf{i}", "pci", 1, "sync", 1, 1, driver="vfdrv",
                                       is_vf=True) for i in range(3)))])
    for seed in range(4):
        run = simulate(t, devs, policy, seed=seed, params=Params(isolcpus=iso, nohz_full=iso))
        assert len(run.probes) == len(devs) + 3
        assert all(not (iso >> p.cpu) & 1 for p in run.probes)


def test_vf_probed_from_pf_does_not_nest_work_on_cpu():
    t = machine(2, 8)
    pf = Device("pf0", "pci", 1, "sync", 4, 4, driver="pfdrv",
                vfs=(Device("vf0", "pci", 1, "sync", 2, 2, driver="vfdrv", is_vf=True),
                     Device("vf1", "pci", 1, "sync", 2, 2, driver="vfdrv", is_vf=True)))
    for pol in ("mainline", "pf-wq-worker"):
        run = simulate(t, [pf], pol).by_device()
        assert run["pf0"].thread == "kworker/8:1"                # work_on_cpu for the PF
        for vf in ("vf0", "vf1"):
            assert run[vf].thread == run["pf0"].thread           # no second work_on_cpu
            assert run[vf].holds_device_lock                     # the PF's thread locked it
            assert run[vf].parent == "pf0"
        assert run["pf0"].end == pytest.approx(run["vf1"].end)   # PF probe includes its VFs
        assert run["pf0"].cost == pytest.approx(8 + 4 + 4)
    core = simulate(t, [pf], "driver-core").by_device()
    # the v2 series hops again: each VF runs in another unbound kworker
    assert core["vf0"].thread != core["pf0"].thread
    assert core["vf0"].thread_kind == "unbound kworker" and not core["vf0"].holds_device_lock


def test_devices_without_node_run_where_called():
    t = machine(2, 8)
    devs = [Device("plat0", "platform", -1, "sync", 2, 1),
            Device("nvmeX", "pci", -1, "async", 2, 1, driver="nvme"),
            Device("mlxX", "pci", -1, "sync", 2, 1, driver="mlx5_core")]
    for pol in POLICIES:
        for seed in range(3):
            run = simulate(t, devs, pol, seed=seed).by_device()
            for name in ("plat0", "mlxX"):
                assert run[name].thread_kind == "udev worker"
                assert run[name].thread == run[name].lock_holder
            # async without a node: the async worker probes it itself
            assert run["nvmeX"].thread == run["nvmeX"].lock_holder
            assert run["nvmeX"].thread_kind == "unbound kworker"


def test_bus_opt_in_only_moves_pci():
    t = machine(2, 8)
    devs = [Device("usb0", "usb", 1, "sync", 1, 1), Device("mlx0", "pci", 1, "sync", 5, 5,
                                                           driver="mlx5_core")]
    c = simulate(t, devs, "driver-core", params=Params(caller_cpu={"usb": 0})).by_device()
    d = simulate(t, devs, "bus-opt-in", params=Params(caller_cpu={"usb": 0})).by_device()
    assert c["usb0"].thread_kind == "unbound kworker" and c["usb0"].cpu_node == 1
    assert d["usb0"].thread_kind == "udev worker" and d["usb0"].cpu == 0
    assert d["usb0"].remote and d["usb0"].cost > c["usb0"].cost      # remote penalty
    assert d["mlx0"].thread_kind == c["mlx0"].thread_kind == "unbound kworker"


def test_work_on_cpu_concurrency_management():
    t = machine(1, 4)
    # pure-CPU probes below the CPU-intensive threshold run one after another
    short = [Device(f"n{i}", "pci", 0, "async", 5, 0, 1, driver="n") for i in range(3)]
    run = simulate(t, short, "mainline")
    assert [p.start for p in run.probes] == pytest.approx([0, 5, 10])
    assert run.makespan == pytest.approx(15)
    # longer ones are marked CPU-intensive once past 10 ms, at the next tick
    # (wq_worker_tick(): 12 ms at HZ=250, 10 ms at HZ=1000 or checked
    # continuously), and then share the CPU
    long = [Device(f"n{i}", "pci", 0, "async", 30, 0, 1, driver="n") for i in range(2)]
    run = simulate(t, long, "mainline")
    assert run.probes[1].start == pytest.approx(12)
    assert run.makespan == pytest.approx(60)
    for hz in (0, 1000):
        assert simulate(t, long, "mainline", params=Params(hz=hz)).probes[1].start \
            == pytest.approx(10)
    assert simulate(t, long, "mainline", params=Params(hz=100)).probes[1].start \
        == pytest.approx(10)
    # a 10.17 ms segment crosses 10 ms between two 4 ms ticks: never marked at HZ=250
    seg = [Device(f"n{i}", "pci", 0, "async", 10.17, 1, 1, driver="n") for i in range(2)]
    assert simulate(t, seg, "mainline").probes[1].start == pytest.approx(10.17)
    assert simulate(t, seg, "mainline", params=Params(hz=0)).probes[1].start \
        == pytest.approx(10)
    assert simulate(t, long, "mainline", params=Params(cpu_intensive_thresh_ms=1e9)).probes[1] \
        .start == pytest.approx(30)


def test_background_load_slows_probes():
    t = machine(1, 4)
    devs = [Device("p", "platform", -1, "sync", 10, 0, 1)]
    assert simulate(t, devs, "mainline", params=Params(background=1.0)).makespan \
        == pytest.approx(20)


def test_input_errors():
    t = machine(2, 4)
    with pytest.raises(ProbeModelError):
        simulate(t, [Device("a", node=3)], "mainline")
    with pytest.raises(ProbeModelError):
        simulate(t, [Device("a"), Device("a")], "mainline")
    with pytest.raises(ProbeModelError):
        policy_name("e")
    with pytest.raises(ProbeModelError):
        Device("a", cpu_ms=-1)


# -- sweep ---------------------------------------------------------------------

def test_sweep_shape_and_monotonic():
    ks = [1, 2, 4, 8, 16, 24]
    df = sweep(devices_per_node=ks, nodes=[2], cpus_per_node=[8],
               policies=["mainline", "pf-wq-worker"])
    assert len(df) == len(ks) * 2
    assert {"policy", "devices_per_node", "makespan_ms", "mean_cost_ms", "cpus_per_node",
            "isolated_share", "alpha", "nodes"} <= set(df.columns)
    a = df[df.policy == "mainline"].set_index("devices_per_node").makespan_ms
    b = df[df.policy == "pf-wq-worker"].set_index("devices_per_node").makespan_ms
    assert a.is_monotonic_increasing
    # (a) grows about linearly: one CPU does all the CPU work of a node
    slope = (a[24] - a[8]) / 16
    from numalab.models.probe.calibrate import NVME_FIT
    assert slope == pytest.approx(NVME_FIT["cpu_ms"], rel=0.1)
    # (b) stays flat while devices <= CPUs per node, then grows
    assert b[1] == pytest.approx(b[8], rel=1e-6)
    assert b[24] > 1.5 * b[8]
    assert (a >= b - 1e-9).all()


def test_sweep_isolated_share_keeps_probes_off_isolated():
    df = sweep(devices_per_node=[4], nodes=[2], cpus_per_node=[8], isolated_share=[0.5])
    assert (df.on_isolated == 0).all()


def test_thread_table_is_computed():
    tt = thread_table()
    m = tt.set_index(["policy", "case"])
    assert m.loc[("mainline", "async PCI (nvme)"), "thread_kind"] == "bound kworker"
    assert m.loc[("pf-wq-worker", "async PCI (nvme)"), "thread_kind"] == "unbound kworker"
    assert m.loc[("driver-core", "USB, node set"), "thread_kind"] == "unbound kworker"
    assert m.loc[("bus-opt-in", "USB, node set"), "thread_kind"] == "udev worker"
    assert not m.loc[("driver-core", "sync PCI (mlx5)"), "holds_device_lock"]


# -- CLI -----------------------------------------------------------------------

def test_cli_text_and_json(capsys):
    topo = "pack:2 numa:1 core:8 pu:1"
    assert main(["probe", topo, "--devices", "nvme:3@node0,mlx5:1@node1,usb:2",
                 "--policy", "a"]) == 0
    out = capsys.readouterr().out
    assert "kworker/0:1" in out and "makespan:" in out
    assert main(["probe", topo, "--devices", "nvme:3@node0", "--policy", "b", "--json",
                 "--seed", "3"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["policy"] == "pf-wq-worker" and len(data["probes"]) == 3
    assert data["makespan_ms"] == pytest.approx(max(p["end"] for p in data["probes"]))
    assert main(["probe", topo, "--devices", "nvme:2@0", "--policy", "all", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(POLICIES)


@pytest.mark.parametrize("spec", ["nvme:x", "disk:2", "nvme:2@node9", "nvme,,usb", "",
                                  "platform@node0", "nvme:0"])
def test_cli_spec_errors(capsys, spec):
    assert main(["probe", "pack:2 numa:1 core:4 pu:1", "--devices", spec]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "--devices" in err


def test_cli_policy_error(capsys):
    assert main(["probe", "pack:2 numa:1 core:4 pu:1", "--devices", "nvme",
                 "--policy", "zz"]) == 2
    assert "policy" in capsys.readouterr().err


def test_sweep_machines_rows_and_speedups():
    from numalab.models.probe.sim import machine
    from numalab.models.probe.sweep import sweep_machines
    big, small = machine(2, 16), machine(2, 2)
    df = sweep_machines({"big": big, "small": small}, devices_per_node=(1, 8))
    assert len(df) == 2 * 2 * 2
    fix = df[df.policy == "pf-wq-worker"].set_index(["machine", "devices_per_node"]).speedup
    assert fix[("big", 8)] > 3            # eight drives spread over 16 CPUs
    assert fix[("big", 8)] > fix[("small", 8)]   # two CPUs cannot spread eight drives
    assert (df[df.policy == "mainline"].speedup == 1).all()


def test_probe_cpu_skips_offline_cpus_listed_in_a_node():
    """A dump's node cpulist may list a CPU that is offline; the kernel's
    cpumask_of_node() would not, and the probe must not land there."""
    from numalab.models.probe.sim import Device, machine, simulate
    t = machine(2, 4)
    t = t.replace(online=t.online & ~1, cpus={c: v for c, v in t.cpus.items() if c != 0})
    run = simulate(t, [Device("nvme0", node=0, probe_type="async", cpu_ms=1, wait_ms=1)],
                   "mainline")
    assert run.probes[0].cpu == 1


# -- issue 15: the 7.2 baseline, the flush hook, scheduling and fidelity ---------

def test_pci_call_probe_7_2_uses_hk_domain_only():
    t = machine(2, 8)
    nohz = Housekeeping(possible=t.possible, nohz_full=0x100)      # CPU 8: nohz_full only
    assert pci_call_probe_cpu(t, nohz, 1) == 9                     # 6.12: HK_TYPE_WQ too
    assert pci_call_probe_cpu(t, nohz, 1, kernel="7.2") == 8       # 7.2: HK_TYPE_DOMAIN only
    dom = Housekeeping(possible=t.possible, isolcpus=0x100)
    assert pci_call_probe_cpu(t, dom, 1, kernel="7.2") == 9
    with pytest.raises(ValueError):
        pci_call_probe_cpu(t, dom, 1, kernel="7.2", pf_wq_worker_fix=True)
    with pytest.raises(ValueError):
        pci_call_probe_cpu(t, dom, 1, kernel="5.4")


def test_housekeeping_update_and_its_steps():
    from numalab.kernel.sched.isolation import housekeeping_update, housekeeping_update_steps
    hk = Housekeeping(possible=0xff)
    new = housekeeping_update(hk, 0x0f, 0xff)
    assert housekeeping_cpumask(new, HK_TYPE_DOMAIN) == 0xf0
    with pytest.raises(ValueError):
        housekeeping_update(hk, 0xff, 0xff)
    with_flush, without = housekeeping_update_steps(True), housekeeping_update_steps(False)
    assert set(with_flush) - set(without) == {"pci_probe_flush_workqueue"}
    # the flush comes after synchronize_rcu() and before the unbound workqueues move
    i = with_flush.index
    assert i("synchronize_rcu") < i("pci_probe_flush_workqueue") < \
        i("workqueue_unbound_housekeeping_update")


def test_mainline_7_2_places_like_6_12_without_isolation():
    t = machine(2, 8)
    devs = nvmes(3, 0) + [Device("mlx5_0", "pci", 1, "sync", 5, 5)]
    a, a7 = simulate(t, devs, "mainline"), simulate(t, devs, "mainline-7.2")
    assert [(p.cpu, p.thread_kind) for p in a.probes] == [(p.cpu, p.thread_kind) for p in a7.probes]
    # with nohz_full on the node's first CPU, 7.2 still picks it (HK_TYPE_DOMAIN only)
    nohz = Params(nohz_full=0x1)
    assert {p.cpu for p in simulate(t, nvmes(2, 0), "mainline-7.2", params=nohz).probes} == {0}
    assert {p.cpu for p in simulate(t, nvmes(2, 0), "mainline", params=nohz).probes} == {1}


def test_partition_change_flush_versus_series():
    t = machine(2, 8, llc_size=8)
    devs = nvmes(3, 0, cpu=10, wait=10, rounds=2)
    part = Params(partition_cpus=0x0f, partition_at_ms=2.0)
    base = simulate(t, devs, "mainline-7.2", params=part)
    # the write waits for every probe queued on pci_probe_wq, so nothing runs afterwards
    assert base.partition["returned_ms"] == pytest.approx(base.makespan)
    assert base.partition["isolated_cpu_ms_after"] == 0.0
    # probes elected after the update go to the new first housekeeping CPU
    late = simulate(t, devs, "mainline-7.2",
                    params=Params(partition_cpus=0x0f, partition_at_ms=0.0))
    assert {p.cpu for p in late.probes} == {4}
    ser = simulate(t, devs, "driver-core", params=part)
    assert ser.partition["returned_ms"] == pytest.approx(2.0)
    leaked = [simulate(t, devs, "driver-core", seed=s, params=part).partition for s in range(5)]
    assert any(p["isolated_cpu_ms_after"] > 0 and p["probes_on_isolated_after"] > 0
               for p in leaked)
    with pytest.raises(ProbeModelError):
        simulate(t, devs, "mainline", params=part)          # 6.12 has no such update
    with pytest.raises(ProbeModelError):
        simulate(t, devs, "mainline-7.2", params=Params(partition_cpus=t.online))


def test_time_slicing_breaks_lock_step():
    # four identical CPU-only probes forced to share one CPU: with equal
    # processor sharing they would all end together; time slices stagger them
    t = machine(1, 1)
    devs = [Device(f"d{i}", "pci", 0, "async", 12, 0, 1, driver="d") for i in range(4)]
    run = simulate(t, devs, "pf-wq-worker", params=Params(timeslice_ms=3.0))
    ends = sorted(p.end for p in run.probes)
    assert len(set(round(e, 6) for e in ends)) == 4
    assert run.makespan == pytest.approx(48.0)               # the CPU is never idle
    short = simulate(t, devs, "pf-wq-worker", params=Params(timeslice_ms=0.5))
    assert short.makespan == pytest.approx(48.0)


def test_smt_factor_slows_busy_siblings():
    t = machine(1, 2, smt=2)
    devs = [Device(f"d{i}", "pci", 0, "async", 10, 0, 1, driver="d") for i in range(2)]
    full = simulate(t, devs, "pf-wq-worker")
    half = simulate(t, devs, "pf-wq-worker", params=Params(smt_factor=0.5))
    assert {p.cpu for p in full.probes} == {0, 1}
    assert full.makespan == pytest.approx(10.0)
    assert half.makespan == pytest.approx(20.0)


def test_serial_fraction_serialises_parallel_probes():
    t = machine(1, 8)
    devs = [Device(f"d{i}", "pci", 0, "async", 10, 0, 1, driver="d", serial=s)
            for i, s in enumerate([1.0] * 4)]
    run = simulate(t, devs, "pf-wq-worker")
    assert run.makespan == pytest.approx(40.0)              # one lock: one at a time
    par = [dataclasses.replace(d, serial=0.0) for d in devs]
    assert simulate(t, par, "pf-wq-worker").makespan == pytest.approx(10.0)
    with pytest.raises(ProbeModelError):
        Device("x", serial=1.5)


def test_unbound_max_active_is_per_node():
    from numalab.kernel.workqueue import wq_node_max_active, workqueue_max_active
    assert workqueue_max_active("system_dfl_wq", "6.12") == 512
    assert workqueue_max_active("system_dfl_wq", "7.2") == 2048
    assert wq_node_max_active(512, 1, 1024) == 8             # never below min_active
    assert wq_node_max_active(512, 32, 64) == 256
    # a node's share limits how many async probes run at once
    t = machine(2, 8)
    devs = nvmes(6, 0, cpu=5, wait=5, rounds=1)
    capped = simulate(t, devs, "pf-wq-worker", params=Params(max_active=4))
    free = simulate(t, devs, "pf-wq-worker")
    assert capped.makespan > free.makespan
    starts = sorted(p.start for p in capped.probes)
    assert starts[3] == pytest.approx(0.0) or starts[3] < starts[4]
    assert sum(1 for s in starts if s <= 1e-9) <= 4


def test_driver_name_keeps_the_instance_prefix():
    assert Device("mlx5_0").driver == "mlx5"
    assert Device("nvme3").driver == "nvme"
    assert Device("usb").driver == "usb"


def test_usb_parent_lock_follows_the_probing_thread():
    t = machine(2, 8)
    usb = [Device("usb0", "usb", 1, "sync", 1, 1)]
    for pol, holds in (("mainline", True), ("bus-opt-in", True), ("driver-core", False)):
        p = simulate(t, usb, pol).probes[0]
        assert p.holds_parent_lock is holds, pol
    assert simulate(t, nvmes(1, 0), "mainline").probes[0].holds_parent_lock is None


# -- issue 24: the kernel's wake-up path (kick_pool(), select_idle_sibling()) ---------

def _sim(topo, **kw):
    from numalab.models.probe.sim import _Kernel
    return _Kernel(topo, "pf-wq-worker", Params(**kw), 0)


def test_select_idle_sibling_scans_the_llc_from_target_plus_one():
    from numalab.models.probe.sim import _Thread
    t = machine(1, 16, llc_size=8)
    k = _sim(t)
    th = _Thread(0, "w", "unbound kworker", 3, t.online)
    assert k.select_idle_sibling(th, 3, 3) == 3            # target idle: stays
    k.load[3] = 1
    assert k.select_idle_sibling(th, 3, 3) == 4            # first idle after target
    for c in range(4, 8):
        k.load[c] = 1
    assert k.select_idle_sibling(th, 3, 3) == 0            # wraps inside the LLC
    for c in range(0, 3):
        k.load[c] = 1
    # the whole LLC busy: the target, although CPUs 8-15 of the node are idle
    assert k.select_idle_sibling(th, 3, 3) == 3
    # the model's node-wide rule takes one of them
    kn = _sim(t, wakeup="node")
    kn.load = dict(k.load)
    assert 8 <= kn._place_node(3, t.online, t.cpus[3].llc_cpus) < 16


def test_select_idle_sibling_prefers_an_idle_core_and_recent_cpu():
    from numalab.models.probe.sim import _Thread
    t = machine(1, 8, llc_size=8, smt=2)                   # cores {0,1} {2,3} ...
    k = _sim(t)
    th = _Thread(0, "w", "unbound kworker", 0, t.online)
    k.load[0] = 1
    k.load[2] = 1                                          # core {2,3} half busy
    # an idle core exists: select_idle_core() from CPU 1 on skips 1 (core {0,1}
    # busy) and 3, and returns 4 (core {4,5} idle)
    assert k.select_idle_sibling(th, 0, 0) == 4
    # the recently used CPU, idle and in the LLC, comes before the scan
    th.recent = 6
    assert k.select_idle_sibling(th, 0, 0) == 6
    assert th.recent == 0                                  # p->recent_used_cpu = prev


def test_kick_pool_distributes_over_the_pod():
    t = machine(1, 16, llc_size=8)
    k = _sim(t)
    pod = t.cpus[8].llc_cpus                               # CPUs 8-15
    picks = [k.kick_pool_cpu(pod, waker=0) for _ in range(10)]
    assert picks == [8, 9, 10, 11, 12, 13, 14, 15, 8, 9]
    assert k.kick_pool_cpu(t.cpus[0].llc_cpus, waker=5) == 1   # "our first selection will skip 0"


def test_kernel_wakeup_keeps_unbound_probes_in_their_llc():
    t = machine(2, 32, llc_size=8)
    devs = nvmes(24, 0)
    for seed in range(3):
        llc = simulate(t, devs, "pf-wq-worker", seed=seed, params=Params(caller_cpu={"nvme": 2}))
        node = simulate(t, devs, "pf-wq-worker", seed=seed,
                        params=Params(caller_cpu={"nvme": 2}, wakeup="node"))
        assert {t.cpus[p.cpu].llc_cpus for p in llc.probes} == {t.cpus[2].llc_cpus}
        assert len({t.cpus[p.cpu].llc_cpus for p in node.probes}) == 4
        assert llc.makespan > node.makespan


def test_wq_unbound_cpumask_per_kernel():
    # 6.12: workqueue_init_early() restricts with HK_TYPE_WQ then HK_TYPE_DOMAIN
    # (workqueue.c 6.12:7805-7806); 7.2 with HK_TYPE_DOMAIN only (7.2:8030)
    from numalab.kernel.workqueue import wq_unbound_cpumask
    t = machine(2, 8)
    nohz = Housekeeping(possible=t.possible, nohz_full=0xff00)       # node 1 nohz_full
    assert wq_unbound_cpumask(t, nohz, "6.12") == 0x00ff
    assert wq_unbound_cpumask(t, nohz, "7.2") == 0xffff
    dom = Housekeeping(possible=t.possible, isolcpus=0xff00)         # node 1 isolated
    assert wq_unbound_cpumask(t, dom, "6.12") == wq_unbound_cpumask(t, dom, "7.2") == 0x00ff
    both = Housekeeping(possible=t.possible, isolcpus=0x000f, nohz_full=0x00f0)
    assert wq_unbound_cpumask(t, both, "6.12") == 0xff00
    assert wq_unbound_cpumask(t, both, "7.2") == 0xfff0
    with pytest.raises(ValueError):
        wq_unbound_cpumask(t, both, "6.1")
    # in the model: nohz_full on the device's node keeps 6.12's probes off it,
    # not 7.2's (pci_call_probe() and the unbound workers both follow the kernel)
    devs = nvmes(3, 1)
    a = simulate(t, devs, "mainline", params=Params(nohz_full=0xff00))
    a7 = simulate(t, devs, "mainline-7.2", params=Params(nohz_full=0xff00))
    assert all(p.cpu_node == 0 for p in a.probes)
    assert {p.cpu for p in a7.probes} == {8}


def test_probe_cli_separates_isolcpus_and_nohz_full(capsys):
    from numalab.cli import main
    assert main(["probe", "numa:2 core:4", "--devices", "nvme:2@node1", "--policy", "a7",
                 "--nohz-full", "4-7", "--json"]) == 0
    out = capsys.readouterr().out
    import json
    assert {p["cpu"] for p in json.loads(out)["probes"]} == {4}
    assert main(["probe", "numa:2 core:4", "--devices", "nvme:2@node1", "--policy", "a7",
                 "--isolcpus", "4", "--json"]) == 0
    assert {p["cpu"] for p in json.loads(capsys.readouterr().out)["probes"]} == {5}


def test_probe_cli_wakeup_and_hz(capsys):
    import json
    from numalab.cli import main
    out = {}
    for w in ("llc", "node"):
        assert main(["probe", "numa:2 l3:2 core:4", "--devices", "nvme:8@node0", "--policy", "b",
                     "--wakeup", w, "--json"]) == 0
        run = json.loads(capsys.readouterr().out)
        out[w] = {p["cpu"] for p in run["probes"]}, run["makespan_ms"]
    assert len(out["llc"][0]) == 4 and len(out["node"][0]) == 8       # one LLC of 4 CPUs, or the node
    assert out["llc"][1] > out["node"][1]
    assert main(["probe", "numa:2 core:4", "--devices", "nvme:2@node0", "--hz", "0"]) == 0


def test_boot_bands_vary_each_assumption_and_cache_once(tmp_path):
    """The band behind chapter 3's headline: each group varies its assumptions
    around the fit, and the cached copy is the computed one (computed once)."""
    from numalab.models.probe.sweep import boot_bands, boot_bands_cached
    kw = dict(by_rounds={2: (0.1, 5.0, 5.0), 4: (0.2, 6.0, 4.0)}, best_rounds=2,
              devices_per_node=[1, 4], seed=0, llc_range=(8,), hz_range=(100, 250),
              alpha_range=(0.0, 1.0), serial_range=(0.0, 0.2))
    df = boot_bands(**kw)
    groups = df.groupby("varied")
    assert set(groups.groups) == {"rounds, new-worker rule, LLC size",
                                  "HZ, new-worker rule, LLC size", "alpha", "serial"}
    assert set(groups.get_group("rounds, new-worker rule, LLC size").rounds) == {2, 4}
    assert set(groups.get_group("HZ, new-worker rule, LLC size").hz) == {100}   # 250 is the default
    assert set(groups.get_group("alpha").alpha) == {0.0, 1.0}
    assert set(groups.get_group("serial").serial) == {0.0, 0.2}
    assert set(df.rounds[df.varied != "rounds, new-worker rule, LLC size"]) == {2}
    first = boot_bands_cached(cache_dir=tmp_path, **kw)
    assert len(list(tmp_path.glob("*.pickle"))) == 1
    assert first.equals(df) and boot_bands_cached(cache_dir=tmp_path, **kw).equals(df)
    boot_bands_cached(cache_dir=tmp_path, **{**kw, "seed": 1})     # other arguments: computed anew
    assert len(list(tmp_path.glob("*.pickle"))) == 2
