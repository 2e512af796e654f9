"""The book's matrix (issue 28): per-machine results of ``numalab lab sweep``
on Linux 7.2 built without and with patch 004.

Two steps, so that the table is a pure function of the boots:

* :func:`boot_row` reads one committed sweep dump (a real kernel's boot) into
  a flat record: the machine, the kernel variant (``mainline`` or
  ``rotate``), CPUs, nodes, and per NVMe controller the I/O queues it asked
  for and got; the most dedicated vectors (single-CPU masks) any CPU
  carries; the port's agreement (every I/O vector's mask equal to
  :func:`numalab.kernel.lib.group_cpus.group_cpus_evenly`'s for that kernel
  and variant, at the traced spread offset for rotate, and the port's MSI-X
  allocation granting the same queue count).
* :func:`machine_table` turns those records into one row per machine, the
  table chapter 2 shows (every number measured on a real kernel; the last
  column says whether the port computed the same).

NVMe asks for ``min(possible CPUs, I/O queues of the device)`` I/O queues
(``nvme_max_io_queues()``, one vector each, plus the admin queue's);
``__pci_enable_msix_range()`` grants fewer when an interrupt set has an empty
mask (:func:`numalab.models.irq.blkmq.msix_allocation`), so a controller's
"lost" queues are asked minus granted.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["boot_row", "machine_table", "book_rows", "COLUMNS", "VARIANT_NAMES"]

#: How the table names each kernel variant.
VARIANT_NAMES = {"mainline": "7.2", "rotate": "7.2 + patch 004"}

#: The table's columns (all measured on the lab's real kernels but the last,
#: which compares the port with them).
COLUMNS = ["machine", "CPUs", "NUMA nodes", "NVMe controllers",
           "I/O queues asked per controller",
           "I/O queues granted per controller, 7.2",
           "I/O queues granted per controller, 7.2 + patch 004",
           "most dedicated vectors on one CPU, 7.2",
           "most dedicated vectors on one CPU, 7.2 + patch 004",
           "I/O queues lost (empty masks), 7.2",
           "I/O queues lost (empty masks), 7.2 + patch 004",
           "controllers whose masks the patch changed",
           "port equals the kernel (I/O vectors)"]


def _distinct(values) -> str:
    """Distinct ints joined by " or " (one value: itself), "-" for none."""
    vs = sorted(set(values))
    return " or ".join(map(str, vs)) if vs else "-"


def boot_row(dump: str | Path) -> dict:
    """One committed sweep dump -> ``{"machine", "variant", "cpus", "nodes",
    "controllers", "asked" (list per controller), "granted" (list),
    "lost" (int), "max_dedicated" (int), "masks" ({PCI address: the I/O
    queues' masks}), "vectors" (I/O vectors compared),
    "equal" (of them, equal to the port's), "port_granted_ok" (bool),
    "dump"}``. Raises LabError for a dump that is not a sweep's."""
    from ..datasets import load_cached
    from ..kernel import versions
    from ..models.irq.blkmq import msix_allocation
    from . import LabError
    from .dump import read_lab_dump
    from .oracle import dedicated_counts, dump_variant, mask_table, rotate_offsets

    d = read_lab_dump(str(dump))
    sweep = d.manifest.get("sweep")
    if not sweep:
        raise LabError(f"{d.name}: not made by numalab lab sweep (no 'sweep' in the manifest)")
    topo = load_cached(str(dump))
    cpus = d.manifest["topology"]["cpus"]
    variant = dump_variant(d)
    kernel = versions.parse_release(d.kernel_release)
    offsets = rotate_offsets(d, topo) if variant == "rotate" else {}
    io_queues = {dev["pci_address"]: dev["io_queues"] for dev in d.manifest["devices"]}
    asked, granted, port_ok = [], [], True
    for ctrl in d.nvme:
        a = min(cpus, io_queues[ctrl.address])
        g = sum(1 for q in ctrl.irqs if q.queue is not None and q.queue >= 1)
        asked.append(a)
        granted.append(g)
        # the port's allocation at the offset the kernel's (last) call got
        r = msix_allocation(a + 1, topo, 1, variant, offsets.get(ctrl.address, 0))
        port_ok &= r["vectors"] - 1 == g
    t = mask_table(str(dump))
    counts = dedicated_counts(str(dump))
    masks = {c.address: tuple(q.smp_affinity for q in sorted(
        (q for q in c.irqs if q.queue is not None and q.queue >= 1), key=lambda q: q.queue))
        for c in d.nvme}
    return {"machine": sweep["spec"]["machine"], "variant": variant, "kernel": kernel,
            "masks": masks,
            "cpus": cpus, "nodes": len(d.manifest["topology"]["nodes"]),
            "controllers": len(d.nvme), "asked": asked, "granted": granted,
            "lost": sum(a - g for a, g in zip(asked, granted)),
            "max_dedicated": int(counts.max()) if len(counts) else 0,
            "vectors": len(t), "equal": int(t["equal"].sum()) if len(t) else 0,
            "port_granted_ok": bool(port_ok), "dump": d.name}


def machine_table(rows: list[dict]) -> pd.DataFrame:
    """Boot records (:func:`boot_row`) -> one row per machine, in
    :data:`COLUMNS`, machines in the order first seen. A variant that did
    not boot shows "-" (and "not booted" in the last column): the table
    never hides a missing boot. Pure: the records in, the table out.

    >>> r = dict(machine="m", cpus=4, nodes=1, controllers=2, asked=[3, 3], granted=[3, 3],
    ...          lost=0, vectors=6, equal=6, port_granted_ok=True)
    >>> t = machine_table([{**r, "variant": "mainline", "max_dedicated": 2},
    ...                    {**r, "variant": "rotate", "max_dedicated": 1}])
    >>> [str(t.iloc[0][c]) for c in ("most dedicated vectors on one CPU, 7.2",
    ...  "most dedicated vectors on one CPU, 7.2 + patch 004", "port equals the kernel (I/O vectors)")]
    ['2', '1', 'yes (12 of 12)']
    >>> machine_table([{**r, "variant": "mainline", "max_dedicated": 2}]).iloc[0, -1]
    'yes (6 of 6); 7.2 + patch 004 not booted'
    """
    by_machine: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_machine.setdefault(r["machine"], {})[r["variant"]] = r
    out = []
    for machine, runs in by_machine.items():
        first = next(iter(runs.values()))
        row = {"machine": machine, "CPUs": first["cpus"], "NUMA nodes": first["nodes"],
               "NVMe controllers": first["controllers"],
               "I/O queues asked per controller": _distinct(
                   a for r in runs.values() for a in r["asked"])}
        for variant, name in VARIANT_NAMES.items():
            r = runs.get(variant)
            row[f"I/O queues granted per controller, {name}"] = _distinct(r["granted"]) if r else "-"
            row[f"most dedicated vectors on one CPU, {name}"] = r["max_dedicated"] if r else "-"
            row[f"I/O queues lost (empty masks), {name}"] = r["lost"] if r else "-"
        a, b = runs.get("mainline"), runs.get("rotate")
        if a and b and "masks" in a and "masks" in b:
            changed = sum(1 for addr, m in b["masks"].items() if a["masks"].get(addr) != m)
            row["controllers whose masks the patch changed"] = f"{changed} of {len(b['masks'])}"
        else:
            row["controllers whose masks the patch changed"] = "-"
        vec = sum(r["vectors"] for r in runs.values())
        eq = sum(r["equal"] for r in runs.values())
        ok = eq == vec and all(r["port_granted_ok"] for r in runs.values())
        verdict = f"{'yes' if ok else 'no'} ({eq} of {vec})"
        missing = [name for v, name in VARIANT_NAMES.items() if v not in runs]
        if missing:
            verdict += "; " + ", ".join(missing) + " not booted"
        row["port equals the kernel (I/O vectors)"] = verdict
        out.append(row)
    df = pd.DataFrame(out, columns=COLUMNS)
    df.attrs["roles"] = {c: "measured" for c in COLUMNS[1:-1]}
    df.attrs["roles"][COLUMNS[-1]] = "predicted (port) against measured"
    return df


def book_rows(folder: str | Path | None = None) -> list[dict]:
    """:func:`boot_row` of every dump in the book's sweep folder
    (``data/lab/sweep/book`` of this checkout by default), sorted by name."""
    if folder is None:
        from ..datasets import repo_root
        folder = repo_root() / "data" / "lab" / "sweep" / "book"
    return [boot_row(p) for p in sorted(Path(folder).glob("*.tar.bz2"))]
