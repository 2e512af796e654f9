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

__all__ = ["sweep", "sweep_machines", "boot_bands", "boot_bands_cached"]


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


def boot_bands(by_rounds: dict, best_rounds: int, devices_per_node: Iterable[int], *,
               seed: int = 0, llc_range: Iterable[int] = (8, 16),
               hz_range: Iterable[int] = (100, 250, 1000),
               alpha_range: Iterable[float] = (0.0, 0.5, 1.0),
               serial_range: Iterable[float] = (0.0, 0.05, 0.1, 0.2), llc_alpha: int = 8):
    """The boot-time gain band of the PF_WQ_WORKER fix: every assumption over its range.

    Inputs: ``by_rounds`` (rounds -> (rms, cpu_ms, wait_ms), as
    :attr:`numalab.models.probe.calibrate.Fit.by_rounds`), the best fit's
    round count, the drive counts, the seed, and the assumed ranges. Four
    groups of :func:`numalab.models.probe.sim.scaling_bands` runs, each
    varying some assumptions around the fit (column ``varied`` names them):
    every round count with both new-worker rules at each LLC size; every
    other HZ with both rules at each LLC size; ``alpha``; the serial
    fraction (the last two at ``llc_alpha`` CPUs per LLC).
    Output: one DataFrame, the rows of all four (column ``llc_size`` added).
    """
    import pandas as pd
    from .sim import HZ_DEFAULT, WAKEUP_RULES, scaling_bands
    ks = list(devices_per_node)
    best = {best_rounds: by_rounds[best_rounds]}
    hz_other = [h for h in hz_range if h != HZ_DEFAULT]
    return pd.concat(
        [scaling_bands(by_rounds, ks, seed=seed, wakeups=WAKEUP_RULES, llc_size=ll)
         .assign(varied="rounds, new-worker rule, LLC size", llc_size=ll) for ll in llc_range]
        + [scaling_bands(best, ks, seed=seed, wakeups=WAKEUP_RULES, hzs=hz_other, llc_size=ll)
           .assign(varied="HZ, new-worker rule, LLC size", llc_size=ll) for ll in llc_range]
        + [scaling_bands(best, ks, alphas=tuple(alpha_range), seed=seed, llc_size=llc_alpha)
           .assign(varied="alpha", llc_size=llc_alpha),
           scaling_bands(best, ks, serials=tuple(serial_range), seed=seed, llc_size=llc_alpha)
           .assign(varied="serial", llc_size=llc_alpha)],
        ignore_index=True)


def boot_bands_cached(cache_dir=None, **kw):
    """:func:`boot_bands` with an on-disk cache, as
    :func:`numalab.models.probe.calibrate.fit_nvme_cached` does for the fit:
    the same arguments and model code give the stored DataFrame (the key's
    lock makes two pages asking at once compute it once); only chapter 3's
    evidence page shows the band, as resting on the model's own rules.
    ``cache_dir`` defaults to ``.numalab-cache/probe-bands`` in the checkout."""
    from ...diskcache import cached
    from .calibrate import _model_fingerprint
    return cached("probe-bands", {"kw": kw, "code": _model_fingerprint()},
                  lambda: boot_bands(**kw), cache_dir)
