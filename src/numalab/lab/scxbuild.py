"""``numalab lab build-scx``: build the sched_ext lab's guest tools for a
kernel -- ``scx_simple`` from the kernel's own ``tools/sched_ext`` and
numalab's workload program ``scxload`` -- statically linked for the
initramfs, plus the structure offsets the guest's kprobes need.

The recipe (``RECIPE`` names its revision):

1. the kernel's ``vmlinux`` (the lab's cached Debian kernel, decompressed from
   its bzImage by :func:`numalab.lab.kernels.boot_image`); it carries the BTF
   that ``vmlinux.h`` and the offsets come from;
2. Debian's ``linux-source-VERSION`` package (the one ``build-kernel`` uses,
   :func:`numalab.lab.build.find_source`): ``tools/``, ``include/``,
   ``scripts/``, ``kernel/`` and ``arch/x86/`` unpacked into
   ``CACHE/scx/tree-VERSION`` (kept: later builds reuse it);
3. ``tools/sched_ext``'s own Makefile builds libbpf and bpftool from the tree,
   ``vmlinux.h`` (``bpftool btf dump file vmlinux format c``), the BPF object
   with ``clang-19`` (``-mcpu=v3``; 7.2's ``tools/sched_ext/README.md`` asks
   for clang >= 16, and bookworm packages clang-19 beside its default clang 14,
   which also compiled ``scx_simple.bpf.c`` here but was not tried further)
   and the skeleton;
   ``scx_simple.c`` gets the lab's one-option patch
   (``tools/sched_ext_lab/scx_simple-per-node.patch``: ``-n`` sets
   ``SCX_OPS_BUILTIN_IDLE_PER_NODE``) and is linked with ``gcc -static``
   against the tree's ``libbpf.a``, ``libelf``, ``libzstd`` and ``libz``;
4. ``tools/sched_ext_lab/scxload.c`` compiled with ``gcc -O2 -static``;
5. the offsets of ``task_struct.{pid,flags,nr_cpus_allowed}``,
   ``rq.{cpu,curr}`` and ``rq.scx.local_dsq.nr`` read from the BTF
   (``bpftool btf dump file vmlinux format raw``);
6. all of it, with ``scx.json`` (inputs' sha256, compiler versions, build
   seconds), moved into ``CACHE/scx/KEY/`` by one rename, KEY being a hash of
   the inputs.

Nothing here is committed to the repository: the binaries live in the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import LabError, cache_root

__all__ = ["RECIPE", "ScxTools", "parse_btf_raw", "member_offset", "scx_offsets",
           "build_scx", "TOOLS_DIR", "CLANG"]

RECIPE = "numalab-scx-build/1"
TOOLS_DIR = Path(__file__).resolve().parents[3] / "tools" / "sched_ext_lab"
CLANG = "clang-19"
LLVM_STRIP = "llvm-strip-19"
_UNPACK = ("tools", "include", "scripts", "kernel", "arch/x86", "Makefile")

# (name in the guest script, struct, member path)
OFFSETS = (
    ("TASK_PID", "task_struct", "pid"),
    ("TASK_FLAGS", "task_struct", "flags"),
    ("TASK_NR_CPUS_ALLOWED", "task_struct", "nr_cpus_allowed"),
    ("TASK_CPUS_PTR", "task_struct", "cpus_ptr"),
    ("RQ_CPU", "rq", "cpu"),
    ("RQ_CURR", "rq", "curr"),
    ("RQ_SCX_LOCAL_DSQ_NR", "rq", "scx.local_dsq.nr"),
    ("SCX_IDLE_CPUS_SMT", "scx_idle_cpus", "smt"),
)


@dataclass
class ScxTools:
    """A finished build: ``dir`` holds ``scx_simple``, ``scxload`` and
    ``scx.json`` (``offsets``: name -> byte offset; inputs and versions)."""

    dir: Path
    meta: dict

    @property
    def scx_simple(self) -> Path:
        return self.dir / "scx_simple"

    @property
    def scxload(self) -> Path:
        return self.dir / "scxload"

    @property
    def offsets(self) -> dict[str, int]:
        return dict(self.meta["offsets"])


# -- BTF ---------------------------------------------------------------------------------

def parse_btf_raw(text: str) -> dict[int, dict]:
    """Types of ``bpftool btf dump ... format raw`` output: ``{id: {"kind",
    "name", "type", "members": [(name, type_id, bits_offset)]}}``.

    >>> t = parse_btf_raw("[1] STRUCT 'a' size=8 vlen=1\\n\\t'x' type_id=2 bits_offset=32\\n"
    ...                   "[2] INT 'int' size=4 bits_offset=0 nr_bits=32 encoding=SIGNED\\n")
    >>> t[1]["members"], t[2]["kind"]
    ([('x', 2, 32)], 'INT')
    """
    types: dict[int, dict] = {}
    cur = None
    for line in text.splitlines():
        m = re.match(r"\[(\d+)\] (\w+) '([^']*)'(.*)", line)
        if m:
            t = re.search(r"\btype_id=(\d+)", m.group(4))
            cur = {"kind": m.group(2), "name": m.group(3),
                   "type": int(t.group(1)) if t else None, "members": []}
            types[int(m.group(1))] = cur
            continue
        m = re.match(r"\t'([^']*)' type_id=(\d+) bits_offset=(\d+)", line)
        if m and cur is not None:
            cur["members"].append((m.group(1), int(m.group(2)), int(m.group(3))))
    return types


def _strip(types: dict[int, dict], tid: int) -> int:
    """Follow typedefs and qualifiers to the underlying type id."""
    while types.get(tid, {}).get("kind") in ("TYPEDEF", "CONST", "VOLATILE", "RESTRICT",
                                               "TYPE_TAG"):
        tid = types[tid]["type"]
    return tid


def _find_member(types: dict[int, dict], tid: int, name: str) -> tuple[int, int] | None:
    """``(bits_offset, type_id)`` of member ``name`` of struct/union ``tid``,
    looking into anonymous members."""
    for mname, mtype, off in types[tid]["members"]:
        if mname == name:
            return off, mtype
        if mname in ("", "(anon)"):
            inner = _strip(types, mtype)
            if types.get(inner, {}).get("kind") in ("STRUCT", "UNION"):
                got = _find_member(types, inner, name)
                if got:
                    return off + got[0], got[1]
    return None


def member_offset(types: dict[int, dict], struct: str, path: str) -> int:
    """Byte offset of ``path`` (``"scx.local_dsq.nr"``) in ``struct NAME``.
    Raises LabError when the struct or a member is missing.

    >>> t = parse_btf_raw("[1] STRUCT 'rq' size=64 vlen=1\\n\\t'scx' type_id=2 bits_offset=64\\n"
    ...                   "[2] STRUCT 'scx_rq' size=8 vlen=1\\n\\t'nr' type_id=3 bits_offset=32\\n"
    ...                   "[3] INT 'u32' size=4 bits_offset=0 nr_bits=32 encoding=(none)\\n")
    >>> member_offset(t, "rq", "scx.nr")
    12
    """
    cands = [i for i, t in types.items() if t["kind"] == "STRUCT" and t["name"] == struct
             and t["members"]]
    if not cands:
        raise LabError(f"BTF: no struct {struct}")
    tid, bits = cands[0], 0
    for part in path.split("."):
        got = _find_member(types, _strip(types, tid), part)
        if got is None:
            raise LabError(f"BTF: struct {struct} has no member {path}")
        bits += got[0]
        tid = got[1]
    if bits % 8:
        raise LabError(f"BTF: {struct}.{path} is a bit field")
    return bits // 8


def scx_offsets(btf_raw: str) -> dict[str, int]:
    """The offsets the guest's kprobes use (names of :data:`OFFSETS`)."""
    types = parse_btf_raw(btf_raw)
    return {name: member_offset(types, struct, path) for name, struct, path in OFFSETS}


# -- the build ---------------------------------------------------------------------------

def _sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if not path:
        raise LabError(f"{name} not found: {hint}")
    return path


def _version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return "unknown"
    return (out.stdout.splitlines() or ["unknown"])[0].strip()


def _run(cmd: list[str], cwd: Path, log: Path, env: dict | None = None) -> None:
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        proc = subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                              env={**os.environ, "LC_ALL": "C", **(env or {})})
    if proc.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise LabError(f"build-scx: {' '.join(cmd[:3])}... failed (log {log}):\n{tail}")


def _unpack_tree(version: str, say: Callable[[str], None]) -> tuple[Path, dict]:
    """The kernel tree's needed folders in ``CACHE/scx/tree-VERSION`` (made once)."""
    from .build import find_source
    src = find_source(version, progress=say)
    root = cache_root() / "scx" / f"tree-{version}"
    stamp = root / ".numalab-source"
    info = {"package": src.package, "version": src.deb_version, "sha256": src.sha256}
    if stamp.is_file() and json.loads(stamp.read_text()) == info:
        return root / f"linux-source-{version}", info
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    say(f"build-scx: unpacking {src.deb.name} (tools, include, scripts, kernel, arch/x86)")
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        subprocess.run(["dpkg-deb", "-x", str(src.deb), tmp], check=True)
        tarball = Path(tmp) / "usr" / "src" / f"linux-source-{version}.tar.xz"
        members = [f"linux-source-{version}/{d}" for d in _UNPACK]
        subprocess.run(["nice", "-n", "10", "tar", "xJf", str(tarball), "-C", str(root),
                        *members], check=True)
    stamp.write_text(json.dumps(info))
    return root / f"linux-source-{version}", info


def build_scx(kernel: str = "7.2", progress: Callable[[str], None] | None = None,
              force: bool = False) -> ScxTools:
    """Build (or reuse from the cache) the guest tools for ``kernel`` (a lab
    kernel query such as ``"7.2"``). Returns :class:`ScxTools`. Raises
    LabError for a missing compiler, a kernel without sched_ext BTF, or a
    failing step (with the log's path)."""
    from .kernels import boot_image, fetch_kernel
    say = progress or (lambda _m: None)
    clang = _tool(CLANG, "apt-get install clang-19 llvm-19 (Debian bookworm)")
    _tool(LLVM_STRIP, "apt-get install llvm-19")
    gcc = _tool("gcc", "apt-get install gcc")
    for lib in ("libelf.a", "libz.a", "libzstd.a"):
        if not Path("/usr/lib/x86_64-linux-gnu", lib).is_file():
            raise LabError(f"{lib} not found: apt-get install libelf-dev zlib1g-dev libzstd-dev")
    k = fetch_kernel(kernel, progress=say)
    vmlinux, how = boot_image(k)
    if how != "pvh":
        raise LabError(f"{k.release}: no vmlinux could be decompressed from the bzImage "
                       "(install zstd)")
    image = vmlinux.read_bytes()
    if b"\0scx_select_cpu_dfl\0" not in image:
        raise LabError(f"{k.release} has no sched_ext (no scx_select_cpu_dfl among its symbol "
                       "and BTF names); sched_ext runs need 6.12 or later, the lab uses 7.2")
    version = ".".join(k.upstream.split(".")[:2])
    patch = TOOLS_DIR / "scx_simple-per-node.patch"
    load_c = TOOLS_DIR / "scxload.c"
    key_src = {"recipe": RECIPE, "kernel": k.release,
               "vmlinux": _sha256_bytes(image),
               "patch": _sha256_bytes(patch.read_bytes()),
               "scxload": _sha256_bytes(load_c.read_bytes()),
               "clang": _version(clang), "gcc": _version(gcc)}
    key = _sha256_bytes(json.dumps(key_src, sort_keys=True).encode())[:16]
    out = cache_root() / "scx" / key
    if (out / "scx.json").is_file() and not force:
        return ScxTools(out, json.loads((out / "scx.json").read_text()))
    started = time.monotonic()
    tree, src_info = _unpack_tree(version, say)
    logs = cache_root() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"build-scx-{key}.log"
    log.write_text(f"# numalab lab build-scx {key_src}\n")
    work = Path(tempfile.mkdtemp(prefix=f".build-{key}.", dir=cache_root() / "scx"))
    try:
        sx = tree / "tools" / "sched_ext"
        # a pristine scx_simple.c, then the lab's patch
        orig = sx / "scx_simple.c.numalab-orig"
        if not orig.exists():
            shutil.copyfile(sx / "scx_simple.c", orig)
        shutil.copyfile(orig, sx / "scx_simple.c")
        _run(["patch", "-p1", "-F0", "-i", str(patch)], tree, log)
        say("build-scx: libbpf, bpftool, vmlinux.h, scx_simple.bpf.o (tools/sched_ext, clang-19)")
        build = work / "o"
        build.mkdir()
        _run(["nice", "-n", "10", "make", "-j2", f"CLANG={clang}", f"LLVM_STRIP={LLVM_STRIP}",
              f"VMLINUX_BTF={vmlinux}", f"O={build}", "scx_simple"], sx, log)
        b = build / "build"
        _run([gcc, "-static", "-o", str(work / "scx_simple"),
              str(b / "obj" / "sched_ext" / "scx_simple.o"), str(b / "obj" / "libbpf" / "libbpf.a"),
              "-lelf", "-lzstd", "-lz", "-lpthread"], sx, log)
        _run([gcc, "-O2", "-static", "-Wall", "-o", str(work / "scxload"), str(load_c)],
             work, log)
        bpftool = b / "sbin" / "bpftool"
        raw = subprocess.run([str(bpftool), "btf", "dump", "file", str(vmlinux), "format", "raw"],
                             capture_output=True, text=True, check=True).stdout
        if not re.search(r"FUNC 'scx_select_cpu_dfl'", raw):
            raise LabError(f"{k.release}: its BTF has no scx_select_cpu_dfl (no sched_ext?)")
        offsets = scx_offsets(raw)
        meta = {"recipe": RECIPE, "key": key, "kernel": k.release, "inputs": key_src,
                "source": src_info, "offsets": offsets,
                "scx_simple_sha256": _sha256_bytes((work / "scx_simple").read_bytes()),
                "scxload_sha256": _sha256_bytes((work / "scxload").read_bytes()),
                "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "seconds": round(time.monotonic() - started, 1)}
        final = work / "final"
        final.mkdir()
        for name in ("scx_simple", "scxload"):
            os.replace(work / name, final / name)
        (final / "scx.json").write_text(json.dumps(meta, indent=1) + "\n")
        shutil.rmtree(out, ignore_errors=True)
        os.rename(final, out)
        say(f"build-scx: done in {meta['seconds']} s -> {out}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return ScxTools(out, json.loads((out / "scx.json").read_text()))
