"""Calibrate the probe model on the two patches' published probe times.

The data (all on the AMD EPYC 9A64 of the series, node0 = CPUs 0-63,128-191):

* "PCI: skip work_on_cpu() in an unbound async probe worker"-style patch
  (PF_WQ_WORKER test), three NVMe drives on node 0:
  before, all on CPU 0: 53372612 / 49532941 / 47315175 ns;
  after, spread: 34765890 / 34696433 / 33233323 ns.
* "[PATCH v2 0/3] Add NUMA-node-aware synchronous probing to driver core"
  (cover letter, https://lore.kernel.org/all/20260107175548.1792-1-guojinhui.liam@bytedance.com/
  is v1; the tables are v2's): without / with the series,
  nvme 54013202 / 53968911 / 48077276 ns and 34244206 / 33883391 / 33943040 ns;
  mlx5_core (synchronous) 506256717 / 514289394 ns and 507206174 / 514927642 ns;
  usb 854131 / 967993 ns and 991417 / 935112 ns;
  intel_rapl_msr (platform, no node) 3717567 ns and 4849967 ns.

:data:`PUBLISHED` holds these numbers, read from the package's table of
published figures (:mod:`numalab.published`); :func:`parse_seed` reads them
back from a patch text (the tests check the two agree when the text is present).

What is fitted: an NVMe probe's CPU time ``cpu_ms`` and hardware-wait time
``wait_ms`` (for each cut into ``rounds`` CPU/wait alternations, 1..8; the
round count with the smallest residual is kept), by
``scipy.optimize.least_squares`` on the 12 NVMe values' relative errors.
Before-values come from :func:`numalab.models.probe.simulate` under the
``mainline`` policy, after-values under ``pf-wq-worker`` (seed 001) and
``driver-core`` (seed 000). Uncertainty: the covariance ``s^2 (J^T J)^-1``
of the fit, and a residual bootstrap (resampled relative residuals added to
the fitted values, refitted).

What is only averaged: mlx5, USB and the platform driver are probed one at
a time in the published runs, so their times do not depend on how they are
split between CPU and waiting; only their totals are identified. The
catalogue gives them the NVMe fit's CPU share, an assumption stated in
:func:`catalogue`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import published as _published
from .probe import Device, Params, ProbeModelError, ProbeRun, simulate

__all__ = ["PUBLISHED", "parse_seed", "seed_machine", "nvme_scenarios", "Fit", "fit_nvme",
           "catalogue", "reproduce", "SEED_FILES"]

SEED_FILES = {"fix": "001_896d51b16a53b501.txt", "series": "000_dccbd2dd19606f08.txt"}

# (driver, device, ns) in the order printed; tables keyed (source, phase).
# "fix" is the PCI patch (published id 001), "series" the driver-core series (000).
SOURCE_PATCH = {"fix": "001", "series": "000"}
PUBLISHED: dict[tuple[str, str], list[tuple[str, str, int]]] = {
    (source, phase): [(r["driver"], r["device"], r["ns"])
                      for r in _published.probe_rows(pid, phase)]
    for source, pid in SOURCE_PATCH.items() for phase in ("before", "after")}
# The policy that produced each phase of each source.
PHASE_POLICY = {("fix", "before"): "mainline", ("fix", "after"): "pf-wq-worker",
                ("series", "before"): "mainline", ("series", "after"): "driver-core"}

_LINE = re.compile(r"(nvme|mlx5_core|usb|intel_rapl_msr) (\S+?):? CPU: (\d+), COMM: (\S+?),?"
                   r" (?:probe )?cost:? (\d+) ns")


def parse_seed(text: str, source: str) -> dict[tuple[str, str], list[tuple[str, str, int]]]:
    """The probe-time tables of a seed text, as in :data:`PUBLISHED`.

    ``source`` is ``"fix"`` (the PF_WQ_WORKER patch: "Before"/"After" tables)
    or ``"series"`` (the v2 cover letter: "Without"/"With" sections; the
    review replies and the unbind/bind run are ignored).

    >>> parse_seed("Before (all on CPU 0): nvme 0000:01:00.0: CPU: 0, COMM: kworker/0:1, "
    ...            "probe cost: 5 ns After (x): nvme 0000:01:00.0: CPU: 5, COMM: k, "
    ...            "probe cost: 3 ns", "fix")[("fix", "after")]
    [('nvme', '0000:01:00.0', 3)]
    """
    def rows(chunk):
        return [(m.group(1), m.group(2), int(m.group(5))) for m in _LINE.finditer(chunk)]
    if source == "fix":
        i, j = text.find("Before ("), text.find("After (")
        if i < 0 or j < 0:
            raise ProbeModelError("no Before/After tables in the PF_WQ_WORKER patch text")
        k = text.find("Fixes:", j)
        return {("fix", "before"): rows(text[i:j]), ("fix", "after"): rows(text[j:k if k > 0 else None])}
    if source == "series":
        head = text.split("\nRe: ", 1)[0]
        i = head.find("1. Without the patchset")
        j = head.find("2. With the patchset")
        k = head.find("3. With the patchset")
        if min(i, j, k) < 0:
            raise ProbeModelError("no Without/With sections in the cover letter text")
        return {("series", "before"): rows(head[i:j]), ("series", "after"): rows(head[j:k])}
    raise ProbeModelError(f"unknown source {source!r}")


def seed_machine():
    """The EPYC 9A64 of the series: ``data/machines/epyc-9a64.toml`` when the
    checkout has it, else the same shape built here (2 nodes of 64 cores x 2
    threads, SMT siblings 128 apart, 8 cores per L3, SLIT 10/32)."""
    try:
        from ..datasets import repo_root
        from ..topology import load
        p = repo_root() / "data" / "machines" / "epyc-9a64.toml"
        if p.is_file():
            return load(p)
    except Exception:   # noqa: BLE001 - any failure: fall back to the built shape
        pass
    from ..topology.model import CPU, Node, Topology
    cpus = {}
    for i in range(256):
        core = i % 128
        node = core // 64
        llc0 = (core // 8) * 8
        llc = (0xff << llc0) | (0xff << (llc0 + 128))
        cpus[i] = CPU(i, node=node, package=node, core=core % 64,
                      thread_siblings=(1 << core) | (1 << (core + 128)), llc_cpus=llc)
    n0 = ((1 << 64) - 1) | (((1 << 64) - 1) << 128)
    allm = (1 << 256) - 1
    return Topology("epyc-9a64", source="built", arch="x86", possible=allm, present=allm,
                    online=allm, cpus=cpus, nodes={0: Node(0, n0), 1: Node(1, allm & ~n0)},
                    distances=[[10, 32], [32, 10]])


def _nvme_devices(cpu_ms: float, wait_ms: float, rounds: int) -> list[Device]:
    return [Device(name, "pci", 0, "async", cpu_ms, wait_ms, rounds, driver="nvme")
            for _, name, _ in PUBLISHED[("fix", "before")]]


def nvme_scenarios() -> list[tuple[tuple[str, str], str]]:
    """The four NVMe runs: (table key, policy)."""
    return [(k, PHASE_POLICY[k]) for k in PUBLISHED]


def _observed_nvme(tables=None) -> np.ndarray:
    tables = tables or PUBLISHED
    return np.array([ns / 1e6 for k, _ in nvme_scenarios() for d, _, ns in tables[k]
                     if d == "nvme"])


def _predict_nvme(topo, cpu_ms, wait_ms, rounds, seed=0) -> np.ndarray:
    devs = _nvme_devices(max(cpu_ms, 0.0), max(wait_ms, 0.0), rounds)
    out = []
    cache: dict[str, ProbeRun] = {}
    for _, pol in nvme_scenarios():
        if pol not in cache:
            cache[pol] = simulate(topo, devs, pol, seed=seed)
        out.extend(p.cost for p in cache[pol].probes)
    return np.array(out)


@dataclass
class Fit:
    """An NVMe calibration result (ms)."""

    cpu_ms: float
    wait_ms: float
    rounds: int
    cpu_err: float            # 1-sigma, from the fit's covariance
    wait_err: float
    rel_rms: float            # RMS of the 12 relative residuals
    residuals: list[float] = field(default_factory=list)
    # rounds -> (relative RMS, cpu_ms, wait_ms): the structural uncertainty
    by_rounds: dict[int, tuple[float, float, float]] = field(default_factory=dict)
    bootstrap: dict[str, float] = field(default_factory=dict)   # mean/std of each parameter

    @property
    def cpu_share(self) -> float:
        return self.cpu_ms / (self.cpu_ms + self.wait_ms)

    def summary(self) -> str:
        s = (f"NVMe probe: cpu {self.cpu_ms:.1f} ± {self.cpu_err:.1f} ms, wait "
             f"{self.wait_ms:.1f} ± {self.wait_err:.1f} ms (rounds={self.rounds}, "
             f"relative RMS {100 * self.rel_rms:.1f} %)")
        if self.bootstrap:
            s += (f"; bootstrap: cpu {self.bootstrap['cpu_mean']:.1f} ± "
                  f"{self.bootstrap['cpu_std']:.1f}, wait {self.bootstrap['wait_mean']:.1f} ± "
                  f"{self.bootstrap['wait_std']:.1f} ms")
        return s


def _fit_one(topo, obs, rounds, x0):
    from scipy.optimize import least_squares

    def resid(x):
        return _predict_nvme(topo, x[0], x[1], rounds) / obs - 1.0
    res = least_squares(resid, x0, bounds=([0.0, 0.0], [80.0, 80.0]), diff_step=1e-3,
                        x_scale=[10.0, 10.0])
    return res


def fit_nvme(topo=None, rounds: tuple[int, ...] = (1, 2, 3, 4, 6, 8), bootstrap: int = 0,
             seed: int = 0, tables=None) -> Fit:
    """Fit the NVMe probe's CPU/wait split; see the module docstring.

    ``bootstrap`` > 0 adds that many residual-bootstrap refits (seeded).
    """
    topo = topo or seed_machine()
    obs = _observed_nvme(tables)
    after = obs[[3, 4, 5, 9, 10, 11]].mean()
    best, by_rounds = None, {}
    for k in rounds:
        starts = [(f * after, (1 - f) * after) for f in (0.3, 0.5, 0.7)]
        fits = [_fit_one(topo, obs, k, np.array(x0)) for x0 in starts]
        res = min(fits, key=lambda r: r.cost)
        rms = float(np.sqrt(np.mean(res.fun ** 2)))
        by_rounds[k] = (rms, float(res.x[0]), float(res.x[1]))
        if best is None or rms < best[1] - 1e-12:
            best = (k, rms, res)
    k, rms, res = best
    n, p = len(obs), 2
    s2 = float(np.sum(res.fun ** 2)) / (n - p)
    try:
        cov = s2 * np.linalg.inv(res.jac.T @ res.jac)
        errs = np.sqrt(np.clip(np.diag(cov), 0, None))
    except np.linalg.LinAlgError:
        errs = np.array([np.nan, np.nan])
    fit = Fit(float(res.x[0]), float(res.x[1]), k, float(errs[0]), float(errs[1]), rms,
              [float(r) for r in res.fun], by_rounds)
    if bootstrap:
        rng = np.random.default_rng(seed)
        fitted = _predict_nvme(topo, fit.cpu_ms, fit.wait_ms, k)
        xs = []
        for _ in range(bootstrap):
            r = rng.choice(res.fun, size=n, replace=True)
            fake = fitted * (1 + r)
            rb = _fit_one(topo, fake, k, res.x)
            xs.append(rb.x)
        xs = np.array(xs)
        fit.bootstrap = {"n": bootstrap, "cpu_mean": float(xs[:, 0].mean()),
                         "cpu_std": float(xs[:, 0].std(ddof=1)),
                         "wait_mean": float(xs[:, 1].mean()),
                         "wait_std": float(xs[:, 1].std(ddof=1))}
    return fit


# The fit above, frozen so that the catalogue needs no scipy run at import.
# tests/test_probe_calibrate.py refits and checks these stay within the
# fit's uncertainty.
NVME_FIT = {"cpu_ms": 16.1, "wait_ms": 17.9, "rounds": 6}


def _mean_ms(driver: str) -> tuple[float, float]:
    xs = np.array([ns / 1e6 for rows in PUBLISHED.values() for d, _, ns in rows if d == driver])
    return float(xs.mean()), float(xs.std(ddof=1) / np.sqrt(len(xs)))


def catalogue(nvme: dict | None = None) -> dict[str, Device]:
    """Device kinds with calibrated costs (templates: name and node are
    replaced when used).

    * ``nvme``: asynchronous PCI (``PROBE_PREFER_ASYNCHRONOUS``), the fitted
      CPU/wait split (:data:`NVME_FIT`).
    * ``mlx5``: synchronous PCI; total = mean of the four published mlx5
      probes; CPU share borrowed from the NVMe fit (assumption).
    * ``usb``: USB bus, synchronous, no node unless given one; total = mean
      of the four USB probes; same borrowed share.
    * ``platform``: platform bus, no node (like ``intel_rapl_msr``); total =
      mean of its two probes; same borrowed share.
    """
    nv = nvme or NVME_FIT
    share = nv["cpu_ms"] / (nv["cpu_ms"] + nv["wait_ms"])
    out = {"nvme": Device("nvme", "pci", -1, "async", nv["cpu_ms"], nv["wait_ms"],
                          nv["rounds"], driver="nvme")}
    for kind, drv, bus, rounds in (("mlx5", "mlx5_core", "pci", 4), ("usb", "usb", "usb", 2),
                                   ("platform", "intel_rapl_msr", "platform", 2)):
        total, _ = _mean_ms(drv)
        out[kind] = Device(kind, bus, -1, "sync", total * share, total * (1 - share), rounds,
                           driver=drv)
    return out


def reproduce(nvme: dict | None = None, topo=None, seed: int = 0):
    """Rerun every published probe with the calibrated model.

    Each driver is simulated on its own (the drivers were loaded at different
    moments in the published runs: mlx5 reused the kworker an NVMe probe had
    used, so they did not overlap). USB devices hang below an xHCI controller
    on node 0 (they ran on node-0 CPUs in unbound kworkers with the series),
    so they are given node 0; the platform device has none. The udev
    workers are put on the CPUs the published lines show (USB on CPU 163;
    intel_rapl_msr on CPU 61, then 17), both on node 0.

    Returns a DataFrame: source, phase, policy, driver, device, published_ms,
    model_ms, rel_error, cpu, thread.
    """
    import pandas as pd
    topo = topo or seed_machine()
    cat = catalogue(nvme)
    nodes = {"nvme": 0, "mlx5_core": 0, "usb": 0, "intel_rapl_msr": -1}
    kinds = {"nvme": "nvme", "mlx5_core": "mlx5", "usb": "usb", "intel_rapl_msr": "platform"}
    rows = []
    for key, table in PUBLISHED.items():
        pol = PHASE_POLICY[key]
        by_driver: dict[str, list[tuple[str, int]]] = {}
        for d, name, ns in table:
            by_driver.setdefault(d, []).append((name, ns))
        for d, items in by_driver.items():
            tmpl = cat[kinds[d]]
            devs = [dataclasses.replace(tmpl, name=name, node=nodes[d], driver=d)
                    for name, _ in items]
            callers = {"usb": 163, "intel_rapl_msr": 61 if key[1] == "before" else 17}
            run = simulate(topo, devs, pol, seed=seed, params=Params(caller_cpu=callers))
            got = run.by_device()
            for name, ns in items:
                p = got[name]
                rows.append({"source": key[0], "phase": key[1], "policy": pol, "driver": d,
                             "device": name, "published_ms": ns / 1e6, "model_ms": p.cost,
                             "rel_error": p.cost / (ns / 1e6) - 1.0, "cpu": p.cpu,
                             "thread": p.thread})
    return pd.DataFrame(rows)


def seed_text(name: str) -> str | None:
    """The text of a patch file in ``../shared/seeds`` beside the checkout, or
    None when absent. Only the tests use it, to check :data:`PUBLISHED`
    against the posted text; nothing in the book needs it."""
    try:
        from ..datasets import repo_root
        path = repo_root().parent / "shared" / "seeds" / name
    except Exception:   # noqa: BLE001
        return None
    return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
