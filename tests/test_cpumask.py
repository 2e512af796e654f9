"""The kernel's two mask syntaxes: parse what it prints, print what it would."""

import pytest
from hypothesis import given, strategies as st

from numalab.cpumask import (CpumaskSyntaxError, cpus, first, format_cpulist, format_hexmask,
                             mask_of, nth, parse_cpulist, parse_hexmask, weight)
from numalab.errors import NumalabError

masks = st.integers(min_value=0, max_value=(1 << 300) - 1)


@pytest.mark.parametrize("text, expected", [
    ("0-3,8,10-11", [0, 1, 2, 3, 8, 10, 11]),
    ("0", [0]),
    ("", []),
    ("5\n", [5]),
    ("0-63,128-191", list(range(64)) + list(range(128, 192))),
    ("0-7:2/4", [0, 1, 4, 5]),          # bitmap_parselist's used/group form
    ("0-9:1/3", [0, 3, 6, 9]),
])
def test_parse_cpulist(text, expected):
    assert cpus(parse_cpulist(text)) == expected


@pytest.mark.parametrize("bad", ["0-", "3-1", "a", "1,,2", "-1", "0-7:3/2", "0-7:1/0", "1-2-3"])
def test_parse_cpulist_rejects(bad):
    with pytest.raises(CpumaskSyntaxError) as e:
        parse_cpulist(bad)
    assert isinstance(e.value, NumalabError)
    assert repr(bad.split(",")[0]) in str(e.value) or bad in str(e.value)


@pytest.mark.parametrize("mask, text", [
    (0, ""), (1, "0"), (0b110, "1-2"), (0b1011, "0-1,3"),
    ((1 << 64) - 1 | ((1 << 64) - 1) << 128, "0-63,128-191"),
])
def test_format_cpulist(mask, text):
    assert format_cpulist(mask) == text


@pytest.mark.parametrize("mask, nbits, text", [
    ((1 << 40) - 1, 40, "ff,ffffffff"),   # 40 CPUs: first chunk 8 bits wide
    (0b11, 8, "03"),
    (1, 1, "1"),
    (1, 4, "1"),
    (0, 64, "00000000,00000000"),
    (1 << 32, 33, "1,00000000"),
    (0xF0, 256, ",".join(["00000000"] * 7 + ["000000f0"])),
])
def test_format_hexmask(mask, nbits, text):
    assert format_hexmask(mask, nbits) == text


def test_parse_hexmask_accepts_hwloc_prefix():
    assert parse_hexmask("0x000000ff,0xffffffff") == (1 << 40) - 1
    assert parse_hexmask("ff,ffffffff\n") == (1 << 40) - 1


@pytest.mark.parametrize("bad", ["", "xyz", "1,,2", "123456789"])
def test_parse_hexmask_rejects(bad):
    with pytest.raises(CpumaskSyntaxError):
        parse_hexmask(bad)


@given(masks)
def test_cpulist_round_trip(mask):
    assert parse_cpulist(format_cpulist(mask)) == mask


@given(masks, st.integers(min_value=0, max_value=64))
def test_hexmask_round_trip(mask, extra):
    nbits = max(1, mask.bit_length() + extra)
    text = format_hexmask(mask, nbits)
    assert parse_hexmask(text) == mask
    # every chunk but the first is exactly 8 hex digits, as the kernel prints
    assert all(len(c) == 8 for c in text.split(",")[1:])


@given(masks)
def test_helpers_agree(mask):
    ids = cpus(mask)
    assert mask_of(ids) == mask
    assert weight(mask) == len(ids)
    assert first(mask) == (ids[0] if ids else None)
    assert nth(mask, len(ids) // 2) == (ids[len(ids) // 2] if ids else None)
