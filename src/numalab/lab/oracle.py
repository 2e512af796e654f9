"""Real kernels next to the port: tables computed from the lab dumps.

For a dump made by ``numalab lab run``, :func:`mask_table` lists, queue by
queue, each NVMe controller's managed interrupt mask as the booted kernel set
it and as the port of that kernel version computes it, with their equality;
:func:`probe_table` lists where each ``nvme_probe`` ran (CPU and kworker) as
the kernel's function tracer recorded it.

For kernels built by ``numalab lab build-kernel`` the manifest names the
patch: a dump of the rotate build (patch 004) is compared with the port's
``variant="rotate"``, each controller with the ``spread_offset`` of the
``group_cpus_evenly()`` call (counted through its traced callers, from
boot) whose rotate masks are the kernel's (:func:`rotate_offsets`; the
patch's counter starts at 0 at boot, so the k-th call got offset k; which
call was whose is chosen to match the masks, so those rows are fitted);
:func:`probe_vs_model` sets a dump's real probe placement beside the probe
model's policy on the same machine.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ..cpumask import format_cpulist
from ..kernel import versions
from ..kernel.lib.group_cpus import group_cpus_evenly
from ..datasets import load_cached as load   # parsed once, cached on disk
from . import LabError
from .dump import LabDump, TraceLine, read_lab_dump

__all__ = ["mask_table", "probe_table", "dedicated_counts", "PATCH_VARIANTS", "dump_build",
           "dump_variant", "GROUP_CPUS_CALLERS", "group_cpus_calls", "rotate_offsets", "port_masks",
           "probe_vs_model", "thread_kind"]

# numalab's patch files (src/numalab/lab/patches/) that change lib/group_cpus.c,
# and the port's variant for each
PATCH_VARIANTS = {"004-group-cpus-rotate-7.2.patch": "rotate"}


def mask_table(dump: str) -> pd.DataFrame:
    """One row per NVMe I/O queue: dump, kernel, controller, queue,
    kernel_mask, port_mask, equal, effective_cpu (role: measured for the
    kernel's columns, the port's computed from the dump's topology)."""
    d = read_lab_dump(dump)
    kernel = versions.parse_release(d.kernel_release)
    topo = load(dump)
    variant = dump_variant(d)
    offsets = rotate_offsets(d, topo) if variant == "rotate" else {}
    rows = []
    for ctrl in d.nvme:
        io = sorted((q for q in ctrl.irqs if q.queue is not None and q.queue >= 1), key=lambda q: q.queue)
        off = offsets.get(ctrl.address)
        port = port_masks(d, ctrl, topo, off)
        for q, m in zip(io, port):
            rows.append({"dump": d.name, "kernel": kernel, "variant": variant,
                         "spread_offset": off, "controller": ctrl.controller,
                         "node": ctrl.node, "queue": q.queue,
                         "kernel_mask": q.smp_affinity_list, "port_mask": format_cpulist(m),
                         "equal": q.smp_affinity == m,
                         "effective_cpu": q.effective_affinity_list})
    return pd.DataFrame(rows)


def _dump(d) -> LabDump:
    return d if isinstance(d, LabDump) else read_lab_dump(d)


def dump_build(dump) -> dict | None:
    """The ``build`` record of a dump's manifest (source package, fragment
    and patch hashes) for a kernel built by ``numalab lab build-kernel``;
    None for a Debian binary kernel."""
    return _dump(dump).manifest.get("kernel", {}).get("build")


def dump_variant(dump) -> str:
    """The port's variant for the kernel of a dump: ``"rotate"`` for a
    build with patch 004, else ``"mainline"``. Raises LabError for a build
    with a patch numalab does not know."""
    b = dump_build(dump) or {}
    patch = b.get("patch")
    if not patch:
        return "mainline"
    if patch in PATCH_VARIANTS:
        return PATCH_VARIANTS[patch]
    if patch.startswith("001-"):        # drivers/pci only: group_cpus.c is mainline
        return "mainline"
    raise LabError(f"{_dump(dump).name}: built with {patch}, which numalab's port does not model")


# The callers of group_cpus_evenly() in the lab kernel's configuration
# (kernel/irq/affinity.c, block/blk-mq-cpumap.c; virtio_fs and virtio_vdpa are
# not built). group_cpus_evenly() itself cannot be traced: lib/Makefile builds
# lib/ without the ftrace flags (ccflags-remove-$(CONFIG_FUNCTION_TRACER)).
GROUP_CPUS_CALLERS = ("irq_create_affinity_masks", "blk_mq_map_queues")


def group_cpus_calls(dump) -> list[TraceLine]:
    """The traced calls of :data:`GROUP_CPUS_CALLERS` of a dump, in time
    order: the boot-time trace (``--boot-trace``, from boot to /init), then
    the trace /init armed before loading nvme. Each stands for one
    ``group_cpus_evenly()`` call (nvme's interrupts are one set:
    ``nvme.write_queues=0``, so ``irq_create_affinity_masks()`` makes one
    call), so index k is the k-th call since boot, which got
    ``spread_offset`` k under the rotate patch; :func:`rotate_offsets`
    checks that against the masks. Raises LabError when the dump did not
    trace them both ways (the count would not start at boot)."""
    d = _dump(dump)
    for key, opt in (("boot_trace", "--boot-trace"), ("trace", "--trace")):
        missing = [f for f in GROUP_CPUS_CALLERS if f not in d.manifest.get(key, [])]
        if missing:
            raise LabError(f"{d.name}: {', '.join(missing)} not traced ({key}); "
                           f"numalab lab run {opt} {','.join(GROUP_CPUS_CALLERS)}")
    if d.boot_tracer != "function":
        raise LabError(f"{d.name}: no function trace from boot in the dump (trace.boot)")
    calls = [t for t in d.boot_trace if t.function in GROUP_CPUS_CALLERS]
    calls += sorted((t for t in d.trace if t.function in GROUP_CPUS_CALLERS),
                    key=lambda t: t.timestamp)
    return calls


def calls_per_probe(dump) -> dict[int, list[tuple[int, str]]]:
    """Who made the traced ``group_cpus_evenly()`` calls of a dump:
    ``{pid: [(index since boot, caller function), ...]}`` for every thread
    that ran a traced ``nvme_probe``, in call order. Input: a dump (or its
    path) traced as :func:`group_cpus_calls` needs, with ``nvme_probe`` in
    its ``--trace``. In Linux 7.2 nvme_probe() sets up the admin tag set
    (``blk_mq_alloc_tag_set()`` -> ``blk_mq_map_queues()``) and the I/O
    interrupts (``irq_create_affinity_masks()``), so each probe's thread
    should show one call of each; the trace line names the thread, not the
    device, so this is what the trace can tell (measured). Calls by
    threads that ran no probe are left out."""
    d = _dump(dump)
    probers = {t.pid for t in d.trace if t.function == "nvme_probe"}
    out: dict[int, list[tuple[int, str]]] = {pid: [] for pid in sorted(probers)}
    for k, c in enumerate(group_cpus_calls(d)):
        if c.pid in out:
            out[c.pid].append((k, c.function))
    return out


def rotate_offsets(dump, topo=None) -> dict[str, int]:
    """``{PCI address: spread_offset}`` for a dump of the rotate build.

    Each controller gets the index (since boot, in
    :func:`group_cpus_calls`) of an ``irq_create_affinity_masks()`` call
    whose rotate-variant masks are exactly the controller's I/O queue masks;
    each call is used once. (The other calls, ``blk_mq_map_queues()`` for
    nvme's admin tag set, advance the patch's counter too.) When one call
    fits each controller, that is the answer. The rotation can repeat
    itself (on some machines several offsets give the same masks); then the
    masks cannot tell which of those calls was whose, and the answer is the
    first one-to-one assignment of calls to controllers (controllers in
    order, earliest call first) under which every controller's masks are
    the port's -- any such assignment gives the same masks. Raises LabError
    when no assignment exists (a controller fits no traced call, or two
    controllers only the same one).

    Roles: the set of offsets is measured (call counting); which controller
    had which call is not recorded (the traced caller's line does not name
    the device), so it is chosen to match
    the masks -- fitted. A rotate controller's masks equal to the port's is
    therefore consistency with one of the traced calls, not a prediction.
    """
    d = _dump(dump)
    topo = topo if topo is not None else load(d.path)
    kernel = versions.parse_release(d.kernel_release)
    calls = group_cpus_calls(d)
    fits: list[list[int]] = []
    cache: dict[tuple[int, int], list[int]] = {}
    for ctrl in d.nvme:
        io = sorted((q for q in ctrl.irqs if q.queue is not None and q.queue >= 1), key=lambda q: q.queue)
        real = [q.smp_affinity for q in io]
        hits = []
        for k, c in enumerate(calls):
            if c.function != "irq_create_affinity_masks":
                continue
            if (len(io), k) not in cache:
                cache[(len(io), k)] = list(group_cpus_evenly(len(io), topo, "rotate", k,
                                                             kernel=kernel))
            if cache[(len(io), k)] == real:
                hits.append(k)
        if not hits:
            raise LabError(f"{d.name}: {ctrl.controller} ({ctrl.address}) matches no of the "
                           f"{len(calls)} group_cpus_evenly() calls traced")
        fits.append(hits)

    def assign(i: int, used: frozenset) -> list[int] | None:
        if i == len(fits):
            return []
        for k in fits[i]:
            if k not in used:
                rest = assign(i + 1, used | {k})
                if rest is not None:
                    return [k, *rest]
        return None
    chosen = assign(0, frozenset())
    if chosen is None:
        raise LabError(f"{d.name}: no one-to-one assignment of the traced "
                       f"group_cpus_evenly() calls to the {len(d.nvme)} controllers fits "
                       f"their masks (candidates {fits})")
    return {ctrl.address: k for ctrl, k in zip(d.nvme, chosen)}


def port_masks(dump, ctrl, topo=None, spread_offset: int | None = None) -> list[int]:
    """The port's masks for controller ``ctrl`` of a dump: the dump's
    kernel version and variant (:func:`dump_variant`), with
    ``spread_offset`` (from :func:`rotate_offsets`) for the rotate build."""
    d = _dump(dump)
    topo = topo if topo is not None else load(d.path)
    kernel = versions.parse_release(d.kernel_release)
    n = sum(1 for q in ctrl.irqs if q.queue is not None and q.queue >= 1)
    if dump_variant(d) == "rotate":
        if spread_offset is None:
            spread_offset = rotate_offsets(d, topo)[ctrl.address]
        return list(group_cpus_evenly(n, topo, "rotate", spread_offset, kernel=kernel))
    return list(group_cpus_evenly(n, topo, kernel=kernel))


def dedicated_counts(dump: str) -> pd.Series:
    """Per CPU, how many NVMe I/O vectors of the dump have that CPU alone in
    their managed mask (the real kernel's masks)."""
    d = read_lab_dump(dump)
    counts: dict[int, int] = {}
    for ctrl in d.nvme:
        for q in ctrl.irqs:
            if q.queue is not None and q.queue >= 1 and q.smp_affinity.bit_count() == 1:
                cpu = q.smp_affinity.bit_length() - 1
                counts[cpu] = counts.get(cpu, 0) + 1
    return pd.Series(counts, name="dedicated_vectors", dtype=int).sort_index()


def probe_table(dump: str) -> pd.DataFrame:
    """One row per traced ``nvme_probe``: dump, kernel, patch (of a built
    kernel, else None), cpu, comm, thread_kind, caller."""
    d = read_lab_dump(dump)
    kernel = versions.parse_release(d.kernel_release)
    patch = (dump_build(d) or {}).get("patch")
    return pd.DataFrame([{"dump": d.name, "kernel": kernel, "patch": patch, "cpu": t.cpu,
                          "comm": t.comm, "thread_kind": thread_kind(t.comm),
                          "caller": t.parent} for t in d.trace if t.function == "nvme_probe"])


def thread_kind(comm: str) -> str:
    """What a kernel thread's name says it is, in the probe model's words:
    ``kworker/CPU:ID`` -> ``"bound kworker"``, ``kworker/uPOOL:ID`` ->
    ``"unbound kworker"``, anything else -> ``"other"``.

    >>> thread_kind("kworker/0:1"), thread_kind("kworker/u33:2"), thread_kind("insmod")
    ('bound kworker', 'unbound kworker', 'other')
    """
    import re
    if re.fullmatch(r"kworker/\d+:\d+H?", comm):
        return "bound kworker"
    if re.fullmatch(r"kworker/u\d+:\d+", comm):
        return "unbound kworker"
    return "other"


def probe_vs_model(dump: str, policy: str, seed: int = 0) -> pd.DataFrame:
    """A dump's traced ``nvme_probe`` calls beside the probe model's
    placement under ``policy`` on the dump's own machine: one asynchronous
    PCI probe per NVMe controller on its node (nvme prefers asynchronous
    probing); the kernel's rows in time order, the model's in device order.
    Columns: real_cpu, real_comm, real_kind, real_node, model_cpu,
    model_thread, model_kind, model_node, same_kind, same_node (the probing
    CPU's node), same_cpu."""
    from ..models.probe.sim import Device, simulate
    d = read_lab_dump(dump)
    topo = load(dump)
    probes = sorted((t for t in d.trace if t.function == "nvme_probe"), key=lambda t: t.timestamp)
    devs = [Device(f"nvme{i}", "pci", c.node, "async", 5, 5) for i, c in enumerate(d.nvme)]
    run = simulate(topo, devs, policy, seed=seed)
    node_of = {c: cpu.node for c, cpu in topo.cpus.items()}
    rows = []
    for t, p in zip(probes, run.probes):
        rows.append({"dump": d.name, "policy": run.policy, "real_cpu": t.cpu,
                     "real_comm": t.comm, "real_kind": thread_kind(t.comm),
                     "real_node": node_of.get(t.cpu), "model_cpu": p.cpu,
                     "model_thread": p.thread, "model_kind": p.thread_kind,
                     "model_node": p.cpu_node,
                     "same_kind": thread_kind(t.comm) == p.thread_kind,
                     "same_node": node_of.get(t.cpu) == p.cpu_node, "same_cpu": t.cpu == p.cpu})
    return pd.DataFrame(rows)


# -- how to redo a lab dump ---------------------------------------------------

_ROW = re.compile(r"^\|\s*`(?P<file>[^`]+)`\s*\|[^|]*\|\s*`(?P<cmd>numalab lab run [^`]+)`\s*\|", re.M)


def _readme_commands(folder: Path) -> dict[str, str]:
    """File name -> ``numalab lab run`` command, from the tables of
    ``FOLDER/README.md`` (the committed dumps' record of how they were made)."""
    readme = folder / "README.md"
    if not readme.is_file():
        return {}
    return {m["file"]: m["cmd"] for m in _ROW.finditer(readme.read_text(encoding="utf-8"))}


def build_command(build: dict) -> str:
    """The ``numalab lab build-kernel`` command that made the kernel a
    manifest's ``kernel.build`` describes.

    >>> build_command({"source_package": "linux-source-7.2", "name": "7.2-rotate",
    ...                "patch": "004-group-cpus-rotate-7.2.patch"})
    'numalab lab build-kernel --source 7.2 --patch src/numalab/lab/patches/004-group-cpus-rotate-7.2.patch -o 7.2-rotate'
    """
    from .build import FRAGMENT, default_name, fragment_file
    version = build["source_package"].removeprefix("linux-source-")
    cmd = f"numalab lab build-kernel --source {version}"
    patch = build.get("patch")
    if patch:
        cmd += f" --patch src/numalab/lab/patches/{patch}"
    frag = fragment_file(build.get("fragment_sha256"))
    if frag is not None and frag != FRAGMENT:
        cmd += f" --fragment src/numalab/lab/kconfig/{frag.name}"
    name = build.get("name")
    if name and name != default_name(version, Path(patch) if patch else None):
        cmd += f" -o {name}"
    return cmd


def reproduce(dump) -> list[str]:
    """The commands that redo a lab dump: ``numalab lab build-kernel`` for a
    kernel numalab built, then the ``numalab lab run`` that booted it.

    The run command comes from the manifest (``numalab_command``, recorded
    by ``numalab lab run``) or, for dumps made before it was recorded, from
    the table of the ``README.md`` beside the dump. Raises LabError if
    neither has it: a measured figure must say how to measure it again.
    """
    path = Path(dump if isinstance(dump, (str, Path)) else dump.path)
    d = _dump(dump)
    cmds = []
    build = dump_build(d)
    if build:
        cmds.append(build_command(build))
    run = d.manifest.get("numalab_command") or _readme_commands(path.parent).get(path.name)
    if not run:
        raise LabError(f"{path.name}: no record of the command that made it "
                       f"(no numalab_command in its manifest, no row in {path.parent / 'README.md'})")
    cmds.append(run)
    return cmds


def how_to_redo(*dumps) -> str:
    """One Markdown sentence giving the commands that redo ``dumps``, for a
    finding measured on a real kernel: per dump, its kernel build (if numalab
    built the kernel and no earlier dump listed that build) then its run.

    >>> how_to_redo()
    ''
    """
    seen: set[str] = set()
    chains = []
    for d in dumps:
        cmds = [c for c in reproduce(d) if c not in seen]
        seen.update(cmds)
        if cmds:
            chains.append(", then ".join(f"`{c}`" for c in cmds))
    if not chains:
        return ""
    return "To measure it again: " + "; ".join(chains) + "."
