"""The port of lib/sort.c against orders produced by the kernel's own sort()."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from numalab.kernel.lib.sort import (cmp_int, cmp_uint_sub, parent, sort,
                                     sort_order_uint_sub)

DATA = Path(__file__).parent / "data" / "group_cpus_kernel" / "sort.json"
UINT_MAX = 0xFFFFFFFF


def _kernel_cases():
    return json.loads(DATA.read_text())["cases"]


def _ncpus_cmp(l, r):
    return cmp_uint_sub(l[1], r[1])


def test_kernel_fixture_is_substantial():
    cases = _kernel_cases()
    assert len(cases) >= 100
    assert any(UINT_MAX in c["ncpus"] for c in cases)
    assert any(len(c["ncpus"]) < 2 for c in cases)


@pytest.mark.parametrize("i", range(0, 159))
def test_sort_matches_kernel_sort(i):
    cases = _kernel_cases()
    if i >= len(cases):
        pytest.skip("fewer cases")
    case = cases[i]
    items = [[k, v] for k, v in enumerate(case["ncpus"])]
    sort(items, _ncpus_cmp)
    assert [k for k, _ in items] == case["order"]
    assert list(sort_order_uint_sub(tuple(case["ncpus"]))) == case["order"]


def test_equal_keys_are_reordered_like_the_kernel():
    # the kernel's heapsort is not stable: two equal nodes come out swapped
    items = [["a", 2], ["b", 2]]
    sort(items, _ncpus_cmp)
    assert [k for k, _ in items] == ["b", "a"]
    # and the kernel did the same: all-equal arrays do not keep their order
    equal = [c["order"] for c in _kernel_cases()
             if len(c["ncpus"]) > 1 and len(set(c["ncpus"])) == 1]
    assert equal and all(o != sorted(o) for o in equal)


def test_uint_comparator_wraps_like_c():
    assert cmp_uint_sub(3, 5) == -2
    assert cmp_uint_sub(UINT_MAX, 5) == -6      # UINT_MAX sorts before small counts
    assert cmp_uint_sub(5, UINT_MAX) == 6
    assert cmp_uint_sub(0, 0x80000000) == -0x80000000
    items = [[0, 4], [1, UINT_MAX], [2, 1]]
    sort(items, _ncpus_cmp)
    assert [k for k, _ in items] == [1, 2, 0]


def test_sort_sorts_and_permutes():
    rng = random.Random(5)
    for _ in range(300):
        xs = [rng.randint(-5, 5) for _ in range(rng.randint(0, 40))]
        ys = list(xs)
        sort(ys, cmp_int)
        assert ys == sorted(xs)


def test_custom_swap_func_is_used():
    calls = []

    def swap(base, i, j):
        calls.append((i, j))
        base[i], base[j] = base[j], base[i]

    xs = [3, 2, 1, 0]
    sort(xs, cmp_int, swap)
    assert xs == [0, 1, 2, 3] and calls


def test_cached_order_equals_sort_on_random_keys():
    rng = random.Random(11)
    for _ in range(500):
        keys = tuple(rng.choice([0, 1, 2, 3, 7, UINT_MAX, 0x80000001])
                     for _ in range(rng.randint(0, 20)))
        items = [[k, v] for k, v in enumerate(keys)]
        sort(items, _ncpus_cmp)
        assert tuple(k for k, _ in items) == sort_order_uint_sub(keys)


def test_parent():
    assert [parent(i) for i in range(1, 9)] == [0, 0, 1, 1, 2, 2, 3, 3]
