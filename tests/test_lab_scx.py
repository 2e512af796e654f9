"""sched_ext in the lab (numalab.lab.scx, numalab.lab.scxbuild): the guest's
probes and script, the trace reader with its one-line errors, and the
committed sched_ext dumps read back and compared with the port
(numalab.kernel.sched.ext_idle) select by select. No QEMU needed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from numalab.lab import LabError
from numalab.lab.initramfs import InitConfig, init_script
from numalab.lab.scx import (CLAIM_SITES, claim_site_name, init_section,
                             parse_scx_trace, parse_workload, port_masks, port_pick,
                             probe_lines, read_scx, scx_dumps, dump_name, run_row,
                             WON_NO_WAKER, compare_ranges)
from numalab.lab.scxbuild import member_offset, parse_btf_raw

LAB = Path(__file__).resolve().parents[1] / "data" / "lab"
DUMPS = scx_dumps(LAB / "scx")            # run 1 of each and the repeats/ runs
OFFS = {"TASK_PID": 2808, "TASK_FLAGS": 44, "TASK_NR_CPUS_ALLOWED": 1368, "TASK_CPUS_PTR": 1376,
        "RQ_CPU": 3880, "RQ_CURR": 24, "RQ_SCX_LOCAL_DSQ_NR": 2592, "SCX_IDLE_CPUS_SMT": 8}


# -- the guest side ---------------------------------------------------------------------

def test_workloads_parse_and_refuse():
    assert parse_workload("pingpong-pin:2x5") == ("pingpong-pin:2x5", ["pingpong", "2", "5", "pin"])
    assert parse_workload("fork") == ("fork:50", ["fork", "50"])
    for bad in ("pingpong:0x5", "pingpong:5", "fork:x", "fork:0", "spin", "fork:1;reboot"):
        with pytest.raises(LabError) as e:
            parse_workload(bad)
        assert "\n" not in str(e.value)


def test_probe_lines_read_every_node_mask():
    lines = probe_lines(OFFS, 4)
    sel = lines[0]
    for n in range(4):
        assert f"n{n}cpu=+0(+0(+{8 * n}(@scx_idle_node_masks))):x64" in sel
        assert f"n{n}smt=+0(+8(+{8 * n}(@scx_idle_node_masks))):x64" in sel
    assert "pid=+2808(%di):s32" in sel and "nr=+1368(%di):s32" in sel
    assert lines[-2].startswith("p:numalab/numalab_upd __scx_update_idle cpu=+3880(%di):s32")
    assert "cflags=+44(+24(%di)):x32" in lines[-2]
    with pytest.raises(LabError):
        probe_lines({**OFFS, "SCX_IDLE_CPUS_SMT": 4}, 2)      # cpumasks not offstack


def test_module_doctests():
    import doctest
    from numalab.lab import scx, scxbuild
    for module in (scx, scxbuild):
        result = doctest.testmod(module)
        assert result.attempted > 0 and result.failed == 0, module.__name__


def test_init_section_is_valid_shell(tmp_path):
    text = init_script(InitConfig(modules=("nvme",), scx_section=init_section("pernode", OFFS)))
    assert 'SCX_FLAGS="-n"' in text and "RQ_DSQ_NR=2592" in text
    assert text.index("sched_ext (numalab.lab.scx)") < text.index('say "collecting"')
    assert "scx_simple" not in init_script(InitConfig(modules=("nvme",)))
    script = tmp_path / "init"
    script.write_text(text)
    sh = shutil.which("busybox") or shutil.which("sh")
    args = [sh, "sh", "-n", str(script)] if sh.endswith("busybox") else [sh, "-n", str(script)]
    assert subprocess.run(args).returncode == 0
    script.write_text(text.replace("  done < /scx/workloads", ""))     # an unclosed loop
    assert subprocess.run(args, capture_output=True).returncode != 0
    with pytest.raises(LabError):
        init_section("numa", OFFS)


def test_btf_offsets_follow_anonymous_members():
    raw = ("[1] STRUCT 'rq' size=64 vlen=2\n\t'nr_running' type_id=3 bits_offset=0\n"
           "\t'(anon)' type_id=2 bits_offset=192\n"
           "[2] UNION '(anon)' size=8 vlen=2\n\t'donor' type_id=4 bits_offset=0\n"
           "\t'curr' type_id=4 bits_offset=0\n"
           "[3] INT 'unsigned int' size=4 bits_offset=0 nr_bits=32 encoding=(none)\n"
           "[4] PTR '(anon)' type_id=0\n")
    t = parse_btf_raw(raw)
    assert member_offset(t, "rq", "curr") == 24
    with pytest.raises(LabError):
        member_offset(t, "rq", "idle")
    with pytest.raises(LabError):
        member_offset(t, "task_struct", "pid")


# -- the reader's errors ------------------------------------------------------------------

_SEL = ("  a-1 [002] d..31 10: numalab_sel: (scx_select_cpu_dfl+0x4/0x640) pid=5 prev=3 "
        "wf=0x8 flags=0x0 nr=4 allowed=0xf gcpu=0xf gsmt=0x0 n0cpu=0x0 n0smt=0x0 dsq0=0 "
        "dsq1=0 dsq2=0 dsq3=0")
_TAC = "  a-1 [002] d..41 11: numalab_tac: (scx_idle_test_and_clear_cpu+0x0/0x140) cpu=3"
_TACR = ("  a-1 [002] d..41 12: numalab_tacr: (scx_select_cpu_dfl+0x4f7/0x640 <- "
         "scx_idle_test_and_clear_cpu) ret=1")
_SELR = ("  a-1 [002] d..31 13: numalab_selr: (select_cpu_from_kfunc+0x21a/0x360 <- "
         "scx_select_cpu_dfl) ret=3")


def test_parse_small_trace():
    run = parse_scx_trace("\n".join(["# tracer: nop", _SEL, _TAC, _TACR, _SELR]), "flat", 1)
    (s,) = run.selects
    assert (s.pid, s.prev_cpu, s.waker_cpu, s.ret) == (5, 3, 2, 3)
    assert s.claims == [(3, True, "scx_select_cpu_dfl+0x4f7")]
    assert claim_site_name("7.2.13+deb14-amd64", s.claims[0][2]) == "prev"
    assert run.counts()["claims"] == 1


@pytest.mark.parametrize("text,msg", [
    ("", "no trace events"),
    ("\n".join([_SEL, _TAC]), "never returned"),
    ("\n".join([_SEL, _SEL]), "before the previous one returned"),
    (_SEL.replace("prev=3", "prev=x3"), "is not a number"),
    (_SEL.replace(" gsmt=0x0", ""), "lacks field gsmt"),
    ("numalab_sel garbage", "unreadable event line"),
])
def test_bad_traces_fail_in_one_line(text, msg):
    with pytest.raises(LabError) as e:
        parse_scx_trace(text, "flat", 1)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_bad_mode_and_non_scx_dump():
    with pytest.raises(LabError):
        parse_scx_trace(_SEL, "numa", 1)
    with pytest.raises(LabError) as e:
        read_scx(LAB / "lab-7.2-16cpu-2n-3nvme-node0.tar.bz2")
    assert "no sched_ext record" in str(e.value)


# -- the committed dumps -------------------------------------------------------------------

def test_committed_scx_dumps_exist():
    names = {p.name for p in DUMPS}
    for mode in ("flat", "pernode"):
        assert f"lab-7.2-scx-{mode}-16cpu-2n.tar.bz2" in names
        assert f"lab-7.2-scx-{mode}-12cpu-4n-uneven.tar.bz2" in names


def test_repeats_are_committed_and_ran_the_same_command():
    """Chapter 4's ranges come from committed dumps only: each guest and mode
    has three runs, numbered 1..3, and every repeat's recorded command is run
    1's with only the output name changed."""
    from numalab.lab.oracle import reproduce
    runs: dict = {}
    for p in DUMPS:
        machine, mode, k = dump_name(p)
        runs.setdefault((machine, mode), {})[k] = p
    assert set(runs) == {(m, md) for m in ("16cpu-2n", "12cpu-4n-uneven") for md in ("flat", "pernode")}
    for key, by_run in runs.items():
        assert sorted(by_run) == [1, 2, 3], key
        first = reproduce(by_run[1])[-1].split(" -o ")[0]
        for k in (2, 3):
            cmd = reproduce(by_run[k])[-1]
            assert cmd.split(" -o ")[0].replace("'", '"') == first.replace("'", '"'), (key, k)
            assert cmd.endswith(f"-run{k}.tar.bz2")


def test_run_row_counts_a_committed_dump():
    p = LAB / "scx" / "lab-7.2-scx-flat-16cpu-2n.tar.bz2"
    r = read_scx(p)
    row = run_row(p, r)
    c = r.counts()
    assert (row["machine"], row["masks"], row["run"]) == ("16cpu-2n", "flat", 1)
    assert row["wakeups"] == len(r.selects) == c["select_calls"]
    assert row["claims that won a CPU %"] == pytest.approx(100 * c["claims_won"] / c["claims"])
    assert row["node walks"] == 0
    # the sync branch's claims of the waker's own CPU, counted claim by claim from the trace
    sw = [ok for s in r.selects for _, ok, site in s.claims
          if claim_site_name(r.release, site) == "sync_waker"]
    assert row["claims of the waker's CPU (sync)"] == len(sw) > 0
    assert row["claims of the waker's CPU that won"] == sum(sw)
    won = sum(ok for s in r.selects for _, ok, _ in s.claims)
    assert row[WON_NO_WAKER] == pytest.approx(100 * (won - sum(sw)) / (c["claims"] - len(sw)))
    assert row[WON_NO_WAKER] != pytest.approx(row["claims that won a CPU %"])
    assert row["mask stores at idle transitions per wakeup"] == pytest.approx(
        c["update_cpu_mask_stores"] / len(r.selects))


def test_compare_ranges():
    assert compare_ranges([1, 2, 3], [2.5, 4]) == "overlap"
    assert compare_ranges([1, 2], [3, 4]) == "higher"
    assert compare_ranges([3, 4], [1, 2]) == "lower"
    assert compare_ranges([3], [1, 2]) == "one run"
    with pytest.raises(LabError):
        dump_name("lab-7.2-flat-16cpu-2n.tar.bz2")


@pytest.fixture(scope="module", params=DUMPS, ids=[p.name for p in DUMPS])
def run(request):
    return read_scx(request.param), request.param


def test_dump_is_complete(run):
    r, path = run
    mode = "pernode" if "-pernode-" in path.name else "flat"
    assert r.mode == mode and r.meta["ops"] == "simple"
    assert r.meta["state_after"] == "disabled"
    assert not r.meta["probe_errors"]
    # no event lost: every CPU's ring buffer reports zero overruns
    assert r.meta["buffer"] and all(" overrun: 0 " in ln for ln in r.meta["buffer"])
    labels = [w["label"] for w in r.meta["workloads"]]
    assert [w.name for w in r.workloads] == labels
    assert all(w.end is not None and w.end > w.begin for w in r.workloads)
    for w in labels:
        assert r.counts(w)["select_calls"] > 0
    assert all(s.ret is not None for s in r.selects)
    assert r.release in CLAIM_SITES
    # every claim came from a known call site of this kernel
    assert all(site in CLAIM_SITES[r.release] for s in r.selects for _, _, site in s.claims)


def test_masks_by_mode(run):
    """Flat: only the global pair is used; per-node: each node's masks hold
    only that node's CPUs and the global pair is never written."""
    r, _ = run
    node_of = r.cpu_node
    for s in r.selects:
        if r.mode == "flat":
            assert all(s.masks[n] == (0, 0) for n in range(r.nnodes))
            assert all(node == -1 for node, *_ in s.searches) and not s.walked
        else:
            assert s.masks[-1] == r.selects[0].masks[-1]
            for n in range(r.nnodes):
                for bits in s.masks[n]:
                    assert all(node_of[c] == n for c in range(len(node_of)) if bits >> c & 1)
            if s.searches:
                assert s.searches[0][0] == node_of[s.prev_cpu]


def test_updates_store_the_cpu_bit(run):
    """After every storing __scx_update_idle() the CPU's bit in its mask is
    the new state, and a busy CPU's core is out of the idle-core mask."""
    r, _ = run
    stores = [u for u in r.updates if u.writes]
    assert stores
    for u in stores:
        key = -1 if r.mode == "flat" else r.cpu_node[u.cpu]
        cpu_bits, smt_bits = u.masks_after[key]
        if u.idle:
            continue                       # a waker may claim it at once (racy, legal)
        assert not cpu_bits >> u.cpu & 1
        core = [c for c in range(len(r.cpu_core)) if r.cpu_core[c] == r.cpu_core[u.cpu]]
        assert not any(smt_bits >> c & 1 for c in core)


def test_searches_end_in_their_claim(run):
    """Each search that found a CPU ended with a won claim of that CPU."""
    r, _ = run
    for s in r.selects:
        picks = [(c, ok) for c, ok, site in s.claims
                 if claim_site_name(r.release, site) == "pick"]
        won = [c for c, ok in picks if ok]
        found = [ret for *_, ret in s.searches if ret >= 0]
        assert found == won


def test_pernode_leaves_the_node_only_by_walk_or_waker(run):
    r, _ = run
    if r.mode != "pernode":          # flat: one mask, no walk to other nodes
        assert not any(s.walked for s in r.selects)
        return
    assert any(s.walked for s in r.selects)
    for s in r.selects:
        if s.ret is not None and s.ret >= 0 and r.cpu_node[s.ret] != r.cpu_node[s.prev_cpu]:
            assert s.walked or s.ret == s.waker_cpu


def _explain(r, m, s, pp) -> str | None:
    """None when the port agrees with the kernel on this select (or differs
    only in a known, documented way), else a description."""
    if pp.same_ret and pp.same_claims:
        return None
    if s.concurrent_stores:
        return None     # another CPU changed the masks during this select (a race)
    return (f"select seq {s.seq}: kernel ret {s.ret} claims {s.claims}, port ret {pp.ret} "
            f"claims {pp.claims} (prev {s.prev_cpu}, waker {s.waker_cpu}, wf {s.wake_flags:#x})")


def test_port_picks_like_the_kernel(run):
    """The port, started from each select's recorded entry state (the waker's
    PF_EXITING included), returns the kernel's CPU and makes the kernel's
    claims -- the WAKE_SYNC claim of the waker's CPU (idle.c:558) included --
    except where another CPU stored to the masks during the select (a race)."""
    from numalab.topology import load
    r, path = run
    m = port_masks(r, load(path))
    bad, same_ret = [], 0
    for s in r.selects:
        pp = port_pick(m, s)
        same_ret += pp.same_ret
        why = _explain(r, m, s, pp)
        if why:
            bad.append(why)
    assert not bad, f"{len(bad)} of {len(r.selects)} selects differ; first: {bad[:3]}"
    # the explanations cover a minority: the port returns the kernel's CPU
    # for almost every select
    assert same_ret >= 0.95 * len(r.selects)
    # races are rare under single-threaded TCG
    assert sum(s.concurrent_stores > 0 for s in r.selects) <= 0.1 * len(r.selects)


def test_every_probe_hit_returned(run):
    """Each entry probe has its return probe (no kretprobe instance missed)."""
    from numalab.topology.safetar import read_archive
    r, path = run
    tree = read_archive(path)
    top = sorted(tree.children.get("", ()))[0]
    text = tree.read(f"{top}/numalab/lab/scx-trace").decode()
    for entry in ("sel", "tac", "pin", "pon", "upd"):
        assert text.count(f" numalab_{entry}: ") == text.count(f" numalab_{entry}r: ")
    assert text.count(" numalab_sel: ") == len(r.selects) > 0
    assert text.count(" numalab_upd: ") == len(r.updates) > 0


def test_port_updates_like_the_kernel(run):
    """The port's __scx_update_idle(), started from the last masks the trace
    shows before an update (when nobody else stored in between), leaves the
    masks the kernel's return probe read. A probe's fetch can run a little
    after its counter stamp (under TCG another vCPU may run in between), so a
    few snapshots are stale: at most 1 %."""
    from numalab.lab.scx import port_update, update_checks
    from numalab.topology import load
    r, path = run
    m = port_masks(r, load(path))
    checks = update_checks(r)
    assert sum(u.writes for _, u in checks) >= 0.5 * sum(u.writes for u in r.updates)
    bad = []
    for before, u in checks:
        got = port_update(m, before, u)
        want = {n: (c & m.possible, s & m.possible) for n, (c, s) in u.masks_after.items()
                if n in got}
        if got != want:
            bad.append((u.seq, u.cpu, u.idle, u.notify, u.site))
    assert len(bad) <= 0.01 * len(checks), bad[:5]


def test_cli_refuses_in_one_line_and_shows_counts(capsys):
    from numalab.cli import main
    assert main(["lab", "run", "--kernel", "7.2", "--topology", "numa:2 core:2",
                 "--workload", "fork"]) == 2
    assert "--workload needs --sched-ext" in capsys.readouterr().err
    assert main(["lab", "run", "--kernel", "7.2", "--topology", "numa:2 core:2",
                 "--sched-ext", "flat", "--workload", "fork:x"]) == 2
    err = capsys.readouterr().err
    assert "fork takes a count" in err and err.count("\n") == 1
    dump = LAB / "scx" / "lab-7.2-scx-pernode-16cpu-2n.tar.bz2"
    assert main(["lab", "show", str(dump)]) == 0
    out = capsys.readouterr().out
    assert "sched_ext: scx_simple, pernode idle masks" in out
    assert "pingpong-pin:4x30: claims " in out and "--sched-ext pernode" in out
