"""The publishing workflow (.github/workflows/book.yml) cannot run here, so it
is linted with actionlint and checked against the README's commands."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "book.yml"


def actionlint() -> str | None:
    here = Path(sys.executable).parent / "actionlint"
    return str(here) if here.exists() else shutil.which("actionlint")


def test_actionlint_passes():
    exe = actionlint()
    if exe is None:
        pytest.skip("actionlint is not installed (pip install -e '.[test]' installs it)")
    r = subprocess.run([exe, "-no-color", str(WORKFLOW)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_actions_pinned_by_commit_and_least_permissions():
    text = WORKFLOW.read_text()
    uses = re.findall(r"uses:\s*(\S+)", text)
    assert uses and all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses), uses
    assert {u.split("@")[0] for u in uses} >= {"actions/checkout", "actions/upload-pages-artifact",
                                               "actions/deploy-pages"}
    assert re.search(r"^permissions: \{\}$", text, re.M)          # nothing by default
    assert "pages: write" in text and "id-token: write" in text     # only the deploy job
    assert "container: debian:bookworm" in text


def test_workflow_runs_the_readme_commands():
    text = WORKFLOW.read_text()
    readme = (REPO / "README.md").read_text()
    ci = (REPO / ".ci" / "run").read_text()
    assert "bash .ci/run" in text and "make book" in text
    assert re.search(r"^make test$", ci, re.M)                       # .ci/run = the README's test
    assert "make test" in readme and "make book" in readme
    assert "_build/html" in text and "_build/html" in readme
    assert "github.io" in readme and "Settings" in readme            # how to enable Pages
