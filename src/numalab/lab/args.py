"""The lab's arguments, checked before anything starts.

Small pure functions, one per argument of ``numalab lab run`` and ``numalab
lab build-kernel`` (and of the future ``lab sweep``, which calls the same
ones): each returns the value, normalised, or raises
:class:`~numalab.lab.LabError` with one line naming the option, what it
must be and the value given. :func:`check_run` and :func:`check_build`
check a whole command's arguments at once; they read the file system
(does the output's folder exist, can it be written, is the patch there) but
write nothing, so a refused command leaves nothing behind.

>>> check_timeout(600)
600.0
>>> check_timeout(float("nan"))
Traceback (most recent call last):
numalab.lab.LabError: --timeout nan: expected a finite number of seconds in (0, 86400]
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from ..errors import one_line
from . import LabError
from .schema import MAX_NODES, check_distances

__all__ = ["check_cmdline", "check_timeout", "check_count", "check_one_line", "check_kernel", "check_functions", "check_output",
           "check_patch_file", "check_source", "check_jobs", "check_nvme", "check_machine",
           "check_distances", "check_run", "check_build", "MAX_TIMEOUT", "MAX_IO_COUNT",
           "MAX_JOBS", "MAX_GUEST_MIB", "MAX_NVME_NODES", "MAX_PATCH_BYTES"]

MAX_TIMEOUT = 86400.0        # a day: the longest committed boot took 1500 s
MAX_IO_COUNT = 65536         # reads per CPU per namespace
MAX_JOBS = 256
MAX_GUEST_MIB = 65536        # the guest's RAM comes from this host
MAX_PATCH_BYTES = 16 << 20
# one PCI expander bridge per node with NVMe, buses 0x10, 0x20... and the
# bus behind each (bus_nr + 1) must stay below 256 (numalab.lab.qemu.PXB_BUS_BASE)
MAX_NVME_NODES = 15
PATH_SHOWN = 1024            # a path in a message is shown whole (up to this)


def _fail(text: str):
    raise LabError(one_line(text))


def _shown(value, limit: int = 40) -> str:
    """A value for a message: strings quoted (cut at ``limit`` characters),
    numbers as Python shows them."""
    if isinstance(value, str):
        return repr(value if len(value) <= limit else value[:limit] + "...")
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_timeout(value, option: str = "--timeout") -> float:
    """Seconds before the VM is killed: a finite number in (0,
    :data:`MAX_TIMEOUT`]."""
    ok = (not isinstance(value, bool) and isinstance(value, (int, float))
          and math.isfinite(value) and 0 < value <= MAX_TIMEOUT)
    if not ok:
        _fail(f"{option} {_shown(value)}: expected a finite number of seconds in "
              f"(0, {MAX_TIMEOUT:.0f}]")
    return float(value)


def check_count(option: str, value, lo: int, hi: int) -> int:
    """An integer option in ``[lo, hi]`` (never a boolean).

    >>> check_count("--io-count", 0, 1, 10)
    Traceback (most recent call last):
    numalab.lab.LabError: --io-count 0: expected an integer in [1, 10]
    """
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        _fail(f"{option} {_shown(value)}: expected an integer in [{lo}, {hi}]")
    return value


_QUERY = re.compile(r"[A-Za-z0-9][A-Za-z0-9.+~_-]{0,127}")


def check_kernel(query: str, built: dict | None = None) -> str:
    """``--kernel``: a version (``7.2``), a release (``7.2.13+deb14-amd64``),
    a package name, or ``built:NAME`` of a build in ``built`` (default: the
    builds in the cache, :func:`numalab.lab.build.built_kernels`). A Debian
    kernel's existence is checked when it is fetched (that needs the package
    lists), before the VM starts.

    >>> check_kernel("7.2")
    '7.2'
    >>> check_kernel("7.2; rm -rf /")
    Traceback (most recent call last):
    numalab.lab.LabError: --kernel '7.2; rm -rf /': expected a version (7.2), a release (7.2.13+deb14-amd64), a package name or built:NAME
    """
    if not isinstance(query, str):
        _fail(f"--kernel {_shown(query)}: expected a kernel name")
    if query.startswith("built:"):
        from .build import built_kernels, check_name
        name = query[len("built:"):]
        try:
            check_name(name)
        except LabError as e:
            _fail(f"--kernel {_shown(query)}: {e}")
        names = built if built is not None else built_kernels()
        if name not in names:
            _fail(f"--kernel {_shown(query)}: no built kernel named {name!r}; built: "
                  f"{', '.join(sorted(names)) or 'none'} (numalab lab build-kernel)")
        return query
    if not _QUERY.fullmatch(query):
        _fail(f"--kernel {_shown(query)}: expected a version (7.2), a release "
              "(7.2.13+deb14-amd64), a package name or built:NAME")
    return query


_FUNC = re.compile(r"[A-Za-z0-9_.]{1,128}")


def check_functions(text: str, option: str = "--trace", limit: int = 64) -> tuple[str, ...]:
    """``--trace`` / ``--boot-trace``: comma-separated kernel function names
    (letters, digits, ``_`` and ``.``), at most ``limit``; ``""`` is none.

    >>> check_functions("nvme_probe, blk_mq_map_queues")
    ('nvme_probe', 'blk_mq_map_queues')
    """
    if not isinstance(text, str):
        _fail(f"{option} {_shown(text)}: expected function names separated by commas")
    names = tuple(f.strip() for f in text.split(",") if f.strip())
    for f in names:
        if not _FUNC.fullmatch(f):
            _fail(f"{option} {_shown(f)}: a kernel function name is letters, digits, _ and . "
                  "(1-128 characters)")
    if len(names) > limit:
        _fail(f"{option}: {len(names)} functions; at most {limit}")
    return names


def _writable_dir(folder: Path, option: str, what: str) -> None:
    what = _shown(what, PATH_SHOWN)
    if not folder.is_dir():
        _fail(f"{option} {what}: folder {str(folder)!r} "
              f"{'is not a folder' if os.path.lexists(folder) else 'does not exist'}")
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    # os.access() says yes to root for any folder; a read-only mount says no to everyone
    if read_only or not os.access(folder, os.W_OK | os.X_OK):
        _fail(f"{option} {what}: folder {str(folder)!r} cannot be written")


def check_output(output, option: str = "-o") -> Path | None:
    """``-o``: None (the current folder), a folder that exists and can be
    written, or a new ``NAME.tar.bz2`` in such a folder (never an existing
    file: the lab never overwrites)."""
    if output is None:
        _writable_dir(Path.cwd(), option, ".")
        return None
    text = str(output)
    if not text or "\0" in text or len(text) > 4096:
        _fail(f"{option} {_shown(text, PATH_SHOWN)}: expected a path")
    out = Path(text)
    if out.is_dir():
        _writable_dir(out, option, text)
        return out
    if not out.name.endswith(".tar.bz2") or out.name == ".tar.bz2":
        _fail(f"{option} {_shown(text, PATH_SHOWN)}: the output must end in .tar.bz2 "
              "(or be a folder)")
    if os.path.lexists(out):
        _fail(f"{option} {_shown(text, PATH_SHOWN)}: exists; lab never overwrites "
              "(choose another -o)")
    _writable_dir(out.parent if str(out.parent) else Path("."), option, text)
    return out


def check_patch_file(path, option: str = "--patch") -> Path:
    """``--patch``: a readable regular file of at most
    :data:`MAX_PATCH_BYTES` holding a unified diff (at least one hunk)."""
    from .build import patch_hunks
    text_path = str(path)
    shown = _shown(text_path, PATH_SHOWN)
    p = Path(text_path).resolve() if text_path and "\0" not in text_path else None
    if p is None or not p.exists():
        _fail(f"{option} {shown}: patch file {p or text_path} not found")
    if not p.is_file():
        _fail(f"{option} {shown}: not a regular file")
    size = p.stat().st_size
    if size > MAX_PATCH_BYTES:
        _fail(f"{option} {shown}: {size} bytes; a patch is at most {MAX_PATCH_BYTES}")
    try:
        text = p.read_text(errors="replace")
    except OSError as e:
        _fail(f"{option} {shown}: cannot read: {e.strerror or e}")
    if not patch_hunks(text):
        _fail(f"{option} {shown}: not a unified diff (no hunks)")
    return p


def check_source(version) -> str:
    """``--source``: a kernel version MAJOR.MINOR (``7.2``, ``6.12``)."""
    if not isinstance(version, str) or not re.fullmatch(r"[1-9][0-9]?\.[0-9]{1,3}", version):
        _fail(f"--source {_shown(version)}: a kernel version such as 7.2 or 6.12")
    return version


def check_jobs(jobs) -> int:
    """``-j``: parallel compile jobs, 1 to :data:`MAX_JOBS`."""
    return check_count("-j", jobs, 1, MAX_JOBS)


def check_nvme(specs, nnodes: int) -> list:
    """``--nvme`` options (:class:`~numalab.lab.spec.NvmeSpec` or text) as
    QEMU can place them: every node exists, at most 31 controllers per node
    (one expander bridge's slots), NVMe on at most :data:`MAX_NVME_NODES`
    nodes (the expanders' bus numbers)."""
    from .qemu import nvme_layout
    from .spec import NvmeSpec, parse_nvme
    out = [s if isinstance(s, NvmeSpec) else parse_nvme(s, nnodes) for s in specs]
    for s in out:
        if s.node >= nnodes:
            _fail(f"--nvme {s.count}@{s.node}:{s.queues}: node {s.node} does not exist (the "
                  f"machine has {nnodes})")
    nodes = {s.node for s in out}
    if len(nodes) > MAX_NVME_NODES:
        _fail(f"--nvme: NVMe on {len(nodes)} nodes; the lab gives each such node a PCI "
              f"expander bridge, and bus numbers allow {MAX_NVME_NODES}")
    nvme_layout(out)           # more than 31 on one node: UnexpressibleTopology
    return out


def check_machine(machine) -> None:
    """What QEMU (``MAX_NODES``) and this host accept besides
    :func:`numalab.lab.spec.machine_from_text`'s checks: at most
    :data:`~numalab.lab.schema.MAX_NODES` nodes, at most
    :data:`MAX_GUEST_MIB` MiB of guest memory in all."""
    if machine.nnodes > MAX_NODES:
        _fail(f"{machine.nnodes} nodes: QEMU builds at most {MAX_NODES}")
    total = sum(machine.memory_mib)
    if total > MAX_GUEST_MIB:
        _fail(f"--node-memory: {total} MiB of guest memory in all; the lab allows at most "
              f"{MAX_GUEST_MIB} (the guest's RAM comes from this host)")


def check_one_line(option: str, value) -> None:
    """A text argument without control characters: the manifest records the
    command as one line (``numalab_command``), which a newline would break.

    >>> check_one_line("--topology", "numa:2\\ncore:2")
    Traceback (most recent call last):
    numalab.lab.LabError: --topology 'numa:2\\ncore:2': a control character in an argument (the manifest records the command on one line)
    """
    if isinstance(value, str) and re.search(r"[\x00-\x1f\x7f]", value):
        _fail(f"{option} {_shown(value)}: a control character in an argument (the manifest "
              "records the command on one line)")


_WORD = re.compile(r"[A-Za-z0-9_.,=:/+-]{1,256}")


def check_cmdline(text, option: str = "--append") -> str:
    """``--append``: more kernel command-line words (``nohz_full=2-3
    irqaffinity=0``): letters, digits and ``_ . , = : / + -``, separated
    by spaces, at most 1024 characters; ``""`` is none. Output: the words
    joined by one space.

    >>> check_cmdline("  irqaffinity=0   nosmt ")
    'irqaffinity=0 nosmt'
    >>> check_cmdline("init=/bin/sh;reboot")
    Traceback (most recent call last):
    numalab.lab.LabError: --append 'init=/bin/sh;reboot': a kernel parameter is letters, digits and _ . , = : / + - (words separated by spaces)
    """
    if text is None:
        return ""
    if not isinstance(text, str) or len(text) > 1024:
        _fail(f"{option} {_shown(text)}: expected kernel parameters (at most 1024 characters)")
    words = text.split()
    for w in words:
        if not _WORD.fullmatch(w):
            _fail(f"{option} {_shown(w)}: a kernel parameter is letters, digits and "
                  "_ . , = : / + - (words separated by spaces)")
    return " ".join(words)


def check_run(args) -> dict:
    """Every argument of ``numalab lab run`` (an argparse namespace, or any
    object with the same attributes), before anything starts. Output: the
    checked values (``machine``, ``devices``, ``trace``, ``boot_trace``,
    ``timeout``, ``io_count``, ``output``). Raises LabError (one line)."""
    from .spec import machine_from_text
    for name in ("kernel", "topology", "distances", "node_cpus", "node_memory", "trace",
                 "boot_trace", "output", "append"):
        check_one_line(f"--{name.replace('_', '-')}", getattr(args, name, None))
    for x in args.nvme:
        check_one_line("--nvme", x)
    kernel = check_kernel(args.kernel)
    timeout = check_timeout(args.timeout)
    io_count = check_count("--io-count", args.io_count, 1, MAX_IO_COUNT)
    trace = check_functions(args.trace, "--trace")
    boot = check_functions(args.boot_trace, "--boot-trace")
    # distances are checked by check_distances inside machine_from_text
    machine = machine_from_text(args.topology, distances=args.distances,
                                node_cpus=args.node_cpus, node_memory=args.node_memory)
    check_machine(machine)
    devices = check_nvme(args.nvme, machine.nnodes)
    output = check_output(args.output)
    append = check_cmdline(getattr(args, "append", None))
    return {"kernel": kernel, "machine": machine, "devices": devices, "trace": trace,
            "boot_trace": boot, "timeout": timeout, "io_count": io_count, "output": output,
            "append": append}


def check_build(args) -> dict:
    """Every argument of ``numalab lab build-kernel`` before anything
    starts: ``--source``, ``--patch``, ``--fragment`` (a Kconfig fragment
    file that parses), ``-o`` (a build name), ``-j``."""
    from .build import FRAGMENT, check_name, parse_fragment
    source = check_source(args.source)
    patch = check_patch_file(args.patch) if args.patch is not None else None
    fragment = Path(getattr(args, "fragment", None) or FRAGMENT)
    try:
        parse_fragment(fragment.read_text())
    except OSError as e:
        raise LabError(f"--fragment {fragment}: cannot read ({e.strerror or e})") from None
    except LabError as e:
        raise LabError(f"--fragment {fragment}: {e}") from None
    name = check_name(args.name) if args.name is not None else None
    jobs = check_jobs(args.jobs)
    return {"source": source, "patch": patch, "name": name, "jobs": jobs, "fragment": fragment}
