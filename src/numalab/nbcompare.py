"""Compare two executed notebooks, ignoring what legitimately changes
between runs: execution metadata, papermill's timing and path metadata,
execution counts, cell ids, and wall-clock timings the notebooks print.

What stays is everything a reader takes as a result: printed numbers,
tables, errors, and chart specs (a Vega-Lite spec holds the chart's data,
so a changed point shows up as a changed spec).

Two entry points:

:func:`normalise`
    an executed notebook (the dict nbformat/JSON gives) -> a plain,
    comparable structure: one entry per cell with its type, source, tags
    and normalised outputs.
:func:`compare`
    two notebooks -> a list of differences, one line each, cell by cell
    (empty when they agree).

Timings are masked only where the text says it is the run's own duration
(``loaded 5 machines in 1.3 s``, ``took 0.52 s``, ``chapter ran in 12.4 ms``,
``notebook run time s   54.2``), never a bare ``52.431 s`` -- that may be a
modelled or measured result the book reports.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable

__all__ = ["TIMING_PATTERNS", "MASK", "mask_timings", "normalise", "compare",
           "compare_files", "load"]

MASK = "<time>"

_NUM = r"\d+(?:[.,]\d+)?"
# Units a notebook's run time is printed in. Not ns/µs: at that scale a
# "time" in this book is a modelled latency, never how long a cell took.
_UNIT = r"(?:ms|milliseconds?|s|secs?|seconds?|min|minutes?)"

#: Regexes whose match is replaced by group 1 followed by :data:`MASK`.
#: Each names the run's duration explicitly: a verb or label of elapsed
#: time immediately before the number.
TIMING_PATTERNS: list[re.Pattern] = [
    # "... in 1.3 s", "took 0.52 s", "ran in 12.4 ms", "after 3 min"
    re.compile(rf"\b((?:in|took|after|elapsed:?)\s+){_NUM}\s*{_UNIT}(?![\w/])"),
    # "run time s   54.2", "wall-clock time: 3.1 s", "elapsed (s): 2.0"
    re.compile(rf"(?i)\b((?:run ?time|wall[- ]?clock(?: time)?|wall time|elapsed)"
               rf"(?:\s*\(?{_UNIT}\)?)?\s*[:=]?\s+){_NUM}(?:\s*{_UNIT}(?![\w/]))?"),
]

# Output types whose strings are free text (masked); other MIME types
# (Vega-Lite specs, images) are compared as they are.
_TEXT_MIME = ("text/plain", "text/markdown", "text/html", "text/latex")

# Per-cell metadata that records the run rather than the content.
_RUN_METADATA = ("execution", "papermill", "collapsed", "scrolled", "jupyter")


def mask_timings(text: str, patterns: Iterable[re.Pattern] = TIMING_PATTERNS) -> str:
    """``text`` with every wall-clock timing of the run replaced by ``<time>``.

    >>> mask_timings("320 configurations in 3.2 s")
    '320 configurations in <time>'
    >>> mask_timings("measured: 52.431 s -> 50.342 s")
    'measured: 52.431 s -> 50.342 s'
    """
    for pat in patterns:
        text = pat.sub(lambda m: m.group(1) + MASK, text)
    return text


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _norm_output(out: dict) -> dict:
    kind = out.get("output_type")
    if kind == "stream":
        return {"output_type": "stream", "name": out.get("name"),
                "text": mask_timings(_text(out.get("text", "")))}
    if kind == "error":
        return {"output_type": "error", "ename": out.get("ename"),
                "evalue": mask_timings(str(out.get("evalue", ""))),
                "traceback": [mask_timings(t) for t in out.get("traceback", [])]}
    data = {}
    for mime, value in sorted(out.get("data", {}).items()):
        if mime in _TEXT_MIME:
            data[mime] = mask_timings(_text(value))
        else:
            data[mime] = value          # chart specs and images: compared whole
    return {"output_type": "result" if kind == "execute_result" else kind,
            "data": data, "metadata": out.get("metadata", {})}


def _merge_streams(outputs: list[dict]) -> list[dict]:
    """Join consecutive stream outputs of one name: how the kernel chunks
    stdout depends on timing, not on what was printed."""
    merged: list[dict] = []
    for o in outputs:
        if (o.get("output_type") == "stream" and merged
                and merged[-1].get("output_type") == "stream"
                and merged[-1].get("name") == o.get("name")):
            merged[-1] = dict(merged[-1], text=_text(merged[-1]["text"]) + _text(o["text"]))
        else:
            merged.append(dict(o))
    return merged


def normalise(nb: dict) -> dict:
    """A comparable copy of an executed notebook.

    Keeps, per cell: type, source, tags, other non-run metadata and the
    outputs (timings masked, streams merged, ``execute_result`` and
    ``display_data`` kept apart). Drops: notebook metadata other than the
    papermill parameters and the kernel name, execution counts, cell ids,
    per-cell ``execution``/``papermill`` metadata.

    >>> nb = {"metadata": {"papermill": {"duration": 1.5, "parameters": {"seed": 0}}},
    ...       "cells": [{"cell_type": "code", "id": "x1", "execution_count": 3,
    ...                  "metadata": {"execution": {"iopub.status.idle": "t"}},
    ...                  "source": "f()", "outputs": [{"output_type": "stream",
    ...                  "name": "stdout", "text": "done in 1.5 s\\n"}]}]}
    >>> normalise(nb)["cells"][0]["outputs"][0]["text"]
    'done in <time>\\n'
    >>> normalise(nb)["parameters"]
    {'seed': 0}
    """
    meta = nb.get("metadata", {})
    cells = []
    for c in nb.get("cells", []):
        cmeta = {k: v for k, v in c.get("metadata", {}).items() if k not in _RUN_METADATA}
        cell = {"cell_type": c.get("cell_type"), "source": _text(c.get("source", "")),
                "metadata": cmeta}
        if c.get("cell_type") == "code":
            cell["outputs"] = [_norm_output(o) for o in _merge_streams(c.get("outputs", []))]
        cells.append(cell)
    return {"parameters": meta.get("papermill", {}).get("parameters", {}),
            "kernel": meta.get("kernelspec", {}).get("name", ""),
            "cells": cells}


def load(path: str | Path) -> dict:
    """Read a notebook file as JSON (no validation: executed copies only)."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _short(value, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _first_json_difference(a, b, path: str = "") -> str | None:
    """Where two JSON values first differ: ``path: a != b``, or None."""
    if type(a) is not type(b):
        return f"{path or '/'}: {_short(a)} != {_short(b)}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}/{k}: {'missing' if k not in a else 'present'} != " \
                       f"{'missing' if k not in b else 'present'}"
            d = _first_json_difference(a[k], b[k], f"{path}/{k}")
            if d:
                return d
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_json_difference(x, y, f"{path}/{i}")
            if d:
                return d
        if len(a) != len(b):
            return f"{path or '/'}: {len(a)} items != {len(b)} items"
        return None
    if a != b:
        if isinstance(a, str) and isinstance(b, str):
            la, lb = a.splitlines(), b.splitlines()
            for i, (x, y) in enumerate(zip(la, lb)):
                if x != y:
                    return f"{path or '/'} line {i + 1}: {_short(x)!r} != {_short(y)!r}"
            return f"{path or '/'}: {len(la)} lines != {len(lb)} lines"
        return f"{path or '/'}: {_short(a)} != {_short(b)}"
    return None


def compare(a: dict, b: dict) -> list[str]:
    """The differences between two executed notebooks, after
    :func:`normalise`, one line per differing cell (cells counted from 1,
    as in the executed notebook, injected-parameters cell included).
    An empty list means the two runs agree.

    >>> def nb(text):
    ...     return {"cells": [{"cell_type": "code", "source": "", "outputs": [
    ...         {"output_type": "stream", "name": "stdout", "text": text}]}]}
    >>> compare(nb("mean 0.31 (took 2.0 s)"), nb("mean 0.31 (took 9.1 s)"))
    []
    >>> compare(nb("mean 0.31"), nb("mean 0.32"))
    ["cell 1: /outputs/0/text line 1: 'mean 0.31' != 'mean 0.32'"]
    """
    na, nb_ = normalise(a), normalise(b)
    diffs = []
    for key in ("parameters", "kernel"):
        d = _first_json_difference(na[key], nb_[key], key)
        if d:
            diffs.append(f"notebook: {d}")
    ca, cb = na["cells"], nb_["cells"]
    for i, (x, y) in enumerate(zip(ca, cb), start=1):
        d = _first_json_difference(x, y)
        if d:
            diffs.append(f"cell {i}: {d}")
    if len(ca) != len(cb):
        diffs.append(f"notebook: {len(ca)} cells != {len(cb)} cells")
    return diffs


def compare_files(a: str | Path, b: str | Path) -> list[str]:
    """:func:`compare` for two notebook files."""
    return compare(load(a), load(b))
