"""Safe tar reading: malicious archives are refused, nothing touches the disk."""

from __future__ import annotations

import bz2
import io
import os
import tarfile
from pathlib import Path

import pytest

from numalab.errors import TopologyError, UnsafeArchiveError
from numalab.topology import load
from numalab.topology.safetar import MemTree, read_archive


def _snapshot(*dirs: Path) -> set[str]:
    out = set()
    for d in dirs:
        for root, subdirs, files in os.walk(d):
            for n in subdirs + files:
                out.add(os.path.join(root, n))
    return out


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]], mode="w:bz2"):
    with tarfile.open(path, mode) as tf:
        for info, data in members:
            if data is not None:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                tf.addfile(info)
    return path


def _file(name: str, data: bytes = b"x\n"):
    return tarfile.TarInfo(name), data


def _dir(name: str):
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    return info, None


def _link(name: str, target: str, kind=tarfile.SYMTYPE):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info, None


def _special(name: str, kind):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.devmajor, info.devminor = 1, 3
    return info, None


@pytest.fixture
def guard(tmp_path, monkeypatch):
    """Run in an empty cwd and check afterwards that only the test's own
    archives exist: the reader wrote nothing anywhere under tmp_path."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    yield tmp_path
    left = {p for p in _snapshot(tmp_path) if not p.endswith((".tar.bz2", ".tar", ".tar.gz"))}
    assert left == {str(work)}, f"files appeared: {sorted(left)}"


GOOD = [_dir("d"), _dir("d/sys"), _dir("d/sys/devices"), _dir("d/sys/devices/system"),
        _dir("d/sys/devices/system/cpu"), _dir("d/sys/devices/system/cpu/cpu0"),
        _file("d/sys/devices/system/cpu/cpu0/online", b"1\n")]


@pytest.mark.parametrize("member, problem", [
    (_file("/etc/evil"), "absolute member path"),
    (_file("d/../../evil"), "'..'"),
    (_file("../evil"), "'..'"),
    (_special("d/dev/null", tarfile.CHRTYPE), "device file"),
    (_special("d/dev/sda", tarfile.BLKTYPE), "device file"),
    (_special("d/fifo", tarfile.FIFOTYPE), "FIFO"),
    (_link("d/passwd", "/etc/passwd"), "symlink to absolute path"),
    (_link("d/sys/passwd", "../../../etc/passwd"), "leaves the archive"),
    (_link("d/hl", "../outside", tarfile.LNKTYPE), "hard link target"),
    (_link("d/hl2", "/etc/shadow", tarfile.LNKTYPE), "hard link target"),
])
def test_unsafe_member_refused(guard, member, problem):
    bad_name = member[0].name
    path = _tar(guard / "bad.tar.bz2", GOOD + [member])
    with pytest.raises(UnsafeArchiveError) as e:
        read_archive(path)
    assert problem in str(e.value)
    assert bad_name in str(e.value)
    assert e.value.path.endswith(f":{bad_name}")


def test_unsafe_member_refused_even_when_not_wanted(guard):
    """The checks apply to every member, not only the ones the reader wants."""
    path = _tar(guard / "bad.tar.bz2", GOOD + [_link("d/x/y", "../../../../etc")])
    with pytest.raises(UnsafeArchiveError, match="d/x/y"):
        read_archive(path, want=lambda name: name.endswith("online"))


def test_load_refuses_unsafe_dump(guard):
    path = _tar(guard / "bad.tar.bz2", GOOD + [_link("d/sys/evil", "/etc/passwd")])
    with pytest.raises(UnsafeArchiveError, match="d/sys/evil"):
        load(path)


def test_huge_member_refused_without_reading(guard):
    """A header claiming 2 GiB (sparse or not) is refused from its header:
    the archive holds only a few blocks, so reading would fail differently."""
    info = tarfile.TarInfo("d/huge")
    info.size = 2 << 30
    raw = b"".join(i.tobuf(tarfile.GNU_FORMAT) for i, _ in [GOOD[0]])
    raw += info.tobuf(tarfile.GNU_FORMAT) + b"\0" * 4096
    path = guard / "huge.tar.bz2"
    path.write_bytes(bz2.compress(raw))
    with pytest.raises(UnsafeArchiveError) as e:
        read_archive(path)
    assert "d/huge" in str(e.value)
    assert "per-member cap" in str(e.value)


def test_total_cap(guard):
    members = GOOD + [_file(f"d/f{i}", b"y" * 4096) for i in range(8)]
    path = _tar(guard / "many.tar.bz2", members)
    with pytest.raises(UnsafeArchiveError, match="total cap"):
        read_archive(path, max_total=16 * 1024)
    assert len(read_archive(path).files) == 9


def test_decompression_bomb_capped(guard):
    """A stream inflating past the cap stops at the cap, whatever its headers say."""
    path = guard / "bomb.tar.bz2"
    path.write_bytes(bz2.compress(b"\0" * (8 << 20)))
    with pytest.raises(UnsafeArchiveError, match="decompresses to over"):
        read_archive(path, max_stream=1 << 20)


def test_truncated_bz2(guard):
    members = GOOD + [_file(f"d/f{i}", os.urandom(2000)) for i in range(20)]
    good = _tar(guard / "good.tar.bz2", members)
    cut = guard / "cut.tar.bz2"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(TopologyError) as e:
        read_archive(cut)
    assert not isinstance(e.value, UnsafeArchiveError)
    assert "truncated or corrupt" in str(e.value)
    assert str(cut) in str(e.value)


def test_corrupt_bz2(guard):
    path = guard / "junk.tar.bz2"
    path.write_bytes(b"BZh9" + b"\x55" * 300)
    with pytest.raises(TopologyError, match="truncated or corrupt"):
        read_archive(path)


def test_not_a_tar(guard):
    path = guard / "plain.tar"
    path.write_bytes(b"hello, this is not a tar archive" * 40)
    with pytest.raises(TopologyError, match="truncated or corrupt"):
        read_archive(path)


def test_truncated_plain_tar_member(guard):
    good = _tar(guard / "good.tar", GOOD + [_file("d/big", b"z" * 5000)], mode="w")
    cut = guard / "cut.tar"
    raw = good.read_bytes()
    cut.write_bytes(raw[: raw.index(b"zzzz") + 100])    # ends inside d/big's data
    with pytest.raises(TopologyError, match="truncated"):
        read_archive(cut)


def test_legit_symlinks_followed(guard):
    members = GOOD + [
        _dir("d/sys/bus"), _dir("d/sys/bus/cpu"), _dir("d/sys/bus/cpu/devices"),
        _link("d/sys/bus/cpu/devices/cpu0", "../../../devices/system/cpu/cpu0"),
        _dir("d/sys/devices/system/node"), _dir("d/sys/devices/system/node/node0"),
        _file("d/sys/devices/system/node/node0/cpulist", b"0\n"),
        _link("d/sys/devices/system/cpu/cpu0/node0", "../../node/node0"),
        _link("d/sys/dangling", "../nothing/here"),
        _link("d/sys/hard", "d/sys/devices/system/cpu/cpu0/online", tarfile.LNKTYPE),
    ]
    tree = read_archive(_tar(guard / "ok.tar.bz2", members))
    assert tree.read("d/sys/bus/cpu/devices/cpu0/online") == b"1\n"
    assert tree.read("d/sys/bus/cpu/devices/cpu0/node0/cpulist") == b"0\n"
    assert tree.listdir("d/sys/bus/cpu/devices/cpu0") == ["node0", "online"]
    assert tree.readlink("d/sys/bus/cpu/devices/cpu0/node0") == "../../node/node0"
    assert tree.read("d/sys/dangling") is None
    assert tree.read("d/sys/hard") == b"1\n"
    assert tree.is_dir("d/sys/bus/cpu/devices/cpu0")


def test_resolve_confined_and_loop_safe():
    tree = MemTree()
    tree.add_file("a/f", b"1")
    tree.add_link("a/up", "../..")        # would leave the root when followed
    tree.add_link("a/loop", "loop")
    assert tree.resolve("a/up/etc") is None
    assert tree.read("a/loop") is None
    assert tree.read("a/./f") == b"1"


def test_gzip_and_plain(guard):
    for mode, name in (("w:gz", "g.tar.gz"), ("w", "p.tar")):
        tree = read_archive(_tar(guard / name, GOOD, mode=mode))
        assert tree.read("d/sys/devices/system/cpu/cpu0/online") == b"1\n"
