"""``numalab lab build-kernel`` without building a kernel: the configuration
fragment, the cache keys, patch application and its one-line failure, a
failed build leaving nothing in the cache, the named-build registry, and the
CLI's argument checks. Fake source packages and fake trees only (no network,
no compiler run beyond a two-line Makefile)."""

import json
import shutil
from pathlib import Path

import pytest

from numalab import cli
from numalab.lab import LabError
from numalab.lab import build as B

REPO = Path(__file__).resolve().parents[1]
PATCHES = REPO / "src" / "numalab" / "lab" / "patches"
needs_patch = pytest.mark.skipif(shutil.which("patch") is None or shutil.which("make") is None,
                                 reason="GNU patch and make (.ci/run installs patch)")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty lab cache, a source dir holding a fake linux-source-7.2
    package, and no package lists (so nothing is fetchable)."""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "linux-source-7.2_7.2.13-1_all.deb").write_bytes(b"not really a deb")
    monkeypatch.setattr(B, "_source_dirs", lambda: [tmp_path / "cache" / "sources", src])
    monkeypatch.setattr(B.AptCache, "update", lambda self, force=False: False)
    return tmp_path


# -- the fragment ----------------------------------------------------------------------

def test_the_committed_fragment_asks_for_what_the_lab_needs():
    frag = B.parse_fragment(B.FRAGMENT.read_text())
    need = {"CONFIG_64BIT": "y", "CONFIG_SMP": "y", "CONFIG_NUMA": "y", "CONFIG_ACPI": "y",
            "CONFIG_PCI": "y", "CONFIG_PCI_MSI": "y", "CONFIG_BLK_DEV_NVME": "m",
            "CONFIG_MODULES": "y", "CONFIG_SERIAL_8250_CONSOLE": "y",
            "CONFIG_BLK_DEV_INITRD": "y", "CONFIG_DEVTMPFS": "y", "CONFIG_BINFMT_SCRIPT": "y",
            "CONFIG_FUNCTION_TRACER": "y", "CONFIG_DYNAMIC_FTRACE": "y", "CONFIG_KALLSYMS": "y",
            "CONFIG_SCHED_CLUSTER": "y", "CONFIG_PVH": "y"}
    assert {k: frag.get(k) for k in need} == need
    assert int(frag["CONFIG_NR_CPUS"]) >= 128        # the lab's largest guest


def test_fragment_errors_and_mismatches():
    with pytest.raises(LabError, match="line 2: CONFIG_SMP is set twice"):
        B.parse_fragment("CONFIG_SMP=y\nCONFIG_SMP=n\n")
    with pytest.raises(LabError, match="line 1"):
        B.parse_fragment("CONFIG_SMP y\n")
    frag = B.parse_fragment("CONFIG_SMP=y\nCONFIG_NR_CPUS=128\n# CONFIG_EFI is not set\n"
                            "CONFIG_BLK_DEV_NVME=m\n")
    config = ("CONFIG_SMP=y\nCONFIG_NR_CPUS=64\nCONFIG_EFI=y\n"
              "# CONFIG_BLK_DEV_NVME is not set\n# a comment\n")
    assert B.fragment_mismatches(frag, config) == [
        "CONFIG_NR_CPUS=128 (got 64)", "CONFIG_EFI=n (got y)", "CONFIG_BLK_DEV_NVME=m (got n)"]
    assert B.fragment_mismatches(frag, "CONFIG_SMP=y\nCONFIG_NR_CPUS=128\n"
                                       "CONFIG_BLK_DEV_NVME=m\n") == []


# -- cache keys ------------------------------------------------------------------------

def test_build_key_changes_with_each_input():
    base = ("aa" * 32, "CONFIG_SMP=y\n", None, "")
    k = B.build_key(*base)
    others = [B.build_key("bb" * 32, *base[1:]),
              B.build_key(base[0], "CONFIG_SMP=y\nCONFIG_NUMA=y\n", None, ""),
              B.build_key(*base[:2], "--- a/x\n", ""),
              B.build_key(*base[:3], "-rotate"),
              B.build_key(*base, recipe="other")]
    assert len({k, *others}) == 6
    assert k == B.build_key(*base)


# -- patches ---------------------------------------------------------------------------

TWO_HUNKS = """\
--- a/lib/x.c
+++ b/lib/x.c
@@ -1,3 +1,3 @@ int f(void)
 one
-two
+TWO
 three
@@ -5,3 +5,3 @@ int g(void)
 five
-six
+SIX
 seven
"""


def _tree(root: Path, lines: list[str]) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "x.c").write_text("".join(f"{ln}\n" for ln in lines))
    return root


@needs_patch
def test_a_patch_that_applies(tmp_path):
    tree = _tree(tmp_path / "t", ["one", "two", "three", "four", "five", "six", "seven"])
    p = tmp_path / "ok.patch"
    p.write_text("a header line\n\n" + TWO_HUNKS)
    B.apply_patch(tree, p)
    assert (tree / "lib/x.c").read_text().split() == ["one", "TWO", "three", "four", "five",
                                                     "SIX", "seven"]


@needs_patch
def test_a_patch_that_does_not_apply_names_its_hunk(tmp_path):
    tree = _tree(tmp_path / "t", ["one", "two", "three", "four", "five", "6", "seven"])
    p = tmp_path / "bad.patch"
    p.write_text(TWO_HUNKS)
    with pytest.raises(B.BuildError) as e:
        B.apply_patch(tree, p, "linux-source-7.2 7.2.13-1")
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("bad.patch does not apply to linux-source-7.2 7.2.13-1: lib/x.c "
                          "hunk #2 @@ -5,3 +5,3 @@ int g(void) failed")
    # the dry run left the tree as it was (hunk 1 would have applied)
    assert (tree / "lib/x.c").read_text().split()[1] == "two"
    # no fuzz: a context line that differs fails even where patch would fuzz it
    tree2 = _tree(tmp_path / "t2", ["one", "two", "THREE", "four", "five", "six", "seven"])
    with pytest.raises(B.BuildError, match="hunk #1"):
        B.apply_patch(tree2, p)
    with pytest.raises(B.BuildError, match="no hunks"):
        (tmp_path / "empty.patch").write_text("hello\n")
        B.apply_patch(tree, tmp_path / "empty.patch")


@pytest.mark.parametrize("name,files,subject", [
    ("004-group-cpus-rotate-7.2.patch", {"lib/group_cpus.c"}, "004"),
    ("001-pci-pf-wq-worker-6.12.patch", {"drivers/pci/pci-driver.c"}, "001")])
def test_the_committed_patches(name, files, subject):
    from numalab.published import patch
    text = (PATCHES / name).read_text()
    assert {f for f, _, _ in B.patch_hunks(text)} == files
    meta = patch(subject)
    header = text.split("diff --git", 1)[0]
    assert meta["lore"] in header and meta["subject"].removeprefix("[PATCH] ") in header
    assert "adapted" in header


def test_the_pf_wq_worker_patch_is_the_posted_change():
    text = (PATCHES / "001-pci-pf-wq-worker-6.12.patch").read_text()
    body = text.split("diff --git", 1)[1]
    added = [ln[1:].strip() for ln in body.splitlines() if ln.startswith("+") and
             not ln.startswith("+++")]
    removed = [ln[1:].strip() for ln in body.splitlines() if ln.startswith("-") and
               not ln.startswith("---")]
    assert removed == ["pci_physfn_is_probed(dev)) {"]
    assert added[-1] == "pci_physfn_is_probed(dev) || (current->flags & PF_WQ_WORKER)) {"
    assert len(added) == 3


# -- builds through the cache ----------------------------------------------------------

def _fake_base_tree(cache_dir: Path, key: str, makefile: str) -> Path:
    tree = cache_dir / "trees" / key
    _tree(tree, ["one", "two", "three", "four", "five", "six", "seven"])
    (tree / "vmlinux").write_bytes(b"")
    (tree / ".config").write_text("".join(
        f"{k}={v}\n" if v != "n" else f"# {k} is not set\n"
        for k, v in B.parse_fragment(B.FRAGMENT.read_text()).items()))
    (tree / "Makefile").write_text(makefile)
    return tree


def _keys(cache: Path):
    src = B.find_source("7.2", fetch=False)
    frag = B.FRAGMENT.read_text()
    return src, B.build_key(src.sha256, frag, None, "")


@needs_patch
def test_a_patch_failure_leaves_nothing_in_the_cache(cache, tmp_path):
    src, base = _keys(cache)
    _fake_base_tree(cache / "cache", base, "all:\n\ttrue\n")
    p = tmp_path / "bad.patch"
    p.write_text(TWO_HUNKS.replace("-six", "-sixty"))
    with pytest.raises(B.BuildError, match=r"^bad.patch does not apply to linux-source-7.2 "
                                           r"7.2.13-1: lib/x.c hunk #2"):
        B.build_kernel("7.2", patch=p)
    assert list((cache / "cache" / "builds").iterdir()) == []
    assert not (cache / "cache" / "built").exists()


@needs_patch
def test_a_build_failure_shows_the_log_and_leaves_nothing(cache, tmp_path):
    src, base = _keys(cache)
    _fake_base_tree(cache / "cache", base,
                    "bzImage:\n\t@echo compiling; echo 'error: boom' >&2; exit 3\nmodules:\n")
    p = tmp_path / "ok.patch"
    p.write_text(TWO_HUNKS)
    with pytest.raises(B.BuildError) as e:
        B.build_kernel("7.2", patch=p)
    msg = str(e.value)
    assert msg.splitlines()[0].startswith("make failed (exit 2); log: ")
    log = Path(msg.splitlines()[0].split("log: ")[1])
    assert log.is_file() and log.parent == cache / "cache" / "logs"
    assert "error: boom" in msg
    assert list((cache / "cache" / "builds").iterdir()) == []


def test_a_cached_build_is_reused_and_named(cache, tmp_path):
    src, base = _keys(cache)
    d = cache / "cache" / "builds" / base
    (d / "modules").mkdir(parents=True)
    (d / "vmlinuz").write_bytes(b"")
    (d / "kernel.json").write_text(json.dumps({
        "release": "7.2.13-numalab", "upstream": "7.2.13", "packages": [], "modules": [],
        "build": {"recipe": B.RECIPE, "key": base, "name": "7.2",
                  "source_package": "linux-source-7.2", "source_version": "7.2.13-1",
                  "fragment_sha256": "0" * 64, "patch": None, "patch_sha256": None}}))
    said = []
    k = B.build_kernel("7.2", name="mine", progress=said.append)
    assert k.dir == d and k.build["key"] == base
    assert said and said[0].startswith("cached: linux-source-7.2 7.2.13-1")
    assert B.find_built("mine").dir == d
    assert set(B.built_kernels()) == {"mine"}
    with pytest.raises(LabError, match="no built kernel named 'other'; built: mine"):
        B.find_built("other")


# -- the command line -------------------------------------------------------------------

@pytest.mark.parametrize("argv,message", [
    (["--source", "7.3"], "unknown source version '7.3'; known: 7.2"),
    (["--source", "seven"], "--source 'seven': a kernel version such as 7.2 or 6.12"),
    (["--source", "7.2", "--patch", "/nonexistent.patch"],
     "patch file /nonexistent.patch not found"),
    (["--source", "7.2", "-o", "../up"], "build name '../up'"),
    (["--source", "7.2", "-j", "0"], "-j 0: expected an integer in [1, 256]"),
    ([], "--source VERSION is required"),
])
def test_cli_bad_input_is_one_line(cache, capsys, argv, message):
    assert cli.main(["lab", "build-kernel", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_run_with_an_unknown_built_kernel(cache, capsys):
    if shutil.which("qemu-system-x86_64") is None:
        pytest.skip("qemu-system-x86_64 not installed")
    rc = cli.main(["lab", "run", "--kernel", "built:nothing", "--topology", "numa:2 core:1",
                   "--nvme", "1@0:1", "-o", str(cache / "x.tar.bz2")])
    assert rc == 2
    assert "no built kernel named 'nothing'" in capsys.readouterr().err


def test_fragment_option_and_committed_fragments(tmp_path):
    """--fragment takes a fragment that parses; each committed fragment is
    found again by its sha256 (a built dump names its fragment by hash)."""
    import argparse
    import hashlib
    from numalab.lab.args import check_build
    ns = dict(source="7.2", patch=None, name=None, jobs=2)
    assert check_build(argparse.Namespace(**ns, fragment=None))["fragment"] == B.FRAGMENT
    bad = tmp_path / "bad.config"
    bad.write_text("SMP=y\n")
    with pytest.raises(LabError, match="--fragment .*bad.config: fragment line 1"):
        check_build(argparse.Namespace(**ns, fragment=str(bad)))
    with pytest.raises(LabError, match="cannot read"):
        check_build(argparse.Namespace(**ns, fragment=str(tmp_path / "none.config")))
    frags = sorted(B.FRAGMENT.parent.glob("*.config"))
    assert {f.name for f in frags} >= {"lab.config", "lab-periodic.config"}
    for f in frags:
        assert B.fragment_file(hashlib.sha256(f.read_text().encode()).hexdigest()) == f
    # the current fragment stops the idle tick; the first one did not
    cur = B.parse_fragment(B.FRAGMENT.read_text())
    old = B.parse_fragment((B.FRAGMENT.parent / "lab-periodic.config").read_text())
    assert cur.get("CONFIG_NO_HZ_IDLE") == "y" and "CONFIG_NO_HZ_IDLE" not in old
