"""``numalab lab kernels|run|show|build-kernel``: boot real Debian kernels in QEMU on a
described topology and collect what they did (see :mod:`numalab.lab`)."""

from __future__ import annotations

import json
import shlex
import sys

RUN_EPILOG = """\
examples:
  numalab lab run --kernel 6.1 --topology "numa:2 core:2 pu:1" --nvme 1@0:4 -o small.tar.bz2
  numalab lab run --kernel 7.2 --topology "pack:2 numa:1 core:24 pu:2" \\
      --nvme 3@0:62 --nvme 3@1:62 -o ex004.tar.bz2
  numalab lab run --kernel 7.2 --topology "pack:1 core:6 pu:2" --node-cpus "0-5;6-9;10-11" \\
      --distances "10,16,32;16,10,22;32,22,10" --nvme 1@0:4 --nvme 1@2:4

The guest has no network. QEMU runs single-threaded TCG (-accel tcg,thread=single
-cpu max) unless --accel kvm; an oops or panic on the console boots it once more.
The dump is a .tar.bz2 in hwloc-gather-topology's layout ('numalab show',
'lstopo -i') with NAME/numalab/lab/ holding the manifest, ftrace output, dmesg
and, with --io, /proc/interrupts before and after the pinned reads.
"""


SWEEP_EPILOG = """\
matrix file (TOML; dump paths relative to its folder):
  machines = ["../../hwloc/linux/16amd64-8n2c.tar.bz2", "pack:2 numa:1 core:4 pu:2"]
  kernels = ["7.2"]              # Debian versions or releases, or built:NAME
  nvme = ["per-node:1:8"]        # per-node:N[:QUEUES], spread:N:Q/C or N@NODE:QUEUES options ("3@0:8 3@1:8")
  cmdline = [""]                 # optional: extra kernel command lines, one boot each
  timeout = 600                  # optional: seconds per boot
  retries = 1                    # optional: boots again after a failure (0-3)

a cluster by hand (each worker needs QEMU, busybox-static and the lab's kernel cache):
  dask scheduler --host 127.0.0.1 --port 8786
  dask worker tcp://127.0.0.1:8786 --nthreads 1        # one per core, as many as wanted
  numalab lab sweep MATRIX.toml -o RESULTS --scheduler tcp://127.0.0.1:8786
"""


def _say(msg: str) -> None:
    print(f"numalab lab: {msg}", file=sys.stderr, flush=True)


def add_parser(sub) -> None:
    import argparse
    p = sub.add_parser("lab", help="boot real kernels in QEMU on a described topology",
                       description="The kernel lab: fetch Debian kernels (never installed "
                                   "into this host), boot them in QEMU on a topology you "
                                   "describe, with NVMe devices on NUMA nodes, and collect "
                                   "a real dump of what the kernel did.")
    lsub = p.add_subparsers(dest="lab_command", metavar="SUBCOMMAND")
    lsub.required = True

    k = lsub.add_parser("kernels", help="list cached and fetchable kernels; fetch one",
                        description="List the kernels in the cache and those Debian "
                                    "(bookworm, bookworm-security, sid) offers, read through "
                                    "a private apt configuration in the cache.")
    k.add_argument("--fetch", metavar="VERSION",
                   help="fetch this kernel into the cache (a version such as 6.1 or 7.2, a "
                        "release such as 6.1.0-56-amd64, or a package name)")
    k.add_argument("--cached", action="store_true",
                   help="only the cached kernels (no package lists, works offline)")
    k.add_argument("--refresh", action="store_true", help="refresh the package lists first")
    k.add_argument("--json", action="store_true", help="machine-readable output")
    k.set_defaults(func=run_kernels)

    r = lsub.add_parser("run", help="boot a kernel on a topology and collect a lab dump",
                        description="Boot a Debian kernel in QEMU on the described machine, "
                                    "load nvme with ftrace on the probe path, optionally run "
                                    "pinned reads, and write a lab dump. Prints progress on "
                                    "stderr and the dump's path on stdout. Never overwrites.",
                        epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--kernel", required=True,
                   help="a version (6.1, 6.12, 7.2), a release or a package name; "
                        "'numalab lab kernels' lists them")
    r.add_argument("--topology", required=True, metavar="SPEC",
                   help="synthetic string (\"pack:2 numa:1 core:24 pu:2\") or a .toml "
                        "description (keys synthetic, distances, node_cpus, node_memory_mib)")
    r.add_argument("--distances", metavar="MATRIX",
                   help="node distance matrix, rows separated by ';' (\"10,21;21,10\")")
    r.add_argument("--node-cpus", metavar="LISTS",
                   help="uneven nodes: one cpulist per node separated by ';' "
                        "(\"0-5;6-9;10-11\"; an empty one is a CPU-less node); only "
                        "without a numa level")
    r.add_argument("--node-memory", metavar="SIZES",
                   help="memory per node, comma separated (\"512M,512M,0\"; 0 is a "
                        "memory-less node; default 384M each)")
    r.add_argument("--nvme", action="append", default=[], metavar="N@NODE:QUEUES",
                   help="N NVMe controllers on NODE, each with QUEUES I/O queue pairs "
                        "(repeatable)")
    r.add_argument("--io", action="store_true",
                   help="run pinned reads (taskset + dd) on every CPU from every namespace and "
                        "record /proc/interrupts before and after")
    r.add_argument("--io-count", type=int, default=16, metavar="N",
                   help="with --io: 4 KiB direct reads per CPU per namespace (default 16)")
    r.add_argument("--trace", default="nvme_probe", metavar="FUNC[,FUNC]",
                   help="ftrace functions armed before nvme loads (default nvme_probe; "
                        "'' for none)")
    r.add_argument("--boot-trace", default="", metavar="FUNC[,FUNC]",
                   help="built-in functions traced from boot (ftrace= on the kernel command "
                        "line; saved as trace.boot), e.g. group_cpus_evenly to count every "
                        "call before the devices")
    r.add_argument("--sched-ext", choices=("flat", "pernode"), default=None,
                   help="load scx_simple (built by 'numalab lab build-scx' from 7.2's "
                        "tools/sched_ext; pernode sets SCX_OPS_BUILTIN_IDLE_PER_NODE), trace "
                        "its idle-mask code and run --workload; the dump gets "
                        "numalab/lab/scx-trace and scx.json (data/lab/README.md)")
    r.add_argument("--workload", action="append", default=[], metavar="NAME[:ARGS]",
                   help="with --sched-ext (repeatable, in order): pingpong[:PAIRSxITERS], "
                        "pingpong-pin[:PAIRSxITERS], fork[:N], fork-pin[:N] (default: all four, "
                        "4x100 and 50)")
    r.add_argument("--append", default="", metavar="WORDS",
                   help="more kernel command-line words (\"irqaffinity=0 nosmt\")")
    r.add_argument("--timeout", type=float, default=600, metavar="SECONDS",
                   help="kill the VM after this long (default 600)")
    r.add_argument("--accel", choices=("tcg", "kvm"), default="tcg",
                   help="tcg (default, single-threaded) or kvm (falls back to tcg when the "
                        "guest does not reach init in 60 s)")
    r.add_argument("-o", "--output", metavar="PATH",
                   help="the dump to write (NAME.tar.bz2) or a directory for it "
                        "(default: the current directory)")
    r.set_defaults(func=run_run)

    b = lsub.add_parser("build-kernel", help="build a lab kernel from Debian's linux-source, "
                                             "optionally patched",
                        description="Build bzImage and the NVMe modules from Debian's "
                                    "linux-source-VERSION package (fetched into the cache, never "
                                    "installed) with the lab's configuration fragment "
                                    "(src/numalab/lab/kconfig/lab.config), optionally with a "
                                    "patch applied, under nice -n 19. Builds are cached by "
                                    "(source package, fragment, patch); boot one with 'numalab "
                                    "lab run --kernel built:NAME'. Prints progress on stderr and "
                                    "the kernel's release on stdout.")
    b.add_argument("--source", metavar="VERSION",
                   help="the linux-source package's version: 7.2 or 6.12 (any cached or "
                        "fetchable one)")
    b.add_argument("--patch", metavar="FILE",
                   help="a unified diff to apply with patch -p1 (no fuzz), e.g. "
                        "src/numalab/lab/patches/004-group-cpus-rotate-7.2.patch")
    b.add_argument("--fragment", metavar="FILE",
                   help="the Kconfig fragment (default src/numalab/lab/kconfig/lab.config; "
                        "kconfig/lab-periodic.config is the one the first built dumps used)")
    b.add_argument("-o", "--name", metavar="NAME",
                   help="the build's name for 'lab run --kernel built:NAME' (default VERSION "
                        "or VERSION-PATCHSTEM)")
    b.add_argument("-j", "--jobs", type=int, default=2, metavar="N",
                   help="parallel compile jobs (default 2)")
    b.add_argument("--list", action="store_true", help="list the named builds and exit")
    b.set_defaults(func=run_build_kernel)

    x = lsub.add_parser("build-scx", help="build scx_simple and the workload program for "
                                          "the sched_ext lab (cached)",
                        description="Build scx_simple from the 7.2 kernel's tools/sched_ext "
                                    "(Debian's linux-source-7.2, clang-19, libbpf and bpftool "
                                    "from the tree, statically linked, with the lab's -n "
                                    "per-node option) and tools/sched_ext_lab/scxload.c, and "
                                    "read the kprobes' structure offsets from the kernel's BTF. "
                                    "Cached in the lab cache by its inputs; 'lab run "
                                    "--sched-ext' calls it. Prints the cache folder.")
    x.add_argument("--kernel", default="7.2", help="the lab kernel whose BTF is used (7.2)")
    x.add_argument("--force", action="store_true", help="build again even when cached")
    x.set_defaults(func=run_build_scx)
    w = lsub.add_parser("sweep", help="boot a matrix of machines x kernels x NVMe layouts on "
                                      "Dask (resumable)",
                        description="Boot every (machine, kernel, NVMe layout, command line) of "
                                    "a matrix file as one task on Dask distributed: a "
                                    "LocalCluster of one single-threaded worker per usable CPU, "
                                    "or --scheduler for a cluster started by hand. Each boot is "
                                    "'numalab lab run' with the same checks; its dump lands in "
                                    "RESULTS under a content-addressed name, so a rerun skips "
                                    "it. A failed boot is retried once, then listed in "
                                    "RESULTS/failures.json. Progress on stderr, the summary on "
                                    "stdout; exit 1 when a boot failed.",
                        epilog=SWEEP_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    w.add_argument("matrix", metavar="MATRIX.toml", help="the matrix file")
    w.add_argument("-o", "--output", required=True, metavar="RESULTS",
                   help="the results folder (created; its dumps are reused)")
    w.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="an existing Dask scheduler (default: a LocalCluster on this machine)")
    w.add_argument("--workers", type=int, default=None, metavar="N",
                   help="LocalCluster worker processes, one thread each (default: the usable "
                        "CPUs)")
    w.add_argument("--dry-run", action="store_true",
                   help="check the matrix and print the plan (and the machines the lab cannot "
                        "build, with why); boot nothing")
    w.set_defaults(func=run_sweep_command)

    e = lsub.add_parser("express", help="which machines the lab can build exactly, and why "
                                        "not the others",
                        description="For each machine (default: the 47 of the hwloc "
                                    "collection, data/hwloc), the 'numalab lab run' options "
                                    "that build it exactly in QEMU (same CPU ids, SMT siblings, "
                                    "dies, packages, clusters, nodes, distances), or every "
                                    "reason why not (numalab.lab.express).")
    e.add_argument("datasets", nargs="*", metavar="DATASET",
                   help="dumps, XML, .toml descriptions or synthetic strings")
    e.add_argument("--json", action="store_true", help="machine-readable output")
    e.set_defaults(func=run_express)

    s = lsub.add_parser("show", help="what a lab dump says: kernel, NVMe IRQ masks, "
                                     "blk-mq maps, probe trace, interrupt deltas")
    s.add_argument("dump", help="a lab dump (.tar.bz2)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=run_show)


def run_kernels(args) -> int:
    from ..lab.kernels import AptCache, cached_kernels, fetch_kernel
    if args.fetch:
        k = fetch_kernel(args.fetch, progress=_say)
        print(k.release)
        return 0
    cached = cached_kernels()
    fetchable = []
    if not args.cached:
        apt = AptCache()
        if apt.update(force=args.refresh):
            _say("package lists refreshed")
        fetchable = apt.kernels()
    have = {k.release for k in cached}
    if args.json:
        print(json.dumps({
            "cached": [{"release": k.release, "upstream": k.upstream, "dir": str(k.dir),
                        "packages": k.packages, "modules": k.modules} for k in cached],
            "fetchable": [{"release": k.release, "upstream": k.upstream,
                           "packages": list(k.packages),
                           "bytes": sum(p["size"] for p in k.packages.values())}
                          for k in fetchable]}, indent=1))
        return 0
    print("cached:")
    for k in cached:
        names = ", ".join(f"{p['name']} {p['version']}" for p in k.packages)
        print(f"  {k.upstream:<10} {k.release:<24} {names}")
    if not cached:
        print("  (none)")
    if not args.cached:
        print("fetchable (Debian bookworm, bookworm-security, sid):")
        for k in fetchable:
            size = sum(p["size"] for p in k.packages.values()) / 1e6
            mark = "  [cached]" if k.release in have else ""
            print(f"  {k.upstream:<10} {k.release:<24} {size:5.0f} MB  "
                  f"{' + '.join(k.packages)}{mark}")
    return 0


def run_run(args) -> int:
    from ..lab import LabError
    from ..lab.args import check_run
    from ..lab.run import LabOptions, find_qemu, run_lab
    ok = check_run(args)              # every argument, before anything starts
    if args.workload and not args.sched_ext:
        raise LabError("--workload needs --sched-ext flat|pernode")
    if args.sched_ext:
        from ..lab.scx import parse_workload
        for w in args.workload:
            parse_workload(w)
    find_qemu()
    opts = LabOptions(devices=ok["devices"], io=args.io, io_count=ok["io_count"],
                      trace=ok["trace"], timeout=ok["timeout"], accel=args.accel,
                      boot_trace=ok["boot_trace"], sched_ext=args.sched_ext or "",
                      workloads=tuple(args.workload), append=ok["append"])
    path = run_lab(ok["kernel"], ok["machine"], opts, output=args.output, progress=_say,
                   command="numalab " + shlex.join(sys.argv[1:]))
    print(path)
    return 0


def run_build_kernel(args) -> int:
    from ..lab.build import build_kernel, built_kernels
    if args.list:
        for name, k in built_kernels().items():
            b = k.build or {}
            print(f"{name:<24} {k.release:<28} {b.get('source_package')} "
                  f"{b.get('source_version')} patch={b.get('patch')}")
        return 0
    if not args.source:
        from ..lab import LabError
        raise LabError("--source VERSION is required (7.2, 6.12...)")
    from ..lab.args import check_build
    ok = check_build(args)            # every argument, before anything is fetched or built
    k = build_kernel(ok["source"], patch=ok["patch"], name=ok["name"], jobs=ok["jobs"],
                     fragment=ok["fragment"], progress=_say)
    print(k.release)
    return 0


def run_build_scx(args) -> int:
    from ..lab.scxbuild import build_scx
    t = build_scx(args.kernel, progress=_say, force=args.force)
    print(t.dir)
    return 0


def run_show(args) -> int:
    from ..lab.dump import read_lab_dump, summary
    d = read_lab_dump(args.dump)
    s = summary(d)
    if args.json:
        print(json.dumps(s, indent=1))
        return 0
    print(f"{d.name}: kernel {d.kernel_release}")
    build = d.manifest["kernel"].get("build")      # read_lab_dump checked its keys
    if build:
        print(f"  built by numalab lab build-kernel from {build['source_package']} "
              f"{build['source_version']}, patch {build.get('patch') or 'none'} "
              f"(fragment sha256 {build['fragment_sha256'][:12]}, patch sha256 "
              f"{(build.get('patch_sha256') or '-')[:12]})")
    from ..lab import LabError
    from ..lab.oracle import reproduce
    try:
        for cmd in reproduce(d):
            print(f"  to make it again: {cmd}")
    except LabError:
        print("  to make it again: not recorded (no numalab_command in the manifest, "
              "no row in the README beside it)")
    for t in d.boot_trace:
        print(f"  boot trace: cpu {t.cpu} {t.comm} {t.function} <- {t.parent}")
    if d.manifest.get("sched_ext"):
        from ..lab.scx import read_scx
        r = read_scx(args.dump)
        print(f"  sched_ext: scx_simple, {r.mode} idle masks, {len(r.selects)} select calls, "
              f"{len(r.updates)} idle updates (counts per workload; timings under TCG mean nothing)")
        for w in r.workloads:
            c = r.counts(w.name)
            print(f"    {w.name}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
    for c in d.nvme:
        print(f"  {c.address} node {c.node} {c.controller or '?'} {' '.join(c.disks)}: "
              f"{c.msi_vectors} MSI vectors")
        for i in c.irqs:
            print(f"    irq {i.irq:<4} {i.name:<10} affinity {i.smp_affinity_list:<12} "
                  f"effective {i.effective_affinity_list}")
    for disk, m in d.blk_mq_lists.items():
        print(f"  {disk} blk-mq: " + "  ".join(f"{h}:{cl}" for h, cl in m.items()))
    for t in d.trace:
        print(f"  trace: cpu {t.cpu} {t.comm} {t.function} <- {t.parent}")
    if d.io_deltas:
        for irq, deltas in d.io_deltas.items():
            name = d.irq_names.get(irq, "")
            hits = ", ".join(f"cpu{c}:{n}" for c, n in enumerate(deltas) if n)
            print(f"  io: irq {irq} {name}: {hits}")
    return 0


def run_express(args) -> int:
    from ..lab.express import express_table
    t = express_table(args.datasets or None)
    if args.json:
        print(json.dumps(t.to_dict(orient="records"), indent=1))
        return 0
    print(f"{int(t['exact'].sum())} of {len(t)} machines can be built exactly in the lab")
    for r in t.itertuples():
        if r.exact:
            print(f"  exact  {r.machine} ({r.cpus} CPUs, {r.nodes} nodes): {r.lab_run}")
    for r in t.itertuples():
        if not r.exact:
            print(f"  no     {r.machine} ({r.cpus} CPUs, {r.nodes} nodes): {r.reasons}")
    return 0


def run_sweep_command(args) -> int:
    from ..lab.sweep import (check_results, check_scheduler, load_matrix, plan_sweep,
                             render_summary, resolve_kernel, run_sweep)
    if args.dry_run:
        m = load_matrix(args.matrix)
        check_results(args.output)
        if args.scheduler is not None:
            check_scheduler(args.scheduler)
        kernels = {q: resolve_kernel(q, progress=_say) for q in m.kernels}
        tasks, refused = plan_sweep(m, kernels)
        print(f"{len(tasks)} boot(s), {len(refused)} not expressible")
        for t in tasks:
            print(f"  boot      {t['name']}: {t['command']}")
        for r in refused:
            print(f"  refused   {r['machine']}" + (f" {r['nvme']}" if r.get("nvme") else "")
                  + f": {'; '.join(r['reasons'])}")
        return 0
    summary = run_sweep(args.matrix, args.output, scheduler=args.scheduler,
                        workers=args.workers, say=lambda m: _say(f"sweep: {m}"))
    print(render_summary(summary))
    return 1 if summary["counts"]["failed"] else 0
