"""``numalab probe TOPOLOGY --devices SPEC --policy P``: simulate boot-time
driver probing on a machine (see :mod:`numalab.models.probe.sim`)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re

from ..cpumask import format_cpulist, parse_cpulist
from ..models.probe.sim import (ALPHA_RANGE, MAX_BACKGROUND, POLICIES, POLICY_ALIASES, Params,
                             ProbeModelError, simulate)
from ..topology import load
from ..validate import option_integer, option_number, option_seed

_SPEC_HELP = """\
SPEC is a comma-separated list of KIND[:COUNT][@NODE] items:
  KIND   one of the calibrated kinds:
           nvme      asynchronous PCI probe (NVMe; CPU/wait split fitted to the patches' tables)
           mlx5      synchronous PCI probe (mlx5_core; ~0.51 s)
           usb       synchronous USB probe (~0.9 ms); no node unless @NODE is given
           platform  synchronous platform probe (intel_rapl_msr-like, ~4 ms); never has a node
  COUNT  how many such devices (default 1)
  NODE   the device's NUMA node: "node0", "0"; "-1" or "none" for no node.
         PCI devices without @NODE have no node (as when the firmware gives none).
Example: nvme:3@node0,mlx5:2@node1,usb:2"""

MAX_DEVICES = 4096      # per item and in all

_ITEM = re.compile(r"^([a-z0-9_]+)(?::(\d{1,9}))?(?:@(?:node)?(-1|none|\d{1,9}))?$")


def parse_spec(spec: str, topo) -> list:
    """Devices of a SPEC (see ``numalab probe --help``); ProbeModelError on
    anything malformed.

    >>> from numalab.models.probe.sim import machine
    >>> [(d.name, d.node, d.probe_type) for d in parse_spec("nvme:2@node1,usb", machine(2, 4))]
    [('nvme0', 1, 'async'), ('nvme1', 1, 'async'), ('usb0', -1, 'sync')]
    """
    from ..models.probe.calibrate import catalogue
    cat = catalogue()
    devices, counters = [], {}
    items = [x.strip() for x in spec.split(",")]
    if not spec.strip() or any(not x for x in items):
        raise ProbeModelError(f"--devices {spec!r}: empty item (expected KIND[:COUNT][@NODE], "
                              f"e.g. nvme:3@node0)")
    for item in items:
        m = _ITEM.match(item.lower())
        if not m:
            raise ProbeModelError(f"--devices: cannot read {item!r} (expected KIND[:COUNT][@NODE], "
                                  f"e.g. nvme:3@node0)")
        kind, count, node = m.group(1), int(m.group(2) or 1), m.group(3)
        if kind not in cat:
            raise ProbeModelError(f"--devices: unknown kind {kind!r} (one of {', '.join(cat)})")
        if count < 1 or count > MAX_DEVICES:
            raise ProbeModelError(f"--devices: count of {kind} must be 1..{MAX_DEVICES}, "
                                  f"not {count}")
        n = -1 if node in (None, "-1", "none") else int(node)
        if kind == "platform" and n >= 0:
            raise ProbeModelError("--devices: platform devices have no node (drop the @NODE)")
        if n >= 0 and n not in topo.nodes:
            raise ProbeModelError(f"--devices: {item!r}: node {n} is not a node of {topo.name} "
                                  f"(nodes: {', '.join(map(str, topo.node_ids))})")
        tmpl = cat[kind]
        for _ in range(count):
            i = counters.get(kind, 0)
            counters[kind] = i + 1
            name = f"{kind}_{i}" if kind[-1].isdigit() else f"{kind}{i}"
            devices.append(dataclasses.replace(tmpl, name=name, node=n))
    if len(devices) > MAX_DEVICES:
        raise ProbeModelError(f"--devices: {len(devices)} devices in all; at most {MAX_DEVICES}")
    return devices


def add_parser(sub) -> None:
    p = sub.add_parser(
        "probe", help="simulate NUMA-aware driver probing under a kernel policy",
        description="Simulate boot-time driver probing on a machine: which thread and CPU run "
                    "each probe, when, and how long it takes, under one of five policies: "
                    "mainline (a: Linux 6.12's work_on_cpu() to the node's first housekeeping "
                    "CPU), mainline-7.2 (a7: Linux 7.2's queue_work_on(pci_probe_wq), the "
                    "series' baseline), pf-wq-worker (b: the PF_WQ_WORKER fix), driver-core (c: the v2 "
                    "NUMA-node-aware synchronous probing series), bus-opt-in (d: (c) for PCI "
                    "only). Costs are calibrated on the patches' published tables.",
        epilog=_SPEC_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("topology", metavar="TOPOLOGY",
                   help="a dump, .toml description or synthetic string (\"pack:2 numa:1 core:8 pu:2\")")
    p.add_argument("--devices", metavar="SPEC", required=True, help="devices to probe (see below)")
    p.add_argument("--policy", default="mainline", metavar="P",
                   help=f"one of {', '.join(POLICIES)} (or a, a7, b, c, d), or 'all' "
                        f"(default: mainline)")
    p.add_argument("--seed", type=option_seed(), default=0,
                   help="random seed (udev worker CPUs, ties), an integer >= 0")
    p.add_argument("--alpha", type=option_number(*ALPHA_RANGE), default=0.5,
                   help="remote-memory sensitivity, 0..1: CPU time x (1 + alpha (d/10 - 1)) "
                        "off-node (default 0.5)")
    p.add_argument("--isolcpus", metavar="CPULIST", default="",
                   help="CPUs given to isolcpus=domain (e.g. 0-3): out of HK_TYPE_DOMAIN")
    p.add_argument("--nohz-full", metavar="CPULIST", default="",
                   help="CPUs given to nohz_full= (e.g. 0-3): out of HK_TYPE_WQ, which only "
                        "the 6.12-based policies read (mainline, pf-wq-worker)")
    p.add_argument("--wakeup", choices=("llc", "node"), default="llc",
                   help="where a waking thread goes: llc (the kernel's kick_pool() and "
                        "select_idle_sibling(), default) or node (the model's rule: any idle CPU "
                        "of the node, standing for load balancing)")
    p.add_argument("--hz", type=option_integer(0, 10_000), default=250,
                   help="scheduler ticks per second for the CPU-intensive check (default 250; "
                        "0: checked continuously)")
    p.add_argument("--background", type=option_number(0, MAX_BACKGROUND), default=0.0,
                   help=f"runnable background tasks on every CPU, 0..{MAX_BACKGROUND:g} "
                        f"(default 0)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _table(run) -> list[str]:
    head = f"{'device':<10} {'bus':<8} {'node':>4} {'mode':<5} {'cpu':>4} {'cnode':>5} " \
           f"{'thread':<18} {'lock':<4} {'start ms':>9} {'end ms':>9} {'cost ms':>9}"
    lines = [head]
    for p in run.probes:
        name = p.device if not p.parent else f" {p.device}"
        lines.append(f"{name:<10} {p.bus:<8} {p.dev_node:>4} {p.mode:<5} {p.cpu:>4} "
                     f"{p.cpu_node:>5} {p.thread:<18} {'yes' if p.holds_device_lock else 'no':<4} "
                     f"{p.start:>9.3f} {p.end:>9.3f} {p.cost:>9.3f}")
    lines.append(f"makespan: {run.makespan:.3f} ms  (policy {run.policy}, seed {run.seed})")
    return lines


def run(args) -> int:
    if args.policy == "all":
        policies = list(POLICIES)
    elif args.policy in POLICIES or args.policy in POLICY_ALIASES:
        policies = [args.policy]
    else:
        raise ProbeModelError(f"--policy: unknown policy {args.policy!r} "
                              f"(one of {', '.join(POLICIES)}, a/a7/b/c/d, or all)")
    topo = load(args.topology)
    devices = parse_spec(args.devices, topo)
    known = topo.possible or sum(1 << c for c in topo.cpus)
    masks = {}
    for opt, val in (("--isolcpus", args.isolcpus), ("--nohz-full", args.nohz_full)):
        m = parse_cpulist(val) if val else 0
        if m & ~known:
            raise ProbeModelError(f"{opt}: CPU(s) {format_cpulist(m & ~known)} are not CPUs "
                                  f"of {topo.name} ({format_cpulist(known) or 'none'})")
        masks[opt] = m
    params = Params(alpha=args.alpha, isolcpus=masks["--isolcpus"],
                    nohz_full=masks["--nohz-full"], background=args.background,
                    wakeup=args.wakeup, hz=args.hz)
    runs = [simulate(topo, devices, pol, seed=args.seed, params=params) for pol in policies]
    if args.json:
        out = [r.to_dict() for r in runs]
        print(json.dumps(out[0] if len(out) == 1 else out, indent=1))
        return 0
    for i, r in enumerate(runs):
        if i:
            print()
        print("\n".join(_table(r)))
    return 0
