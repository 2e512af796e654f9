"""What the lab's files must hold: a tiny declarative schema checker, and the
schemas of every file the lab reads.

A schema is a tree of small checkers (:class:`Str`, :class:`Int`,
:class:`Num`, :class:`Bool`, :class:`Const`, :class:`Enum`, :class:`Cpulist`,
:class:`List`, :class:`Obj`, :class:`Maybe`); :func:`check` walks a value
against one and raises :class:`LabFileError`, one line naming the file, the
key (``kernel.packages[0].sha256``) and what was expected, for the first
value that does not fit. Objects may carry keys the schema does not name
(a later numalab may add some); the keys it names are required unless
listed as optional. Ranges are the lab's: at most :data:`MAX_VCPUS` CPUs,
:data:`MAX_NODES` nodes (QEMU's ``MAX_NODES``), :data:`MAX_QUEUES` I/O
queues per controller, distances 10 on the diagonal and 11-254 elsewhere
(QEMU's ``NUMA_DISTANCE_MAX``).

The schemas:

* :data:`MANIFEST` -- ``NAME/numalab/lab/manifest.json`` of a lab dump
  (format ``numalab-lab/1``, written by :func:`numalab.lab.run.run_lab`),
  with the cross-field rules of :func:`check_manifest` (CPU count, node
  CPU lists, distances, devices on existing nodes, ``--nvme`` options);
* :data:`KERNEL_JSON` -- ``kernel.json`` of a kernel in the cache;
* :data:`BUILT_NAME` -- ``built/NAME.json`` (a build's name -> its key);
* :data:`ARM64_RUNS` -- ``data/lab/arm64/runs.toml``.

:func:`load_json` parses JSON strictly (no NaN, no duplicate keys, bounded
nesting) before checking. The kernel's text files of a dump (ftrace output,
``/proc/interrupts``, affinity lists) are checked where they are parsed, in
:mod:`numalab.lab.dump`; the arm64 consoles in :mod:`numalab.lab.arm64`.

>>> check({"kernel": 5}, Obj({"kernel": Obj({"release": Str()})}), "m.json")
Traceback (most recent call last):
numalab.lab.schema.LabFileError: m.json: kernel: expected an object, not 5
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..cpumask import CpumaskSyntaxError, format_cpulist, parse_cpulist
from ..errors import one_line
from . import LabError

__all__ = ["LabFileError", "Mismatch", "Str", "Int", "Num", "Bool", "Const", "Enum", "Cpulist",
           "List", "Obj", "Maybe", "check", "load_json", "check_manifest", "check_distances",
           "cover_once",
           "MANIFEST", "KERNEL_JSON", "BUILT_NAME", "ARM64_RUNS", "MAX_VCPUS", "MAX_NODES",
           "MAX_QUEUES", "MAX_DISTANCE", "RELEASE", "show"]

MAX_VCPUS = 128          # the lab's guests (see numalab.lab.spec)
MAX_NODES = 128          # QEMU's MAX_NODES (include/sysemu/numa.h)
MAX_QUEUES = 128         # I/O queue pairs per NVMe controller (numalab.lab.spec)
MAX_DISTANCE = 254       # QEMU's NUMA_DISTANCE_MAX; 255 means unreachable
MAX_NODE_MIB = 1 << 20   # 1 TiB per node: a bound on the numbers, not a QEMU limit
MAX_JSON_BYTES = 1 << 20
MAX_DEPTH = 32


class LabFileError(LabError):
    """A lab file that does not hold what the lab expects.

    ``file`` names the file (``ARCHIVE:MEMBER`` inside a dump), ``key``
    the value at fault (``topology.nodes[1].cpus``, ``line 7``; may be
    empty), ``problem`` what was expected and what was found; ``str()`` is
    the one line ``FILE: KEY: PROBLEM`` (control characters escaped).
    """

    def __init__(self, file: str, key: str, problem: str):
        self.file, self.key, self.problem = str(file), key, problem
        super().__init__(one_line(f"{self.file}: {key}: {problem}" if key
                                  else f"{self.file}: {problem}"))


class Mismatch(Exception):
    """Raised inside :func:`check` (key, problem); turned into LabFileError."""

    def __init__(self, key: str, problem: str):
        super().__init__(key, problem)
        self.key, self.problem = key, problem


def show(value: Any, limit: int = 40) -> str:
    """A short JSON-like picture of ``value`` for an error message.

    >>> show("a" * 50)
    '"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa..."'
    >>> show(None), show(True), show([1, 2])
    ('null', 'true', '[1, 2]')
    """
    if isinstance(value, str):
        text = json.dumps(value if len(value) <= limit else value[:limit - 1], ensure_ascii=False)
        return text if len(value) <= limit else text[:-1] + '..."'
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _join(key: str, sub: str | int) -> str:
    if isinstance(sub, int):
        return f"{key}[{sub}]"
    return f"{key}.{sub}" if key else sub


class Spec:
    """A checker: :meth:`check` returns the value or raises :class:`Mismatch`."""

    expected = "a value"

    def check(self, value: Any, key: str) -> Any:
        raise NotImplementedError

    def fail(self, value: Any, key: str, why: str = ""):
        raise Mismatch(key, f"expected {self.expected}, not {show(value)}{why}")


@dataclass(frozen=True)
class Str(Spec):
    """A string: at most ``max_len`` characters, fully matching ``pattern``
    when given; ``what`` says what it is in messages."""

    pattern: str | None = None
    what: str = "a string"
    max_len: int = 4096
    min_len: int = 0

    @property
    def expected(self) -> str:
        return self.what

    def check(self, value, key):
        if not isinstance(value, str) or not self.min_len <= len(value) <= self.max_len:
            self.fail(value, key)
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            self.fail(value, key)
        return value


def _bound(x) -> str:
    return str(x) if isinstance(x, int) else f"{x:g}"


@dataclass(frozen=True)
class Int(Spec):
    """An integer (never a boolean, never 1.0) in ``[lo, hi]``."""

    lo: int
    hi: int

    @property
    def expected(self) -> str:
        return f"an integer in [{self.lo}, {self.hi}]"

    def check(self, value, key):
        if isinstance(value, bool) or not isinstance(value, int) or not self.lo <= value <= self.hi:
            self.fail(value, key)
        return value


@dataclass(frozen=True)
class Num(Spec):
    """A finite number (int or float, never a boolean) in ``[lo, hi]``."""

    lo: float
    hi: float

    @property
    def expected(self) -> str:
        return f"a finite number in [{_bound(self.lo)}, {_bound(self.hi)}]"

    def check(self, value, key):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(value, key)
        try:
            ok = math.isfinite(value) and self.lo <= value <= self.hi
        except OverflowError:
            ok = False
        if not ok:
            self.fail(value, key)
        return value


@dataclass(frozen=True)
class Bool(Spec):
    expected = "true or false"

    def check(self, value, key):
        if not isinstance(value, bool):
            self.fail(value, key)
        return value


@dataclass(frozen=True)
class Const(Spec):
    value: Any

    @property
    def expected(self) -> str:
        return show(self.value)

    def check(self, value, key):
        if type(value) is not type(self.value) or value != self.value:
            self.fail(value, key)
        return value


@dataclass(frozen=True)
class Enum(Spec):
    values: tuple

    @property
    def expected(self) -> str:
        return "one of " + ", ".join(show(v) for v in self.values)

    def check(self, value, key):
        if not any(type(value) is type(v) and value == v for v in self.values):
            self.fail(value, key)
        return value


@dataclass(frozen=True)
class Cpulist(Spec):
    """A kernel cpulist string (``"0-3,8"``; empty allowed when
    ``allow_empty``) naming only CPUs below ``max_cpu``."""

    max_cpu: int = MAX_VCPUS
    allow_empty: bool = True

    @property
    def expected(self) -> str:
        return f"a CPU list of CPUs 0-{self.max_cpu - 1}"

    def check(self, value, key):
        if not isinstance(value, str) or len(value) > 4096:
            self.fail(value, key)
        try:
            mask = parse_cpulist(value.strip())
        except CpumaskSyntaxError:
            self.fail(value, key)
        if mask >> self.max_cpu or (not mask and not self.allow_empty):
            self.fail(value, key)
        return value


@dataclass(frozen=True)
class List(Spec):
    """A list of ``item`` with ``min``..``max`` entries."""

    item: Spec
    min: int = 0
    max: int = 4096

    @property
    def expected(self) -> str:
        n = f"{self.min} to {self.max}" if self.min else f"at most {self.max}"
        return f"a list of {n} entries ({self.item.expected})"

    def check(self, value, key):
        if not isinstance(value, list):
            raise Mismatch(key, f"expected a list ({self.item.expected}), not {show(value)}")
        if not self.min <= len(value) <= self.max:
            raise Mismatch(key, f"expected {self.min} to {self.max} entries, not {len(value)}")
        for i, x in enumerate(value):
            self.item.check(x, _join(key, i))
        return value


@dataclass(frozen=True)
class Obj(Spec):
    """An object with the keys of ``fields`` (required) and ``optional``;
    other keys are allowed and not read."""

    fields: dict = field(default_factory=dict)
    optional: dict = field(default_factory=dict)
    expected = "an object"

    def check(self, value, key):
        if not isinstance(value, dict):
            self.fail(value, key)
        # the keys that are there first: {"kernel": 5} is about kernel, not a missing key
        for name, spec in (*self.fields.items(), *self.optional.items()):
            if name in value:
                spec.check(value[name], _join(key, name))
        for name, spec in self.fields.items():
            if name not in value:
                raise Mismatch(_join(key, name), f"missing (expected {spec.expected})")
        return value


@dataclass(frozen=True)
class Maybe(Spec):
    """``null`` or ``spec``."""

    spec: Spec

    @property
    def expected(self) -> str:
        return f"null or {self.spec.expected}"

    def check(self, value, key):
        if value is None:
            return None
        try:
            return self.spec.check(value, key)
        except Mismatch as e:
            if e.key == key:          # the value itself, not a part of it: say null is fine too
                raise Mismatch(key, f"expected {self.expected}, not {show(value)}") from None
            raise


def check(value: Any, spec: Spec, file: str) -> Any:
    """``value`` if it fits ``spec``, else :class:`LabFileError` naming ``file``."""
    try:
        return spec.check(value, "")
    except Mismatch as e:
        raise LabFileError(file, e.key, e.problem) from None


class _JsonProblem(ValueError):
    pass


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise _JsonProblem(f"duplicate key {show(k)}")
        out[k] = v
    return out


def _no_constant(name):
    raise _JsonProblem(f"{name} is not JSON")


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a parsed JSON value, stopping at ``limit + 1``."""
    stack, deepest = [(value, 1)], 0
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def load_json(raw: bytes | str, file: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """Parse ``raw`` as strict JSON: UTF-8, at most ``max_bytes``, no
    ``NaN``/``Infinity``, no duplicate keys, at most :data:`MAX_DEPTH`
    levels. Raises :class:`LabFileError` naming ``file``.

    >>> load_json(b'{"a": [1, 2]}', "x.json")
    {'a': [1, 2]}
    >>> load_json(b'{"a": 1, "a": 2}', "x.json")
    Traceback (most recent call last):
    numalab.lab.schema.LabFileError: x.json: not valid JSON: duplicate key "a"
    """
    if len(raw) > max_bytes:
        raise LabFileError(file, "", f"{len(raw)} bytes; a lab file is at most {max_bytes}")
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
    except UnicodeDecodeError as e:
        raise LabFileError(file, "", f"not UTF-8 text (byte {e.start})") from None
    if text.count("[") + text.count("{") > 100_000:
        raise LabFileError(file, "", "not valid JSON: too many lists and objects")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except _JsonProblem as e:
        raise LabFileError(file, "", f"not valid JSON: {e}") from None
    except json.JSONDecodeError as e:
        raise LabFileError(file, "", f"not valid JSON (line {e.lineno} column {e.colno}: "
                                     f"{e.msg})") from None
    except RecursionError:
        raise LabFileError(file, "", f"not valid JSON: nested more than {MAX_DEPTH} "
                                     "levels deep") from None
    except ValueError:                # an integer of more than 4300 digits
        raise LabFileError(file, "", "not valid JSON: a number too long to read") from None
    if _depth(value, MAX_DEPTH) > MAX_DEPTH:
        raise LabFileError(file, "", f"not valid JSON: nested more than {MAX_DEPTH} levels deep")
    return value


# -- the lab's vocabulary -------------------------------------------------------------------

#: A kernel release (``uname -r``): MAJOR.MINOR[.PATCH] then an optional suffix.
RELEASE = r"(?:[2-9]|[1-9][0-9])\.[0-9]{1,3}(?:\.[0-9]{1,6})?(?:[-+~][A-Za-z0-9.+~_-]{0,120})?"
KERNEL_RELEASE = Str(RELEASE, "a kernel release such as 7.2.13+deb14-amd64", max_len=128)
UPSTREAM = Str(r"(?:[2-9]|[1-9][0-9])\.[0-9]{1,3}(?:\.[0-9]{1,6})?",
               "an upstream version such as 7.2.13", max_len=16)
SHA256 = Str(r"[0-9a-f]{64}", "a sha256 (64 hex digits)", max_len=64)
UTC = Str(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z",
          "a UTC time such as 2026-11-22T22:38:50Z", max_len=20)
NAME = Str(r"[A-Za-z0-9_.+~:-]{1,128}", "a name (letters, digits, . _ + ~ : -)", max_len=128)
FILE_NAME = Str(r"[A-Za-z0-9_+-][A-Za-z0-9._+~-]{0,127}", "a file name (no folder)", max_len=128)
FUNCTION = Str(r"[A-Za-z0-9_.]{1,128}", "a kernel function name", max_len=128)
LINE = Str(r"[^\n\r]*", "one line of text", max_len=65536)
SECONDS = Num(0, 1e7)
PCI_ADDRESS = Str(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]",
                  "a PCI address such as 0000:11:01.0", max_len=12)
NVME_OPTION = Str(r"[0-9]{1,2}@[0-9]{1,3}:[0-9]{1,3}", "N@NODE:QUEUES such as 3@0:62",
                  max_len=12)

PACKAGE = Obj({"name": NAME, "version": NAME, "sha256": SHA256},
              optional={"size": Int(0, 1 << 40), "file": FILE_NAME})

BUILD = Obj({"recipe": Str(r"numalab-lab-build/[0-9]+", "numalab-lab-build/N", max_len=32),
             "name": Str(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,63}", "a build name", max_len=64),
             "source_package": Str(r"linux-source-[0-9]{1,2}\.[0-9]{1,3}",
                                   "linux-source-MAJOR.MINOR", max_len=32),
             "source_version": NAME, "fragment_sha256": SHA256,
             "patch": Maybe(Str(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,127}\.(?:patch|diff)",
                                "a patch file name (NAME.patch)", max_len=134)),
             "patch_sha256": Maybe(SHA256)},
            optional={"key": Str(r"[0-9a-f]{16}", "a build key (16 hex digits)", max_len=16),
                      "source_sha256": SHA256, "fragment": LINE, "base": LINE, "make": LINE,
                      "compiler": LINE, "make_seconds": SECONDS, "seconds": SECONDS,
                      "built_utc": UTC})

KERNEL = Obj({"release": KERNEL_RELEASE, "upstream": UPSTREAM,
              "packages": List(PACKAGE, 1, 16),
              "modules_loaded": List(Str(r"[A-Za-z0-9_-]{1,64}", "a module name", max_len=64),
                                     0, 64)},
             optional={"build": BUILD})

NODE = Obj({"node": Int(0, MAX_NODES - 1), "cpus": Cpulist(MAX_VCPUS),
            "memory_mib": Int(0, MAX_NODE_MIB)})

TOPOLOGY = Obj({"description": Str(max_len=1024), "sockets": Int(1, MAX_VCPUS),
                "dies": Int(1, MAX_VCPUS), "cores_per_die": Int(1, MAX_VCPUS),
                "threads_per_core": Int(1, MAX_VCPUS), "cpus": Int(1, MAX_VCPUS),
                "nodes": List(NODE, 1, MAX_NODES),
                "distances": Maybe(List(List(Int(0, 255), 1, MAX_NODES), 1, MAX_NODES))})

DEVICE = Obj({"id": Str(r"nvme[0-9]{1,3}", "nvmeN", max_len=7), "node": Int(0, MAX_NODES - 1),
              "io_queues": Int(1, MAX_QUEUES), "pxb_bus_nr": Int(1, 254), "slot": Int(1, 31),
              "pci_address": PCI_ADDRESS})

ATTEMPT = Obj({"accel": Enum(("tcg", "kvm")), "seconds": SECONDS,
               "result": Str(r"[a-z-]{1,16}", "ok, oops, fail, timeout, nodump, qemu or "
                             "kvm-timeout", max_len=16),
               "message": Str(max_len=4096)})

MANIFEST = Obj({
    "format": Const("numalab-lab/1"),
    "numalab_version": Str(r"[0-9A-Za-z.+-]{1,32}", "a version such as 0.1.0", max_len=32),
    "created_utc": UTC,
    "kernel": KERNEL,
    "qemu": Obj({"version": LINE, "accel": Enum(("tcg", "kvm")),
                 "command": List(Str(max_len=65536), 1, 4096), "append": LINE, "boot": LINE}),
    "topology": TOPOLOGY,
    "devices": List(DEVICE, 0, 256),
    "nvme_options": List(NVME_OPTION, 0, 256),
    "trace": List(FUNCTION, 0, 64),
    "io": Maybe(Obj({"reads_per_cpu_per_namespace": Int(1, 1 << 20),
                     "block_bytes": Int(512, 1 << 20)},
                    optional={"method": LINE, "guest": LINE})),
    "attempts": List(ATTEMPT, 1, 16),
    "seconds": Obj({"fetch": SECONDS, "boot_and_collect": SECONDS}),
}, optional={
    "numalab_command": Str(r"numalab lab run [^\n\r]+", "the command line "
                           "'numalab lab run ...'", max_len=65536),
    "boot_trace": List(FUNCTION, 0, 64),
    "busybox": LINE,
})


def check_distances(matrix: Any, nnodes: int, where: str = "--distances") -> list[list[int]]:
    """A NUMA distance matrix as the lab can give QEMU: ``nnodes`` rows of
    ``nnodes`` integers, 10 on the diagonal, 11 to :data:`MAX_DISTANCE`
    elsewhere (ACPI's ``slit_valid()`` wants more than 10 off the diagonal;
    QEMU refuses more than 254), symmetric. Input: a list of rows, or text
    rows separated by ``;`` with ``,`` or spaces between values. Output:
    the matrix as lists of ints. Raises LabError (``where: problem``).

    >>> check_distances("10,21;21,10", 2)
    [[10, 21], [21, 10]]
    >>> check_distances("10,21;22,10", 2)
    Traceback (most recent call last):
    numalab.lab.LabError: --distances: node0->node1 is 21 but node1->node0 is 22: not symmetric
    """
    def bad(problem: str):
        raise LabError(one_line(f"{where}: {problem}"))
    if isinstance(matrix, str):
        if len(matrix) > 1 << 16:
            bad("too long")
        matrix = [r.replace(",", " ").split() for r in re.split(r"[;\n]", matrix) if r.strip()]
    if not isinstance(matrix, (list, tuple)):
        bad(f"expected a list of rows, not {show(matrix)}")
    rows: list[list[int]] = []
    for i, row in enumerate(matrix):
        if not isinstance(row, (list, tuple)):
            bad(f"row {i} is {show(row)}, not a list of distances")
        vals = []
        for x in row:
            if isinstance(x, str) and re.fullmatch(r"[0-9]{1,3}", x.strip()):
                x = int(x)
            if isinstance(x, bool) or not isinstance(x, int):
                bad(f"distance {show(x)} in row {i} is not an integer")
            vals.append(x)
        rows.append(vals)
    if len(rows) != nnodes or any(len(r) != nnodes for r in rows):
        bad(f"expected {nnodes}x{nnodes} for {nnodes} node(s), not rows of "
            f"{[len(r) for r in rows][:16]}")
    for i in range(nnodes):
        if rows[i][i] != 10:
            bad(f"node{i}->node{i} is {rows[i][i]}, not 10")
        for j in range(nnodes):
            if i != j and not 10 < rows[i][j] <= MAX_DISTANCE:
                bad(f"node{i}->node{j} is {rows[i][j]}; a remote distance must be 11 to "
                    f"{MAX_DISTANCE}")
            if rows[i][j] != rows[j][i]:
                bad(f"node{i}->node{j} is {rows[i][j]} but node{j}->node{i} is "
                    f"{rows[j][i]}: not symmetric")
    return rows


def check_manifest(manifest: Any, file: str) -> dict:
    """A lab dump's manifest, checked against :data:`MANIFEST` and the rules
    that tie its parts together: ``cpus`` is sockets x dies x cores x
    threads; nodes are numbered 0..N-1 in order, their CPU lists cover
    every CPU once, and each node has CPUs or memory; the distance matrix
    (if any) passes :func:`check_distances`; every device sits on a node of
    the machine, at its own PCI address; the ``--nvme`` options name as
    many controllers as ``devices`` lists; the last attempt is ``ok``.
    Output: the manifest. Raises :class:`LabFileError` naming ``file``."""
    check(manifest, MANIFEST, file)
    t = manifest["topology"]

    def bad(key: str, problem: str):
        raise LabFileError(file, key, problem)
    product = t["sockets"] * t["dies"] * t["cores_per_die"] * t["threads_per_core"]
    if product != t["cpus"]:
        bad("topology.cpus", f"{t['cpus']}, but sockets x dies x cores x threads is {product}")
    seen = 0
    for i, n in enumerate(t["nodes"]):
        key = f"topology.nodes[{i}]"
        if n["node"] != i:
            bad(f"{key}.node", f"expected {i} (nodes in order from 0), not {n['node']}")
        mask = parse_cpulist(n["cpus"].strip())
        if mask >> t["cpus"]:
            bad(f"{key}.cpus", f"names CPU {mask.bit_length() - 1}; the machine has "
                               f"{t['cpus']} CPUs")
        if mask & seen:
            bad(f"{key}.cpus", f"CPUs {format_cpulist(mask & seen)} are in an earlier node too")
        if not mask and not n["memory_mib"]:
            bad(key, "a node with neither CPUs nor memory")
        seen |= mask
    if seen != (1 << t["cpus"]) - 1:
        missing = ((1 << t["cpus"]) - 1) & ~seen
        bad("topology.nodes", f"CPUs {format_cpulist(missing)} are in no node")
    nnodes = len(t["nodes"])
    if t["distances"] is not None:
        try:
            check_distances(t["distances"], nnodes, "topology.distances")
        except LabError as e:
            raise LabFileError(file, "", str(e)) from None
    addresses: set[str] = set()
    for i, d in enumerate(manifest["devices"]):
        if d["node"] >= nnodes:
            bad(f"devices[{i}].node", f"{d['node']}, but the machine has {nnodes} node(s)")
        if d["pci_address"] in addresses:
            bad(f"devices[{i}].pci_address", f"{d['pci_address']} is used twice")
        addresses.add(d["pci_address"])
    asked = sum(int(o.split("@")[0]) for o in manifest["nvme_options"])
    if asked != len(manifest["devices"]):
        bad("nvme_options", f"ask for {asked} controller(s), but devices lists "
                            f"{len(manifest['devices'])}")
    last = manifest["attempts"][-1]["result"]
    if last != "ok":
        bad(f"attempts[{len(manifest['attempts']) - 1}].result",
            f"expected \"ok\" (a dump comes from a boot that worked), not {show(last)}")
    return manifest


#: ``kernel.json`` of a kernel in the lab's cache (fetched or built).
KERNEL_JSON = Obj({"release": KERNEL_RELEASE},
                  optional={"upstream": Str(r"(?:[0-9]{1,2}\.[0-9]{1,3}(?:\.[0-9]{1,6})?)?",
                                            "an upstream version such as 7.2.13", max_len=16),
                            "packages": List(Obj({"name": NAME}), 0, 16),
                            "modules": List(Str(r"[A-Za-z0-9_-]{1,64}", "a module name",
                                                max_len=64), 0, 64),
                            "build": BUILD})

#: ``built/NAME.json``: the key of the build a name stands for (a folder name).
BUILT_NAME = Obj({"key": Str(r"[0-9a-f]{16}", "a build key (16 hex digits)", max_len=16)})

#: ``data/lab/arm64/runs.toml``: one ``[[run]]`` per console log.
ARM64_RUN = Obj({"log": Str(r"[A-Za-z0-9_+-][A-Za-z0-9._+-]{0,127}\.log",
                            "a log file name (NAME.log, no folder)", max_len=132),
                 "kernel": Enum(("7.2", "7.2-rotate")),
                 "nodes": List(Cpulist(512, allow_empty=False), 1, 64),
                 "clusters": List(Cpulist(512, allow_empty=False), 1, 512),
                 "max_ioqpairs": Int(1, 65535),
                 "command": LINE},
                optional={"debug": Bool()})
ARM64_RUNS = Obj({"run": List(ARM64_RUN, 1, 1024)})


def cover_once(lists: list[str], key: str, file: str) -> int:
    """The union of CPU lists that must hold CPUs 0..N-1 once each (N the
    union's size); raises :class:`LabFileError` at ``key[i]`` otherwise."""
    seen = 0
    for i, text in enumerate(lists):
        mask = parse_cpulist(text.strip())
        if mask & seen:
            raise LabFileError(file, f"{key}[{i}]", f"CPUs {format_cpulist(mask & seen)} are "
                                                    "listed twice")
        seen |= mask
    if seen != (1 << seen.bit_length()) - 1:
        missing = ((1 << seen.bit_length()) - 1) & ~seen
        raise LabFileError(file, key, f"CPUs {format_cpulist(missing)} are missing (expected "
                                      f"CPUs 0 to {seen.bit_length() - 1})")
    return seen
