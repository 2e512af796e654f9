"""``numalab lab build-kernel``: build a kernel for the lab from Debian's
``linux-source-VERSION`` package, with the lab's configuration fragment and
optionally a patch.

The recipe (``RECIPE`` names its revision):

1. the source package ``linux-source-VERSION_*_all.deb``, taken from the
   lab's cache (``CACHE/sources/``) or ``~/.cache/numalab/src/`` (where
   ``tools/kernel_c/fetch_sources.sh`` puts it), else fetched with
   ``apt-get download`` under the lab's private apt configuration
   (:class:`~numalab.lab.kernels.AptCache`; nothing is installed);
2. its ``usr/src/linux-source-VERSION.tar.xz`` unpacked into a work folder;
3. ``make ARCH=x86_64 tinyconfig``, then the fragment
   (``kconfig/lab.config`` beside this file) merged with
   ``scripts/kconfig/merge_config.sh -m``, then ``make olddefconfig``;
   every option of the fragment is checked in the final ``.config``;
4. ``nice -n 19 make -jJOBS bzImage modules`` with ``LOCALVERSION=-numalab``
   (``-numalab-LABEL`` with a patch) and a fixed build user, host and
   timestamp;
5. the bzImage, the modules nvme needs (with their dependencies, read from
   their ``.modinfo``), the final ``.config`` and ``kernel.json`` (source
   package, version and sha256; fragment sha256; patch name and sha256;
   build time) are moved into ``CACHE/builds/KEY/`` by one rename, where
   KEY is :func:`build_key` of the source package's sha256, the fragment,
   the patch and the recipe. A build that fails leaves nothing there: its
   log goes to ``CACHE/logs/`` and the error shows its last lines.

With a patch, the unpatched build's tree (kept in ``CACHE/trees/``, made
first when missing) is copied back to the path it was built at
(``CACHE/buildroot/linux-source-VERSION``, one build at a time) and patched,
so only what the patch touches is compiled again; the patch must apply
exactly (``patch -p1 -F0``, offsets allowed, no fuzz), checked with
``--dry-run`` first. ``-o NAME`` (default
``VERSION`` or ``VERSION-PATCHSTEM``) names the build for
``numalab lab run --kernel built:NAME``.
"""

from __future__ import annotations

import fcntl
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
from .kernels import DEFAULT_MODULES, AptCache, CachedKernel, _load_cached, _module_deps, _sha256

__all__ = ["RECIPE", "FRAGMENT", "PATCHES", "SourcePackage", "parse_fragment",
           "fragment_mismatches", "fragment_file", "build_key", "patch_hunks", "check_patch", "apply_patch",
           "check_name", "check_source_version", "find_source", "build_kernel", "find_built",
           "built_kernels", "default_name", "BuildError"]

RECIPE = "numalab-lab-build/1"
FRAGMENT = Path(__file__).parent / "kconfig" / "lab.config"
PATCHES = Path(__file__).parent / "patches"
ARCH = "x86_64"
LOG_TAIL = 25
_SOURCE_DEB = re.compile(r"^linux-source-(\d+\.\d+)_([^_]+)_all\.deb$")


class BuildError(LabError):
    """A kernel build that failed (configuration, compilation, or a patch
    that does not apply)."""


@dataclass(frozen=True)
class SourcePackage:
    """A Debian ``linux-source-VERSION`` package on disk: ``version``
    (``"7.2"``), ``deb_version`` (``"7.2.13-1"``), ``deb`` path, ``sha256``."""

    version: str
    deb_version: str
    deb: Path
    sha256: str

    @property
    def package(self) -> str:
        return f"linux-source-{self.version}"


# -- pure helpers -------------------------------------------------------------------------

def parse_fragment(text: str) -> dict[str, str]:
    """The options a Kconfig fragment sets: ``{"CONFIG_X": value}`` with
    ``"n"`` for ``# CONFIG_X is not set``; other comments and blank lines
    are skipped. Raises LabError for any other line or an option set twice.

    >>> parse_fragment("# c\\nCONFIG_SMP=y\\n# CONFIG_EFI is not set\\nCONFIG_NR_CPUS=128\\n")
    {'CONFIG_SMP': 'y', 'CONFIG_EFI': 'n', 'CONFIG_NR_CPUS': '128'}
    >>> parse_fragment("SMP=y")
    Traceback (most recent call last):
    numalab.lab.LabError: fragment line 1: 'SMP=y' is not CONFIG_NAME=VALUE
    """
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        m = re.fullmatch(r"# (CONFIG_[A-Za-z0-9_]+) is not set", line)
        if m:
            name, value = m.group(1), "n"
        elif not line or line.startswith("#"):
            continue
        else:
            m = re.fullmatch(r"(CONFIG_[A-Za-z0-9_]+)=(.*)", line)
            if not m:
                raise LabError(f"fragment line {n}: {line!r} is not CONFIG_NAME=VALUE")
            name, value = m.group(1), m.group(2)
        if name in out:
            raise LabError(f"fragment line {n}: {name} is set twice")
        out[name] = value
    return out


def fragment_mismatches(fragment: dict[str, str], config: str) -> list[str]:
    """Options of ``fragment`` (from :func:`parse_fragment`) that the final
    ``.config`` text does not have as asked, as ``"CONFIG_X=y (got n)"``.
    An option absent from ``.config`` counts as ``n``.

    >>> fragment_mismatches({"CONFIG_SMP": "y", "CONFIG_EFI": "n", "CONFIG_PCI": "y"},
    ...                     "CONFIG_SMP=y\\n# CONFIG_PCI is not set\\n")
    ['CONFIG_PCI=y (got n)']
    """
    have = parse_fragment("\n".join(ln for ln in config.splitlines()
                                    if ln.startswith("CONFIG_") or ln.endswith(" is not set")))
    return [f"{k}={v} (got {have.get(k, 'n')})" for k, v in fragment.items()
            if have.get(k, "n") != v]


def fragment_file(sha256: str | None) -> Path | None:
    """The committed fragment (``kconfig/*.config`` beside this module) whose
    text has this sha256, or None: a built dump names the fragment it was
    built with by its hash, and every fragment a committed dump used stays
    here (``lab.config``, the current one; ``lab-periodic.config``, the
    first one, with the periodic tick)."""
    if not sha256:
        return None
    for f in sorted(FRAGMENT.parent.glob("*.config")):
        if hashlib.sha256(f.read_text().encode()).hexdigest() == sha256:
            return f
    return None


def build_key(source_sha256: str, fragment: str, patch: str | None,
              label: str = "", recipe: str = RECIPE) -> str:
    """The build cache key: 16 hex digits of the sha256 over the recipe
    revision, the source package's sha256, the fragment's text, the patch's
    text (or none) and the release label. Any change of one gives another key.

    >>> a = build_key("ab" * 32, "CONFIG_SMP=y\\n", None)
    >>> len(a), a == build_key("ab" * 32, "CONFIG_SMP=y\\n", None)
    (16, True)
    >>> a != build_key("ab" * 32, "CONFIG_SMP=y\\n", "")
    True
    """
    h = hashlib.sha256()
    for part in (recipe, source_sha256, fragment,
                 "\0none" if patch is None else "\0patch\0" + patch, label):
        h.update(part.encode())
        h.update(b"\0\0")
    return h.hexdigest()[:16]


def patch_hunks(text: str) -> list[tuple[str, int, str]]:
    """The hunks of a unified diff: ``(file, number, header)`` with the
    file's new name (``a/``/``b/`` stripped), the hunk's number within its
    file from 1, and its ``@@ ... @@`` line.

    >>> patch_hunks("--- a/lib/x.c\\n+++ b/lib/x.c\\n@@ -1,2 +1,3 @@ f()\\n x\\n+y\\n")
    [('lib/x.c', 1, '@@ -1,2 +1,3 @@ f()')]
    """
    out = []
    cur = None
    n = 0
    for line in text.splitlines():
        if line.startswith("+++ "):
            cur = line[4:].split("\t")[0].strip()
            cur = re.sub(r"^[ab]/", "", cur)
            n = 0
        elif line.startswith("@@ ") and cur is not None:
            n += 1
            out.append((cur, n, line.rstrip()))
    return out


def _patch_failure(patch_name: str, text: str, output: str, where: str) -> str:
    """One line naming the first hunk GNU patch could not apply."""
    hunks = patch_hunks(text)
    current = None
    for line in output.splitlines():
        m = re.match(r"(?:checking|patching) file (.+)$", line)
        if m:
            current = m.group(1).strip().strip("'")
            continue
        m = re.match(r"Hunk #(\d+) FAILED at (\d+)", line)
        if m:
            num = int(m.group(1))
            header = next((h for f, k, h in hunks if f == current and k == num), "")
            return (f"{patch_name} does not apply to {where}: {current} hunk #{num} "
                    f"{header} failed (at line {m.group(2)})").replace("  ", " ")
        m = re.search(r"can't find file to patch|No file to patch", line)
        if m:
            files = [f for f, _, _ in hunks]
            return f"{patch_name} does not apply to {where}: no file {files[0] if files else '?'}"
        if "Reversed (or previously applied) patch detected" in line:
            return f"{patch_name} does not apply to {where}: {current} is already patched"
        if "Only garbage was found" in line or "malformed patch" in line:
            return f"{patch_name} is not a patch ({line.strip()})"
    last = (output.strip().splitlines() or ["(no message)"])[-1]
    return f"{patch_name} does not apply to {where}: {last}"


def _patch_exe() -> str:
    exe = shutil.which("patch")
    if not exe:
        raise LabError("patch not found: install it with apt-get install patch")
    return exe


def check_patch(tree: Path, patch: Path, where: str = "the source") -> None:
    """Dry-run ``patch -p1 -N -F0`` of ``patch`` in ``tree``; raise
    :class:`BuildError` (one line naming the failing hunk) if it does not
    apply exactly. Offsets are allowed, fuzz is not."""
    text = patch.read_text(errors="replace")
    if not patch_hunks(text):
        raise BuildError(f"{patch.name} is not a unified diff (no hunks)")
    proc = subprocess.run([_patch_exe(), "-p1", "-N", "-F0", "--dry-run", "-i", str(patch)],
                          cwd=tree, capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        raise BuildError(_patch_failure(patch.name, text, proc.stdout + proc.stderr, where))


def apply_patch(tree: Path, patch: Path, where: str = "the source") -> str:
    """Apply ``patch`` to ``tree`` after :func:`check_patch`; return
    patch's output (the files patched, offsets)."""
    check_patch(tree, patch, where)
    proc = subprocess.run([_patch_exe(), "-p1", "-N", "-F0", "-i", str(patch)], cwd=tree,
                          capture_output=True, text=True, env={**os.environ, "LC_ALL": "C"})
    if proc.returncode != 0:
        raise BuildError(_patch_failure(patch.name, patch.read_text(errors="replace"),
                                        proc.stdout + proc.stderr, where))
    return proc.stdout


def check_name(name: str) -> str:
    """A build name (``-o``): letters, digits, ``. _ + -``, 1-64 characters.

    >>> check_name("7.2-rotate")
    '7.2-rotate'
    >>> check_name("../x")
    Traceback (most recent call last):
    numalab.lab.LabError: build name '../x': use 1-64 letters, digits and . _ + - (not starting with .)
    """
    if not re.fullmatch(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,63}", name or ""):
        raise LabError(f"build name {name!r}: use 1-64 letters, digits and . _ + - "
                       "(not starting with .)")
    return name


def check_source_version(version: str, known: list[str]) -> str:
    """``version`` if it is one of ``known`` (``"7.2"``...), else LabError
    listing them.

    >>> check_source_version("7.2", ["6.12", "7.2"])
    '7.2'
    >>> check_source_version("7.3", ["6.12", "7.2"])
    Traceback (most recent call last):
    numalab.lab.LabError: unknown source version '7.3'; known: 6.12, 7.2
    """
    if version in known:
        return version
    shown = ", ".join(known) or "none (no linux-source package cached or fetchable)"
    raise LabError(f"unknown source version {version!r}; known: {shown}")


def default_name(version: str, patch: Path | None) -> str:
    """``"7.2"`` or ``"7.2-STEM"`` for the patch file ``STEM.patch``.

    >>> default_name("7.2", Path("patches/004-rotate.patch"))
    '7.2-004-rotate'
    """
    if patch is None:
        return version
    return check_name(f"{version}-{patch.name.removesuffix('.patch').removesuffix('.diff')}")


def _label(patch: Path | None) -> str:
    """The release suffix after ``-numalab``: ``""`` or ``"-STEM"``
    (letters and digits only, at most 24)."""
    if patch is None:
        return ""
    stem = re.sub(r"[^A-Za-z0-9]+", "", patch.name.removesuffix(".patch"))[:24]
    return f"-{stem}" if stem else "-patched"


def _ver_key(v: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in re.split(r"[.\-+~]", v))


# -- the source package -------------------------------------------------------------------

def _source_dirs() -> list[Path]:
    return [cache_root() / "sources", Path.home() / ".cache" / "numalab" / "src"]


def cached_sources() -> dict[str, Path]:
    """``{"7.2": newest linux-source-7.2_*_all.deb}`` found in the source dirs."""
    found: dict[str, Path] = {}
    for d in _source_dirs():
        if not d.is_dir():
            continue
        for p in d.glob("linux-source-*_all.deb"):
            m = _SOURCE_DEB.match(p.name)
            if m and (m.group(1) not in found
                      or _ver_key(m.group(2)) > _ver_key(_SOURCE_DEB.match(found[m.group(1)].name).group(2))):
                found[m.group(1)] = p
    return found


def _fetchable_sources(apt: AptCache) -> list[str]:
    if apt.lists_age() is None:
        return []
    out = apt._run("apt-cache", ["search", "--names-only", r"^linux-source-[0-9]+\.[0-9]+$"])
    return sorted({m.group(1) for m in re.finditer(r"^linux-source-(\d+\.\d+) ", out, re.M)},
                  key=_ver_key)


def known_sources(apt: AptCache | None = None) -> list[str]:
    """Source versions cached here or in the private package lists (if any)."""
    apt = apt or AptCache()
    try:
        fetchable = _fetchable_sources(apt)
    except LabError:
        fetchable = []
    return sorted(set(cached_sources()) | set(fetchable), key=_ver_key)


def find_source(version: str, fetch: bool = True, apt: AptCache | None = None,
                progress: Callable[[str], None] | None = None) -> SourcePackage:
    """The ``linux-source-VERSION`` package: cached, or fetched (with
    ``fetch``) into ``CACHE/sources/``. Raises LabError for a version that
    is neither cached nor fetchable, listing those that are."""
    say = progress or (lambda _m: None)
    if not re.fullmatch(r"\d+\.\d+", version or ""):
        raise LabError(f"--source {version!r}: a kernel version such as 7.2 or 6.12 "
                       f"(known: {', '.join(known_sources(apt)) or 'none'})")
    deb = cached_sources().get(version)
    if deb is None:
        apt = apt or AptCache()
        if not fetch:
            check_source_version(version, sorted(cached_sources(), key=_ver_key))
        if apt.update():
            say("fetching: package lists refreshed")
        check_source_version(version, known_sources(apt))
        dest = cache_root() / "sources"
        dest.mkdir(parents=True, exist_ok=True)
        say(f"fetching: linux-source-{version} (about 150 MB)")
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=dest) as tmp:
            apt.download([f"linux-source-{version}"], Path(tmp))
            got = sorted(Path(tmp).glob(f"linux-source-{version}_*_all.deb"))
            if not got:
                raise LabError(f"apt-get download left no linux-source-{version} .deb")
            os.replace(got[-1], dest / got[-1].name)
        deb = cached_sources()[version]
    m = _SOURCE_DEB.match(deb.name)
    return SourcePackage(version=version, deb_version=m.group(2).replace("%3a", ":"),
                         deb=deb, sha256=_sha256(deb))


# -- building -----------------------------------------------------------------------------

def _builds_dir() -> Path:
    return cache_root() / "builds"


def _names_dir() -> Path:
    return cache_root() / "built"


def _run_logged(cmd: list[str], cwd: Path, log: Path, env: dict | None = None,
                say: Callable[[str], None] | None = None, what: str = "") -> None:
    """Run ``cmd`` appending its output to ``log``; on failure raise
    BuildError with the log's last lines and its path (copied to
    ``CACHE/logs/``)."""
    with open(log, "a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        started = time.monotonic()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT,
                                env={**os.environ, "LC_ALL": "C", **(env or {})})
        last = started
        while proc.poll() is None:
            time.sleep(1)
            if say and time.monotonic() - last >= 60:
                last = time.monotonic()
                say(f"{what}: {time.monotonic() - started:.0f} s, "
                    f"{_count_compiled(log)} files compiled so far")
    if proc.returncode != 0:
        logs = cache_root() / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        kept = logs / f"build-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        shutil.copyfile(log, kept)
        tail = log.read_text(errors="replace").splitlines()[-LOG_TAIL:]
        raise BuildError(f"{what or cmd[0]} failed (exit {proc.returncode}); log: {kept}\n"
                         + "\n".join(tail))


def _count_compiled(log: Path) -> int:
    try:
        return sum(1 for ln in log.read_text(errors="replace").splitlines()
                   if ln.lstrip().startswith("CC "))
    except OSError:
        return 0


def _unpack(src: SourcePackage, dest: Path, say) -> Path:
    """Unpack the package's ``linux-source-V.tar.xz`` under ``dest``;
    return the tree."""
    say(f"unpacking {src.deb.name}")
    inner = f"./usr/src/linux-source-{src.version}.tar.xz"
    dpkg = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(src.deb)], stdout=subprocess.PIPE)
    tar1 = subprocess.Popen(["tar", "-xO", inner], stdin=dpkg.stdout, stdout=subprocess.PIPE)
    dpkg.stdout.close()
    tar2 = subprocess.run(["nice", "-n", "19", "tar", "-xJ", "-C", str(dest)], stdin=tar1.stdout,
                          capture_output=True)
    tar1.stdout.close()
    if tar1.wait() != 0 or dpkg.wait() != 0 or tar2.returncode != 0:
        raise BuildError(f"{src.deb.name}: cannot unpack {inner} "
                         f"({tar2.stderr.decode(errors='replace').strip()[-200:]})")
    tree = dest / f"linux-source-{src.version}"
    if not (tree / "Makefile").is_file():
        raise BuildError(f"{src.deb.name}: no linux-source-{src.version}/Makefile inside")
    return tree


def _configure(tree: Path, fragment_path: Path, log: Path, say) -> None:
    say("configuring: tinyconfig + fragment (merge_config.sh -m) + olddefconfig")
    mk = ["make", f"ARCH={ARCH}"]
    _run_logged(mk + ["tinyconfig"], tree, log, what="make tinyconfig")
    _run_logged(["sh", "scripts/kconfig/merge_config.sh", "-m", ".config", str(fragment_path)],
                tree, log, env={"ARCH": ARCH}, what="merge_config.sh")
    _run_logged(mk + ["olddefconfig"], tree, log, what="make olddefconfig")
    bad = fragment_mismatches(parse_fragment(fragment_path.read_text()),
                              (tree / ".config").read_text())
    if bad:
        raise BuildError(f"Kconfig did not keep the fragment's {', '.join(bad[:6])}"
                         f"{' and more' if len(bad) > 6 else ''} (a dependency is missing)")


def _make_env(label: str) -> tuple[list[str], dict]:
    args = [f"ARCH={ARCH}", f"LOCALVERSION=-numalab{label}"]
    env = {"KBUILD_BUILD_USER": "numalab", "KBUILD_BUILD_HOST": "numalab",
           "KBUILD_BUILD_TIMESTAMP": "2026-01-01 00:00:00 UTC"}
    return args, env


def _collect(tree: Path, out: Path, wanted=DEFAULT_MODULES) -> list[str]:
    """Copy bzImage, .config and the modules of ``wanted`` (with their
    dependencies) from a built tree into ``out``; return the module load order."""
    (out / "modules").mkdir(parents=True)
    shutil.copyfile(tree / "arch/x86/boot/bzImage", out / "vmlinuz")
    shutil.copyfile(tree / ".config", out / "config")
    order = tree / "modules.order"
    if not order.is_file():
        return []
    with tempfile.TemporaryDirectory() as tmp:
        for ln in order.read_text().split():
            ko = tree / re.sub(r"\.o$", ".ko", ln)
            if ko.is_file():
                shutil.copyfile(ko, Path(tmp) / ko.name)
        closure, blobs = _module_deps(Path(tmp), wanted)
    for name in closure:
        (out / "modules" / f"{name}.ko").write_bytes(blobs[name])
    return closure


def _register(name: str, key: str) -> None:
    d = _names_dir()
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".name.", dir=d)
    with os.fdopen(fd, "w") as f:
        json.dump({"key": key}, f)
    os.replace(tmp, d / f"{name}.json")


def built_kernels() -> dict[str, CachedKernel]:
    """``{name: CachedKernel}`` of the named builds in the cache."""
    out = {}
    d = _names_dir()
    from .schema import BUILT_NAME, check, load_json
    for p in sorted(d.glob("*.json")) if d.is_dir() else []:
        try:
            raw = p.read_bytes()
        except OSError:
            continue
        # the key names a folder of the cache: checked, so that it cannot lead elsewhere
        key = check(load_json(raw, str(p)), BUILT_NAME, str(p))["key"]
        k = _load_cached(_builds_dir() / key)
        if k is not None:
            out[p.stem] = k
    return out


def find_built(name: str) -> CachedKernel:
    """The build named ``name`` (``-o`` of build-kernel), or LabError
    listing the names that exist."""
    ks = built_kernels()
    if name in ks:
        return ks[name]
    raise LabError(f"no built kernel named {name!r}; built: {', '.join(ks) or 'none'} "
                   "(numalab lab build-kernel)")


def build_kernel(version: str, patch: str | os.PathLike | None = None, name: str | None = None,
                 jobs: int = 2, nice: int = 19, fragment: Path = FRAGMENT,
                 progress: Callable[[str], None] | None = None) -> CachedKernel:
    """Build (or find in the cache) the lab kernel from ``linux-source-VERSION``
    with ``fragment`` and ``patch``; register it as ``name``; return it.

    Raises LabError for an unknown version or a missing patch file and
    BuildError for a patch that does not apply or a failed build (nothing
    is left in the cache but the log).
    """
    say = progress or (lambda _m: None)
    if jobs < 1:
        raise LabError("-j must be at least 1")
    patch_path = Path(patch).resolve() if patch is not None else None
    if patch_path is not None and not patch_path.is_file():
        raise LabError(f"patch file {patch_path} not found")
    name = check_name(name) if name is not None else default_name(version, patch_path)
    src = find_source(version, progress=say)
    frag_text = fragment.read_text()
    parse_fragment(frag_text)
    patch_text = patch_path.read_text(errors="replace") if patch_path else None
    label = _label(patch_path)
    key = build_key(src.sha256, frag_text, patch_text, label)
    final = _builds_dir() / key
    hit = _load_cached(final)
    if hit is not None:
        _register(name, key)
        say(f"cached: {src.package} {src.deb_version}"
            f"{' + ' + patch_path.name if patch_path else ''} -> {final} (built:{name})")
        return hit

    base_key = build_key(src.sha256, frag_text, None, "")
    base_tree = cache_root() / "trees" / base_key
    if patch_path is not None and not (base_tree / "vmlinux").is_file():
        say("building the unpatched kernel first (the patched build reuses its tree)")
        build_kernel(version, None, None, jobs, nice, fragment, progress)

    _builds_dir().mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{key}.", dir=_builds_dir()))
    log = work / "build.log"
    where = f"{src.package} {src.deb_version}"
    started = time.monotonic()
    # Every build of a source version compiles at the same path (the tools'
    # dependency files hold absolute paths: a tree built elsewhere would
    # rebuild objtool, and then every object), one build at a time.
    broot = cache_root() / "buildroot"
    broot.mkdir(parents=True, exist_ok=True)
    lock = open(broot / f".lock-{src.version}", "w")
    tree = broot / f"linux-source-{src.version}"
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tree.exists():                 # left by a build that was killed
            shutil.rmtree(tree)
        if patch_path is not None:
            say(f"copying the unpatched tree {base_tree.name}")
            subprocess.run(["cp", "-a", str(base_tree), str(tree)], check=True)
            say(f"patching: {patch_path.name}")
            out = apply_patch(tree, patch_path, where)
            for ln in out.splitlines():
                say(f"patch: {ln.strip()}")
            bad = fragment_mismatches(parse_fragment(frag_text), (tree / ".config").read_text())
            if bad:
                raise BuildError(f"the unpatched tree's .config lacks {', '.join(bad[:6])}")
        else:
            if _unpack(src, broot, say) != tree:
                raise BuildError(f"{src.deb.name}: unexpected tree name")
            _configure(tree, fragment, log, say)
        args, env = _make_env(label)
        targets = ["bzImage", "modules"]
        say(f"building {' + '.join(targets)} (nice -n {nice} make -j{jobs}); log {log}")
        t_make = time.monotonic()
        _run_logged(["nice", "-n", str(nice), "make", f"-j{jobs}", *args, *targets], tree, log,
                    env=env, say=say, what="make")
        make_s = time.monotonic() - t_make
        release = (tree / "include/config/kernel.release").read_text().strip()
        out_dir = work / "kernel"
        modules = _collect(tree, out_dir)
        gcc = subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout
        build = {
            "recipe": RECIPE, "key": key, "name": name,
            "source_package": src.package, "source_version": src.deb_version,
            "source_sha256": src.sha256,
            "fragment": f"src/numalab/lab/kconfig/{fragment.name}",
            "fragment_sha256": hashlib.sha256(frag_text.encode()).hexdigest(),
            "patch": patch_path.name if patch_path else None,
            "patch_sha256": hashlib.sha256(patch_text.encode()).hexdigest() if patch_text else None,
            "base": f"copy of the unpatched tree {base_key}" if patch_path else "fresh",
            "make": f"nice -n {nice} make -j{jobs} {' '.join(args)} {' '.join(targets)}",
            "compiler": (gcc.splitlines() or ["?"])[0],
            "make_seconds": round(make_s, 1),
            "seconds": round(time.monotonic() - started, 1),
            "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        meta = {"release": release, "upstream": src.deb_version.split("-")[0],
                "image": f"bzImage of {src.package} {src.deb_version}",
                "packages": [{"name": src.package, "version": src.deb_version,
                              "sha256": src.sha256, "file": src.deb.name}],
                "modules": modules, "build": build}
        (out_dir / "kernel.json").write_text(json.dumps(meta, indent=1) + "\n")
        shutil.copyfile(log, out_dir / "build.log")
        os.rename(out_dir, final)
        if patch_path is None and not base_tree.exists():
            base_tree.parent.mkdir(parents=True, exist_ok=True)
            os.rename(tree, base_tree)
        _register(name, key)
        say(f"done in {time.monotonic() - started:.0f} s (make {make_s:.0f} s): {release} "
            f"-> {final} (built:{name})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(tree, ignore_errors=True)
        lock.close()
    got = _load_cached(final)
    assert got is not None
    return got
