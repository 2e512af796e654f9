"""``numalab group-cpus TOPOLOGY --groups N [--devices D] [--variant V] [--kernel K] [--json]``.

Runs the port of ``group_cpus_evenly()`` of kernel K (default: the newest
modelled kernel, said in the output) for D devices asking for N groups
each (device d gets ``spread_offset`` d under the rotate variant), prints
each device's masks and, per CPU, how many groups hold it and how many of
those are single-CPU ("dedicated") groups. ``block`` and ``balance`` are the
two placements of :mod:`numalab.models.irq.alternative`, not kernel code.
"""

from __future__ import annotations

import json

from ..cpumask import cpus as _cpus
from ..cpumask import format_cpulist
from ..errors import NumalabError, ParameterError
from ..kernel import versions
from ..kernel.lib.group_cpus import VARIANTS, GroupMasks, prepare, spread_devices
from ..models.irq.load import group_metrics
from ..topology import load
from ..validate import integer, option_integer

MAX_GROUPS = 1 << 16
MAX_DEVICES = 4096
MAX_MASKS = 1 << 22       # groups x devices: about 15 s of work and output on 4 CPUs


def add_parser(sub) -> None:
    p = sub.add_parser("group-cpus", help="run group_cpus_evenly() (mainline or the rotate patch)",
                       description="Group a machine's CPUs the way the kernel's "
                                   "group_cpus_evenly() does (blk-mq queue maps, managed IRQ "
                                   "affinity), for one or more devices, and show the per-CPU "
                                   "load. TOPOLOGY is anything 'numalab show' reads, including "
                                   "synthetic strings such as \"numa:2 cluster:24 core:2 pu:1\".")
    p.add_argument("topology", metavar="TOPOLOGY")
    p.add_argument("--groups", "-g", type=option_integer(1, MAX_GROUPS), required=True,
                   metavar="N",
                   help="groups (vectors, queues) each device asks for")
    p.add_argument("--devices", "-d", type=option_integer(1, MAX_DEVICES), default=1,
                   metavar="D",
                   help="number of devices calling in turn (default 1)")
    p.add_argument("--variant", choices=VARIANTS + ALTERNATIVES, default="mainline",
                   help="mainline, the seed patch's per-caller rotation, or one of the "
                        "book's two alternatives (block, balance)")
    p.add_argument("--kernel", "-k", default=None, metavar="K",
                   help=f"the kernel whose lib/group_cpus.c and lib/sort.c to run: "
                        f"{', '.join(versions.KNOWN)} or a release such as 7.2.13+deb14-amd64 "
                        f"(default {versions.NEWEST}, the newest modelled)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


class UsageError(ParameterError):
    """A command-line value out of range."""


ALTERNATIVES = ("block", "balance")


def _alternative(variant: str, topology, groups: int, devices: int) -> list[GroupMasks]:
    """The masks of :mod:`numalab.models.irq.alternative`'s placements
    (their ``nummasks`` is the number of masks they return)."""
    from ..models.irq.alternative import balance_devices, block_devices
    devs = (block_devices if variant == "block" else balance_devices)(topology, groups, devices)
    out = []
    for masks in devs:
        g = GroupMasks(masks)
        g.nummasks = len(masks)
        out.append(g)
    return out


def compute(topology, groups: int, devices: int = 1, variant: str = "mainline",
            kernel: str | None = None) -> dict:
    """Everything the command prints, as the ``--json`` dict.

    ``topology`` is a Topology; ``kernel`` a modelled kernel version or
    release (None: the newest). The result has ``kernel`` (the modelled
    version) and ``kernel_source``, ``devices`` (each with its ``masks`` as
    CPU lists, ``nummasks`` and ``spread_offset``), ``per_cpu`` (cpu,
    groups, dedicated) and ``metrics`` (see
    :func:`numalab.models.irq.load.metrics`).
    """
    text = versions.text(kernel)                # UnknownKernelError: one line, exit 2
    if variant not in VARIANTS + ALTERNATIVES:
        raise UsageError(f"--variant must be one of {', '.join(VARIANTS + ALTERNATIVES)}, "
                         f"not {variant}")
    if variant != "mainline" and not text.cluster_path:
        raise UsageError(f"--variant {variant} changes the cluster path, which Linux "
                         f"{text.version}'s lib/group_cpus.c does not have (use --kernel "
                         f"{versions.NEWEST})")
    if variant in ALTERNATIVES and text.version != versions.NEWEST:
        raise UsageError(f"--variant {variant} is built on Linux {versions.NEWEST}'s groups, "
                         f"not {text.version}'s")
    integer("--groups", groups, 1, MAX_GROUPS, error=UsageError)
    integer("--devices", devices, 1, MAX_DEVICES, error=UsageError)
    if groups * devices > MAX_MASKS:
        raise UsageError(f"--groups x --devices is {groups * devices} masks, more than "
                         f"{MAX_MASKS}")
    if not topology.possible:
        raise UsageError(f"{topology.name}: the topology has no possible CPUs")
    view = prepare(topology)
    if variant in ALTERNATIVES:
        devs = _alternative(variant, topology, groups, devices)
    else:
        devs = spread_devices(groups, view, devices, variant, kernel=text.version)
    m, load = group_metrics(devs, view)
    return {
        "topology": topology.name,
        "variant": variant,
        "kernel": text.version,
        "kernel_source": text.source,
        "kernel_default": kernel is None,
        "groups": groups,
        "devices": [{"spread_offset": d if variant == "rotate" else 0,
                     "nummasks": g.nummasks,
                     "empty_masks": sum(1 for mask in g if not mask & view.present),
                     "masks": [_cpus(mask) for mask in g]} for d, g in enumerate(devs)],
        "cpu_set": "present",
        "per_cpu": [{"cpu": c, "groups": n, "dedicated": k}
                    for c, n, k in zip(load.cpus, load.groups, load.dedicated)],
        "metrics": m,
    }


def render(result: dict) -> str:
    """The human-readable form of :func:`compute`'s result."""
    lines = [f"{result['topology']}: {result['groups']} groups x {len(result['devices'])} "
             f"device(s), variant {result['variant']}, kernel {result['kernel']}"
             + (" (the newest modelled; " if result.get("kernel_default") else " (")
             + f"{result.get('kernel_source', '')})"]
    for d, dev in enumerate(result["devices"]):
        masks = [format_cpulist(sum(1 << c for c in m)) or "-" for m in dev["masks"]]
        lines.append(f"device {d} (spread_offset {dev['spread_offset']}, "
                     f"nummasks {dev['nummasks']}):")
        lines.append("  " + " ".join(f"{i}:{m}" for i, m in enumerate(masks)))
    for d, dev in enumerate(result["devices"]):
        if dev.get("empty_masks"):
            lines.append(f"warning: device {d} has {dev['empty_masks']} empty mask(s) of "
                         f"{len(dev['masks'])}: the kernel's alloc_descs() refuses an empty "
                         f"affinity mask (-EINVAL), so this MSI-X allocation would fail")
    lines.append("per present CPU (groups/dedicated):")
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
    import sys
    topo = load(args.topology)
    result = compute(topo, args.groups, args.devices, args.variant, args.kernel)
    bad = sum(1 for dev in result["devices"] if dev["empty_masks"])
    if bad and args.json:
        print(f"warning: {bad} device(s) got empty masks (alloc_descs() would return -EINVAL)",
              file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    else:
        print(render(result))
    return 0
