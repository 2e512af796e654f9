"""numalab.evidence: roles, calibrations, spread, generated prose, checked
claims, findings and the generated guide; chapter 1's generated sentences."""

import json

import pytest

from numalab import evidence as ev
from numalab.bookpages import guide_page, provenance_section
from numalab.errors import NumalabError
from numalab.evidence.findings import MIME, Finding, collect_findings, render_guide
from numalab.models.machine import text as T
from numalab.topology import load


def test_value_roles_are_closed():
    assert ev.ROLES == ("measured", "fitted", "predicted", "assumed", "published")
    with pytest.raises(ValueError):
        ev.Value(1.0, "reproduced")
    assert ev.Value(2.5, "assumed", "ns", spread=(1, 4)).text() == "2.5 ns (assumed, range 1-4 ns)"


def test_calibration_refuses_a_fitted_target_as_prediction():
    cal = ev.Calibration("m")
    cal.fit("a", 10.0)
    with pytest.raises(ev.FittedTargetError):
        cal.predicted("a", 10.1)
    assert cal.predicted("b", 3.0).role == "predicted"
    rows = cal.table([cal.compare("a", 10.1), cal.compare("b", 3.0, published=2.0)])
    assert rows["comparison"].tolist() == ["fit quality", "held-out test"]
    assert rows["role"].tolist() == ["fitted", "predicted"]
    with pytest.raises(ValueError):
        cal.compare("c", 1.0)          # a held-out figure must be given


def test_spread_needs_five_seeds_and_reports_range():
    with pytest.raises(ValueError, match="at least 5 seeds"):
        ev.over_seeds(lambda s: s, seeds=range(3))
    s = ev.over_seeds(lambda s: [3, 1, 2, 5, 4][s])
    assert (s.median, s.low, s.high) == (3.0, 1.0, 5.0)
    assert s.value(unit="%").spread == (1.0, 5.0)
    with pytest.raises(ValueError, match="non-finite"):
        ev.over_seeds(lambda s: float("nan"))


def test_scope_phrases():
    assert ev.count_of(41, 53, "machine") == "41 of 53 machines"
    assert ev.share_phrase(0, 2, "seed") == "on none of the 2 seeds"
    assert ev.say("{x} and {y}", x=0.123456, y="z") == "0.123 and z"


def test_claim_quotes_the_sentence():
    with pytest.raises(ev.ClaimFailed, match='"groups never overlap"'):
        ev.claim(False, "groups never overlap")


def _notebook_with(records, tmp_path):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# A title\n"}]
    for r in records:
        bundle = r._repr_mimebundle_()
        cells.append({"cell_type": "code", "metadata": {}, "execution_count": 1, "source": "",
                      "outputs": [{"output_type": "display_data", "metadata": {},
                                   "data": bundle}]})
    p = tmp_path / "02-x.ipynb"
    p.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                             "nbformat_minor": 5}))
    return p


def test_findings_round_trip_through_an_executed_notebook(tmp_path):
    recs = [ev.finding("02-x", "004", "ch2-a", "28 CPUs stack.", cpus=28),
            ev.kernel_modelled("02-x", "ch2-a", "lib/group_cpus.c of Linux 7.2"),
            ev.measured_on("02-x", "ch2-a", "a 2-vCPU VM")]
    assert MIME in recs[0]._repr_mimebundle_()
    nb = _notebook_with(recs, tmp_path)
    got = collect_findings(nb)
    assert [f.kind for f in got] == ["finding", "kernel", "measured"]
    assert got[0].values == {"cpus": 28}
    page = guide_page("x\n<!-- findings: 004 -->\n<!-- findings: 002 -->\n",
                      {"02-group-cpus": nb}, [])
    assert "| computed | 28 CPUs stack. | {ref}`ch. 2 <ch2-a>` |" in page
    assert "*(the chapter that computes these was not built)*" in page   # 002's chapter absent
    prov = provenance_section(tmp_path, {"02-x": nb}, ["numa:2 core:2"], lambda p: "0" * 64)
    assert "lib/group_cpus.c of Linux 7.2" in prov and "a 2-vCPU VM" in prov
    assert "| `numa:2 core:2` | `numa:2 core:2` | `synthetic` |" in prov


GUIDE = ("<!-- verdict: K -->\n<!-- facts: K -->\n<!-- commands: K -->\n"
         "<!-- findings: K -->\n")


def _f(label, text, chapter="02-x", **kw):
    return Finding(chapter, "K", label, text, **kw)


def test_guide_verdict_prefers_the_marked_then_the_lab_then_a_fact():
    model = _f("ch2-fit", "A rate is 4 ns (fitted).")
    fact = _f("ch2-pub", "The patch's gain is 3 % (published). Its noise is unknown.")
    lab = _f("ch2-lab", "On a real kernel 28 CPUs stack. More detail here. "
             "To measure it again: `numalab lab run --kernel 7.2 -o a.tar.bz2`.")
    marked = _f("ch2-sum", "The patch halves the stacking.", verdict=True)
    page = render_guide(GUIDE, [model, fact, lab, marked], {})
    assert page.startswith("**Verdict** (computed): The patch halves the stacking. "
                           "({ref}`ch. 2 <ch2-sum>`)")
    page = render_guide(GUIDE, [model, fact, lab], {})
    verdict = page.splitlines()[0]
    assert verdict == "**Verdict** (measured): On a real kernel 28 CPUs stack. ({ref}`ch. 2 <ch2-lab>`)"
    page = render_guide(GUIDE, [model, fact], {})
    assert page.splitlines()[0] == ("**Verdict** (published): The patch's gain is 3 % (published). "
                                    "({ref}`ch. 2 <ch2-pub>`)")


def test_guide_facts_are_measured_or_published_and_never_fits():
    page = render_guide(GUIDE, [
        _f("ch2-lab", "28 CPUs stack (measured)."),
        _f("ch2-pub", "The gain is 3 % (published)."),
        _f("ch2-arm", "4 queues on a real arm64 kernel.", chapter="02-x-evidence"),
        _f("ch2-fit", "A rate fitted to 3 % (published)."),
        _f("ch2-neg", "Ask whether it was measured; not measured here (port of 7.2).")], {})
    facts = [ln for ln in page.splitlines() if ln.startswith("| ") and "ch2-" in ln]
    table = facts[:2]          # the facts table; the rest is the dropdown of every finding
    assert table == ["| published | The gain is 3 % (published). | {ref}`ch. 2 <ch2-pub>` |",
                     "| measured | 4 queues on a real arm64 kernel. | {ref}`ch. 2, evidence <ch2-arm>` |"]
    assert "| published, fitted | A rate fitted to 3 % (published). |" in page
    assert "| port | Ask whether" in page
    assert page.count("ch2-lab") == 2               # the verdict and the dropdown


def test_guide_shows_a_failed_models_output_as_such_never_as_predicted():
    """A finding computed by a model that failed its test carries "model output" with
    its qualifier, in the guide's table; it is never a fact, and no other role is read
    from its text; an unknown role is refused."""
    out = _f("ch3-band", "1.6x at 3 drives (the model's pod rule).",
             role="assumed, model output (failed placement model)")
    page = render_guide(GUIDE, [out], {})
    assert ("| model output (failed placement model), assumed | 1.6x at 3 drives" in page)
    assert "predicted" not in page
    assert "*No other measured or published fact in this build's facts table.*" in page
    with pytest.raises(ValueError):
        _f("ch3-x", "1.6x.", role="guessed (by a model)")


def test_guide_commands_once_each_with_the_chapter_build():
    run = "numalab lab run --kernel built:7.2-x --topology 'numa:2 core:2' -o b.tar.bz2"
    cmd = "numalab lab build-kernel --source 7.2 --patch src/numalab/lab/patches/x.patch -o 7.2-x"
    recs = [_f("ch2-lab", f"A (measured). To measure it again: `{cmd}`, then `{run}`.",
               chapter="02-group-cpus"),
            _f("ch2-lab", f"B (measured). To measure it again: `{cmd}`, then `{run}`.",
               chapter="02-group-cpus-evidence"),
            _f("ch2-arm", "C (measured). To measure it again: tools/arm/README.md.")]
    page = render_guide(GUIDE, recs, {})
    block = page.split("```sh\n")[1].split("\n```")[0].splitlines()
    assert block == ["numalab build --only 2", cmd, run]
    assert "name it in `--patch`" in page and "- Also: tools/arm/README.md." in page
    assert "To measure it again" not in page.split(":::{dropdown}")[0].split("```")[0]
    unpatched = render_guide(GUIDE, [_f("ch2-lab", f"D (measured). To measure it again: `{run}`.")], {})
    assert "To boot a new version of the patch: `numalab lab build-kernel" in unpatched
    assert "name it in `--patch`" not in unpatched
    # a key whose chapter was not built says so; its command comes from the owners
    page = render_guide(GUIDE, [], {}, missing={"K"}, owners={"K": "05-percpu-ref"})
    assert "*(the chapter that computes these was not built)*" in page
    assert "numalab build --only 5" in page


def test_finding_roles_are_checked_and_kept():
    with pytest.raises(ValueError, match="not one of"):
        Finding("c", "k", "ch-x", "t", role="guessed")
    rec = ev.finding("02-x", "004", "ch2-a", "t", role="measured, port", verdict=True, n=1)
    f = Finding(**rec._repr_mimebundle_()[MIME])
    assert (f.role, f.verdict, f.values) == ("measured, port", True, {"n": 1})


def test_the_guide_template_has_every_part_for_every_key():
    from pathlib import Path
    from numalab.bookpages import GUIDE_OWNERS
    from numalab.evidence.findings import SECTION_MARKER
    text = (Path(__file__).resolve().parents[1] / "book" / "reviewers-guide.md").read_text()
    parts = {(w, k) for w, k in SECTION_MARKER.findall(text)}
    assert parts == {(w, k) for w in ("verdict", "facts", "commands", "findings")
                     for k in GUIDE_OWNERS}


def test_a_finding_without_a_marker_fails_the_build():
    f = Finding("02-x", "009", "ch2-a", "lost")
    with pytest.raises(NumalabError, match="no marker for findings"):
        render_guide("no markers here", [f], {})


def test_bad_labels_are_refused():
    with pytest.raises(ValueError):
        Finding("c", "k", "has space", "t")


def test_chapter_one_claims_fail_on_a_contradiction(monkeypatch):
    t = load("numa:2 core:2 pu:1")
    assert T.check_hop_claims({"m": t}) == 1
    import numalab.models.machine.text as mt
    monkeypatch.setattr(mt, "for_each_node_numadist", lambda topo, n: [1, 0] if n == 0 else [0, 1])
    with pytest.raises(ev.ClaimFailed, match="by distance, then by node id"):
        T.check_hop_claims({"m": t})


def test_chapter_one_sentences_follow_the_data():
    two = load("numa:2 core:2 pu:2")
    ring = load("numa:4 core:1", distances=[[10, 20, 30, 20], [20, 10, 20, 30],
                                             [30, 20, 10, 20], [20, 30, 20, 10]])
    assert "2 NUMA nodes" in T.describe_hierarchy("a", two)
    assert "The remote distances take 2 values, 20 and 30." in T.describe_distances("r", ring)
    assert "3 hop levels reach all 4 CPUs (port)." in T.describe_hops("r", ring, 0)
    assert "meet 4 ties" in T.describe_walk("r", ring)
    assert "never decide" in T.describe_walk("a", two)
    from numalab.models.machine.tables import compare_machines
    cmp = compare_machines({"a": two, "r": ring})
    text = T.describe_collection(cmp)
    assert text.startswith("Of the 2 datasets of this build, 2 have more than one NUMA node. ")
    assert "On 1 of them the kernel sees more than two distance levels, so more than one remote step" in text
    details = T.describe_details(cmp)
    assert "1 of 2 datasets has exactly two hop levels" in details
    assert "multi-node dump" not in details          # both synthetic: no dump to count
    assert T.role_counts(cmp)["datasets"].tolist() == [2]        # both synthetic: assumed
    assert T.built_on(cmp, ["a"]).startswith("The machine collected for this book (`a`, measured)")


def test_chapter_one_sentences_give_the_machines_role():
    """A published machine's distance table is not called its own SLIT (its
    file assumes what the patch does not give); a measured one says measured."""
    d = load("numa:2 core:1", distances=[[10, 21], [21, 10]])
    pub = T.describe_distances("dgx", d, role="published")
    assert "own distance table" not in pub and "assumed where the patch gives none" in pub
    assert T.describe_distances("x", d, role="measured").startswith(
        "`x` (measured) gives its own distance table (SLIT)")
    assert T.describe_distances("x", d) == T.describe_distances("x", d, role="")
    assert T.describe_hierarchy("x", d, role="assumed").startswith("`x` (assumed) has 2 CPUs")
    assert T.describe_hierarchy("dgx", d, role="published").endswith(
        "The table below gives which of these facts the patch published and which are assumed.")


def test_chapter_one_sentences_stay_short():
    """Each generated sentence of chapter 1 says one thing (readability's limits),
    also on a machine whose label starts with digits."""
    from numalab.evidence.readability import long_sentences
    from numalab.models.machine.tables import compare_machines
    ring = load("numa:4 core:4 pu:2", distances=[[10, 20, 30, 40], [20, 10, 20, 30],
                                                  [30, 20, 10, 20], [40, 30, 20, 10]])
    m = {"128arm-2pa2n": ring, "b": load("pack:2 numa:1 core:3 pu:2")}
    cmp = compare_machines(m)
    texts = [T.describe_hierarchy("128arm-2pa2n", ring, role="published"),
             T.describe_distances("128arm-2pa2n", ring, role="published"),
             T.describe_distances("128arm-2pa2n", ring, role="measured"),
             T.describe_hops("128arm-2pa2n", ring, 0), T.describe_walk("128arm-2pa2n", ring),
             T.describe_collection(cmp), T.describe_details(cmp), T.built_on(cmp, ["b"])]
    assert all(texts) and not [s for t in texts for s in long_sentences(t)]


def test_guide_facts_show_two_sentences_and_fold_the_rest():
    long = _f("ch2-pub", "One (published). Two. Three. To measure it again: `numalab lab run x`.")
    page = render_guide(GUIDE, [_f("ch2-lab", "V."), long], {})
    assert "| published | One (published). Two. … | {ref}`ch. 2 <ch2-pub>` |" in page
    assert "| published | One (published). Two. Three. To measure it again:" in page   # dropdown


def test_a_finding_the_page_introduces_shows_without_the_reviewers_prefix():
    shown = ev.finding("02-x", "004", "ch2-a", "28 CPUs stack.", prefix="")
    assert shown.markdown == "28 CPUs stack."
    assert ev.finding("02-x", "004", "ch2-a", "28 CPUs stack.").markdown.startswith("**For reviewers:**")
    assert ev.finding("02-x", "004", "ch2-a", "28 CPUs stack.", verdict=True).markdown == "28 CPUs stack."
