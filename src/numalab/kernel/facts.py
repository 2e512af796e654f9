"""Facts about a kernel's source that a chapter states, with file and line.

A chapter that says "unbind calls ``xa_erase()``, then ``synchronize_net()``,
then ``percpu_ref_kill()``" makes a claim about the kernel's code. The
facts behind such sentences live in a small committed record
(``numalab/data/kernel_facts/*.toml``): per fact a kind, a file, a scope
(function or struct), a name and the line it is on -- identifiers and line
numbers only, no source text. Two checks keep them honest:

* :func:`check_tree` re-derives every fact from a kernel tree (Debian's
  ``linux-source-VERSION``, unpacked) and reports each one that no longer
  holds. :func:`find_tree` finds such a tree: ``$NUMALAB_LINUX_7_2``, else
  the record's files unpacked in the lab's cache (``CACHE/facts/``, made by
  ``python -m numalab.kernel.facts --unpack 7.2`` from the cached source
  package), else an unpatched build tree of the lab (``CACHE/trees/``).
  ``tests/test_devmem.py`` and chapter 5's build run the check whenever a
  tree is found, and fail when a fact no longer holds;
* the chapter builds its sentences from the record with :func:`line_of` and
  :func:`in_order`, which raise when an ordering the prose states does not
  hold in the record, so the build fails.

Kinds of fact:

``member``  struct ``scope`` has a member ``name`` of type ``type``;
``call``    function ``scope`` calls ``name`` (the line of the first call);
``discarded_call``  likewise, and that call is a statement of its own: its
            result is ignored;
``phrase``  the words ``name`` appear (case-insensitive) on that line of the
            file: the first such line in function ``scope`` or the comment
            block above it (from the previous closing brace in column 0);
            when ``scope`` is no function the file has, the first such line
            in the file (used for what a header *says*, such as "no implied
            RCU grace periods");
``no_comment``  without ``name``: function ``scope`` contains no comment and
            no comment ends on the line above it (line: its first line); with
            ``name``: no comment sits on, or ends right above, the first call
            of ``name`` in ``scope`` (line: the call's).

The parser is deliberately small: kernel style puts a function's opening
brace, and its closing one, in column 0, and a struct's closing ``};`` too.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import NumalabError

__all__ = ["Fact", "FactError", "load", "records", "line_of", "in_order", "body", "find",
           "check_tree", "has_files", "check_record", "find_tree", "unpack_tree"]

KINDS = ("member", "call", "discarded_call", "phrase", "no_comment")


class FactError(NumalabError):
    """A recorded fact is missing, or an ordering a chapter states does not hold."""


@dataclass(frozen=True)
class Fact:
    """One fact: ``id`` (the chapter's name for it), ``kind`` (see the module
    docstring), ``file`` (relative to the tree), ``scope`` (function or
    struct), ``name`` (callee, member, or words), ``line`` (1-based),
    ``type`` (members only)."""

    id: str
    kind: str
    file: str
    scope: str
    name: str
    line: int
    type: str = ""


def load(name: str = "devmem-7.2") -> dict:
    """The record ``numalab/data/kernel_facts/NAME.toml``: ``{"source": {...},
    "facts": {id: Fact}}`` (``source`` names the kernel and package)."""
    text = resources.files("numalab").joinpath("data", "kernel_facts", f"{name}.toml").read_text()
    raw = tomllib.loads(text)
    facts = {}
    for f in raw.get("fact", []):
        fact = Fact(**f)
        if fact.kind not in KINDS:
            raise FactError(f"{name}: fact {fact.id}: kind must be one of {KINDS}")
        if fact.id in facts:
            raise FactError(f"{name}: fact {fact.id} twice")
        facts[fact.id] = fact
    return {"source": raw.get("source", {}), "facts": facts}


def records() -> list[str]:
    """The names of every committed record (``numalab/data/kernel_facts/*.toml``).

    >>> "devmem-7.2" in records() and "placement-7.2" in records()
    True
    """
    folder = resources.files("numalab").joinpath("data", "kernel_facts")
    return sorted(p.name[:-len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def has_files(tree: str | Path | None, record: dict) -> bool:
    """Does ``tree`` hold every file ``record`` cites? (The lab cache's
    unpacked tree holds only the files of the records it was unpacked for.)"""
    return tree is not None and all((Path(tree) / f.file).is_file()
                                    for f in record["facts"].values())


def line_of(record: dict, fact_id: str) -> int:
    """The recorded line of ``fact_id`` (FactError when the record lacks it)."""
    try:
        return record["facts"][fact_id].line
    except KeyError:
        raise FactError(f"no recorded fact {fact_id!r}") from None


def in_order(record: dict, *fact_ids: str) -> list[int]:
    """The lines of ``fact_ids``, checked to be in one file and one scope and
    strictly increasing: the order a sentence states. FactError otherwise."""
    facts = [record["facts"].get(i) for i in fact_ids]
    if any(f is None for f in facts):
        raise FactError(f"no recorded fact {[i for i, f in zip(fact_ids, facts) if f is None]}")
    if len({(f.file, f.scope) for f in facts}) != 1:
        raise FactError(f"{fact_ids}: not one file and one function")
    lines = [f.line for f in facts]
    if lines != sorted(set(lines)) or len(set(lines)) != len(lines):
        raise FactError(f"{fact_ids} are not in this order in {facts[0].file}: lines {lines}")
    return lines


_COMMENT = re.compile(r"/\*|//")


def body(text: str, scope: str, kind: str = "function") -> tuple[int, list[str]] | None:
    """The first definition of function (or ``struct``) ``scope`` in C source
    ``text``: (1-based line of its first line, its lines up to the closing
    brace in column 0), or None. A prototype (a line ending in ``;`` before
    any ``{``) is skipped.

    >>> src = "int f(int);\\nstatic int\\nf(int x)\\n{\\n\\treturn g(x);\\n}\\n"
    >>> body(src, "f")
    (2, ['static int', 'f(int x)', '{', '\\treturn g(x);', '}'])
    """
    lines = text.splitlines()
    if kind == "struct":
        head = re.compile(rf"^struct {re.escape(scope)} \{{")
        end = re.compile(r"^\};")
    else:
        head = re.compile(rf"^(?:[A-Za-z_].*[\s*])?{re.escape(scope)}\(")
        end = re.compile(r"^\}")
    i = 0
    while i < len(lines):
        if head.match(lines[i]):
            start = i
            # a return type on the line before belongs to the definition
            if kind != "struct" and i > 0 and lines[i].startswith(scope) and lines[i - 1] \
                    and not lines[i - 1].rstrip().endswith((";", "}", "*/")) \
                    and not lines[i - 1].startswith("#"):
                start = i - 1
            j = i
            while j < len(lines) and not lines[j].startswith("{") and kind != "struct":
                if lines[j].rstrip().endswith(";"):
                    break
                j += 1
            if kind != "struct" and (j == len(lines) or not lines[j].startswith("{")):
                i = j + 1            # a prototype: keep looking
                continue
            k = j + 1
            while k < len(lines) and not end.match(lines[k]):
                k += 1
            return start + 1, lines[start:k + 1]
        i += 1
    return None


def find(text: str, fact: Fact) -> int | None:
    """Where ``fact`` holds in C source ``text`` (1-based line), or None."""
    if fact.kind == "phrase":
        words = " ".join(fact.name.lower().split())
        all_lines = text.splitlines()
        lo, hi = 1, len(all_lines)
        found = body(text, fact.scope, "function") if fact.scope else None
        if found is not None:           # the function and the comment block above it
            first, lines = found
            lo, hi = first, first + len(lines) - 1
            while lo > 1 and not all_lines[lo - 2].startswith("}"):
                lo -= 1
        for n in range(lo, hi + 1):
            if " ".join(all_lines[n - 1].lower().split()).find(words) >= 0:
                return n
        return None
    found = body(text, fact.scope, "struct" if fact.kind == "member" else "function")
    if found is None:
        return None
    first, lines = found
    all_lines = text.splitlines()
    above = all_lines[first - 2] if first >= 2 else ""
    if fact.kind == "no_comment" and not fact.name:
        return None if any(_COMMENT.search(x) for x in lines) or \
            above.rstrip().endswith("*/") else first
    if fact.kind == "member":
        pat = re.compile(rf"^\s*{re.escape(fact.type)}\s+\**{re.escape(fact.name)}\s*;")
    else:
        pat = re.compile(rf"\b{re.escape(fact.name)}\s*\(")
    for n, line in enumerate(lines):
        if pat.search(line):
            if fact.kind == "discarded_call" and not re.match(rf"\s*{re.escape(fact.name)}\s*\(",
                                                              line):
                return None
            if fact.kind == "no_comment" and (_COMMENT.search(line) or (
                    n and lines[n - 1].rstrip().endswith("*/"))):
                return None
            return first + n
    return None


def check_tree(tree: str | Path, record: dict | None = None) -> list[str]:
    """Every fact of ``record`` (default: :func:`load`) that does not hold in
    the kernel tree ``tree``, one line each ("id: file:line expected, found
    LINE|nothing"); empty when all hold."""
    record = record or load()
    tree = Path(tree)
    bad = []
    cache: dict[str, str] = {}
    for f in record["facts"].values():
        p = tree / f.file
        if f.file not in cache:
            try:
                cache[f.file] = p.read_text(errors="replace")
            except OSError as e:
                raise FactError(f"cannot read {p}: {e.strerror}") from None
        got = find(cache[f.file], f)
        if got != f.line:
            bad.append(f"{f.id}: {f.file}:{f.line} expected, found {got or 'nothing'}")
    return bad


def _is_version(tree: Path, version: str) -> bool:
    """True when ``tree/Makefile`` names kernel ``version`` ("7.2")."""
    major, minor = version.split(".")
    try:
        head = (tree / "Makefile").read_text(errors="replace")[:2000]
    except OSError:
        return False
    return re.search(rf"^VERSION = {major}$", head, re.M) is not None and \
        re.search(rf"^PATCHLEVEL = {minor}$", head, re.M) is not None


def check_record(name: str) -> Path | None:
    """Check record ``name`` against its kernel's tree when one holding all
    its files is found (:func:`find_tree`, :func:`has_files`): FactError
    listing every fact that no longer holds. Returns the tree checked, or
    None when there is none (a chapter's build then relies on the record,
    which tests/test_kernel_facts.py checks wherever a tree is found)."""
    record = load(name)
    tree = find_tree(record["source"]["kernel"])
    if not has_files(tree, record):
        return None
    bad = check_tree(tree, record)
    if bad:
        raise FactError(f"{name}: facts no longer hold in {tree}: " + "; ".join(bad))
    return tree


def find_tree(version: str = "7.2") -> Path | None:
    """An unpacked kernel tree of ``version`` to check the record against, or
    None: ``$NUMALAB_LINUX_<MAJOR>_<MINOR>`` (FactError when it names no such
    tree), else ``CACHE/facts/linux-source-VERSION`` (see :func:`unpack_tree`),
    else an unpatched lab build tree (``CACHE/trees/*``) of that version."""
    env = os.environ.get("NUMALAB_LINUX_" + version.replace(".", "_"))
    if env:
        if not _is_version(Path(env), version):
            raise FactError(f"NUMALAB_LINUX_{version.replace('.', '_')}={env}: "
                            f"not a Linux {version} tree")
        return Path(env)
    from ..lab import cache_root       # the lab's cache; imported late (no cycle)
    root = cache_root()
    candidates = [root / "facts" / f"linux-source-{version}"]
    if (root / "trees").is_dir():
        candidates += sorted(p for p in (root / "trees").iterdir() if p.is_dir())
    return next((c for c in candidates if _is_version(c, version)), None)


def unpack_tree(version: str = "7.2", record: dict | None = None) -> Path:
    """Unpack the files ``record`` cites (default: every record's, see
    :func:`records`) and the Makefile from the lab's cached
    ``linux-source-VERSION`` package into ``CACHE/facts/linux-source-VERSION``;
    return that folder. About a minute (the inner tarball is decompressed
    once). FactError when no package is cached."""
    from ..lab import cache_root
    from ..lab.build import cached_sources
    if record is None:
        record = {"facts": {f"{name}:{i}": f for name in records()
                            for i, f in load(name)["facts"].items()}}
    deb = cached_sources().get(version)
    if deb is None:
        raise FactError(f"no linux-source-{version} package in the lab's cache "
                        "(numalab lab build-kernel fetches it)")
    dest = cache_root() / "facts"
    dest.mkdir(parents=True, exist_ok=True)
    top = f"linux-source-{version}"
    files = sorted({f"{top}/{f.file}" for f in record["facts"].values()} | {f"{top}/Makefile"})
    inner = f"./usr/src/{top}.tar.xz"
    dpkg = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)], stdout=subprocess.PIPE)
    tar1 = subprocess.Popen(["tar", "-xO", inner], stdin=dpkg.stdout, stdout=subprocess.PIPE)
    dpkg.stdout.close()
    tar2 = subprocess.run(["nice", "-n", "10", "tar", "-xJ", "-C", str(dest), *files],
                          stdin=tar1.stdout, capture_output=True)
    tar1.stdout.close()
    if tar1.wait() != 0 or dpkg.wait() != 0 or tar2.returncode != 0:
        raise FactError(f"{deb.name}: cannot unpack {inner} "
                        f"({tar2.stderr.decode(errors='replace').strip()[-200:]})")
    return dest / top


if __name__ == "__main__":       # python -m numalab.kernel.facts TREE [RECORD] | --unpack VERSION
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--unpack":
        print(unpack_tree(sys.argv[2]))
        sys.exit(0)
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m numalab.kernel.facts TREE [RECORD] | --unpack VERSION")
    problems = check_tree(sys.argv[1], load(sys.argv[2]) if len(sys.argv) == 3 else None)
    print("\n".join(problems) or "every fact holds")
    sys.exit(1 if problems else 0)
