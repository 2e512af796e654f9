"""numalab lab sweep without QEMU: a fake boot function (a task that writes a
tiny fake dump) on a real Dask LocalCluster (2 worker processes, loopback
only), then on a scheduler and two workers started as separate processes.
Tested: content addressing, resumability, retry-once, failure reporting,
progress lines, the unexpressible machines' report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from numalab.lab import LabError
from numalab.lab.sweep import load_matrix, parse_layout, plan_sweep, run_sweep, task_key

REPO = Path(__file__).resolve().parents[1]
HWLOC = REPO / "data" / "hwloc" / "linux"
FAKE_SHA = "ab" * 32
_TRIES: dict[str, int] = {}


def fake_resolve(query: str, sha: str = FAKE_SHA) -> dict:
    return {"kernel": f"{query}.0-fake", "upstream": f"{query}.0", "packages": [sha]}


def fake_boot(task: dict, workdir: Path) -> Path:
    """Writes a tiny 'dump' naming the task; ``cmdline`` steers failures:
    ``fail=always`` always raises, ``fail=once`` raises on the first try."""
    cmd = task["args"]["append"]
    _TRIES[task["key"]] = _TRIES.get(task["key"], 0) + 1
    if cmd == "fail=always" or (cmd == "fail=once" and _TRIES[task["key"]] == 1):
        raise LabError(f"fake guest oopsed (try {_TRIES[task['key']]})")
    p = workdir / task["name"]
    p.write_text(json.dumps({"key": task["key"], "pid": os.getpid()}))
    return p


def _matrix(tmp_path: Path, cmdlines=("", "fail=once", "fail=always")) -> Path:
    m = tmp_path / "matrix.toml"
    machines = [str(HWLOC / "16amd64-8n2c.tar.bz2"),           # exact
                "pack:1 numa:2 core:2 pu:1",                    # exact, synthetic
                str(HWLOC / "16em64t-4s2c2t.tar.bz2")]          # smt-apart numbering
    m.write_text(f"machines = {json.dumps(machines)}\nkernels = [\"7.2\"]\n"
                 f"nvme = [\"per-node:1:2\"]\ncmdline = {json.dumps(list(cmdlines))}\n")
    return m


def test_layouts():
    from numalab.lab.spec import machine_from_text
    m = machine_from_text("pack:1 core:4 pu:1", node_cpus="0-1;2-3;", node_memory="384,384,256")
    assert parse_layout("per-node:2").options(m) == ["2@0:4", "2@1:4"]   # not the CPU-less node
    assert parse_layout("per-node:1:8").options(m) == ["1@0:8", "1@1:8"]
    assert parse_layout(" 3@0:8   1@1:2 ").options(m) == ["3@0:8", "1@1:2"]
    for bad in ("3@0", "per-node:0", "per-node:1:999", "node0:3", "40@0:4"):
        with pytest.raises(LabError):
            parse_layout(bad)


def test_plan_is_content_addressed(tmp_path):
    m = load_matrix(_matrix(tmp_path))
    tasks, refused = plan_sweep(m, {"7.2": fake_resolve("7.2")})
    assert len(tasks) == 2 * 3 and [r["machine"] for r in refused] == ["16em64t-4s2c2t"]
    assert refused[0]["reasons"][0].startswith("CPU numbering: CPU 0's SMT siblings are CPUs 0,8")
    for t in tasks:
        assert t["key"] == task_key(t["spec"]) and t["key"][:12] in t["name"]
        assert t["command"].startswith("numalab lab run --kernel 7.2.0-fake --topology ")
        assert t["command"].endswith(f"-o {t['name']}")
    # the same matrix plans the same keys; another kernel package, other keys
    again, _ = plan_sweep(m, {"7.2": fake_resolve("7.2")})
    assert [t["key"] for t in again] == [t["key"] for t in tasks]
    other, _ = plan_sweep(m, {"7.2": fake_resolve("7.2", sha="cd" * 32)})
    assert not {t["key"] for t in other} & {t["key"] for t in tasks}
    eight = next(t for t in tasks if t["spec"]["machine"] == "16amd64-8n2c")
    assert eight["args"]["nvme"] == [f"1@{n}:2" for n in range(8)]


def _check_first_run(summary, out, lines):
    c = summary["counts"]
    assert c == {"booted": 4, "existing": 0, "failed": 2, "unexpressible": 1}
    rows = {(r["machine"], r["cmdline"]): r for r in summary["tasks"]}
    assert all(rows[(m, "fail=once")]["status"] == "booted" and
               [a["ok"] for a in rows[(m, "fail=once")]["attempts"]] == [False, True]
               for m in ("16amd64-8n2c", "pack:1 numa:2 core:2 pu:1"))
    failures = json.loads((out / "failures.json").read_text())
    assert len(failures) == 2
    for f in failures:       # retried once, then reported with both errors
        assert [a["ok"] for a in f["attempts"]] == [False, False]
        assert "fake guest oopsed (try 2)" in f["attempts"][1]["error"]
    booted = [r for r in summary["tasks"] if r["status"] == "booted"]
    for r in booted:
        dump = json.loads((out / r["name"]).read_text())
        assert dump["key"] == r["key"]
    assert len({json.loads((out / r["name"]).read_text())["pid"] for r in booted}) >= 1
    assert any(line.startswith("6/6 boots done (2 failed)") for line in lines)
    assert any("ETA" in line for line in lines)
    assert any(line.startswith("not expressible: 16em64t-4s2c2t") for line in lines)
    assert json.loads((out / "sweep.json").read_text())["counts"] == c


def test_sweep_on_a_local_cluster_resumes_and_reports(tmp_path):
    out = tmp_path / "results"
    lines: list[str] = []
    summary = run_sweep(_matrix(tmp_path), out, workers=2, boot=fake_boot,
                        resolve=fake_resolve, say=lines.append, dashboard=True)
    _check_first_run(summary, out, lines)
    assert any(line.startswith("dask: LocalCluster, 2 worker(s); dashboard http://127.0.0.1:")
               for line in lines)
    assert summary["workers"] == 2
    # a rerun boots nothing that is there, and tries the failed ones again
    lines.clear()
    again = run_sweep(_matrix(tmp_path), out, workers=2, boot=fake_boot,
                      resolve=fake_resolve, say=lines.append, dashboard=False)
    assert again["counts"] == {"booted": 0, "existing": 4, "failed": 2, "unexpressible": 1}
    assert lines[1].startswith("6 boot(s) planned, 4 already in")
    # a matrix without the failing boots: everything is there, no cluster starts
    lines.clear()
    done = run_sweep(_matrix(tmp_path, cmdlines=("",)), out, workers=2, boot=fake_boot,
                     resolve=fake_resolve, say=lines.append)
    assert done["counts"] == {"booted": 0, "existing": 2, "failed": 0, "unexpressible": 1}
    assert not any(line.startswith("dask:") for line in lines)
    assert json.loads((out / "failures.json").read_text()) == []


def _start(args, log: Path) -> subprocess.Popen:
    # the scheduler and workers unpickle this module's fake boot: they import it from tests/
    # (LocalCluster's workers inherit the test's sys.path)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent))
    return subprocess.Popen([sys.executable, "-m", *args], stdout=log.open("w"),
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=log.parent,
                            env=env)


def test_sweep_on_a_cluster_started_by_hand(tmp_path):
    """dask scheduler + two dask workers as separate processes, on loopback."""
    sched_file = tmp_path / "scheduler.json"
    procs = [_start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                     "--no-dashboard", "--scheduler-file", str(sched_file)],
                    tmp_path / "scheduler.log")]
    try:
        deadline = time.monotonic() + 60
        while not sched_file.is_file() and time.monotonic() < deadline:
            assert procs[0].poll() is None, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        assert address.startswith("tcp://127.0.0.1:")
        for i in range(2):
            procs.append(_start(["distributed.cli.dask_worker", address, "--nthreads", "1",
                                 "--nworkers", "1", "--host", "127.0.0.1", "--no-dashboard",
                                 "--no-nanny"], tmp_path / f"worker{i}.log"))
        out = tmp_path / "results"
        lines: list[str] = []
        from distributed import Client
        with Client(address, timeout=30) as c:
            c.wait_for_workers(2, timeout=60)
        summary = run_sweep(_matrix(tmp_path), out, scheduler=address, boot=fake_boot,
                            resolve=fake_resolve, say=lines.append, dashboard=False)
        _check_first_run(summary, out, lines)
        assert summary["workers"] == 2 and summary["scheduler"] == address
        assert any(line.startswith(f"dask: scheduler {address}, 2 worker(s)") for line in lines)
        with Client(address, timeout=30) as c:
            c.shutdown()
        # the scheduler and workers now stop by themselves; a SIGTERM in the
        # middle of that shutdown made a worker hang for the whole wait below
        # (20 s each, most of this test's time), so give them time first
        deadline = time.monotonic() + 15
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)


def test_a_scheduler_without_workers_is_one_line(tmp_path):
    with pytest.raises(LabError, match="cannot connect|no worker joined"):
        run_sweep(_matrix(tmp_path), tmp_path / "r", scheduler="tcp://127.0.0.1:9",
                  boot=fake_boot, resolve=fake_resolve, say=lambda m: None,
                  connect_timeout=2)


def test_dry_run_prints_the_plan(tmp_path, capsys, monkeypatch):
    from numalab.cli import main
    import numalab.lab.sweep as sweep
    monkeypatch.setattr(sweep, "resolve_kernel", lambda q, progress=None: fake_resolve(q))
    assert main(["lab", "sweep", str(_matrix(tmp_path)), "-o", str(tmp_path / "r"),
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("6 boot(s), 1 not expressible")
    assert "refused   16em64t-4s2c2t: CPU numbering" in out
    assert not (tmp_path / "r").exists()


def test_bench_lab_is_registered_and_projects():
    from numalab.measure.bench import targets
    from numalab.measure.lab import project_wall
    assert "lab" in targets()
    # 4 boots of 10 s and 20 s on 2 workers: 20+10 on each -> 30 s; on 1 worker the sum
    assert project_wall([10.0, 20.0], 4, 2) == 30.0
    assert project_wall([10.0, 20.0], 4, 1) == 60.0
    # more workers never take longer, and never less than the longest boot
    walls = [project_wall([110.0, 150.0, 40.0], 200, w) for w in (1, 2, 8, 32, 500)]
    assert walls == sorted(walls, reverse=True) and walls[-1] == 150.0


def test_a_finished_sweep_projected_on_more_workers():
    from numalab.measure.lab import render, sweep_projection
    summary = {"matrix": "m.toml", "wall_seconds": 100.0, "workers": 2,
               "tasks": [{"status": "booted", "seconds": s} for s in (60.0, 30.0, 30.0)]
               + [{"status": "failed", "seconds": 5.0}, {"status": "existing", "seconds": 0}]}
    r = sweep_projection(summary, (1, 2, 3))
    assert r["boots"] == 3 and r["failed"] == 1
    assert r["startup_s"] == 40.0                      # 100 s wall, 60 s of boots on 2 workers
    assert [p["wall_s"] for p in r["projection"]] == [160.0, 100.0, 100.0]
    assert "3 boots (1 failed) in 100 s wall on 2 worker(s)" in render(r)
    with pytest.raises(ValueError):
        sweep_projection({"wall_seconds": 1.0, "tasks": [{"status": "existing", "seconds": 0}]})
