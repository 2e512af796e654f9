"""The CLI turns input errors into one line and exit status 2."""

import subprocess
import sys

from numalab.cli import main


def test_missing_path_is_one_line_exit_2(capsys, tmp_path):
    rc = main(["show", str(tmp_path / "nope.tar.bz2")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "nope.tar.bz2" in err and "Traceback" not in err


def test_unknown_format(capsys, tmp_path):
    p = tmp_path / "machine.bin"
    p.write_bytes(b"\0\1")
    assert main(["show", str(p)]) == 2
    assert "unknown topology format" in capsys.readouterr().err


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "numalab", "--help"], capture_output=True,
                         text=True, check=True).stdout
    assert "show" in out


def test_group_cpus_warns_on_empty_masks_and_counts_present_cpus():
    import json
    import subprocess
    import sys
    hybrid = "data/hwloc/linux/20em64t-hybrid-1p6c2t+2ca4co1t.tar.bz2"
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    if not (root / hybrid).exists():
        import pytest
        pytest.skip("hybrid dump not present")
    out = subprocess.run([sys.executable, "-m", "numalab", "group-cpus", hybrid, "-g", "20",
                          "--variant", "rotate"], capture_output=True, text=True, cwd=root)
    assert out.returncode == 0 and "warning: device 0 has" in out.stdout and "-EINVAL" in out.stdout
    js = subprocess.run([sys.executable, "-m", "numalab", "group-cpus", hybrid, "-g", "20",
                         "--variant", "rotate", "--json"], capture_output=True, text=True, cwd=root)
    res = json.loads(js.stdout)
    assert res["cpu_set"] == "present" and res["devices"][0]["empty_masks"] >= 1
    assert "warning" in js.stderr
    ok = subprocess.run([sys.executable, "-m", "numalab", "group-cpus", hybrid, "-g", "20"],
                        capture_output=True, text=True, cwd=root)
    assert "warning" not in ok.stdout
