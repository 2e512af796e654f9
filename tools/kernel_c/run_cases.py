"""Feed machines to a compiled kernel's group_cpus_evenly() and sort() and
write or compare the results; the Python half of check_group_cpus.sh.

    run_cases.py results --kernel V --mainline BIN [--rotate BIN] --cases FILE --out FILE.json[.gz] [--source TEXT]
    run_cases.py compare --kernel V --mainline BIN [--rotate BIN] [--machines N] [--seed S] [--dumps]

``results`` runs every case of ``--cases`` (data/kernel_c/cases.json)
and writes one results file; ``compare`` checks the port
(numalab.kernel.lib.group_cpus with ``kernel=V``) call for call against the
C on seeded random machines (and, with ``--dumps``, the hwloc collection),
every group count from 1 to 2 x CPUs + 2, and prints the counts.

The machine the C sees is numalab's own view of the topology
(``numalab.kernel.lib.group_cpus.prepare()``), so both sides get the same
cpu_to_node(), sibling and cluster masks, including numalab's choices for
possible CPUs that are not present.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

from numalab import datasets
from numalab.cpumask import format_cpulist, parse_cpulist
from numalab.kernel import versions
from numalab.kernel.lib.group_cpus import CpuTopo, group_cpus_evenly, prepare
from numalab.topology import load
from numalab.topology.model import CPU, Node, Topology

SETS = ("synthetic", "random", "real", "findings")


def cpulist(mask: int) -> str:
    """A cpulist for the driver ("-" when empty)."""
    return format_cpulist(mask) or "-"


def machine_lines(v: CpuTopo) -> list[str]:
    """The driver's description of one machine."""
    lines = [f"machine {v.nr_cpu_ids} {v.nr_node_ids}",
             f"possible {cpulist(v.possible)}", f"present {cpulist(v.present)}",
             "nodes " + " ".join(str(n) for n in v.node_possible)]
    for c in range(v.nr_cpu_ids):
        if v.possible >> c & 1:
            lines.append(f"cpu {c} {v.cpu_to_node[c]} {cpulist(v.sibling[c])} {cpulist(v.cluster[c])}")
    return lines


def run_driver(binary: str, lines: list[str]) -> list[str]:
    """Run the driver on ``lines``; its output lines."""
    out = subprocess.run([binary], input="\n".join(lines + ["end"]) + "\n",
                         capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def parse_results(out: list[str], numgrps_list: list[int]) -> list[tuple]:
    """``(nummasks or None, warnings, [cpulist...] or None)`` per call."""
    res, i = [], 0
    for numgrps in numgrps_list:
        head = out[i].split()
        i += 1
        if head[0] != "result":
            raise RuntimeError(f"driver output out of step: {head}")
        if head[1] == "null":
            res.append((None, int(head[2]), None))
            continue
        masks = []
        for _ in range(numgrps):
            kind, text = out[i].split(" ", 1)
            assert kind == "mask"
            masks.append("" if text == "-" else text)
            i += 1
        res.append((None if head[1] == "-" else int(head[1]), int(head[2]), masks))
    return res


def run_calls(bins: dict[str, str], v: CpuTopo, queries: list[list]) -> list[list]:
    """Run ``[variant, numgrps, offset]`` queries (variants without a binary
    are skipped); ``[variant, numgrps, offset, nummasks, warnings, masks]`` each."""
    out = []
    for variant, binary in bins.items():
        qs = [q for q in queries if q[0] == variant]
        if not qs:
            continue
        lines = machine_lines(v) + [f"call {q[1]} {q[2] & 0xFFFFFFFF}" for q in qs]
        for q, (nm, w, masks) in zip(qs, parse_results(run_driver(binary, lines), [q[1] for q in qs])):
            out.append([q[0], q[1], q[2], nm, w, masks])
    order = {tuple(q): i for i, q in enumerate(queries)}
    return sorted(out, key=lambda r: order[(r[0], r[1], r[2])])


def desc_to_topo(d: dict) -> Topology:
    """A stored topology description back to a Topology."""
    cpus = {c[0]: CPU(id=c[0], node=c[1], thread_siblings=parse_cpulist(c[2]),
                      cluster_cpus=parse_cpulist(c[3])) for c in d["cpus"]}
    nodes = {int(n): Node(id=int(n), cpus=parse_cpulist(m)) for n, m in d["nodes"].items()}
    present = parse_cpulist(d["present"])
    return Topology(name=d["name"], arch=d["arch"], possible=parse_cpulist(d["possible"]),
                    present=present, online=present, cpus=cpus, nodes=nodes)


def case_topology(case: dict) -> Topology | None:
    """The Topology of a case (None when a real dump is absent)."""
    if "topology" in case:
        return desc_to_topo(case["topology"])
    path = Path(datasets.hwloc_dir()) / "linux" / case["dump"]
    if not path.exists():
        return None
    return load(path, **datasets.load_options(str(path)))


def cmd_results(args) -> int:
    cases = json.loads(Path(args.cases).read_text())
    bins = {"mainline": args.mainline}
    if args.rotate:
        bins["rotate"] = args.rotate
    sets, missing = {}, 0
    for name in SETS:
        rows = []
        for case in cases["sets"][name]:
            topo = case_topology(case)
            if topo is None:
                missing += 1
                rows.append(None)
                continue
            rows.append(run_calls(bins, prepare(topo), case["queries"]))
        sets[name] = rows
    sort_lines = [f"sort {len(k)} " + " ".join(str(x) for x in k) for k in cases["sort"]]
    sort_out = run_driver(args.mainline, sort_lines)
    orders = [[int(x) for x in line.split()[1:]] for line in sort_out]
    doc = {"format": 2, "kernel": args.kernel, "source": args.source,
           "variants": list(bins), "sha256": json.loads(args.sha256 or "{}"),
           "sets": sets, "sort": orders}
    write_results(Path(args.out), doc)
    calls = sum(len(r) for rows in sets.values() for r in rows if r)
    print(f"{args.kernel}: {calls} calls ({', '.join(bins)}), {len(orders)} sorts"
          + (f", {missing} dumps absent" if missing else "") + f" -> {args.out}")
    return 0


def write_results(path: Path, doc: dict) -> None:
    """JSON with one case per line (``zcat`` shows it); gzip when ``path`` ends in ``.gz``."""
    head = {k: v for k, v in doc.items() if k not in ("sets", "sort")}
    parts = ["{" + json.dumps(head, separators=(",", ":"))[1:-1] + ',"sets":{']
    for i, (name, rows) in enumerate(doc["sets"].items()):
        parts.append(("," if i else "") + json.dumps(name) + ":[")
        parts.append(",\n".join(json.dumps(r, separators=(",", ":")) for r in rows))
        parts.append("]")
    parts.append('},"sort":[\n' + ",\n".join(json.dumps(o, separators=(",", ":")) for o in doc["sort"]))
    parts.append("]}\n")
    text = "\n".join(parts)
    json.loads(text)                 # well-formed
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":         # fixed mtime: the same results give the same bytes
        path.write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    else:
        path.write_text(text)


# -- compare: seeded random machines -------------------------------------------------

def random_topology(rng: random.Random) -> Topology:
    """A random machine: 1-8 nodes (sparse ids, maybe CPU-less), 1-4
    clusters of 1-4 cores per node, SMT 1/2/4, clusters real / one CPU /
    the node, linear / SMT-apart / shuffled numbering, 0-5 possible CPUs
    that are not present (some in a node), x86 or arm64."""
    arch = rng.choice(["x86", "arm64"])
    node_ids = sorted(rng.sample(range(12), rng.randint(1, 8)))
    smt = rng.choice([1, 2, 4])
    mode = rng.choice(["clusters", "clusters", "equal", "self", "node"])
    layout = []
    even = (rng.randint(1, 4), rng.randint(1, 4))
    for n in node_ids:
        if len(node_ids) > 1 and rng.randint(0, 9) == 0:
            continue
        ncl = even[0] if mode == "equal" else rng.randint(1, 4)
        for k in range(ncl):
            for core in range(even[1] if mode == "equal" else rng.randint(1, 4)):
                for th in range(smt):
                    layout.append((n, k, core, th))
    if not layout:
        layout = [(node_ids[0], 0, 0, 0)]
    size = len(layout)
    numbering = rng.choice(["linear", "smt-apart", "shuffle"])
    if numbering == "linear":
        ids = list(range(size))
    elif numbering == "smt-apart":
        order = sorted(range(size), key=lambda i: (layout[i][3], i))
        ids = [0] * size
        for new, i in enumerate(order):
            ids[i] = new
    else:
        pool = list(range(size + rng.randint(0, 6)))
        rng.shuffle(pool)
        ids = pool[:size]
    top = max(ids) + 1
    extra = list(range(top, top + rng.randint(0, 5)))
    core_m, cl_m, node_m = {}, {}, {}
    for i, (n, k, core, _) in enumerate(layout):
        bit = 1 << ids[i]
        core_m[(n, k, core)] = core_m.get((n, k, core), 0) | bit
        cl_m[(n, k)] = cl_m.get((n, k), 0) | bit
        node_m[n] = node_m.get(n, 0) | bit
    cpus = {}
    for i, (n, k, core, _) in enumerate(layout):
        c = ids[i]
        cl = {"clusters": cl_m[(n, k)], "equal": cl_m[(n, k)], "self": 1 << c,
              "node": node_m[n]}[mode]
        cpus[c] = CPU(id=c, node=n, thread_siblings=core_m[(n, k, core)], cluster_cpus=cl)
    nodes = {n: Node(id=n, cpus=node_m.get(n, 0)) for n in node_ids}
    for c in extra:
        if rng.random() < 0.5:
            n = rng.choice(node_ids)
            nodes[n] = Node(id=n, cpus=nodes[n].cpus | 1 << c)
    present = sum(1 << c for c in cpus)
    return Topology(name="random", arch=arch, possible=present | sum(1 << c for c in extra),
                    present=present, online=present, cpus=cpus, nodes=nodes)


def compare_machine(bins: dict[str, str], kernel: str, topo: Topology,
                    offsets: list[int], max_groups: int | None = None) -> tuple[int, list]:
    """Every group count against the port; (calls, mismatches)."""
    v = prepare(topo)
    n = v.possible.bit_count()
    top = 2 * n + 2 if max_groups is None else min(2 * n + 2, max_groups)
    queries = [["mainline", g, 0] for g in range(1, top + 1)]
    if "rotate" in bins:
        queries += [["rotate", g, o] for g in range(1, top + 1) for o in offsets]
    bad = []
    for variant, g, o, nm, w, masks in run_calls(bins, v, queries):
        got = group_cpus_evenly(g, v, variant, o, kernel=kernel)
        want = [parse_cpulist(m) for m in masks]
        want_nm = g if nm is None else nm
        if list(got) != want or got.nummasks != want_nm or got.warnings != w:
            bad.append((topo.name, variant, g, o))
    return len(queries), bad


def cmd_compare(args) -> int:
    bins = {"mainline": args.mainline}
    if args.rotate:
        bins["rotate"] = args.rotate
    rng = random.Random(args.seed)
    calls, bad, machines = 0, [], 0
    for _ in range(args.machines):
        offs = sorted(rng.sample([0, 1, 2, 3, 5, 6, 7, 13, 100, 0xFFFFFFFF], 3))
        k, b = compare_machine(bins, args.kernel, random_topology(rng), offs)
        calls, bad, machines = calls + k, bad + b, machines + 1
    if args.dumps:
        for path in sorted((Path(datasets.hwloc_dir()) / "linux").glob("*.tar.bz2")):
            topo = load(path, **datasets.load_options(str(path)))
            k, b = compare_machine(bins, args.kernel, topo, [0, 1, 5], max_groups=160)
            calls, bad, machines = calls + k, bad + b, machines + 1
    print(f"{args.kernel}: {machines} machines, {calls} calls ({', '.join(bins)}), "
          f"{len(bad)} differ from the port")
    for b in bad[:20]:
        print("  differs:", b)
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("results", "compare"):
        s = sub.add_parser(name)
        s.add_argument("--kernel", required=True, choices=versions.KNOWN)
        s.add_argument("--mainline", required=True)
        s.add_argument("--rotate")
    r = sub.choices["results"]
    r.add_argument("--cases", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--source", default="")
    r.add_argument("--sha256", default="")
    c = sub.choices["compare"]
    c.add_argument("--machines", type=int, default=100)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--dumps", action="store_true")
    args = p.parse_args(argv)
    return cmd_results(args) if args.cmd == "results" else cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
