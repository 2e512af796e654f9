"""``numalab group-cpus TOPOLOGY --groups N [--devices D] [--variant V] [--json]``.

Runs the port of ``group_cpus_evenly()`` for D devices asking for N groups
each (device d gets ``spread_offset`` d under the rotate variant), prints
each device's masks and, per CPU, how many groups hold it and how many of
those are single-CPU ("dedicated") groups.
"""

from __future__ import annotations

import json

from ..cpumask import cpus as _cpus
from ..cpumask import format_cpulist
from ..errors import NumalabError
from ..kernel.lib.group_cpus import VARIANTS, prepare, spread_devices
from ..models.irq_load import irq_load, metrics
from ..topology import load

MAX_GROUPS = 1 << 16
MAX_DEVICES = 4096


def add_parser(sub) -> None:
    p = sub.add_parser("group-cpus", help="run group_cpus_evenly() (mainline or the rotate patch)",
                       description="Group a machine's CPUs the way the kernel's "
                                   "group_cpus_evenly() does (blk-mq queue maps, managed IRQ "
                                   "affinity), for one or more devices, and show the per-CPU "
                                   "load. TOPOLOGY is anything 'numalab show' reads, including "
                                   "synthetic strings such as \"numa:2 cluster:24 core:2 pu:1\".")
    p.add_argument("topology", metavar="TOPOLOGY")
    p.add_argument("--groups", "-g", type=int, required=True, metavar="N",
                   help="groups (vectors, queues) each device asks for")
    p.add_argument("--devices", "-d", type=int, default=1, metavar="D",
                   help="number of devices calling in turn (default 1)")
    p.add_argument("--variant", choices=VARIANTS, default="mainline",
                   help="mainline, or the seed patch's per-caller rotation")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


class UsageError(NumalabError, ValueError):
    """A command-line value out of range."""


def compute(topology, groups: int, devices: int = 1, variant: str = "mainline") -> dict:
    """Everything the command prints, as the ``--json`` dict.

    ``topology`` is a Topology; the result has ``devices`` (each with its
    ``masks`` as CPU lists, ``nummasks`` and ``spread_offset``), ``per_cpu``
    (cpu, groups, dedicated) and ``metrics`` (see
    :func:`numalab.models.irq_load.metrics`).
    """
    if not 1 <= groups <= MAX_GROUPS:
        raise UsageError(f"--groups must be between 1 and {MAX_GROUPS}, not {groups}")
    if not 1 <= devices <= MAX_DEVICES:
        raise UsageError(f"--devices must be between 1 and {MAX_DEVICES}, not {devices}")
    if not topology.possible:
        raise UsageError(f"{topology.name}: the topology has no possible CPUs")
    view = prepare(topology)
    devs = spread_devices(groups, view, devices, variant)
    load = irq_load(devs, view.possible)
    nodes = [0] * view.nr_node_ids
    for c in _cpus(view.possible):
        nodes[view.cpu_to_node[c]] |= 1 << c
    m = metrics(load, clusters=set(view.cluster) | {1 << c for c in _cpus(view.possible)},
                nodes=nodes, devices=devs)
    return {
        "topology": topology.name,
        "variant": variant,
        "groups": groups,
        "devices": [{"spread_offset": d if variant == "rotate" else 0,
                     "nummasks": g.nummasks,
                     "masks": [_cpus(mask) for mask in g]} for d, g in enumerate(devs)],
        "per_cpu": [{"cpu": c, "groups": n, "dedicated": k}
                    for c, n, k in zip(load.cpus, load.groups, load.dedicated)],
        "metrics": m,
    }


def render(result: dict) -> str:
    """The human-readable form of :func:`compute`'s result."""
    lines = [f"{result['topology']}: {result['groups']} groups x {len(result['devices'])} "
             f"device(s), variant {result['variant']}"]
    for d, dev in enumerate(result["devices"]):
        masks = [format_cpulist(sum(1 << c for c in m)) or "-" for m in dev["masks"]]
        lines.append(f"device {d} (spread_offset {dev['spread_offset']}, "
                     f"nummasks {dev['nummasks']}):")
        lines.append("  " + " ".join(f"{i}:{m}" for i, m in enumerate(masks)))
    lines.append("per CPU (groups/dedicated):")
    row = []
    for r in result["per_cpu"]:
        row.append(f"{r['cpu']:>4}:{r['groups']}/{r['dedicated']}")
        if len(row) == 8:
            lines.append("  " + " ".join(row))
            row = []
    if row:
        lines.append("  " + " ".join(row))
    m = result["metrics"]
    worst = format_cpulist(sum(1 << c for c in m["worst_cpus"])) or "none"
    lines.append(f"dedicated per CPU: max {m['max_dedicated']}, mean {m['mean_dedicated']:.2f}, "
                 f"{m['cpus_at_max_dedicated']} CPU(s) at the max ({worst})")
    lines.append(f"load share per CPU: max {m['max_share']:.2f}, mean {m['mean_share']:.2f}, "
                 f"max/mean {m['share_imbalance']:.3f}, CV {m['share_cv']:.3f}; groups "
                 f"crossing a cluster {m['cross_cluster_groups']}, a node {m['cross_node_groups']}")
    return "\n".join(lines)


def run(args) -> int:
    topo = load(args.topology)
    result = compute(topo, args.groups, args.devices, args.variant)
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result))
    return 0
