"""The book's dataset list and the parsed-topology cache."""

import pickle
from pathlib import Path

import pytest

from numalab import datasets
from numalab.errors import TopologyError


def test_default_datasets_list_project_data_first():
    ds = datasets.default_datasets()
    proj = datasets.project_datasets()
    assert ds[: len(proj)] == proj
    assert any(p.endswith(".toml") for p in proj)
    assert any("/data/collected/" in p for p in proj)


def test_labels():
    assert datasets.label("/x/linux/16amd64-8n2c.tar.bz2") == "16amd64-8n2c"
    assert datasets.label("data/machines/epyc-9a64.toml") == "epyc-9a64"
    assert datasets.label("numa:2 core:4 pu:2") == "numa:2 core:4 pu:2"


def test_cache_hit_is_identical_and_keyed_on_content(tmp_path, monkeypatch):
    proj = [p for p in datasets.project_datasets() if p.endswith(".toml")]
    src = Path(proj[0])
    copy = tmp_path / src.name
    copy.write_bytes(src.read_bytes())
    first = datasets.load_cached(str(copy))
    cache = datasets._cache_path(copy)
    assert cache is not None and cache.is_file()
    again = datasets.load_cached(str(copy))
    assert again.to_dict() == first.to_dict()
    # a changed file is a different key: the old parse is not reused
    copy.write_text(src.read_text().replace("\n", "\n\n", 1))
    assert datasets._cache_path(copy) != cache


def test_damaged_cache_entry_is_a_miss():
    proj = [p for p in datasets.project_datasets() if p.endswith(".toml")]
    path = Path(proj[0])
    datasets.load_cached(str(path))
    cache = datasets._cache_path(path)
    cache.write_bytes(b"not a pickle")
    topo = datasets.load_cached(str(path))
    assert topo.counts()["pu"] > 0
    assert isinstance(pickle.loads(cache.read_bytes()), type(topo))


def test_bad_dataset_is_not_dropped(tmp_path):
    with pytest.raises(TopologyError):
        datasets.load_datasets([str(tmp_path / "missing.tar.bz2")])


def test_duplicate_labels_are_kept_apart():
    out = datasets.load_datasets(["numa:2 core:2 pu:1", "numa:2 core:2 pu:1"])
    assert len(out) == 2
