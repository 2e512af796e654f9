"""Sweeps of the driver-probing model over devices, machines and isolation.

Moved out of :mod:`numalab.models.probe.sim` so that the simulator does not
need the calibration: a sweep's default device is the calibrated NVMe
(:func:`numalab.models.probe.calibrate.catalogue`), and the calibration
imports the simulator. The import order is sim <- calibrate <- sweep.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import numpy as np

from ...topology.model import Topology
from .calibrate import catalogue
from .sim import POLICIES, Device, Params, isolate_share, machine, policy_name, simulate

__all__ = ["sweep", "sweep_machines"]


def sweep(devices_per_node: Iterable[int] = range(1, 65), nodes: Iterable[int] = (2,),
          cpus_per_node: Iterable[int] = (16,), isolated_share: Iterable[float] = (0.0,),
          alpha: Iterable[float] = (0.5,), policies: Iterable[str] = POLICIES,
          device: Device | None = None, seed: int = 0, llc_size: int = 8):
    """Makespan and probe costs over a grid; a tidy DataFrame, one row per point.

    Each point probes ``devices_per_node`` copies of ``device`` (default: the
    calibrated NVMe, asynchronous) on every node of a :func:`machine`.
    Columns: policy, nodes, cpus_per_node, isolated_share, alpha,
    devices_per_node, devices, makespan_ms, mean_cost_ms, max_cost_ms,
    distinct_cpus, on_isolated (probes that ran on an isolated CPU).
    """
    import pandas as pd
    if device is None:
        device = catalogue()["nvme"]
    rows = []
    for nn in nodes:
        for cpn in cpus_per_node:
            topo = machine(nn, cpn, llc_size=min(llc_size, cpn))
            for share in isolated_share:
                iso = isolate_share(topo, share)
                for a in alpha:
                    params = Params(alpha=a, isolcpus=iso, nohz_full=iso)
                    for k in devices_per_node:
                        devs = [dataclasses.replace(device, name=f"{device.driver}{n}.{i}",
                                                    node=n, driver=device.driver)
                                for n in range(nn) for i in range(k)]
                        for pol in policies:
                            run = simulate(topo, devs, pol, seed=seed, params=params)
                            costs = [p.cost for p in run.probes]
                            rows.append({
                                "policy": policy_name(pol), "nodes": nn, "cpus_per_node": cpn,
                                "isolated_share": share, "alpha": a, "devices_per_node": k,
                                "devices": len(devs), "makespan_ms": run.makespan,
                                "mean_cost_ms": float(np.mean(costs)),
                                "max_cost_ms": float(np.max(costs)),
                                "distinct_cpus": len({p.cpu for p in run.probes}),
                                "on_isolated": sum(1 for p in run.probes if (iso >> p.cpu) & 1),
                            })
    return pd.DataFrame(rows)


def sweep_machines(machines: "dict[str, Topology]", devices_per_node: Iterable[int] = (1, 4, 16),
                   policies: Iterable[str] = ("mainline", "pf-wq-worker"),
                   device: Device | None = None, seed: int = 0, max_devices: int = 256):
    """Probe ``k`` copies of ``device`` on every node with CPUs of each machine.

    Inputs: machines by label (e.g. :func:`numalab.datasets.load_datasets`),
    the devices per node to try, the policies, the device (default: the
    calibrated asynchronous NVMe), a seed, and a cap on devices per run
    (points above it are skipped, not truncated). Output: a tidy DataFrame,
    one row per (machine, devices_per_node, policy), with makespan_ms,
    mean_cost_ms and the speedup of each policy over mainline.
    """
    import pandas as pd
    if device is None:
        device = catalogue()["nvme"]
    rows = []
    for label, topo in machines.items():
        nodes = [n for n in topo.node_ids if topo.nodes[n].cpus & topo.online]
        if not nodes:
            continue
        for k in devices_per_node:
            if k * len(nodes) > max_devices:
                continue
            devs = [dataclasses.replace(device, name=f"{device.driver}{n}.{i}", node=n,
                                        driver=device.driver) for n in nodes for i in range(k)]
            for pol in policies:
                run = simulate(topo, devs, pol, seed=seed)
                rows.append({"machine": label, "nodes": len(nodes), "cpus": len(topo.cpus),
                             "cpus_per_node": len(topo.cpus) / len(nodes),
                             "devices_per_node": k, "policy": policy_name(pol),
                             "makespan_ms": run.makespan,
                             "mean_cost_ms": float(np.mean([p.cost for p in run.probes]))})
    df = pd.DataFrame(rows)
    if len(df):
        base = df[df.policy == "mainline"].set_index(["machine", "devices_per_node"]).makespan_ms
        df["speedup"] = [base.get((m, k), float("nan")) / ms for m, k, ms in
                         zip(df.machine, df.devices_per_node, df.makespan_ms)]
    return df
