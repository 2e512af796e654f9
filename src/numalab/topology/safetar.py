"""Read a tar archive into memory, refusing anything that could escape it.

A sysfs dump is a tarball produced by ``hwloc-gather-topology`` (or by
``numalab collect``) on someone else's machine, so it is untrusted input.
:func:`read_archive` never extracts: it reads the members into a
:class:`MemTree` (regular files as bytes, directories, symlinks kept as
links) and answers path look-ups from memory, following symlinks only
inside the archive.

Refused with :class:`~numalab.errors.UnsafeArchiveError` naming the member,
whatever the member is and whether or not the reader needs it:

* absolute member names and names with a ``..`` component;
* character/block devices and FIFOs;
* symlinks that are absolute or whose target, taken relative to the link's
  folder, leaves the archive root; hard links whose target does;
* a member (or, in total, all members) larger than the size caps: the sizes
  come from the headers, so a 2 GiB (possibly sparse) member is refused
  before a byte of it is decompressed.

A truncated or corrupt archive gives :class:`~numalab.errors.TopologyError`.

Reading an archive is the slow part of loading a dump (Python's tar header
parsing: about 10,000 members in a lab dump), and a chapter reads the same
archive several times. An archive read whole (no ``want``) that passed every
check is therefore kept, keyed on its content's sha256 and the caps: in
memory for the process, and on disk when the environment
variable ``NUMALAB_ARCHIVE_CACHE`` names a folder (``numalab build`` sets
it to ``.numalab-cache/archives``; the key adds this module's source). A
refused archive is never cached, so it is refused again every time.

hwloc dumps legitimately contain relative symlinks inside the dump (for
example ``sys/bus/cpu/devices/cpu0 -> ../../../devices/system/cpu/cpu0``);
they are kept and followed by :meth:`MemTree.resolve`.
"""

from __future__ import annotations

import bz2
import hashlib
import io
import lzma
import os
import pickle
import posixpath
import tarfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import TopologyError, UnsafeArchiveError

__all__ = ["MemTree", "read_archive", "MAX_MEMBER_BYTES", "MAX_TOTAL_BYTES",
           "MAX_STREAM_BYTES", "CACHE_ENV", "clear_memo"]

MAX_MEMBER_BYTES = 64 << 20
MAX_TOTAL_BYTES = 512 << 20
# The tar stream itself: member bytes plus 512-byte headers and padding
# (a dump of 10,000 two-byte files is a 10 MB stream).
MAX_STREAM_BYTES = MAX_TOTAL_BYTES + (64 << 20)
_MAX_LINK_HOPS = 40          # the kernel's MAXSYMLINKS
CACHE_ENV = "NUMALAB_ARCHIVE_CACHE"
_MEMO: dict[tuple, "MemTree"] = {}
_MEMO_MAX = 128


def _clean_name(name: str, archive: str) -> str:
    """A member name as a normalized relative path, or UnsafeArchiveError.

    >>> _clean_name("./a/b/", "x.tar")
    'a/b'
    """
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchiveError(f"{archive}:{name}", "absolute member path refused")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchiveError(f"{archive}:{name}", "member path with '..' refused")
    return "/".join(parts)


def _inside(base_dir: str, target: str) -> str | None:
    """Where a relative link target lands, relative to the root; None when
    it leaves the root.

    >>> _inside("a/b", "../c")
    'a/c'
    >>> _inside("a", "../../etc") is None
    True
    """
    parts: list[str] = [p for p in base_dir.split("/") if p]
    for p in target.split("/"):
        if p in ("", "."):
            continue
        if p == "..":
            if not parts:
                return None
            parts.pop()
        else:
            parts.append(p)
    return "/".join(parts)


@dataclass
class MemTree:
    """An archive's content held in memory.

    ``files`` maps a relative path to its bytes, ``links`` a symlink's path
    to its target (as stored, relative to the link's folder), ``dirs`` holds
    every folder (explicit or implied by a member's path; ``""`` is the root).
    """

    name: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {""})
    children: dict[str, set[str]] = field(default_factory=dict)

    def _add_parents(self, path: str) -> None:
        while path:
            parent, _, leaf = path.rpartition("/")
            self.children.setdefault(parent, set()).add(leaf)
            if parent in self.dirs:
                return
            self.dirs.add(parent)
            path = parent

    def add_dir(self, path: str) -> None:
        if path not in self.dirs:
            self.dirs.add(path)
            self._add_parents(path)

    def add_file(self, path: str, data: bytes) -> None:
        self.files[path] = data
        self._add_parents(path)

    def add_link(self, path: str, target: str) -> None:
        self.links[path] = target
        self._add_parents(path)

    def resolve(self, path: str) -> str | None:
        """The link-free path that ``path`` names, or None when it names
        nothing (or a link loop / a link leaving the root).

        Links are followed the POSIX way: ``..`` after a link goes to the
        parent of the link's target.
        """
        todo = [p for p in path.split("/") if p not in ("", ".")]
        todo.reverse()
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop()
            if part == "..":
                if not done:
                    return None
                done.pop()
                continue
            cur = "/".join(done + [part])
            target = self.links.get(cur)
            if target is None:
                done.append(part)
                continue
            hops += 1
            if hops > _MAX_LINK_HOPS or target.startswith("/"):
                return None
            todo.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
        out = "/".join(done)
        if out in self.files or out in self.dirs:
            return out
        return None

    def read(self, path: str) -> bytes | None:
        real = self.resolve(path)
        return self.files.get(real) if real is not None else None

    def listdir(self, path: str) -> list[str]:
        real = self.resolve(path)
        if real is None or real not in self.dirs:
            return []
        return sorted(self.children.get(real, ()))

    def is_dir(self, path: str) -> bool:
        real = self.resolve(path)
        return real is not None and real in self.dirs

    def exists(self, path: str) -> bool:
        return self.resolve(path) is not None

    def readlink(self, path: str) -> str | None:
        """The target of the link ``path`` (its parents may be links)."""
        parent, _, leaf = path.strip("/").rpartition("/")
        real_parent = self.resolve(parent) if parent else ""
        if real_parent is None:
            return None
        return self.links.get(f"{real_parent}/{leaf}" if real_parent else leaf)


def _check_member(m: tarfile.TarInfo, name: str, archive: str) -> None:
    """Refuse device/fifo members and links that leave the root."""
    where = f"{archive}:{m.name}"
    if m.ischr() or m.isblk():
        raise UnsafeArchiveError(where, "device file member refused")
    if m.isfifo():
        raise UnsafeArchiveError(where, "FIFO member refused")
    if m.issym():
        if m.linkname.startswith("/"):
            raise UnsafeArchiveError(where, f"symlink to absolute path {m.linkname!r} refused")
        if _inside(posixpath.dirname(name), m.linkname) is None:
            raise UnsafeArchiveError(where, f"symlink target {m.linkname!r} leaves the archive")
    elif m.islnk():
        if m.linkname.startswith("/") or _inside("", m.linkname) is None:
            raise UnsafeArchiveError(where, f"hard link target {m.linkname!r} leaves the archive")
    elif not (m.isreg() or m.isdir()):
        raise UnsafeArchiveError(where, f"member of unsupported type {m.type!r} refused")


_MAGIC = ((b"BZh", "bz2"), (b"\x1f\x8b", "gzip"), (b"\xfd7zXZ\x00", "xz"))


def _decompressor(kind: str):
    if kind == "bz2":
        return bz2.BZ2Decompressor()
    if kind == "gzip":
        return zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    return lzma.LZMADecompressor()


def _bounded_bytes(archive: str, limit: int) -> bytes:
    """The archive's tar stream, decompressed in memory, at most ``limit`` bytes.

    Decompressing ourselves (instead of tarfile's stream mode, whose buffer
    handling is quadratic in the member count) lets us stop at the cap:
    a compression bomb costs at most ``limit`` bytes of work.
    Concatenated streams (pbzip2, multi-member gzip) are followed.
    """
    with open(archive, "rb") as f:
        # compressed data never usefully exceeds what it inflates to
        raw = f.read(limit + 1)
    if len(raw) > limit:
        raise UnsafeArchiveError(archive, f"archive file is over the {limit >> 20} MiB cap")
    kind = next((k for magic, k in _MAGIC if raw.startswith(magic)), None)
    if kind is None:
        return raw
    out = bytearray()
    data = raw
    while data:
        d = _decompressor(kind)
        pending = data
        while True:
            room = limit + 1 - len(out)
            if kind == "gzip":
                out += d.decompress(pending, room)
                pending = d.unconsumed_tail
            else:
                out += d.decompress(pending, max_length=room)
                pending = b""
            if len(out) > limit:
                raise UnsafeArchiveError(archive, f"archive decompresses to over the "
                                                  f"{limit >> 20} MiB cap; refused")
            if d.eof:
                break
            more = pending if kind == "gzip" else (not d.needs_input)
            if not more:
                raise EOFError("compressed stream ended before its end marker")
        data = d.unused_data
        # zero padding after the last stream is allowed (tar blocking)
        if data and not data.strip(b"\0"):
            break
    return bytes(out)


def read_archive(path: str | Path, *, max_member: int = MAX_MEMBER_BYTES,
                 max_total: int = MAX_TOTAL_BYTES, max_stream: int = MAX_STREAM_BYTES,
                 want=None) -> MemTree:
    """Read a (possibly compressed) tar archive into a :class:`MemTree`.

    Inputs: the archive path; size caps in bytes (per member, all members,
    the decompressed tar stream); ``want``, an optional
    predicate on a member's clean name: regular files for which it is false
    are skipped (their header is still checked and counted in the total).
    Output: the MemTree. Nothing is extracted (see the module doc for what
    is cached).

    Example: ``read_archive("x.tar.bz2").read("x/sys/devices/system/cpu/online")``.
    """
    if want is not None:
        return _read_archive(path, max_member, max_total, max_stream, want)
    caps = (max_member, max_total, max_stream)
    digest = _content_digest(path, max_stream)
    key = None if digest is None else (digest, caps)
    name = Path(str(path)).name
    if key is not None and key in _MEMO:
        tree = _MEMO[key]
        # the same content under another name: the same tree, its own name
        return tree if tree.name == name else replace(tree, name=name)
    tree = _disk_cached(path, key)
    if tree is None:
        tree = _read_archive(path, max_member, max_total, max_stream, None)
        _disk_store(key, tree)
    if key is not None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[key] = tree
    return tree


def clear_memo() -> None:
    """Forget the archives kept in memory (the tests' way to time a cold read)."""
    _MEMO.clear()


def _content_digest(path, limit: int) -> str | None:
    """sha256 of the archive file (None when it cannot be read or is over the
    cap: then the reader itself says why). Keyed on content, not on the
    file's name and time, so an archive rewritten in place is never mistaken
    for the old one."""
    try:
        if os.path.getsize(path) > limit:
            return None
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


def _source_digest() -> str:
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def _disk_path(key) -> Path | None:
    folder = os.environ.get(CACHE_ENV)
    if not folder or key is None:
        return None
    h = hashlib.sha256(repr(key).encode())
    h.update(_source_digest().encode())
    return Path(folder) / f"{h.hexdigest()[:32]}.pickle"


def _disk_cached(path, key) -> "MemTree | None":
    cache = _disk_path(key)
    if cache is None or not cache.is_file():
        return None
    try:
        with cache.open("rb") as f:
            tree = pickle.load(f)
    except Exception:       # a damaged entry is only a miss
        return None
    if not isinstance(tree, MemTree):
        return None
    tree.name = Path(str(path)).name
    return tree


def _disk_store(key, tree: "MemTree") -> None:
    cache = _disk_path(key)
    if cache is None:
        return
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        with tmp.open("wb") as f:
            pickle.dump(tree, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, cache)
    except OSError:         # a cache that cannot be written is only slower
        pass


def _read_archive(path, max_member: int, max_total: int, max_stream: int, want) -> MemTree:
    archive = str(path)
    tree = MemTree(name=Path(archive).name)
    total = 0
    pending_hard: list[tuple[str, str]] = []
    try:
        buf = _bounded_bytes(archive, max_stream)
        view = memoryview(buf)
        with tarfile.open(fileobj=io.BytesIO(buf), mode="r:") as tf:
            for m in tf:
                name = _clean_name(m.name, archive)
                _check_member(m, name, archive)
                if m.size > max_member:
                    raise UnsafeArchiveError(
                        f"{archive}:{m.name}",
                        f"member of {m.size} bytes is over the {max_member >> 20} MiB "
                        f"per-member cap; refused without reading it")
                total += m.size
                if total > max_total:
                    raise UnsafeArchiveError(
                        f"{archive}:{m.name}",
                        f"members add up to over the {max_total >> 20} MiB total cap; "
                        f"refused without reading further")
                if not name:
                    continue
                if m.isdir():
                    tree.add_dir(name)
                elif m.issym():
                    tree.add_link(name, m.linkname)
                elif m.islnk():
                    pending_hard.append((name, _clean_name(m.linkname, archive)))
                elif want is None or want(name):
                    if m.sparse is None:
                        data = bytes(view[m.offset_data:m.offset_data + m.size])
                    else:
                        f = tf.extractfile(m)
                        data = f.read() if f is not None else b""
                    if len(data) != m.size:
                        raise TopologyError(f"{archive}:{m.name}", "member is truncated")
                    tree.add_file(name, data)
                else:
                    tree._add_parents(name)
            # tarfile stops quietly at a bad or cut header after the first
            # member; every tar writer ends with zero blocks, so anything
            # else after the last member means members were lost.
            rest = view[tf.offset:]
            if not rest or bytes(rest).strip(b"\0"):
                raise TopologyError(archive, f"truncated or corrupt archive (no valid header "
                                             f"or end-of-archive marker at byte {tf.offset})")
    except TopologyError:
        raise
    # bz2 and gzip report corrupt data as OSError/EOFError, zlib as zlib.error
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError,
            ValueError) as e:
        raise TopologyError(archive, f"truncated or corrupt archive ({type(e).__name__}: {e})") \
            from None
    for name, target in pending_hard:
        data = tree.files.get(target)
        if data is None:
            # a link to a skipped member, or to a folder: keep the name only
            tree._add_parents(name)
            continue
        tree.add_file(name, data)
    return tree
