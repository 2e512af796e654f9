"""The kernel's ``sort()`` (``lib/sort.c``): an in-place, *unstable* heapsort.

Ported from the stored ``torvalds/linux`` copy of ``lib/sort.c`` (commit
072cf06e35eb). The kernel works on byte offsets into an array of
``size``-byte elements; this port works on list indices, which is the same
walk: the kernel's ``parent()`` computes ``(j - 1) / 2`` for element index
``j`` with a branch-free trick on byte offsets.

Why a port rather than ``list.sort()``: the kernel's heapsort is not stable,
and ``lib/group_cpus.c`` sorts nodes and clusters that often have equal CPU
counts. Which of two equal clusters comes first decides which CPUs end up in
which group, so reproducing the kernel's groups needs its exact order of
comparisons and swaps.

The sift-down is the "bottom-up" variant: it walks down to a leaf choosing
the larger child (one comparison per level), then climbs back up to where
the element being sifted belongs, and rotates it into place with swaps.

>>> xs = [3, 1, 2]
>>> sort(xs, lambda a, b: a - b)
>>> xs
[1, 2, 3]
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence
from functools import lru_cache
from typing import Any, TypeVar

__all__ = ["sort", "parent", "cmp_int", "cmp_uint_sub", "sort_order_uint_sub"]

T = TypeVar("T")


def parent(i: int) -> int:
    """Index of the heap parent of element ``i`` (``i`` > 0).

    The kernel's ``parent(i, lsbit, size)`` on byte offsets; on indices it is
    ``(i - 1) // 2``.

    >>> [parent(i) for i in (1, 2, 3, 4, 5, 6)]
    [0, 0, 1, 1, 2, 2]
    """
    return (i - 1) >> 1


def sort(base: MutableSequence[T], cmp_func: Callable[[T, T], int],
         swap_func: Callable[[MutableSequence[T], int, int], Any] | None = None) -> None:
    """Sort ``base`` in place exactly as the kernel's ``sort()`` does.

    Inputs: the list, a comparison function returning <0, 0 or >0 (the
    kernel's ``cmp_func``; only its sign matters) and an optional swap
    function ``swap_func(base, i, j)`` (the kernel passes element pointers;
    the default exchanges the two items, like the kernel's built-in swaps).
    Output: None; ``base`` is reordered. Equal elements may change order.

    >>> xs = [(2, "a"), (1, "b"), (2, "c")]
    >>> sort(xs, lambda l, r: l[0] - r[0])
    >>> xs
    [(1, 'b'), (2, 'c'), (2, 'a')]
    """
    num = len(base)
    # pre-scaled counters in the kernel; plain indices here
    n = num
    a = num // 2
    if not a:           # num < 2
        return

    def do_swap(i: int, j: int) -> None:
        if swap_func is None:
            base[i], base[j] = base[j], base[i]
        else:
            swap_func(base, i, j)

    # Loop invariants (as in the kernel): [a, n) is a heap, [n, num) sorted.
    while True:
        if a:                       # building the heap: sift down --a
            a -= 1
        else:
            n -= 1                  # sorting: extract the root to --n
            if n:
                do_swap(0, n)
            else:                   # sort complete
                break

        # Bottom-up sift: find the path of larger children down to a leaf.
        b = a
        while True:
            c = 2 * b + 1
            d = c + 1
            if not d < n:
                break
            b = c if cmp_func(base[c], base[d]) >= 0 else d
        if d == n:                  # last leaf with no sibling
            b = c

        # Backtrack from b to the place where the element at a belongs.
        while b != a and cmp_func(base[a], base[b]) >= 0:
            b = (b - 1) >> 1
        c = b
        while b != a:               # shift it into place
            b = (b - 1) >> 1
            do_swap(b, c)


def cmp_int(a: int, b: int) -> int:
    """A plain three-way comparison of two ints (for tests and callers)."""
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


@lru_cache(maxsize=4096)
def sort_order_uint_sub(keys: tuple[int, ...]) -> tuple[int, ...]:
    """Where :func:`sort` with a ``return l - r;`` comparator on unsigned keys moves things.

    Input: the keys (C ``unsigned int`` values) in array order. Output: the
    permutation ``p`` such that after ``sort()`` position i holds the element
    that was at ``p[i]``.

    The same heapsort as :func:`sort` (same comparisons, same swaps), run on
    indices with the comparator :func:`cmp_uint_sub` inlined. The order of
    equal keys depends only on the keys, so the result is cached per key
    tuple: callers that sort the same counts again and again (one call of
    ``group_cpus_evenly()`` per device) pay for the sort once.

    >>> sort_order_uint_sub((2, 1, 2))
    (1, 2, 0)
    """
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
