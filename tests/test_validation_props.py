"""Every number a user types or a caller passes: a result, or one clear error.

Hypothesis drives the sub-commands that compute (``show``, ``group-cpus``,
``probe``, ``idle``, in-process through :func:`numalab.cli.main`) and the
model APIs behind them (and the devmem / refcount models) with generated
values for each numeric option: NaN, infinities, 0, -0, negatives, huge
numbers, non-numbers, and ordinary values. The properties:

* the command exits 0 or 2; with 2, stderr is exactly one line starting
  ``numalab``; with 0, stderr is empty; never a traceback;
* an API call returns, or raises :class:`numalab.errors.ParameterError`
  (a NumalabError and a ValueError) with a one-line message;
* nothing hangs: each call runs under ``signal.alarm`` (a safety net, not
  a speed target).

So that every accepted run is short, the models' work budgets (the limits
that refuse runs which would take too long, or never end) are lowered for
this module; the refusal path is the same code. Hypothesis is derandomized:
the same examples every run.
"""

from __future__ import annotations

import contextlib
import io
import math
import signal

import pytest
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from conftest import deadline
from numalab.cli import main
from numalab.errors import ParameterError
from numalab.topology import load

TOPO = "pack:1 numa:2 core:2 pu:1"
TIMEOUT_S = 30

SETTINGS = settings(derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module", autouse=True)
def small_budgets():
    from numalab.commands import group_cpus
    from numalab.models.idle import sim as idle_sim
    from numalab.models.refcount import sim as refcount
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(idle_sim, "MAX_WAKEUPS", 2e4)
        mp.setattr(refcount, "MAX_EVENTS", 1e5)
        mp.setattr(group_cpus, "MAX_MASKS", 1 << 12)
        yield




def _event(what: str) -> None:
    if currently_in_test_context():     # the statistics (--hypothesis-show-statistics)
        event(what)


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with deadline(argv, TIMEOUT_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def check_cli(argv: list[str]) -> int:
    rc, out, err = run_cli(argv)
    _event(f"exit {rc}")
    assert "Traceback" not in err, (argv, err)
    assert rc in (0, 2), (argv, rc, err)
    if rc == 2:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("numalab"), (argv, err)
        assert err.endswith("\n")
    else:
        # success may carry warnings (group-cpus warns on empty masks), nothing else
        assert all(ln.startswith("warning: ") for ln in err.splitlines()), (argv, err)
        assert out.strip(), argv
    return rc


def check_api(what, fn):
    """Call ``fn()``; it returns, or raises a ParameterError with one line."""
    try:
        with deadline(what, TIMEOUT_S):
            result = fn()
        _event("returned")
        return result
    except ParameterError as e:
        _event("ParameterError")
        msg = str(e)
        assert msg and "\n" not in msg and "\r" not in msg, (what, msg)
        return None


# -- values ---------------------------------------------------------------------

SPECIAL_TEXT = ["nan", "NaN", "-nan", "inf", "-inf", "+inf", "Infinity", "1e309", "-1e309",
                "0", "-0", "0.0", "-0.0", "-1", "-1e-300", "1e-300", "5e-324", "1e300",
                "-1e300", "1.7976931348623157e308", "18446744073709551615",
                "18446744073709551616", "-9223372036854775809", "9" * 40, "", " ", "abc",
                "1.5", "0x10", "1_000", "1e3", "2"]

SPECIAL_VALUES = [math.nan, math.inf, -math.inf, 0, 0.0, -0.0, -1, -1e-300, 5e-324, 1e300,
                  2 ** 64, -2 ** 64, 10 ** 400, True, False, None, "1", 1.5]


def odd_text() -> st.SearchStrategy[str]:
    """Text for a numeric option: special spellings, any float, any int."""
    return st.one_of(st.sampled_from(SPECIAL_TEXT),
                     st.floats(allow_nan=True, allow_infinity=True).map(repr),
                     st.integers(min_value=-2 ** 80, max_value=2 ** 80).map(str))


def odd_value() -> st.SearchStrategy:
    """A Python value for an API parameter: specials, any float, any int."""
    return st.one_of(st.sampled_from(SPECIAL_VALUES),
                     st.floats(allow_nan=True, allow_infinity=True),
                     st.integers(min_value=-2 ** 80, max_value=2 ** 80))


@st.composite
def mixed(draw, ordinary: dict, odd: st.SearchStrategy | dict) -> dict:
    """One value per parameter: most ordinary (``ordinary[name]``), up to
    three odd (from ``odd``, or ``odd[name]``) -- so that each odd value is
    met both alone and next to others, and ordinary runs happen too."""
    names = sorted(ordinary)
    chosen = set(draw(st.lists(st.sampled_from(names), max_size=3, unique=True)))
    out = {}
    for name in names:
        if name in chosen:
            strat = odd[name] if isinstance(odd, dict) and name in odd else \
                (odd if not isinstance(odd, dict) else odd_text())
            out[name] = draw(strat)
        else:
            out[name] = draw(ordinary[name])
    return out


def opt(name: str, text: str) -> list[str]:
    # "--x=VALUE": a value starting with "-" is still read as the value
    return [f"{name}={text}"]


def floats_text(lo, hi):
    return st.floats(lo, hi).map(repr)


def ints_text(lo, hi):
    return st.integers(lo, hi).map(str)


# -- the commands ------------------------------------------------------------------

LEVEL_ODD = st.sampled_from(["0", "-1", "nan", "inf", "1e3", "1.5", "99999999999", "65537", "",
                             "x"])


@SETTINGS
@given(v=mixed({"pack": ints_text(1, 2), "numa": ints_text(1, 2), "core": ints_text(1, 3),
                "pu": ints_text(1, 2)}, LEVEL_ODD),
       asym=st.booleans(), as_json=st.booleans())
def test_show(v, asym, as_json):
    argv = ["show", f"pack:{v['pack']} numa:{v['numa']} core:{v['core']} pu:{v['pu']}"]
    argv += ["--allow-asymmetric"] * asym + ["--json"] * as_json
    check_cli(argv)


@SETTINGS
@given(v=mixed({"groups": ints_text(1, 64), "devices": ints_text(1, 8)}, odd_text()),
       variant=st.sampled_from(["mainline", "rotate"]), as_json=st.booleans())
def test_group_cpus(v, variant, as_json):
    argv = ["group-cpus", TOPO, *opt("--groups", v["groups"]), *opt("--devices", v["devices"]),
            "--variant", variant] + ["--json"] * as_json
    check_cli(argv)


PROBE_ORDINARY = {
    "alpha": floats_text(0, 1), "background": floats_text(0, 8),
    "seed": ints_text(0, 2 ** 64 - 1), "count": ints_text(1, 6),
    "node": st.sampled_from(["", "@node0", "@1", "@-1", "@none"]),
    "isolcpus": st.sampled_from(["", "0", "1-2", "3", "0-3:1/2"]),
}
PROBE_ODD = {
    "count": st.sampled_from(["0", "-1", "4097", "99999999999", "nan", "1.5", "", "9" * 40]),
    "node": st.sampled_from(["@2", "@node99999999999", "@nan", "@-2", "@", "@node" + "9" * 40]),
    "isolcpus": st.sampled_from(["0-3", "4", "0-65535", "0-65536", "-1", "nan", "3-1",
                                 "0-3:0/0", "9" * 30, ","]),
    "alpha": odd_text(), "background": odd_text(), "seed": odd_text(),
}


@SETTINGS
@given(v=mixed(PROBE_ORDINARY, PROBE_ODD), kind=st.sampled_from(["nvme", "mlx5", "usb"]),
       policy=st.sampled_from(["mainline", "b", "driver-core", "d", "all", "e"]),
       as_json=st.booleans())
def test_probe(v, kind, policy, as_json):
    argv = ["probe", TOPO, *opt("--devices", f"{kind}:{v['count']}{v['node']}"),
            *opt("--alpha", v["alpha"]), *opt("--background", v["background"]),
            *opt("--seed", v["seed"]), *opt("--isolcpus", v["isolcpus"]), "--policy", policy]
    check_cli(argv + ["--json"] * as_json)


@SETTINGS
@given(v=mixed({"load": floats_text(0.01, 1), "run-us": floats_text(1, 1000),
                "duration": floats_text(0.01, 2), "seed": ints_text(0, 2 ** 64 - 1)},
               odd_text()),
       flags=st.lists(st.sampled_from(["--per-node", "--compare", "--cached-order", "--json"]),
                      unique=True))
def test_idle(v, flags):
    argv = ["idle", TOPO, *[a for k in sorted(v) for a in opt(f"--{k}", v[k])], *flags]
    check_cli(argv)


def test_commands_accept_ordinary_values():
    """The properties above are not met by refusing everything."""
    assert check_cli(["show", TOPO]) == 0
    assert check_cli(["group-cpus", TOPO, "--groups=3", "--devices=2"]) == 0
    assert check_cli(["probe", TOPO, "--devices=nvme:2@node1", "--alpha=0.3",
                      "--background=1.5", "--seed=7", "--isolcpus=0"]) == 0
    assert check_cli(["idle", TOPO, "--load=0.5", "--run-us=20", "--duration=0.5",
                      "--seed=3"]) == 0


# -- the model APIs ------------------------------------------------------------------

@pytest.fixture(scope="module")
def topo():
    return load(TOPO)


@SETTINGS
@given(v=mixed({"alpha": st.floats(0, 1), "background": st.floats(0, 8),
                "thresh": st.floats(0.1, 100), "max_active": st.integers(1, 512),
                "cpu_ms": st.floats(0, 50), "wait_ms": st.floats(0, 50),
                "rounds": st.integers(1, 8), "node": st.integers(-1, 1),
                "seed": st.integers(0, 100)}, odd_value()),
       policy=st.sampled_from(["mainline", "c", "d", "b"]))
def test_probe_api(v, policy):
    from numalab.models.probe.sim import Device, Params, machine, simulate

    def call():
        params = Params(alpha=v["alpha"], background=v["background"],
                        cpu_intensive_thresh_ms=v["thresh"], max_active=v["max_active"])
        devs = [Device("d0", node=v["node"], probe_type="async", cpu_ms=v["cpu_ms"],
                       wait_ms=v["wait_ms"], rounds=v["rounds"]),
                Device("u0", bus="usb", node=0, cpu_ms=1.0, wait_ms=1.0, rounds=2)]
        return simulate(machine(2, 2, 2), devs, policy, seed=v["seed"], params=params)
    run = check_api("probe.simulate", call)
    if run is not None:
        assert all(math.isfinite(p.end) and p.end >= p.start >= 0 for p in run.probes)


@SETTINGS
@given(v=mixed({"load": st.floats(0.01, 1), "run_mean_us": st.floats(1, 1000),
                "duration_ms": st.floats(0.01, 1), "warmup_ms": st.floats(0, 0.5),
                "tasks_per_cpu": st.floats(0.5, 2), "waker_local": st.floats(0, 1),
                "local_ns": st.floats(0, 200), "lat": st.floats(0, 400),
                "seed": st.integers(0, 100)}, odd_value()),
       per_node=st.booleans())
def test_idle_api(topo, v, per_node):
    from numalab.models.idle.sim import simulate
    kw = {k: x for k, x in v.items() if k not in ("lat", "seed")}

    def call():
        return simulate(topo, seed=v["seed"], latency_ns=[[v["lat"], 100.0], [100.0, v["lat"]]],
                        per_node=per_node, **kw)
    r = check_api("idle_sim.simulate", call)
    if r is not None:
        assert r.work_ns >= 0 and math.isfinite(r.overhead_ns)


@SETTINGS
@given(v=mixed({"groups": st.integers(1, 64), "devices": st.integers(1, 8)}, odd_value()),
       variant=st.sampled_from(["mainline", "rotate"]))
def test_group_cpus_api(topo, v, variant):
    from numalab.commands.group_cpus import compute
    r = check_api("group_cpus.compute",
                  lambda: compute(topo, v["groups"], v["devices"], variant))
    if r is not None:
        assert len(r["devices"]) == v["devices"]


@SETTINGS
@given(v=mixed({"work": st.floats(0, 1000), "ops": st.floats(0.5, 4),
                "rate": st.one_of(st.none(), st.floats(1e3, 1e9)), "duration": st.floats(1, 2e4),
                "op_local": st.floats(0.5, 10), "seed": st.integers(0, 100)}, odd_value()),
       mode=st.sampled_from(["shared", "percpu", "x"]), per_cpu=st.booleans())
def test_refcount_api(topo, v, mode, per_cpu):
    from numalab.models.refcount.sim import Latencies, percpu_expected, simulate

    def call():
        lat = Latencies(op_local_ns=v["op_local"])
        w = [v["work"], 300.0] if per_cpu else v["work"]
        return simulate(topo, [0, 1], mode, work_ns=w, ops_per_item=v["ops"],
                        rate_per_cpu=v["rate"], duration_ns=v["duration"], lat=lat,
                        seed=v["seed"])
    r = check_api("refcount.simulate", call)
    if r is not None:
        assert all(0 <= b <= 1 for b in r["busy_per_cpu"]) and r["items_per_s"] >= 0

    def expected():
        return percpu_expected(v["work"], v["ops"], v["rate"], Latencies(op_local_ns=v["op_local"]))
    e = check_api("refcount.percpu_expected", expected)
    if e is not None:
        assert math.isfinite(e["items_per_s"]) and 0 <= e["busy"]


@SETTINGS
@given(v=mixed({"gbytes": st.one_of(st.none(), st.floats(0.1, 20)),
                "duration": st.floats(1, 2e4), "message": st.integers(1, 1 << 22),
                "share": st.floats(0, 1)}, odd_value()),
       mode=st.sampled_from(["shared", "percpu"]))
def test_devmem_api(topo, v, mode):
    from numalab.models.refcount.devmem import Calibration, Scenario, simulate_devmem

    def call():
        sc = Scenario(message_bytes=v["message"], app_put_share=v["share"])
        cal = Calibration(app_work_ns=300.0, net_work_ns=300.0, rx_work_ns=300.0,
                          transfer_ns=45.0, rx_refs_per_frag=1.0)
        return simulate_devmem(topo, [0], [1], mode, cal, sc, gbytes_per_s=v["gbytes"],
                               duration_ns=v["duration"])
    r = check_api("devmem.simulate_devmem", call)
    if r is not None:
        assert math.isfinite(r["gbytes_per_s"]) and r["gbytes_per_s"] >= 0
