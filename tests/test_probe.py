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
from numalab.models.probe import (POLICIES, Device, Params, ProbeModelError, machine,
                                  policy_name, remote_factor, simulate, sweep, thread_table)
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
    run = simulate(t, nvmes(8, 0), policy, params=Params(isolcpus=iso, nohz_full=iso))
    cpus = [p.cpu for p in run.probes]
    assert len(set(cpus)) == 8                 # one CPU each
    assert all(4 <= c < 16 for c in cpus)      # node 0, never isolated
    assert all(p.thread_kind == "unbound kworker" and p.holds_device_lock for p in run.probes)
    assert all(p.cost == pytest.approx(30.0) for p in run.probes)


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
    # longer ones are marked CPU-intensive after 10 ms and then share the CPU
    long = [Device(f"n{i}", "pci", 0, "async", 30, 0, 1, driver="n") for i in range(2)]
    run = simulate(t, long, "mainline")
    assert run.probes[1].start == pytest.approx(10)
    assert run.makespan == pytest.approx(60)
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
    from numalab.models.probe_calibrate import NVME_FIT
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
    assert len(json.loads(capsys.readouterr().out)) == 4


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
    from numalab.models.probe import machine, sweep_machines
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
    from numalab.models.probe import Device, machine, simulate
    t = machine(2, 4)
    t = t.replace(online=t.online & ~1, cpus={c: v for c, v in t.cpus.items() if c != 0})
    run = simulate(t, [Device("nvme0", node=0, probe_type="async", cpu_ms=1, wait_ms=1)],
                   "mainline")
    assert run.probes[0].cpu == 1
