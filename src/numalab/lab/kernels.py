"""Debian kernels for the lab: find, fetch, unpack, cache, list.

Packages come from Debian's archive through ``apt-get`` under a *private*
apt configuration (its own ``sources.list``, lists and archives folders in
the cache, the host's keyring for signatures): the host's apt sources and
installed packages are never touched. ``apt-get download`` fetches the
``.deb`` files (apt checks them against the signed index; numalab records
their sha256 again), ``dpkg-deb -x`` unpacks them into a temporary folder,
and only ``vmlinuz`` and the modules that nvme needs (with their
dependencies, from their ``.modinfo``) are kept, decompressed, in
``CACHE/kernels/RELEASE/``, beside a ``kernel.json`` naming the packages.

Suites searched: bookworm (+ updates and security: 6.1, 6.12) and sid
(unstable: 7.x, where ``linux-image-X`` is a meta package over
``linux-binary-X`` with ``vmlinuz`` and ``linux-modules-X`` with the
modules). Only the plain ``-amd64`` flavour is used.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from . import LabError, cache_root

__all__ = ["KernelPackage", "CachedKernel", "parse_stanzas", "kernel_candidates",
           "resolve_kernel", "module_closure", "AptCache", "cached_kernels", "find_cached",
           "fetch_kernel", "modinfo", "boot_image", "bzimage_payload", "has_pvh_note",
           "DEFAULT_MODULES", "SOURCES"]

MIRROR = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
SOURCES = [(MIRROR, "bookworm"), (MIRROR, "bookworm-updates"),
           (SECURITY, "bookworm-security"), (MIRROR, "sid")]
# What the guest loads: the NVMe driver (its dependencies come from .modinfo).
DEFAULT_MODULES = ("nvme",)
_LISTS_MAX_AGE = 24 * 3600

_IMAGE = re.compile(r"^linux-image-(\d+\.\d+(?:\.\d+)?[-+][A-Za-z0-9.+-]*?-amd64)$")


@dataclass(frozen=True)
class KernelPackage:
    """A fetchable kernel: ``release`` (``uname -r``, e.g.
    ``"7.2.13+deb14-amd64"``), ``version`` (the image package's Debian
    version), ``upstream`` (``"7.2.13"``), and the packages holding it:
    ``{name: {"version", "sha256", "size", "filename"}}``."""

    release: str
    version: str
    upstream: str
    image: str
    packages: dict[str, dict] = field(default_factory=dict)


@dataclass
class CachedKernel:
    """A kernel unpacked in the cache: ``dir`` holds ``vmlinuz``,
    ``modules/NAME.ko`` and ``kernel.json``; ``modules`` is the load order
    of the modules kept (dependencies first)."""

    release: str
    dir: Path
    upstream: str
    packages: list[dict]
    modules: list[str]
    build: dict | None = None     # for kernels built by numalab lab build-kernel

    @property
    def vmlinuz(self) -> Path:
        return self.dir / "vmlinuz"

    def module_path(self, name: str) -> Path:
        return self.dir / "modules" / f"{name}.ko"


# -- pure helpers ---------------------------------------------------------------

def parse_stanzas(text: str) -> list[dict[str, str]]:
    """Parse Debian control stanzas (``apt-cache show`` output) into dicts.

    Continuation lines (starting with a space) are joined to their field.

    >>> parse_stanzas("Package: a\\nVersion: 1\\n\\nPackage: b\\nDescription: x\\n y\\n")
    [{'Package': 'a', 'Version': '1'}, {'Package': 'b', 'Description': 'x\\ny'}]
    """
    out: list[dict[str, str]] = []
    cur: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if not line.strip():
            if cur:
                out.append(cur)
            cur, key = {}, None
        elif line[0] in " \t" and key:
            cur[key] += "\n" + line.strip()
        elif ":" in line:
            key, _, value = line.partition(":")
            cur[key] = value.strip()
    if cur:
        out.append(cur)
    return out


def _version_key(v: str) -> tuple:
    """Sort key for versions such as ``6.1.176`` or ``6.12.100-1~deb12u1``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"[.\-+~]", v))


def _depends(stanza: dict[str, str]) -> list[str]:
    return [d.strip().split()[0] for d in stanza.get("Depends", "").split(",") if d.strip()]


def kernel_candidates(stanzas: list[dict[str, str]]) -> list[KernelPackage]:
    """The fetchable kernels among package stanzas, newest first.

    Input: stanzas of ``linux-image-*``, ``linux-binary-*`` and
    ``linux-modules-*`` packages. Output: one :class:`KernelPackage` per
    plain ``-amd64`` image (not cloud, rt or meta packages), holding the
    image package itself, or, when the image depends on
    ``linux-binary-RELEASE`` and ``linux-modules-RELEASE`` (Debian's split
    packaging from 6.19 on), those two.

    >>> s = [{"Package": "linux-image-6.1.0-50-amd64", "Version": "6.1.176-1",
    ...       "SHA256": "ab", "Size": "7", "Filename": "pool/x.deb"}]
    >>> k = kernel_candidates(s)[0]
    >>> k.release, k.upstream, list(k.packages)
    ('6.1.0-50-amd64', '6.1.176', ['linux-image-6.1.0-50-amd64'])
    """
    by_name: dict[str, dict[str, str]] = {}
    for s in stanzas:
        name = s.get("Package", "")
        old = by_name.get(name)
        if old is None or _version_key(s.get("Version", "")) > _version_key(old.get("Version", "")):
            by_name[name] = s
    out = []
    for name, s in by_name.items():
        m = _IMAGE.match(name)
        if not m or "-cloud-" in name or "-rt-" in name:
            continue
        release = m.group(1)
        version = s.get("Version", "")
        upstream = re.split(r"[-~+]", version)[0]
        deps = _depends(s)
        parts = [d for d in deps if d in (f"linux-binary-{release}", f"linux-modules-{release}")]
        names = parts if len(parts) == 2 else [name]
        pkgs = {}
        for n in names:
            st = by_name.get(n)
            if st is None:
                break
            pkgs[n] = {"version": st.get("Version", ""), "sha256": st.get("SHA256", ""),
                       "size": int(st.get("Size", "0") or 0), "filename": st.get("Filename", "")}
        else:
            out.append(KernelPackage(release=release, version=version, upstream=upstream,
                                     image=name, packages=pkgs))
    out.sort(key=lambda k: (_version_key(k.upstream), _version_key(k.release)), reverse=True)
    return out


def _matches(query: str, release: str, upstream: str, image: str) -> bool:
    q = query.strip()
    if q in (release, image, release.removesuffix("-amd64"), upstream):
        return True
    if q.startswith("linux-"):
        return q in (image, f"linux-binary-{release}", f"linux-modules-{release}")
    return upstream.startswith(q + ".") or release.startswith(q + ".") or release.startswith(q + "-")


def resolve_kernel(query: str, releases: list[tuple[str, str, str]]) -> str:
    """Pick the release a user means by ``query``.

    Input: ``query`` -- a version (``"7.2"``, ``"6.1.176"``), a release
    (``"6.1.0-50-amd64"``) or a package name; ``releases`` --
    ``(release, upstream, image package)`` triples, newest first. Output:
    the first (newest) matching release. Raises :class:`LabError` naming
    the versions that exist when nothing matches.

    >>> r = [("7.2.13+deb14-amd64", "7.2.13", "linux-image-7.2.13+deb14-amd64"),
    ...      ("6.1.0-50-amd64", "6.1.176", "linux-image-6.1.0-50-amd64")]
    >>> resolve_kernel("6.1", r), resolve_kernel("linux-image-7.2.13+deb14-amd64", r)
    ('6.1.0-50-amd64', '7.2.13+deb14-amd64')
    >>> resolve_kernel("6.7", r)
    Traceback (most recent call last):
    numalab.lab.LabError: unknown kernel '6.7'; known: 7.2.13 (7.2.13+deb14-amd64), 6.1.176 (6.1.0-50-amd64)
    """
    for release, upstream, image in releases:
        if _matches(query, release, upstream, image):
            return release
    known = ", ".join(f"{u} ({r})" for r, u, _ in releases[:12]) or "none (run 'numalab lab kernels')"
    more = f" and {len(releases) - 12} more" if len(releases) > 12 else ""
    raise LabError(f"unknown kernel {query!r}; known: {known}{more}")


def _mod_name(path: str) -> str:
    """``kernel/drivers/nvme/host/nvme-core.ko.xz`` -> ``nvme-core``."""
    base = path.rsplit("/", 1)[-1]
    return re.sub(r"\.ko(\.(xz|zst|gz))?$", "", base)


def modinfo(blob: bytes) -> dict[str, list[str]]:
    """The ``.modinfo`` section of a kernel module (an ELF64 little-endian
    ``.ko``): ``{key: [values]}`` (``depends``, ``softdep``, ``alias``...).

    Input: the module's bytes (decompressed). Raises LabError when the
    bytes are not an ELF64 little-endian file or have no ``.modinfo``.
    """
    import struct
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise LabError("not an ELF64 little-endian kernel module")
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)

    def section(i: int) -> tuple[int, int, int]:
        name, _t, _f, _a, off, size = struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize)
        return name, off, size

    _n, stroff, _s = section(shstrndx)
    for i in range(shnum):
        name, off, size = section(i)
        end = blob.index(b"\0", stroff + name)
        if blob[stroff + name:end] == b".modinfo":
            out: dict[str, list[str]] = {}
            for item in blob[off:off + size].split(b"\0"):
                key, eq, value = item.decode("utf-8", "replace").partition("=")
                if eq:
                    out.setdefault(key, []).append(value)
            return out
    raise LabError("kernel module without a .modinfo section")


def module_closure(deps: dict[str, list[str]], wanted) -> list[str]:
    """Modules to load for ``wanted``, dependencies first.

    Input: ``{module: [modules it needs]}`` (from each module's
    ``depends=`` and the ``pre:`` modules of its ``softdep=``; names with
    ``-`` and ``_`` are the same, as for modprobe) and the module names
    wanted. Output: the load order, each module after what it needs.
    Raises LabError for a wanted module that is not there.

    >>> d = {"nvme": ["nvme-core"], "nvme-core": ["t10-pi"], "t10-pi": []}
    >>> module_closure(d, ["nvme"])
    ['t10-pi', 'nvme-core', 'nvme']
    """
    norm = {k.replace("_", "-"): [v.replace("_", "-") for v in vs] for k, vs in deps.items()}
    order: list[str] = []
    seen: set[str] = set()

    def visit(n: str, stack: tuple[str, ...]) -> None:
        if n in seen or n in stack:
            return
        for d in norm.get(n, []):
            if d in norm:
                visit(d, stack + (n,))
        seen.add(n)
        order.append(n)

    for w in wanted:
        key = w.replace("_", "-")
        if key not in norm:
            raise LabError(f"module {w!r} is not among this kernel's modules "
                           "(built in, or not built)")
        visit(key, ())
    return order


def _read_module(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".zst"):
        raise LabError(f"{path.name}: zstd-compressed modules are not supported")
    return data


def _module_deps(moddir: Path, wanted) -> tuple[list[str], dict[str, bytes]]:
    """Load order and decompressed bytes of ``wanted`` and what they need,
    read from the modules' own ``.modinfo`` (Debian ships no modules.dep:
    depmod makes it at install time)."""
    files = {_mod_name(p.name).replace("_", "-"): p for p in moddir.rglob("*.ko*")}
    deps: dict[str, list[str]] = {}
    blobs: dict[str, bytes] = {}
    todo = [w.replace("_", "-") for w in wanted]
    while todo:
        n = todo.pop()
        if n in deps or n not in files:
            continue
        blobs[n] = _read_module(files[n])
        info = modinfo(blobs[n])
        need = [d for v in info.get("depends", []) for d in v.split(",") if d]
        for soft in info.get("softdep", []):
            m = re.search(r"pre:\s*([^:]*?)(?:\s+post:|$)", soft)
            need += m.group(1).split() if m else []
        need = [d.replace("_", "-") for d in need]
        deps[n] = [d for d in need if d in files]
        todo += deps[n]
    return module_closure(deps, wanted), blobs


# -- the private apt configuration ------------------------------------------------------

def _need(tool: str, hint: str) -> str:
    path = shutil.which(tool)
    if not path:
        raise LabError(f"{tool} not found: {hint}")
    return path


class AptCache:
    """apt-get / apt-cache under a private configuration in ``root``
    (default ``CACHE/apt``): its own sources list (:data:`SOURCES`), lists,
    archives and an empty dpkg status, so the host's sources and packages
    are neither read for packages nor changed."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or cache_root() / "apt")

    def _setup(self) -> None:
        for d in ("lists/partial", "archives/partial", "etc/sources.list.d",
                  "etc/preferences.d"):
            (self.root / d).mkdir(parents=True, exist_ok=True)
        lines = [f"deb [signed-by={KEYRING}] {uri} {suite} main" for uri, suite in SOURCES]
        (self.root / "etc/sources.list").write_text("\n".join(lines) + "\n")
        status = self.root / "status"
        if not status.exists():
            status.write_text("")

    def options(self) -> list[str]:
        r = self.root
        user = "root" if os.geteuid() == 0 else ""
        opts = {
            "Dir::Etc::SourceList": r / "etc/sources.list",
            "Dir::Etc::SourceParts": r / "etc/sources.list.d",
            "Dir::Etc::PreferencesParts": r / "etc/preferences.d",
            "Dir::Etc::Preferences": r / "etc/preferences",
            "Dir::State::Lists": r / "lists",
            "Dir::State::status": r / "status",
            "Dir::Cache": r,
            "Dir::Cache::archives": r / "archives",
        }
        out = []
        for k, v in opts.items():
            out += ["-o", f"{k}={v}"]
        if user:
            # as root apt would hand downloads to _apt, who cannot write here
            out += ["-o", f"APT::Sandbox::User={user}"]
        return out

    def _run(self, tool: str, args: list[str], cwd: Path | None = None,
             what: str = "") -> str:
        exe = _need(tool, "numalab lab fetches Debian kernels with apt-get and dpkg-deb "
                          "(a Debian or Ubuntu host)")
        proc = subprocess.run([exe, *self.options(), *args], cwd=cwd, capture_output=True,
                              text=True, env={**os.environ, "LC_ALL": "C"})
        if proc.returncode != 0:
            err = (proc.stderr.strip().splitlines() or ["(no message)"])
            errs = [ln for ln in err if ln.startswith(("E:", "W:", "Err:"))] or err
            raise LabError(f"{what or tool} failed: {errs[-1].strip()} (is the Debian "
                           "archive reachable?)")
        return proc.stdout

    def lists_age(self) -> float | None:
        stamp = self.root / "lists" / ".numalab-updated"
        try:
            return time.time() - stamp.stat().st_mtime
        except FileNotFoundError:
            return None

    def update(self, force: bool = False) -> bool:
        """Refresh the private package lists when missing, older than a
        day, or ``force``. Returns whether it ran."""
        self._setup()
        age = self.lists_age()
        if not force and age is not None and age < _LISTS_MAX_AGE:
            return False
        self._run("apt-get", ["-q", "update"], what="apt-get update (private lists)")
        (self.root / "lists" / ".numalab-updated").write_text(time.strftime("%FT%T\n"))
        return True

    def kernels(self) -> list[KernelPackage]:
        """Every fetchable kernel, newest first (needs :meth:`update` once)."""
        self._setup()
        if self.lists_age() is None:
            return []
        names = self._run("apt-cache", ["search", "--names-only",
                                        r"^linux-(image|binary|modules)-[0-9].*-amd64$"])
        pkgs = sorted({ln.split(" - ")[0].strip() for ln in names.splitlines() if ln.strip()})
        pkgs = [p for p in pkgs if "-cloud-" not in p and "-rt-" not in p]
        if not pkgs:
            return []
        text = self._run("apt-cache", ["show", "--no-all-versions", *pkgs])
        return kernel_candidates(parse_stanzas(text))

    def download(self, names: list[str], dest: Path) -> None:
        self._run("apt-get", ["-q", "download", *names], cwd=dest,
                  what=f"apt-get download {' '.join(names)}")


# -- the cache of unpacked kernels ------------------------------------------------------

def _kernels_dir() -> Path:
    return cache_root() / "kernels"


def _load_cached(d: Path) -> CachedKernel | None:
    """The kernel unpacked in ``d``, None when ``d`` holds none (no
    ``kernel.json`` or no ``vmlinuz``); a ``kernel.json`` that is not what
    numalab writes raises :class:`~numalab.lab.schema.LabFileError` (see
    :data:`~numalab.lab.schema.KERNEL_JSON`)."""
    from .schema import KERNEL_JSON, check, load_json
    try:
        raw = (d / "kernel.json").read_bytes()
    except OSError:
        return None
    meta = check(load_json(raw, str(d / "kernel.json")), KERNEL_JSON, str(d / "kernel.json"))
    if not (d / "vmlinuz").is_file():
        return None
    return CachedKernel(release=meta["release"], dir=d, upstream=meta.get("upstream", ""),
                        packages=meta.get("packages", []), modules=meta.get("modules", []),
                        build=meta.get("build"))


def cached_kernels() -> list[CachedKernel]:
    """Kernels unpacked in the cache, newest first."""
    d = _kernels_dir()
    out = [k for k in (_load_cached(p) for p in sorted(d.iterdir()) if p.is_dir())
           if k is not None] if d.is_dir() else []
    out.sort(key=lambda k: (_version_key(k.upstream), _version_key(k.release)), reverse=True)
    return out


def find_cached(query: str) -> CachedKernel | None:
    """The newest cached kernel matching ``query`` (see :func:`resolve_kernel`), or None."""
    ks = cached_kernels()
    for k in ks:
        image = next((p["name"] for p in k.packages if p["name"].startswith("linux-image-")),
                     f"linux-image-{k.release}")
        if _matches(query, k.release, k.upstream, image) or any(
                query == p["name"] for p in k.packages):
            return k
    return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _find_one(root: Path, pattern: str) -> Path | None:
    hits = sorted(root.glob(pattern))
    return hits[0] if hits else None


def fetch_kernel(query: str, apt: AptCache | None = None, wanted=DEFAULT_MODULES,
                 progress: Callable[[str], None] | None = None) -> CachedKernel:
    """Fetch and unpack the kernel ``query`` names, unless already cached.

    Returns the :class:`CachedKernel`. Raises LabError for an unknown
    kernel (listing what exists), an unreachable archive, or a package
    whose sha256 differs from the signed index.
    """
    hit = find_cached(query)
    if hit is not None:
        return hit
    say = progress or (lambda _m: None)
    apt = apt or AptCache()
    if apt.update():
        say("fetching: package lists refreshed")
    cands = apt.kernels()
    release = resolve_kernel(query, [(k.release, k.upstream, k.image) for k in cands])
    kp = next(k for k in cands if k.release == release)
    hit = find_cached(release)
    if hit is not None:
        return hit
    total = sum(p["size"] for p in kp.packages.values())
    say(f"fetching: {' '.join(kp.packages)} ({total / 1e6:.0f} MB)")
    started = time.monotonic()
    kdir = _kernels_dir()
    kdir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".fetch-{release}.", dir=kdir))
    try:
        debs = work / "debs"
        debs.mkdir()
        apt.download(list(kp.packages), debs)
        unpack = work / "root"
        unpack.mkdir()
        recorded = []
        dpkg_deb = _need("dpkg-deb", "install dpkg (Debian/Ubuntu)")
        for name, info in kp.packages.items():
            deb = _find_one(debs, f"{name}_*.deb")
            if deb is None:
                raise LabError(f"apt-get download left no .deb for {name}")
            digest = _sha256(deb)
            if info["sha256"] and digest != info["sha256"]:
                raise LabError(f"{deb.name}: sha256 {digest} differs from the archive's "
                               f"{info['sha256']}")
            recorded.append({"name": name, "version": info["version"], "sha256": digest,
                             "size": deb.stat().st_size, "file": deb.name})
            subprocess.run([dpkg_deb, "-x", str(deb), str(unpack)], check=True)
            deb.unlink()
        say(f"fetching: downloaded and unpacked in {time.monotonic() - started:.0f} s")
        moddir = (_find_one(unpack, f"lib/modules/{release}")
                  or _find_one(unpack, f"usr/lib/modules/{release}"))
        # boot/vmlinuz-RELEASE up to 6.x; MODULES/vmlinuz in the split packages
        kernel = (_find_one(unpack, f"boot/vmlinuz-{release}")
                  or (moddir and _find_one(moddir, "vmlinuz")))
        if kernel is None or moddir is None:
            raise LabError(f"{release}: the packages hold no vmlinuz or modules")
        closure, blobs = _module_deps(moddir, wanted)
        out = work / "kernel"
        (out / "modules").mkdir(parents=True)
        shutil.copyfile(kernel, out / "vmlinuz")
        for name in closure:
            (out / "modules" / f"{name}.ko").write_bytes(blobs[name])
        meta = {"release": release, "upstream": kp.upstream, "image": kp.image,
                "image_version": kp.version, "packages": recorded,
                "modules": closure,
                "fetched_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "fetch_seconds": round(time.monotonic() - started, 1)}
        (out / "kernel.json").write_text(json.dumps(meta, indent=1) + "\n")
        final = kdir / release
        try:
            os.rename(out, final)
        except OSError:
            if not (final / "kernel.json").is_file():
                raise
        say(f"fetching: {release} cached in {final} ({meta['fetch_seconds']} s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    got = _load_cached(kdir / release)
    assert got is not None
    return got


def describe(k: CachedKernel) -> dict:
    """A JSON-able summary of a cached kernel (for manifests and listings)."""
    d = asdict(k)
    d["dir"] = str(k.dir)
    return d


# -- booting without decompression --------------------------------------------------------

XEN_ELFNOTE_PHYS32_ENTRY = 18


def bzimage_payload(image: bytes) -> tuple[str, bytes] | None:
    """The compressed kernel inside a bzImage: ``(format, bytes)``, from
    the boot protocol header (``setup_sects`` at 0x1f1, ``payload_offset``
    and ``payload_length`` at 0x248/0x24c, relative to the protected-mode
    code that follows the setup sectors). None for anything else.

    >>> bzimage_payload(b"not a kernel") is None
    True
    """
    import struct
    if len(image) < 0x250 or image[0x202:0x206] != b"HdrS":
        return None
    setup = (image[0x1F1] or 4) + 1
    off, length = struct.unpack_from("<II", image, 0x248)
    start = setup * 512 + off
    blob = image[start:start + length]
    for name, magic in (("xz", b"\xfd7zXZ\x00"), ("zstd", b"\x28\xb5\x2f\xfd"),
                        ("gzip", b"\x1f\x8b")):
        if blob.startswith(magic):
            return name, blob
    return None


def has_pvh_note(elf: bytes) -> bool:
    """True when an ELF64 kernel carries the ``XEN_ELFNOTE_PHYS32_ENTRY``
    note: QEMU can then start it directly (PVH boot) from ``-kernel``.

    >>> has_pvh_note(b"\\x7fELF")
    False
    """
    import struct
    if len(elf) < 64 or elf[:4] != b"\x7fELF" or elf[4] != 2:
        return False
    phoff, = struct.unpack_from("<Q", elf, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    for i in range(phnum):
        p_type, _f, p_off, _v, _p, p_filesz = struct.unpack_from("<IIQQQQ", elf,
                                                                  phoff + i * phentsize)
        if p_type != 4:          # PT_NOTE
            continue
        pos, end = p_off, p_off + p_filesz
        while pos + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", elf, pos)
            name = elf[pos + 12:pos + 12 + namesz].rstrip(b"\0")
            if name == b"Xen" and ntype == XEN_ELFNOTE_PHYS32_ENTRY:
                return True
            pos += 12 + (namesz + 3) // 4 * 4 + (descsz + 3) // 4 * 4
    return False


def _decompress(fmt: str, blob: bytes) -> bytes | None:
    import zlib
    if fmt == "xz":
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(blob)
    if fmt == "gzip":
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(blob)
    if fmt == "zstd":
        exe = shutil.which("zstd")
        if not exe:
            return None
        # the kernel's build appends the 4-byte decompressed size
        proc = subprocess.run([exe, "-dc"], input=blob[:-4], capture_output=True)
        return proc.stdout if proc.returncode == 0 else None
    return None


def boot_image(k: CachedKernel) -> tuple[Path, str]:
    """What QEMU should boot for ``k``: ``(path, how)``. When the bzImage's
    kernel can be decompressed here (xz, gzip; zstd with the ``zstd``
    tool) and has a PVH entry note, the ELF ``vmlinux`` is kept in the
    kernel's cache folder and booted directly (``"pvh"``): under TCG the
    guest's own decompression takes 10-15 s of every boot. Else the
    bzImage (``"bzimage"``)."""
    vmlinux = k.dir / "vmlinux"
    if vmlinux.is_file():
        return vmlinux, "pvh"
    if (k.dir / "vmlinux.none").exists():
        return k.vmlinuz, "bzimage"
    found = bzimage_payload(k.vmlinuz.read_bytes())
    if found and found[0] == "zstd" and not shutil.which("zstd"):
        return k.vmlinuz, "bzimage"          # until the zstd tool is installed
    elf = _decompress(*found) if found else None
    if not elf or not has_pvh_note(elf):
        (k.dir / "vmlinux.none").write_text("no PVH-bootable vmlinux could be made here\n")
        return k.vmlinuz, "bzimage"
    fd, tmp = tempfile.mkstemp(prefix=".vmlinux.", dir=k.dir)
    with os.fdopen(fd, "wb") as f:
        f.write(elf)
    os.replace(tmp, vmlinux)
    return vmlinux, "pvh"
