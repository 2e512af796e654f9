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
