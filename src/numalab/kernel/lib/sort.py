"""The kernel's ``sort()`` (``lib/sort.c``): an in-place, *unstable* heapsort,
in the two texts the modelled kernels have.

The kernel works on byte offsets into an array of ``size``-byte elements;
this port works on list indices, which is the same walk: the kernel's
``parent()`` computes ``(j - 1) / 2`` for element index ``j`` with a
branch-free trick on byte offsets. Both texts sift down "bottom-up": walk
down to a leaf choosing the larger child (one comparison per level), then
climb back up to where the element being sifted belongs, and rotate it into
place with swaps.

* :func:`sort_r_single_pop` -- ``sort_r()`` up to Linux 6.8, and Debian's
  6.1 (6.1.192): each round extracts the root to ``--n``; on the way down
  the left child wins ties (``>= 0 ? c : d``). The project's first port
  was made from the stored ``torvalds/linux`` copy at 072cf06e35eb, the
  same loop.
* :func:`__sort_r` -- Linux 6.11 and later (Debian's 6.12.117 and 7.2.13,
  where 7.2 calls the function ``__sort_r()``): each round extracts the two
  largest elements (0e02ca29a563, "lib/sort: optimize heapsort with
  double-pop variation"), the right child wins ties (``> 0 ? c : d``,
  db946a422260) and the last two elements get one final compare-and-swap
  (0bc0c43eafb3, 6.11). 6.9 and 6.10 have the first two commits without
  the third: that text is not modelled.

Why a port rather than ``list.sort()``: the kernel's heapsort is not stable,
and ``lib/group_cpus.c`` sorts nodes and clusters that often have equal CPU
counts. Which of two equal clusters comes first decides which CPUs end up in
which group, so reproducing the kernel's groups needs its exact order of
comparisons and swaps -- and the two texts order equal keys differently.

>>> xs = [3, 1, 2]
>>> sort(xs, lambda a, b: a - b)
>>> xs
[1, 2, 3]
>>> a, b = [[0, 2], [1, 2], [2, 2]], [[0, 2], [1, 2], [2, 2]]
>>> sort(a, lambda l, r: l[1] - r[1], kernel="6.1"); sort(b, lambda l, r: l[1] - r[1], kernel="7.2")
>>> [i for i, _ in a], [i for i, _ in b]
([1, 2, 0], [2, 1, 0])
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from functools import lru_cache
from typing import Any, TypeVar

from .. import versions

__all__ = ["HEAPSORTS", "sort", "sort_r_single_pop", "__sort_r", "heapsort_of",
           "parent", "cmp_int", "cmp_uint_sub", "sort_order_uint_sub"]

T = TypeVar("T")
SwapFunc = Callable[[MutableSequence[T], int, int], Any]

HEAPSORTS = ("single-pop", "double-pop")


def parent(i: int) -> int:
    """Index of the heap parent of element ``i`` (``i`` > 0).

    The kernel's ``parent(i, lsbit, size)`` on byte offsets; on indices it is
    ``(i - 1) // 2``.

    >>> [parent(i) for i in (1, 2, 3, 4, 5, 6)]
    [0, 0, 1, 1, 2, 2]
    """
    return (i - 1) >> 1


def _swapper(base: MutableSequence[T], swap_func: SwapFunc | None) -> Callable[[int, int], None]:
    if swap_func is None:
        def do_swap(i: int, j: int) -> None:
            base[i], base[j] = base[j], base[i]
    else:
        def do_swap(i: int, j: int) -> None:
            swap_func(base, i, j)
    return do_swap


def sort_r_single_pop(base: MutableSequence[T], cmp_func: Callable[[T, T], int],
                      swap_func: SwapFunc | None = None) -> None:
    """``sort_r()`` of Linux up to 6.8 (and Debian's 6.1): one pop per round.

    Inputs: the list, a comparison returning <0, 0 or >0 (only its sign
    matters) and an optional ``swap_func(base, i, j)``. Output: None;
    ``base`` is sorted in place, equal elements in this text's order.

    >>> xs = [(2, "a"), (1, "b"), (2, "c")]
    >>> sort_r_single_pop(xs, lambda l, r: l[0] - r[0])
    >>> xs
    [(1, 'b'), (2, 'c'), (2, 'a')]
    """
    num = len(base)
    # pre-scaled counters in the kernel; plain indices here
    n = num
    a = num // 2
    if not a:           # num < 2
        return
    do_swap = _swapper(base, swap_func)

    # Loop invariants (as in the kernel): [a, n) is a heap, [n, num) sorted.
    while True:
        if a:                       # Building heap: sift down --a
            a -= 1
        else:
            n -= 1                  # Sorting: Extract root to --n
            if n:
                do_swap(0, n)
            else:                   # Sort complete
                break

        # Bottom-up sift: find the path of larger children down to a leaf.
        b = a
        while True:
            c = 2 * b + 1
            d = c + 1
            if not d < n:
                break
            b = c if cmp_func(base[c], base[d]) >= 0 else d
        if d == n:                  # Special case last leaf with no sibling
            b = c

        # Now backtrack from "b" to the correct location for "a".
        while b != a and cmp_func(base[a], base[b]) >= 0:
            b = parent(b)
        c = b                       # Where "a" belongs
        while b != a:               # Shift it into place
            b = parent(b)
            do_swap(b, c)


def __sort_r(base: MutableSequence[T], cmp_func: Callable[[T, T], int],
             swap_func: SwapFunc | None = None) -> None:
    """``__sort_r()`` of Linux 6.11 and later (Debian's 6.12 and 7.2): two pops per round.

    Same inputs and output as :func:`sort_r_single_pop`. While more than
    three elements remain unsorted, each round swaps the root to ``--n``,
    compares the root's two children (``shift`` says which is larger; the
    right one on a tie), swaps that child to ``--n`` and sifts down from it
    and then from the root. On the way down the right child wins ties.
    The last two or three elements are finished by one swap of the root
    and, for two left, one compare-and-swap. 7.2's ``cond_resched()``
    between rounds (``sort_nonatomic()`` only) changes no order.

    >>> xs = [(2, "a"), (2, "b"), (2, "c"), (1, "d")]
    >>> __sort_r(xs, lambda l, r: l[0] - r[0])
    >>> xs
    [(1, 'd'), (2, 'b'), (2, 'c'), (2, 'a')]
    """
    num = len(base)
    n = num
    a = num // 2
    shift = 0
    if not a:           # num < 2 || size == 0
        return
    do_swap = _swapper(base, swap_func)

    # Loop invariants: 1. [a, n) satisfy the heap property, 2. [n, num) are
    # sorted, 3. a <= b <= c <= d <= n (whenever they are valid).
    while True:
        if a:                       # Building heap: sift down a
            a -= 1 << shift
        elif n > 3:                 # Sorting: Extract two largest elements
            n -= 1
            do_swap(0, n)
            shift = 1 if cmp_func(base[1], base[2]) <= 0 else 0
            a = 1 << shift
            n -= 1
            do_swap(a, n)
        else:                       # Sort complete
            break

        b = a
        while True:
            c = 2 * b + 1
            d = c + 1
            if not d < n:
                break
            b = c if cmp_func(base[c], base[d]) > 0 else d
        if d == n:                  # Special case last leaf with no sibling
            b = c

        while b != a and cmp_func(base[a], base[b]) >= 0:
            b = parent(b)
        c = b
        while b != a:
            b = parent(b)
            do_swap(b, c)

    n -= 1
    do_swap(0, n)
    if n == 2 and cmp_func(base[0], base[1]) > 0:
        do_swap(0, 1)


_BY_NAME = {"single-pop": sort_r_single_pop, "double-pop": __sort_r}


def heapsort_of(kernel: str | None) -> str:
    """Which heapsort (one of :data:`HEAPSORTS`) ``kernel``'s ``lib/sort.c`` has.

    >>> heapsort_of("6.1"), heapsort_of("6.12"), heapsort_of(None)
    ('single-pop', 'double-pop', 'double-pop')
    """
    return versions.text(kernel).heapsort


def sort(base: MutableSequence[T], cmp_func: Callable[[T, T], int],
         swap_func: SwapFunc | None = None, kernel: str | None = None) -> None:
    """Sort ``base`` in place exactly as ``kernel``'s ``sort()`` does.

    Inputs: the list, a comparison function returning <0, 0 or >0 (the
    kernel's ``cmp_func``; only its sign matters), an optional swap
    function ``swap_func(base, i, j)`` (the kernel passes element pointers;
    the default exchanges the two items, like the kernel's built-in swaps)
    and the modelled kernel version (``None``: the newest, see
    :mod:`numalab.kernel.versions`). Output: None; ``base`` is reordered.
    Equal elements may change order.

    >>> xs = [(2, "a"), (1, "b"), (2, "c")]
    >>> sort(xs, lambda l, r: l[0] - r[0], kernel="6.1")
    >>> xs
    [(1, 'b'), (2, 'c'), (2, 'a')]
    """
    _BY_NAME[heapsort_of(kernel)](base, cmp_func, swap_func)


def cmp_int(a: int, b: int) -> int:
    """A plain three-way comparison of two ints (for tests and callers).

    >>> cmp_int(1, 2), cmp_int(2, 2), cmp_int(3, 2)
    (-1, 0, 1)
    """
    return (a > b) - (a < b)


def cmp_uint_sub(a: int, b: int) -> int:
    """``return a - b;`` on two C ``unsigned int`` values, as the ``int`` result.

    C computes the difference modulo 2**32 and converting it to ``int``
    reinterprets it as two's complement. So ``UINT_MAX - 5`` is ``-6``: a
    comparator written this way treats ``UINT_MAX`` as smaller than every
    small count (``lib/group_cpus.c``'s ``ncpus_cmp_func`` relies on this
    without saying so: unused nodes, marked ``UINT_MAX``, sort first).

    >>> cmp_uint_sub(3, 5), cmp_uint_sub(0xFFFFFFFF, 5), cmp_uint_sub(5, 0xFFFFFFFF)
    (-2, -6, 6)
    """
    d = (a - b) & 0xFFFFFFFF
    return d - 0x100000000 if d & 0x80000000 else d


_M32 = 0xFFFFFFFF


def sort_order_uint_sub(keys: tuple[int, ...], heapsort: str = "double-pop") -> tuple[int, ...]:
    """Where ``sort()`` with a ``return l - r;`` comparator on unsigned keys moves things.

    Input: the keys (C ``unsigned int`` values) in array order and the
    heapsort (``"single-pop"`` or ``"double-pop"``, see :func:`heapsort_of`).
    Output: the permutation ``p`` such that after ``sort()`` position i
    holds the element that was at ``p[i]``.

    The same heapsort as :func:`sort_r_single_pop` / :func:`__sort_r` (same
    comparisons, same swaps), run on indices with the comparator
    :func:`cmp_uint_sub` inlined. The order of equal keys depends only on the
    keys, so the result is cached per key tuple and heapsort: callers that
    sort the same counts again and again (one call of
    ``group_cpus_evenly()`` per device) pay for the sort once.

    >>> sort_order_uint_sub((2, 2, 2), "single-pop"), sort_order_uint_sub((2, 2, 2), "double-pop")
    ((1, 2, 0), (2, 1, 0))
    """
    if heapsort == "single-pop":
        return _order_single_pop(tuple(keys))
    if heapsort == "double-pop":
        return _order_double_pop(tuple(keys))
    raise ValueError(f"heapsort must be one of {HEAPSORTS}, not {heapsort!r}")


@lru_cache(maxsize=4096)
def _order_single_pop(keys: tuple[int, ...]) -> tuple[int, ...]:
    base = list(range(len(keys)))
    num = len(base)
    n = num
    a = num // 2
    if not a:
        return tuple(base)

    def ge(i: int, j: int) -> bool:
        # cmp_uint_sub(keys[i], keys[j]) >= 0
        return not ((keys[i] - keys[j]) & _M32) & 0x80000000

    while True:
        if a:
            a -= 1
        else:
            n -= 1
            if n:
                base[0], base[n] = base[n], base[0]
            else:
                break
        b = a
        while True:
            c = 2 * b + 1
            d = c + 1
            if not d < n:
                break
            b = c if ge(base[c], base[d]) else d
        if d == n:
            b = c
        while b != a and ge(base[a], base[b]):
            b = (b - 1) >> 1
        c = b
        while b != a:
            b = (b - 1) >> 1
            base[b], base[c] = base[c], base[b]
    return tuple(base)


@lru_cache(maxsize=4096)
def _order_double_pop(keys: tuple[int, ...]) -> tuple[int, ...]:
    base = list(range(len(keys)))
    num = len(base)
    n = num
    a = num // 2
    shift = 0
    if not a:
        return tuple(base)

    def cmp_sign(i: int, j: int) -> int:
        # the sign of cmp_uint_sub(keys[i], keys[j]): -1, 0 or 1
        d = (keys[i] - keys[j]) & _M32
        return -1 if d & 0x80000000 else (1 if d else 0)

    while True:
        if a:
            a -= 1 << shift
        elif n > 3:
            n -= 1
            base[0], base[n] = base[n], base[0]
            shift = 1 if cmp_sign(base[1], base[2]) <= 0 else 0
            a = 1 << shift
            n -= 1
            base[a], base[n] = base[n], base[a]
        else:
            break
        b = a
        while True:
            c = 2 * b + 1
            d = c + 1
            if not d < n:
                break
            b = c if cmp_sign(base[c], base[d]) > 0 else d
        if d == n:
            b = c
        while b != a and cmp_sign(base[a], base[b]) >= 0:
            b = (b - 1) >> 1
        c = b
        while b != a:
            b = (b - 1) >> 1
            base[b], base[c] = base[c], base[b]
    n -= 1
    base[0], base[n] = base[n], base[0]
    if n == 2 and cmp_sign(base[0], base[1]) > 0:
        base[0], base[1] = base[1], base[0]
    return tuple(base)
