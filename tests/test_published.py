"""The package's table of published figures (numalab.published).

The table is what chapters and tests use, so nothing needs ../shared/seeds.
Where the patch texts are beside the checkout (as in CI), every number of the
table is checked against the posted text.
"""

import re

import pytest

from numalab import published as P
from numalab.models.refcount.devmem import SEED_KPERF, SEED_THROUGHPUT, parse_kperf
from numalab.models.probe.calibrate import PUBLISHED, SEED_FILES, parse_seed, seed_text

SEEDS = {"000": "000_dccbd2dd19606f08.txt", "001": "001_896d51b16a53b501.txt",
         "002": "002_21e9fc63aae7b5a5.txt", "003": "003_2df4d2adce8fff4a.txt",
         "004": "004_694c989826c46d02.txt"}


def text_of(pid):
    t = seed_text(SEEDS[pid])
    if t is None:
        pytest.skip("the patch texts (../shared/seeds) are not beside this checkout")
    return t


def test_every_patch_has_subject_and_lore_link():
    assert sorted(P.patches()) == sorted(SEEDS)
    for pid, p in P.patches().items():
        assert p["subject"] and p["author"], pid
        assert p["lore"].startswith("https://lore.kernel.org/all/"), pid
        assert P.cite(pid).startswith("[") and p["lore"] in P.cite(pid)


def test_unknown_patch_is_a_clear_error():
    with pytest.raises(KeyError, match="known: 000"):
        P.patch("999")


@pytest.mark.parametrize("pid", sorted(SEEDS))
def test_subject_is_the_posted_one(pid):
    subject = P.patch(pid)["subject"]
    core = re.sub(r"^\[PATCH[^\]]*\]\s*", "", subject).split(" (")[0]
    if pid == "003":   # the stored text is the cover letter's body: check its patch list
        assert "Introduce per-node idle cpumasks" in text_of(pid)
        return
    if pid == "001":   # the stored text starts at the body: the seeds' index names it
        text_of(pid)
        assert core in seed_text("README.md")
        return
    assert core in text_of(pid)


@pytest.mark.parametrize("source", ["fix", "series"])
def test_probe_rows_are_the_posted_lines(source):
    pid = {"fix": "001", "series": "000"}[source]
    text = text_of(pid)
    parsed = parse_seed(text, source)
    for key, rows in parsed.items():
        assert rows == PUBLISHED[key]
        # the CPU and COMM columns too, each line as printed
        for r in P.probe_rows(pid, key[1]):
            line = re.compile(rf"{re.escape(r['driver'])} {re.escape(r['device'])}:? "
                              rf"CPU: {r['cpu']}, COMM: {re.escape(r['comm'])},? "
                              rf"(?:probe )?cost:? {r['ns']} ns")
            assert line.search(text), r


def test_seed_files_names_agree():
    assert SEED_FILES == {"fix": SEEDS["001"], "series": SEEDS["000"]}


def test_kperf_is_the_posted_one():
    parsed = parse_kperf(text_of("002"))
    assert set(parsed) == set(SEED_KPERF) == set(P.kperf())
    for key, want in P.kperf().items():
        for field, values in want.items():
            assert parsed[key][field] == pytest.approx(values), (key, field)


def test_devmem_throughput_is_the_posted_one():
    text = text_of("002")
    for phase, (mean, spread) in SEED_THROUGHPUT.items():
        assert re.search(rf"{phase.capitalize()}: {mean} GB/s \(\+/- {spread} GB/s\)", text)


def test_idle_times_are_the_posted_ones():
    text = text_of("003")
    b = P.idle_b200()
    assert f"over {b['runs']} runs" in text
    for phase in ("before", "after"):
        assert f"{phase}: {b[phase]['mean']}s | {b[phase]['stdev']}" in text


def test_fio_fractions_are_the_posted_ones():
    text = text_of("004")
    f = P.irq_fio()
    pct = lambda x: f"{round(abs(x) * 100)}%"   # noqa: E731
    assert f"{pct(f['before_degradation'])} -> {pct(f['after_degradation'])}" in text
    assert f"+{pct(f['penalized_iops_gain'])} IOPS, {pct(f['penalized_latency_change'])} lower latency" in text
    assert f"{f['jobs_per_disk']} jobs/disk" in text
    assert f"{f['disks']} NVMe data disks ({f['vectors_per_disk']} MSI-X vectors each)" in text


def test_devmem_summary_is_the_posted_one():
    text = text_of("002")
    s = P.table()["devmem"]["summary"]
    assert f"- {s['message_mb']}MB message sizes" in text
    for side in ("tx_app_idle", "rx_app_idle"):
        for phase in ("before", "after"):
            assert f"{phase.capitalize()}: {s[side][phase]}%" in text


@pytest.mark.parametrize("pid,phrase", [("001", "a {} % probe-time improvement"),
                                        ("000", "~{} % faster"),
                                        ("003", "approximately +{}%")])
def test_headlines_are_the_posted_wording(pid, phrase):
    (value,) = P.table()["headlines"][pid].values()
    assert phrase.format(round(value * 100)) in text_of(pid)


def test_dgx1_claim_and_what_the_stored_posting_said():
    """The table takes the DGX-1 claim of the latest posting (v9 to v12, merged:
    'a speedup of around 1.5-3%'); the stored seed is v8's cover letter, which
    said no measurable difference. Check the seed is that earlier posting."""
    d = P.idle_dgx1()
    assert 0 < d["speedup_low"] < d["speedup_high"] and d["since"] == "v9"
    assert (round(d["speedup_low"] * 100, 1), round(d["speedup_high"] * 100, 1)) == (1.5, 3.0)
    text = text_of("003")
    assert d["v8_wording"] in text
    assert "ChangeLog v7 -> v8" in text and "v8 -> v9" not in text
    assert "v12" in P.patch("003")["subject"]
    assert "20250214194134.658939-1-arighi@nvidia.com" in P.patch("003")["lore"]


def test_devmem_patch_names_the_merged_posting():
    """002's link is v1 (the stored text, with the figures); the merged
    posting (v2, resent) is named by its own message id."""
    p = P.patch("002")
    assert "-v1-1-" in p["lore"] and p["lore"].startswith("https://lore.kernel.org/all/")
    assert "-v2-1-" in p["merged_lore"] and "v2" in p["merged_subject"]
