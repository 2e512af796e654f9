"""The patches' published figures, as data of the package.

``src/numalab/data/published.toml`` carries every figure of the five patches
that a chapter or a test uses, with each patch's subject and lore link, so
neither needs the patch texts. Every number read from here is a *published*
figure: it is what a chapter compares with, never one of its own results.

>>> patch("004")["subject"]
'[PATCH] lib/group_cpus: rotate extra groups to avoid IRQ stacking'
>>> probe_rows("001", "before")[0]["cpu"]
0
>>> idle_b200()["before"]["mean"]
52.431
"""

from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources

__all__ = ["table", "patch", "patches", "probe_rows", "kperf", "devmem_throughput",
           "idle_b200", "idle_dgx1", "irq_fio", "cite"]


@lru_cache(maxsize=1)
def table() -> dict:
    """The whole table, parsed (cached; do not modify the result)."""
    with resources.files("numalab").joinpath("data/published.toml").open("rb") as f:
        return tomllib.load(f)


def patches() -> dict[str, dict]:
    """``{"000": {subject, author, lore, ...}, ...}`` for the five patches."""
    return table()["patches"]


def patch(pid: str) -> dict:
    """One patch's record: subject, author, lore link, machine."""
    try:
        return patches()[pid]
    except KeyError:
        raise KeyError(f"no published patch {pid!r}; known: {', '.join(patches())}") from None


def cite(pid: str) -> str:
    """A Markdown citation of a patch: its subject linked to lore.

    >>> cite("001")
    '[PCI: Avoid work_on_cpu() in async probe workers](https://lore.kernel.org/all/20251227113326.964-1-guojinhui.liam@bytedance.com/)'
    """
    p = patch(pid)
    return f"[{p['subject']}]({p['lore']})"


def probe_rows(pid: str, phase: str) -> list[dict]:
    """The probe lines a patch printed: dicts with driver, device, cpu, comm, ns.
    ``pid`` is "000" (the driver-core series) or "001" (the PCI patch),
    ``phase`` "before" or "after"."""
    return [dict(r) for r in table()["probe"][pid][phase]["rows"]]


def kperf() -> dict[tuple[str, str], dict[str, list]]:
    """The devmem patch's kperf per-flow figures, keyed ``(phase, side)``."""
    out = {}
    for phase, sides in table()["devmem"]["kperf"].items():
        for side, v in sides.items():
            out[(phase, side)] = {k: list(x) for k, x in v.items()}
    return out


def devmem_throughput() -> dict[str, tuple[float, float]]:
    """``{"before": (mean, spread), "after": (mean, spread)}`` in GB/s."""
    t = table()["devmem"]["throughput"]
    return {k: (v["mean"], v["spread"]) for k, v in t.items()}


def idle_b200() -> dict:
    """The sched_ext patch's build times on the DGX B200 (seconds, 10 runs)."""
    return table()["idle"]["b200"]


def idle_dgx1() -> dict:
    """The sched_ext patch's DGX-1 claim in its latest posting (v9 to v12 and
    the merged patch): ``speedup_low`` / ``speedup_high`` (fractions), the
    version that introduced it (``since``) and v8's earlier wording."""
    return dict(table()["idle"]["dgx1"])


def irq_fio() -> dict:
    """The rotate patch's fio setup and its published fractions."""
    return dict(table()["irq"]["fio"])
