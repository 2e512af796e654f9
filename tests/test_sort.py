"""The port of lib/sort.c (both heapsorts) against orders produced by each
modelled kernel's own sort(), compiled in user space by tools/kernel_c/."""

from __future__ import annotations

import gzip
import json
import random
from functools import cache
from pathlib import Path

import pytest

from numalab.kernel import versions
from numalab.kernel.lib.sort import (HEAPSORTS, __sort_r, cmp_int, cmp_uint_sub, heapsort_of,
                                     parent, sort, sort_order_uint_sub, sort_r_single_pop)

DATA = Path(__file__).resolve().parents[1] / "data" / "kernel_c"
UINT_MAX = 0xFFFFFFFF


@cache
def _keys() -> list[list[int]]:
    return json.loads((DATA / "cases.json").read_text())["sort"]


@cache
def _orders(kernel: str) -> list[list[int]]:
    doc = json.loads(gzip.decompress((DATA / kernel / "results.json.gz").read_bytes()))
    assert doc["kernel"] == kernel
    return doc["sort"]


def _ncpus_cmp(l, r):
    return cmp_uint_sub(l[1], r[1])


def test_kernel_fixture_is_substantial():
    keys = _keys()
    assert len(keys) >= 100
    assert any(UINT_MAX in k for k in keys)
    assert any(len(k) < 2 for k in keys)
    assert sum(len(set(k)) < len(k) for k in keys) >= 50       # ties: where the texts differ
    for kernel in versions.KNOWN:
        assert len(_orders(kernel)) == len(keys)


@pytest.mark.parametrize("kernel", versions.KNOWN)
def test_sort_matches_each_kernels_sort(kernel):
    bad = []
    for i, (keys, want) in enumerate(zip(_keys(), _orders(kernel))):
        items = [[k, v] for k, v in enumerate(keys)]
        sort(items, _ncpus_cmp, kernel=kernel)
        got = [k for k, _ in items]
        cached = list(sort_order_uint_sub(tuple(keys), heapsort_of(kernel)))
        if got != want or cached != want:
            bad.append(i)
    assert bad == []


def test_the_two_heapsorts_order_ties_differently_like_the_kernels():
    # 6.1 and 7.2's C disagree on many arrays with ties, 6.12 and 7.2 on none
    differ = [i for i, (a, b) in enumerate(zip(_orders("6.1"), _orders("7.2"))) if a != b]
    assert len(differ) >= 50
    assert _orders("6.12") == _orders("7.2")
    for i in differ:
        keys = tuple(_keys()[i])
        assert len(set(keys)) < len(keys)                      # only ties move
        assert sort_order_uint_sub(keys, "single-pop") != sort_order_uint_sub(keys, "double-pop")


def test_three_equal_keys():
    # what puts cluster 4-5 before 2-3 on 7.2 (tests/test_group_cpus_versions.py)
    assert sort_order_uint_sub((2, 2, 2), "single-pop") == (1, 2, 0)
    assert sort_order_uint_sub((2, 2, 2), "double-pop") == (2, 1, 0)


def test_equal_keys_are_reordered_like_the_kernel():
    # neither heapsort is stable: two equal nodes come out swapped
    for kernel in versions.KNOWN:
        items = [["a", 2], ["b", 2]]
        sort(items, _ncpus_cmp, kernel=kernel)
        assert [k for k, _ in items] == ["b", "a"]
        # and the kernel did the same: all-equal arrays do not keep their order
        equal = [o for k, o in zip(_keys(), _orders(kernel)) if len(k) > 1 and len(set(k)) == 1]
        assert equal and all(o != sorted(o) for o in equal)


def test_uint_comparator_wraps_like_c():
    assert cmp_uint_sub(3, 5) == -2
    assert cmp_uint_sub(UINT_MAX, 5) == -6      # UINT_MAX sorts before small counts
    assert cmp_uint_sub(5, UINT_MAX) == 6
    assert cmp_uint_sub(0, 0x80000000) == -0x80000000
    for kernel in versions.KNOWN:
        items = [[0, 4], [1, UINT_MAX], [2, 1]]
        sort(items, _ncpus_cmp, kernel=kernel)
        assert [k for k, _ in items] == [1, 2, 0]


@pytest.mark.parametrize("fn", [sort_r_single_pop, __sort_r])
def test_sort_sorts_and_permutes(fn):
    rng = random.Random(5)
    for _ in range(300):
        xs = [rng.randint(-5, 5) for _ in range(rng.randint(0, 40))]
        ys = list(xs)
        fn(ys, cmp_int)
        assert ys == sorted(xs)


@pytest.mark.parametrize("fn", [sort_r_single_pop, __sort_r])
def test_custom_swap_func_is_used(fn):
    calls = []

    def swap(base, i, j):
        calls.append((i, j))
        base[i], base[j] = base[j], base[i]

    xs = [3, 2, 1, 0]
    fn(xs, cmp_int, swap)
    assert xs == [0, 1, 2, 3] and calls


@pytest.mark.parametrize("heapsort", HEAPSORTS)
def test_cached_order_equals_sort_on_random_keys(heapsort):
    fn = {"single-pop": sort_r_single_pop, "double-pop": __sort_r}[heapsort]
    rng = random.Random(11)
    for _ in range(500):
        keys = tuple(rng.choice([0, 1, 2, 3, 7, UINT_MAX, 0x80000001])
                     for _ in range(rng.randint(0, 20)))
        items = [[k, v] for k, v in enumerate(keys)]
        fn(items, _ncpus_cmp)
        assert tuple(k for k, _ in items) == sort_order_uint_sub(keys, heapsort)


def test_kernel_selects_the_heapsort():
    assert [heapsort_of(k) for k in versions.KNOWN] == ["single-pop", "double-pop", "double-pop"]
    assert heapsort_of(None) == heapsort_of(versions.NEWEST)
    with pytest.raises(versions.UnknownKernelError):
        sort([2, 1], cmp_int, kernel="5.4")
    with pytest.raises(ValueError):
        sort_order_uint_sub((1, 2), "quick")


def test_parent():
    assert [parent(i) for i in range(1, 9)] == [0, 0, 1, 1, 2, 2, 3, 3]
