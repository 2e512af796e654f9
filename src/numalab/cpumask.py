"""CPU masks as Python ints, and the kernel's two text syntaxes for them.

A cpumask is an ``int`` whose bit *i* is set when CPU *i* is in the set.
The kernel prints masks two ways, and sysfs uses both:

* the *cpulist* syntax of ``%*pbl`` (``cpu_list``, ``shared_cpu_list``,
  ``/sys/devices/system/cpu/online``): ``"0-3,8,10-11"``;
* the *hex mask* syntax of ``%*pb`` (``cpu_map``, ``smp_affinity``):
  32-bit chunks, most significant first, separated by commas, the first
  chunk only as wide as ``nr_cpu_ids`` needs: ``"ff,ffffffff"`` for 40 CPUs.

The parsers accept what the kernel's ``bitmap_parselist()`` and
``bitmap_parse()`` accept (including the ``a-b:used/group`` region form)
and raise :class:`CpumaskSyntaxError` on anything else, so that a bad dump
gets one clear message instead of a silently wrong mask.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from .errors import NumalabError

__all__ = [
    "CpumaskSyntaxError",
    "parse_cpulist",
    "format_cpulist",
    "parse_hexmask",
    "format_hexmask",
    "cpus",
    "mask_of",
    "weight",
    "first",
    "nth",
    "MAX_CPUS",
]

# The largest CPU id + 1 a parsed mask may hold. The kernel's parsers refuse
# bits at or past nr_cpumask_bits (bitmap_parselist() returns -ERANGE,
# bitmap_parse() -EOVERFLOW); numalab's limit is far above any NR_CPUS and
# keeps a hostile "0-4294967295" from building a 512 MiB int.
MAX_CPUS = 1 << 16


class CpumaskSyntaxError(NumalabError, ValueError):
    """A cpulist or hex mask that the kernel's parsers would reject."""


_REGION = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+)/(\d+))?)?$")


def parse_cpulist(text: str) -> int:
    """Parse the kernel's cpulist syntax into a mask.

    Input: a string such as ``"0-3,8,10-11"`` (surrounding white space and a
    trailing newline are ignored; an empty string is the empty mask).
    Output: the mask as an int.

    >>> parse_cpulist("0-3,8")
    271
    >>> parse_cpulist("0-7:2/4")   # first 2 of every 4: 0,1,4,5
    51
    """
    text = text.strip()
    if not text:
        return 0
    mask = 0
    for part in text.split(","):
        part = part.strip()
        m = _REGION.match(part)
        if not m:
            raise CpumaskSyntaxError(f"bad cpulist region {part!r} in {text!r}")
        start = int(m.group(1))
        end = int(m.group(2)) if m.group(2) is not None else start
        if end < start:
            raise CpumaskSyntaxError(f"bad cpulist range {part!r} in {text!r}: end before start")
        if end >= MAX_CPUS:
            raise CpumaskSyntaxError(f"cpulist region {part!r} names CPU {end}, beyond the "
                                     f"{MAX_CPUS} CPUs numalab handles")
        if m.group(3) is not None:
            used, group = int(m.group(3)), int(m.group(4))
            if group == 0 or used > group:
                raise CpumaskSyntaxError(f"bad cpulist stride {part!r} in {text!r}")
            for base in range(start, end + 1, group):
                for cpu in range(base, min(base + used, end + 1)):
                    mask |= 1 << cpu
        else:
            mask |= ((1 << (end - start + 1)) - 1) << start
    return mask


def _runs(mask: int) -> Iterator[tuple[int, int]]:
    """Yield (first, last) of every run of consecutive set bits."""
    cpu = 0
    while mask >> cpu:
        if not (mask >> cpu) & 1:
            # skip the zeros in one step
            low = (mask >> cpu) & -(mask >> cpu)
            cpu += low.bit_length() - 1
            continue
        rest = mask >> cpu
        length = (~rest & (rest + 1)).bit_length() - 1
        yield cpu, cpu + length - 1
        cpu += length


def format_cpulist(mask: int) -> str:
    """Print a mask the way the kernel's ``%*pbl`` does.

    >>> format_cpulist(0b1111_0000_1111)
    '0-3,8-11'
    >>> format_cpulist(0)
    ''
    """
    if mask < 0:
        raise ValueError("a cpumask is a non-negative int")
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in _runs(mask))


_HEXCHUNK = re.compile(r"^(?:0x)?([0-9a-fA-F]{1,8})$")


def parse_hexmask(text: str) -> int:
    """Parse the kernel's comma-separated hex mask (``cpu_map``, ``smp_affinity``).

    Each comma-separated chunk holds 32 bits, most significant chunk first.
    A ``0x`` prefix on a chunk is accepted (hwloc writes its masks that way).

    >>> parse_hexmask("ff,ffffffff") == (1 << 40) - 1
    True
    """
    text = text.strip()
    if not text:
        raise CpumaskSyntaxError("empty hex mask")
    digits = []
    for chunk in text.split(","):
        m = _HEXCHUNK.match(chunk.strip())
        if not m:
            raise CpumaskSyntaxError(f"bad hex mask chunk {chunk[:20]!r} in {text[:60]!r}")
        digits.append(m.group(1).zfill(8))
    # one int() over all chunks: shifting chunk by chunk is quadratic
    mask = int("".join(digits), 16)
    if mask.bit_length() > MAX_CPUS:
        raise CpumaskSyntaxError(f"hex mask names CPU {mask.bit_length() - 1}, beyond the "
                                 f"{MAX_CPUS} CPUs numalab handles")
    return mask


def format_hexmask(mask: int, nbits: int) -> str:
    """Print a mask the way the kernel's ``%*pb`` does for ``nbits`` bits.

    ``nbits`` is ``nr_cpu_ids``: it fixes the width of the output.

    >>> format_hexmask((1 << 40) - 1, 40)
    'ff,ffffffff'
    >>> format_hexmask(0b11, 8)
    '03'
    """
    if nbits <= 0:
        return ""
    if mask >> nbits:
        raise ValueError(f"mask has bits at or above nbits={nbits}")
    chunks = []
    chunksz = nbits % 32 or 32
    i = ((nbits + 31) // 32) * 32 - 32
    while i >= 0:
        val = (mask >> i) & ((1 << chunksz) - 1)
        chunks.append(f"{val:0{(chunksz + 3) // 4}x}")
        chunksz = 32
        i -= 32
    return ",".join(chunks)


def cpus(mask: int) -> list[int]:
    """The CPUs of a mask in increasing order (``for_each_cpu``).

    >>> cpus(0b1011)
    [0, 1, 3]
    """
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def mask_of(cpu_ids: Iterable[int]) -> int:
    """The mask holding the given CPUs.

    >>> mask_of([0, 1, 3])
    11
    """
    mask = 0
    for c in cpu_ids:
        if c < 0:
            raise ValueError(f"negative CPU id {c}")
        mask |= 1 << c
    return mask


def weight(mask: int) -> int:
    """Number of CPUs in a mask (``cpumask_weight``)."""
    return mask.bit_count()


def first(mask: int) -> int | None:
    """Lowest CPU of a mask (``cpumask_first``), None when empty."""
    if not mask:
        return None
    return (mask & -mask).bit_length() - 1


def nth(mask: int, n: int) -> int | None:
    """The n-th CPU (0-based) of a mask (``cpumask_nth``), None past the end."""
    for i, c in enumerate(cpus(mask)):
        if i == n:
            return c
    return None
