"""Facts about a kernel's source that a chapter states, with file and line.

A chapter that says "unbind calls ``xa_erase()``, then ``synchronize_net()``,
then ``percpu_ref_kill()``" makes a claim about the kernel's code. The
facts behind such sentences live in a small committed record
(``numalab/data/kernel_facts/*.toml``): per fact a kind, a file, a scope
(function or struct), a name and the line it is on -- identifiers and line
numbers only, no source text. Two checks keep them honest:

* :func:`check_tree` re-derives every fact from a kernel tree (Debian's
  ``linux-source-VERSION``, unpacked) and reports each one that no longer
  holds; ``tests/test_devmem.py`` runs it when a tree is given
  (``NUMALAB_LINUX_7_2=/path/to/linux-source-7.2``);
* the chapter builds its sentences from the record with :func:`line_of` and
  :func:`in_order`, which raise when an ordering the prose states does not
  hold in the record, so the build fails.

Kinds of fact:

``member``  struct ``scope`` has a member ``name`` of type ``type``;
``call``    function ``scope`` calls ``name`` (the line of the first call);
``discarded_call``  likewise, and that call is a statement of its own: its
            result is ignored;
``phrase``  the words ``name`` appear (case-insensitive) on that line of the
            file, inside the comment block of ``scope`` (used for what a
            header *says*, such as "no implied RCU grace periods");
``no_comment``  without ``name``: function ``scope`` contains no comment and
            no comment ends on the line above it (line: its first line); with
            ``name``: no comment sits on, or ends right above, the first call
            of ``name`` in ``scope`` (line: the call's).

The parser is deliberately small: kernel style puts a function's opening
brace, and its closing one, in column 0, and a struct's closing ``};`` too.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import NumalabError

__all__ = ["Fact", "FactError", "load", "line_of", "in_order", "body", "find", "check_tree"]

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
        words = fact.name.lower().split()
        for n, line in enumerate(text.splitlines(), 1):
            if " ".join(line.lower().split()).find(" ".join(words)) >= 0:
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


if __name__ == "__main__":       # python -m numalab.kernel.facts TREE [RECORD]
    import sys

    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python -m numalab.kernel.facts TREE [RECORD]")
    problems = check_tree(sys.argv[1], load(sys.argv[2]) if len(sys.argv) == 3 else None)
    print("\n".join(problems) or "every fact holds")
    sys.exit(1 if problems else 0)
