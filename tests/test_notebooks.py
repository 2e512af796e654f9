"""Every chapter notebook runs top to bottom with quick=True, and the
notebooks in notebooks/ follow the conventions (README, developer section).

Execution goes through numalab.build's cache in the session's quick project
(tests/conftest.py): when the quick book was built earlier in the session,
its executed copy (same key: same source, parameters, data and package) is
checked instead of running the notebook a second time.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import chapter_notebooks, quick_executed
from numalab import build

NOTEBOOKS = chapter_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _tags(cell: dict) -> list[str]:
    return cell.get("metadata", {}).get("tags", [])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_outputs_committed(path):
    dirty = [i + 1 for i, c in enumerate(_cells(path))
             if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_parameters_cell_first(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    assert code and "parameters" in _tags(code[0]), \
        f"{path.name}: the first code cell must be tagged 'parameters'"
    declared = build.notebook_parameters(path)
    for name in ("seed", "quick"):
        assert name in declared, f"{path.name}: the parameters cell must define {name}"
    if "datasets" in declared:
        assert declared["datasets"]["default"].strip() == "[]", \
            f"{path.name}: datasets must default to [] (meaning the default datasets)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_second_cell_enables_renderer(path):
    code = [c for c in _cells(path) if c["cell_type"] == "code"]
    src = "".join(code[1]["source"]) if len(code) > 1 else ""
    assert "render.enable()" in src, \
        f"{path.name}: the second code cell must call numalab.render.enable()"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_executes_quick(path, quick_book):
    project, status, lines = quick_book
    executed = quick_executed(project, path.stem)
    assert executed.is_file(), f"the quick build did not execute {path.name}: {lines[-3:]}"
    cells = _cells(executed)
    code = [c for c in cells if c["cell_type"] == "code"]
    errors = [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, f"{path.name}: {errors[0]['ename']}: {errors[0]['evalue']}"
    assert all(c.get("execution_count") for c in code), \
        f"{path.name}: some code cells did not run"
    injected = [c for c in cells if "injected-parameters" in _tags(c)]
    assert injected and "quick = True" in "".join(injected[0]["source"])


FOLD_RULES = (r"^# For the reviewer's guide", r"^# Where this chapter's measured figures",
              r'ev\.md\("## Summary', r'"## Summary", ""')


@pytest.mark.parametrize("nb", chapter_notebooks(), ids=lambda p: p.stem)
def test_bookkeeping_cells_are_folded(nb):
    """Setup cells (before the first section), the cells that write the
    reviewer's guide's findings, and the cells that generate the summary only
    prepare or record; the book folds their code (hide-input), or removes it
    when the cell only writes a sentence (remove-input), so the page reads as
    prose, charts and the code that teaches."""
    cells = json.loads(nb.read_text())["cells"]
    first_h2 = next(i for i, c in enumerate(cells) if c["cell_type"] == "markdown"
                    and re.search(r"(?m)^## ", "".join(c["source"])))
    unfolded = []
    for i, c in enumerate(cells):
        tags = c.get("metadata", {}).get("tags", [])
        if c["cell_type"] != "code" or "parameters" in tags:
            continue
        src = "".join(c["source"])
        must = i < first_h2 or any(re.search(r, src, re.M) for r in FOLD_RULES)
        # remove-input hides the code entirely (a cell whose only output is Markdown,
        # numalab.evidence.readability): folded enough
        if must and not {"hide-input", "remove-input"} & set(tags):
            unfolded.append(f"cell {i}: {src.splitlines()[0][:60]}")
    assert not unfolded, f"{nb.name}: bookkeeping cells not folded: {unfolded}"
    # and the parameters stay visible: a reader needs to see what they can change
    params = [c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert params and "hide-input" not in params[0]["metadata"]["tags"]
