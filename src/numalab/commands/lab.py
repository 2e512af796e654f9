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
    r.add_argument("--cmdline", default="", metavar="WORDS",
                   help="extra kernel command-line words, e.g. \"isolcpus=domain,0-3\" or "
                        "\"nohz_full=0-3\" (letters, digits and =,-_. only)")
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
    b.add_argument("-o", "--name", metavar="NAME",
                   help="the build's name for 'lab run --kernel built:NAME' (default VERSION "
                        "or VERSION-PATCHSTEM)")
    b.add_argument("-j", "--jobs", type=int, default=2, metavar="N",
                   help="parallel compile jobs (default 2)")
    b.add_argument("--list", action="store_true", help="list the named builds and exit")
    b.set_defaults(func=run_build_kernel)

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
    from ..lab.run import LabOptions, find_qemu, run_lab
    from ..lab.spec import machine_from_text, parse_nvme
    machine = machine_from_text(args.topology, distances=args.distances,
                                node_cpus=args.node_cpus, node_memory=args.node_memory)
    devices = [parse_nvme(x, machine.nnodes) for x in args.nvme]
    trace = tuple(f.strip() for f in args.trace.split(",") if f.strip())
    if args.timeout <= 0:
        raise LabError("--timeout must be positive")
    if args.io_count < 1:
        raise LabError("--io-count must be at least 1")
    find_qemu()
    boot = tuple(f.strip() for f in args.boot_trace.split(",") if f.strip())
    opts = LabOptions(devices=devices, io=args.io, io_count=args.io_count, trace=trace,
                      timeout=args.timeout, accel=args.accel, boot_trace=boot,
                      cmdline=args.cmdline)
    path = run_lab(args.kernel, machine, opts, output=args.output, progress=_say,
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
    k = build_kernel(args.source, patch=args.patch, name=args.name, jobs=args.jobs,
                     progress=_say)
    print(k.release)
    return 0


def run_show(args) -> int:
    from ..lab.dump import read_lab_dump, summary
    d = read_lab_dump(args.dump)
    s = summary(d)
    if args.json:
        print(json.dumps(s, indent=1))
        return 0
    print(f"{d.name}: kernel {d.kernel_release}")
    build = d.manifest.get("kernel", {}).get("build")
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
