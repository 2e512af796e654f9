"""The book's data are in the product: data/ holds every machine the default
set names, with its licence and a README that lists it."""

import re
from pathlib import Path

from numalab import datasets
from numalab.datasets import (default_datasets, hwloc_datasets, hwloc_dir, lab_datasets,
                              load_options, project_datasets)

REPO = Path(__file__).resolve().parents[1]


def test_hwloc_collection_is_in_the_checkout_with_its_licence():
    base = hwloc_dir(REPO)
    assert (base / "COPYING").read_text().startswith("SPDX-License-Identifier: BSD-3-Clause")
    assert len(list(base.glob("linux/*.tar.bz2"))) >= 30
    assert len(list(base.glob("xml/*.xml"))) >= 10


def test_readme_lists_every_machine_file_and_nothing_else():
    base = hwloc_dir(REPO)
    text = (base / "README.md").read_text()
    listed = set(re.findall(r"^\| `([^`]+)` \|", text, flags=re.M))
    files = {str(Path(p).relative_to(base)) for p in hwloc_datasets(REPO)}
    assert listed == files


def test_project_readme_counts_the_collection():
    text = (REPO / "README.md").read_text()
    m = re.search(r"on the (\d+) real machine topologies of the hwloc project", text)
    assert m and int(m.group(1)) == len(hwloc_datasets(REPO))


def test_default_set_is_data_only_and_skips_expected_outputs():
    paths = default_datasets(REPO)
    assert paths == project_datasets(REPO) + hwloc_datasets(REPO)
    data = (REPO / "data").resolve()
    for p in paths:
        assert Path(p).resolve().is_relative_to(data), p
    # the lstopo answers beside the tarballs are not machines
    assert not [p for p in paths if "/linux/" in p and p.endswith(".xml")]
    assert not set(paths) & set(lab_datasets(REPO))


def test_relaxed_options_follow_the_collection(tmp_path):
    fake = str(hwloc_dir(REPO) / "linux" / "fakeheterocpunuma.tar.bz2")
    assert load_options(fake) == {"allow_asymmetric": True, "allow_overlapping_nodes": True}
    xml = str(hwloc_dir(REPO) / "xml" / "16amd64-4distances.xml")
    assert load_options(xml) == {"allow_asymmetric": True}
    # the same file anywhere else is read strictly
    copy = tmp_path / "fakeheterocpunuma.tar.bz2"
    copy.write_bytes(Path(fake).read_bytes())
    assert load_options(str(copy)) == {}
    assert load_options("pack:2 numa:2 core:2 pu:1") == {}


def test_every_default_machine_loads():
    topos = datasets.load_datasets(default_datasets(REPO))
    assert len(topos) == len(default_datasets(REPO))
    assert all(t.cpus for t in topos.values())


def test_no_module_reads_the_shared_folder():
    src = REPO / "src" / "numalab"
    offenders = [str(p.relative_to(REPO)) for p in src.rglob("*.py")
                 if "NUMALAB_SHARED" in p.read_text() or "shared_topologies" in p.read_text()]
    assert offenders == []
