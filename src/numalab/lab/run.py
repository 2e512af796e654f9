"""``numalab lab run``: fetch a kernel, boot it in QEMU on the described
machine, collect its dump, publish it without overwriting anything.

:func:`run_lab` does it all and reports progress lines (``fetching``,
``booting``, guest milestones, ``collecting``, ``done in N s``). A guest
that oopses or panics (seen on the console) is booted once more; a guest
that does not finish within the timeout is killed, nothing is written but
a log of its last console lines, whose path the error names.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from .. import __version__
from ..collect import collect
from . import LabError, cache_root
from .dump import build_tree, decode_channel, parse_links, split_head_stream
from .initramfs import InitConfig, build_initramfs, find_busybox
from .kernels import CachedKernel, boot_image, fetch_kernel
from .qemu import KERNEL_APPEND, nvme_layout, qemu_command
from .spec import LabMachine, NvmeSpec

__all__ = ["run_lab", "write_lab_dump", "LabOptions", "find_qemu", "OOPS",
           "default_output_name", "boot_trace_append"]

QEMU = "qemu-system-x86_64"
OOPS = re.compile(r"(Oops: |Kernel panic|kernel BUG at|BUG: unable|BUG: kernel|"
                  r"general protection fault|int3: 0000|Unable to handle kernel)")
LOG_LINES = 200
KVM_BOOT_SECONDS = 60


@dataclass
class LabOptions:
    """Everything a run needs besides the kernel query and the machine."""

    devices: list[NvmeSpec] = field(default_factory=list)
    io: bool = False
    io_count: int = 16
    trace: tuple[str, ...] = ("nvme_probe",)
    timeout: float = 600.0
    accel: str = "tcg"
    retries: int = 1
    boot_trace: tuple[str, ...] = ()   # built-in functions traced from boot (ftrace= on the command line)
    sched_ext: str = ""                 # "flat" or "pernode": load scx_simple and trace (numalab.lab.scx)
    workloads: tuple[str, ...] = ()     # with sched_ext: workload specs (numalab.lab.scx.WORKLOADS)
    append: str = ""                   # more kernel command-line words (numalab.lab.args.check_cmdline)


def find_qemu() -> str:
    """Path of qemu-system-x86_64, or LabError saying how to install it."""
    path = shutil.which(QEMU)
    if not path:
        raise LabError(f"{QEMU} not found; install it with: apt-get install qemu-system-x86")
    return path


def qemu_version(qemu: str) -> str:
    try:
        out = subprocess.run([qemu, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.stdout.splitlines() or ["unknown"])[0].strip()


def default_output_name(kernel: CachedKernel, machine: LabMachine, ndev: int,
                        when: datetime) -> str:
    """``lab-7.2-16cpu-2n-1nvme-20250131.tar.bz2``-style name.

    >>> from numalab.lab.spec import machine_from_text
    >>> k = CachedKernel("7.2.13+deb14-amd64", Path("."), "7.2.13", [], [])
    >>> default_output_name(k, machine_from_text("numa:2 core:2"), 1, datetime(2025, 1, 31))
    'lab-7.2-4cpu-2n-1nvme-20250131.tar.bz2'
    """
    ver = ".".join(kernel.upstream.split(".")[:2]) or kernel.release
    return (f"lab-{ver}-{machine.ncpus}cpu-{machine.nnodes}n-{ndev}nvme-"
            f"{when:%Y%m%d}.tar.bz2")


def _resolve_output(output: str | os.PathLike | None) -> Path | None:
    if output is None:
        return None
    out = Path(output)
    if out.is_dir():
        return out
    if not out.name.endswith(".tar.bz2"):
        raise LabError(f"{out}: the output must end in .tar.bz2 (or be a directory)")
    if out.exists():
        raise LabError(f"{out} exists; lab never overwrites (choose another -o)")
    return out


def _tail(path: Path, n: int = LOG_LINES) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-n:]) + "\n"


def _write_log(console: Path, reason: str) -> Path:
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    log = logs / f"lab-{stamp}-{os.getpid()}.log"
    log.write_text(f"# numalab lab: {reason}\n# last {LOG_LINES} console lines:\n"
                   + _tail(console))
    return log


@dataclass
class _Boot:
    ok: bool
    reason: str = ""          # "oops", "fail", "timeout", "nodump", "kvm-timeout"
    message: str = ""
    seconds: float = 0.0
    dump: bytes = b""
    console: str = ""


def _boot(cmd: list[str], console: Path, dump: Path, timeout: float,
          say: Callable[[str], None], first_line_deadline: float | None = None) -> _Boot:
    """Run QEMU once; watch the console for progress, failures and oopses."""
    for p in (console, dump):
        p.unlink(missing_ok=True)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    seen = 0
    reason = ""
    message = ""
    saw_init = False
    try:
        while True:
            done = proc.poll() is not None
            try:
                data = console.read_bytes()
            except FileNotFoundError:
                data = b""
            if len(data) > seen:
                new = data[seen:data.rfind(b"\n") + 1] if not done else data[seen:]
                seen += len(new)
                for line in new.decode("utf-8", "replace").splitlines():
                    if line.startswith("NUMALAB: "):
                        saw_init = True
                        say(f"guest: {line[9:].strip()} "
                            f"[{time.monotonic() - started:.0f} s]")
                    elif line.startswith("NUMALAB-FAIL: "):
                        reason, message = "fail", line[14:].strip()
                    elif OOPS.search(line) and not reason:
                        reason, message = "oops", line.strip()
            if reason or done:
                break
            elapsed = time.monotonic() - started
            if elapsed > timeout:
                reason, message = "timeout", f"the VM did not finish in {timeout:.0f} s"
                break
            if first_line_deadline and not saw_init and elapsed > first_line_deadline:
                reason, message = "kvm-timeout", f"no init after {first_line_deadline:.0f} s"
                break
            time.sleep(0.25)
    finally:
        if proc.poll() is None:
            proc.kill()
        out = proc.communicate()[0] or b""
    seconds = time.monotonic() - started
    text = console.read_bytes().decode("utf-8", "replace") if console.exists() else ""
    if reason:
        return _Boot(False, reason, message, seconds, console=text)
    if proc.returncode != 0:
        err = out.decode("utf-8", "replace").strip().splitlines()
        return _Boot(False, "qemu", f"QEMU exited with status {proc.returncode}: "
                     f"{err[-1] if err else '(no message)'}", seconds, console=text)
    if OOPS.search(text):
        return _Boot(False, "oops", OOPS.search(text).group(0), seconds, console=text)
    try:
        blob = decode_channel(dump.read_bytes() if dump.exists() else b"")
    except LabError as e:
        return _Boot(False, "nodump", str(e), seconds, console=text)
    return _Boot(True, seconds=seconds, dump=blob, console=text)


def _unpack_guest(blob: bytes) -> dict[str, bytes]:
    """The guest's ``/lab`` folder (regular files only) from its tar.gz."""
    out = {}
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:gz") as tf:
        for m in tf:
            if m.isfile():
                name = m.name.removeprefix("./")
                if "/" in name or name.startswith("."):
                    continue
                f = tf.extractfile(m)
                out[name] = f.read() if f else b""
    return out


_EXTRAS = {"trace": "trace", "set_ftrace_filter": "set_ftrace_filter",
           "trace-filters": "trace-filters", "uname-r": "uname-r", "uname-a": "uname-a",
           "dmesg": "dmesg", "modules": "modules", "interrupts.before": "interrupts.before",
           "interrupts.after": "interrupts.after", "io": "io", "done": "done",
           "trace.boot": "trace.boot"}


def boot_trace_append(functions) -> str:
    """Kernel command-line words that start the function tracer at boot
    on ``functions`` (built-in functions only: a module is not loaded yet);
    ``""`` for none. The guest's /init saves that trace as ``trace.boot``
    before it arms its own.

    >>> boot_trace_append(["group_cpus_evenly", "irq_create_affinity_masks"])
    ' ftrace=function ftrace_filter=group_cpus_evenly,irq_create_affinity_masks trace_buf_size=256K'
    >>> boot_trace_append([])
    ''
    """
    fs = [f for f in functions if f]
    for f in fs:
        if not re.fullmatch(r"[A-Za-z0-9_.]+", f):
            raise LabError(f"boot trace function {f!r}: letters, digits, _ and . only")
    if not fs:
        return ""
    return f" ftrace=function ftrace_filter={','.join(fs)} trace_buf_size=256K"


def run_lab(kernel: str, machine: LabMachine, options: LabOptions,
            output: str | os.PathLike | None = None,
            progress: Callable[[str], None] | None = None,
            command: str | None = None, manifest_extra: dict | None = None) -> Path:
    """Boot ``kernel`` on ``machine`` with ``options`` and write the lab dump.

    ``command``, when given, is the command line that asked for this run; the
    manifest keeps it (``numalab_command``) so the dump says how to redo it.
    ``manifest_extra``: more top-level manifest keys (``numalab lab sweep``
    records its task there, under ``sweep``); they cannot replace the lab's own.

    Output: the path written (``output``, a file in the directory
    ``output``, or :func:`default_output_name` in the current directory).
    Raises LabError (one line) for a missing QEMU, an unknown kernel, a
    failing or timed-out guest (with the path of the console log), or an
    existing output.
    """
    from .args import (MAX_IO_COUNT, check_cmdline, check_count, check_kernel, check_machine,
                       check_nvme, check_output, check_timeout)
    say = progress or (lambda _m: None)
    t0 = time.monotonic()
    # every argument first (the same checks as the command line's): a refused
    # run starts nothing and leaves nothing behind
    check_kernel(kernel)
    check_timeout(options.timeout)
    check_count("--io-count", options.io_count, 1, MAX_IO_COUNT)
    check_count("retries", options.retries, 0, 8)
    for f in (*options.trace, *options.boot_trace):
        if not isinstance(f, str) or not re.fullmatch(r"[A-Za-z0-9_.]{1,128}", f):
            raise LabError(f"trace function {f!r:.40}: letters, digits, _ and . only")
    if options.accel not in ("tcg", "kvm"):
        raise LabError(f"--accel {options.accel!r}: tcg or kvm")
    check_machine(machine)
    check_nvme(options.devices, machine.nnodes)
    check_output(output)
    extra_append = check_cmdline(options.append)
    qemu = find_qemu()
    out = _resolve_output(output)
    layout = nvme_layout(options.devices)

    if kernel.startswith("built:"):
        from .build import find_built
        k = find_built(kernel[len("built:"):])
    else:
        k = fetch_kernel(kernel, progress=say)
    fetch_s = time.monotonic() - t0
    if options.sched_ext and k.build:
        raise LabError("--sched-ext boots Debian's kernels (its probes and scx_simple are built "
                       "against the Debian image's BTF), not built:NAME")
    scx = _prepare_scx(options, machine, say, k.release) if options.sched_ext else None
    cfg = InitConfig(modules=tuple(k.modules), trace=tuple(options.trace), nvme=len(layout),
                     io=options.io, io_count=options.io_count,
                     boot_trace=bool(options.boot_trace),
                     scx_section=scx["section"] if scx else "")
    append = (KERNEL_APPEND + (" " + extra_append if extra_append else "")
              + boot_trace_append(options.boot_trace))
    busybox = find_busybox(progress=say)
    modules = {m: k.module_path(m).read_bytes() for m in k.modules}
    initrd = build_initramfs(modules, cfg, busybox, extra=scx["files"] if scx else None)
    image, how = boot_image(k)

    runs = cache_root() / "runs"
    runs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="run-", dir=runs))
    try:
        console, chan = work / "console.log", work / "dump.txt"
        accel = options.accel
        attempts: list[dict] = []
        result = None
        tries = 1 + max(0, options.retries)
        while len(attempts) < tries + (1 if accel == "kvm" else 0):
            cmd = qemu_command(machine, options.devices, str(image), str(initrd),
                               str(console), str(chan), accel=accel, qemu=qemu, append=append)
            say(f"booting {k.release} on {machine.ncpus} vCPUs, {machine.nnodes} node(s), "
                f"{len(layout)} NVMe ({accel})")
            b = _boot(cmd, console, chan, options.timeout, say,
                      KVM_BOOT_SECONDS if accel == "kvm" else None)
            attempts.append({"accel": accel, "seconds": round(b.seconds, 1),
                             "result": "ok" if b.ok else b.reason, "message": b.message})
            if b.ok:
                result = (b, cmd, accel)
                break
            if b.reason == "kvm-timeout":
                say(f"kvm: {b.message}; falling back to tcg")
                accel = "tcg"
                continue
            if b.reason == "oops" and sum(a["result"] == "oops" for a in attempts) <= options.retries:
                say(f"guest oopsed ({b.message}); booting once more")
                continue
            log = _write_log(console, f"{b.reason}: {b.message}")
            raise LabError(f"{b.message}; no output written; last console lines in {log}")
        if result is None:
            log = _write_log(console, "gave up after retries")
            raise LabError(f"the guest failed {len(attempts)} times; last console lines in {log}")
        b, cmd, accel = result
        say(f"collecting ({len(b.dump)} bytes from the guest)")
        now = datetime.now(timezone.utc)
        if out is None:
            out = Path.cwd() / default_output_name(k, machine, len(layout), now)
        elif out.is_dir():
            out = out / default_output_name(k, machine, len(layout), now)
        if out.exists():
            raise LabError(f"{out} exists; lab never overwrites (choose another -o)")
        cache = str(cache_root())
        shown = [a.replace(str(work), "$RUN").replace(cache, "$NUMALAB_CACHE") for a in cmd]
        io_info = None
        if options.io:
            io_info = {"reads_per_cpu_per_namespace": options.io_count, "block_bytes": 4096,
                       "method": "busybox taskset -c CPU dd iflag=direct, every online CPU, "
                                 "every namespace, /proc/interrupts before and after"}
        manifest = {
            "format": "numalab-lab/1",
            "numalab_version": __version__,
            "created_utc": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            **({"numalab_command": command} if command else {}),
            "kernel": {"release": k.release, "upstream": k.upstream, "packages": k.packages,
                       "modules_loaded": k.modules,
                       **({"build": k.build} if k.build else {})},
            "qemu": {"version": qemu_version(qemu), "accel": accel, "command": shown,
                     "append": append,
                     "boot": how + (" (the bzImage's vmlinux, decompressed on the host, "
                                    "started at its PVH entry)" if how == "pvh" else "")},
            "topology": machine.as_dict(),
            "devices": [{"id": d.id, "node": d.node, "io_queues": d.queues,
                         "pxb_bus_nr": d.bus, "slot": d.slot, "pci_address": d.address}
                        for d in layout],
            "nvme_options": [f"{s.count}@{s.node}:{s.queues}" for s in options.devices],
            "trace": list(options.trace),
            **({"boot_trace": list(options.boot_trace)} if options.boot_trace else {}),
            "io": io_info,
            "attempts": attempts,
            "seconds": {"fetch": round(fetch_s, 1), "boot_and_collect": round(b.seconds, 1)},
            "busybox": str(busybox),
            **({"sched_ext": scx["manifest"]} if scx else {}),
        }
        for key, value in (manifest_extra or {}).items():
            manifest.setdefault(key, value)
        try:
            path = write_lab_dump(b.dump, out, manifest, b.console, work,
                                  scx=scx["meta"] if scx else None)
        except LabError as e:
            log = _write_log(console, f"bad dump: {e}")
            raise LabError(f"{e}; console in {log}") from None
        say(f"done in {time.monotonic() - t0:.0f} s (boot and collect {b.seconds:.0f} s) "
            f"-> {path} ({path.stat().st_size / 1024:.1f} KiB)")
        return path
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _prepare_scx(options: LabOptions, machine: LabMachine, say, release: str) -> dict:
    """For ``--sched-ext``: build (or reuse) scx_simple and scxload, and return
    the initramfs files, the /init section, the manifest entry and the
    metadata that ``scx.json`` starts from."""
    from .scx import FORMAT, init_section, parse_workload, probe_lines, MAX_CPUS, WORKLOADS
    from .scxbuild import build_scx
    if machine.ncpus > MAX_CPUS:
        raise LabError(f"--sched-ext: at most {MAX_CPUS} CPUs (the probes read 64-bit masks)")
    specs = options.workloads or ("pingpong", "pingpong-pin", "fork", "fork-pin")
    loads = [parse_workload(w) for w in specs]
    tools = build_scx(release, progress=say)
    probes = probe_lines(tools.offsets, machine.nnodes)
    files = {"bin/scx_simple": (tools.scx_simple.read_bytes(), 0o755),
             "bin/scxload": (tools.scxload.read_bytes(), 0o755),
             "scx/probes": (("\n".join(probes) + "\n").encode(), 0o644),
             "scx/workloads": ("".join(f"{label} {' '.join(argv)}\n"
                                       for label, argv in loads).encode(), 0o644)}
    meta = {"format": FORMAT, "mode": options.sched_ext, "nnodes": machine.nnodes,
            "ncpus": machine.ncpus,
            "scheduler": {"name": "scx_simple", "from": "tools/sched_ext of "
                          f"{tools.meta['source']['package']} {tools.meta['source']['version']}",
                          "flags": "-n (SCX_OPS_BUILTIN_IDLE_PER_NODE)"
                          if options.sched_ext == "pernode" else "(none: flat masks)",
                          "build_key": tools.meta["key"],
                          "scx_simple_sha256": tools.meta["scx_simple_sha256"],
                          "scxload_sha256": tools.meta["scxload_sha256"],
                          "compilers": {"clang": tools.meta["inputs"]["clang"],
                                        "gcc": tools.meta["inputs"]["gcc"]}},
            "offsets": tools.offsets,
            "probes": probes,
            "workloads": [{"label": label, "argv": ["scxload", *argv],
                           "meaning": WORKLOADS[label.split(":")[0]][2]} for label, argv in loads],
            "trace_clock": "counter",
            "timing_note": "single-threaded TCG: counts of calls and stores are the kernel's; "
                           "no timing in this record means anything"}
    manifest = {"mode": options.sched_ext, "workloads": [label for label, _ in loads],
                "scx_build": tools.meta["key"]}
    return {"files": files, "section": init_section(options.sched_ext, tools.offsets),
            "manifest": manifest, "meta": meta}


def _scx_record(meta: dict, guest: dict[str, bytes]) -> tuple[bytes, dict]:
    """``scx.json`` from the host's metadata and the guest's ``scx-*`` files;
    also the trace bytes. Raises LabError when the guest saved no trace."""
    if "scx-trace" not in guest:
        raise LabError("the guest saved no sched_ext trace (scx-trace)")

    def text(name: str) -> str | None:
        return guest[name].decode("utf-8", "replace") if name in guest else None

    rec = dict(meta)
    rec["kallsyms"] = (text("scx-kallsyms") or "").splitlines()
    rec["kprobe_events"] = (text("scx-kprobe-events") or "").splitlines()
    rec["probe_errors"] = (text("scx-probe-errors") or "").splitlines()
    rec["ops"] = (text("scx-ops") or "").strip()
    rec["state_after"] = (text("scx-state.after") or "").strip()
    rec["events_before"] = (text("scx-events.before") or "").splitlines()
    rec["events_after"] = (text("scx-events.after") or "").splitlines()
    rec["buffer"] = (text("scx-buffer") or "").splitlines()
    rec["scheduler_log"] = (text("scx-simple.log") or "").splitlines()[-20:]
    return guest["scx-trace"], rec


def write_lab_dump(guest_tgz: bytes, output: Path, manifest: dict, console: str,
                   workdir: Path, scx: dict | None = None) -> Path:
    """Turn what the guest sent into the lab dump at ``output``.

    Inputs: the guest's tar.gz of ``/lab`` (the ``head -v`` stream
    ``files``, the ``links`` list, and the lab's own files), the
    manifest, the console text, and an empty-enough ``workdir`` for the
    rebuilt tree. The tree is snapshotted by :func:`numalab.collect.collect`
    (so the layout is the one ``numalab collect`` writes), with the lab's
    files under ``NAME/numalab/lab/``. Output: the path written; an
    existing ``output`` is never replaced. Raises LabError for a guest
    dump without the CPU files or ``/proc/interrupts``.
    """
    guest = _unpack_guest(guest_tgz)
    files = split_head_stream(guest.get("files", b""))
    links = parse_links(guest.get("links", b"").decode("utf-8", "replace"))
    if "proc/interrupts" not in files or "sys/devices/system/cpu/online" not in files:
        raise LabError("the guest's dump lacks /proc/interrupts or the CPU files")
    tree = Path(tempfile.mkdtemp(prefix="tree-", dir=workdir))
    build_tree(tree, files, links)
    if manifest.get("io") is not None and "io" in guest:
        manifest = {**manifest, "io": {**manifest["io"],
                                       "guest": guest["io"].decode("utf-8", "replace").strip()}}
    extras = {f"lab/{dst}": guest[src] for src, dst in _EXTRAS.items() if src in guest}
    if scx is not None:
        trace, rec = _scx_record(scx, guest)
        extras["lab/scx-trace"] = trace
        extras["lab/scx.json"] = (json.dumps(rec, indent=1) + "\n").encode()
    extras["lab/console.log"] = console.encode()
    extras["lab/manifest.json"] = (json.dumps(manifest, indent=1) + "\n").encode()
    return collect(root=tree, output=output, progress=None, extra_files=extras)
