"""Deterministic results kept on disk, computed once per inputs.

A chapter and its evidence page run at the same time and often ask for the
same slow, deterministic result (a fit, a sweep, a model-vs-measurement
table). :func:`cached` stores it under the checkout's ``.numalab-cache`` in a
file named by a digest of everything the result depends on (the caller
passes that as ``key``: arguments, inputs, a fingerprint of the model's
code), so a changed input or model never reuses an old result. The first
caller takes the key's lock and computes; a second one waits and reads the
stored copy. A damaged entry is computed again.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> calls = []
>>> f = lambda: calls.append(1) or {"x": 1}
>>> cached("demo", {"a": 1}, f, cache_dir=d), cached("demo", {"a": 1}, f, cache_dir=d), len(calls)
({'x': 1}, {'x': 1}, 1)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any, Callable

__all__ = ["cached", "key_digest", "folder"]


def key_digest(key: Any, n: int = 32) -> str:
    """A stable digest of ``key`` (JSON with sorted keys; tuples and ranges
    as lists, anything else by ``repr``).

    >>> key_digest({"b": (1, 2), "a": range(2)}) == key_digest({"a": [0, 1], "b": [1, 2]})
    True
    """
    def norm(v):
        if isinstance(v, (tuple, range)):
            return [norm(x) for x in v]
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {str(k): norm(x) for k, x in v.items()}
        return v
    text = json.dumps(norm(key), default=repr, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def folder(name: str) -> Path | None:
    """``.numalab-cache/NAME`` in the checkout, or None outside one."""
    try:
        from .datasets import repo_root
        return repo_root() / ".numalab-cache" / name
    except Exception:      # noqa: BLE001 - not in a checkout: no disk cache
        return None


def cached(name: str, key: Any, compute: Callable[[], Any], cache_dir=None, *,
           dumps: Callable[[Any], bytes] = pickle.dumps,
           loads: Callable[[bytes], Any] = pickle.loads, suffix: str = ".pickle") -> Any:
    """``compute()``, or its stored copy for the same ``key``.

    ``cache_dir`` defaults to :func:`folder` (``name``); outside a checkout
    the result is computed and not stored. ``dumps``/``loads``/``suffix``
    choose the format (pickle by default; a JSON result may use JSON)."""
    base = Path(cache_dir) if cache_dir is not None else folder(name)
    if base is None:
        return compute()
    path = base / f"{key_digest(key)}{suffix}"

    def stored():
        try:
            return loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, EOFError, pickle.UnpicklingError):   # a damaged entry
            return None

    out = stored()
    if out is not None:
        return out
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = stored()
        if out is None:
            out = compute()
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_bytes(dumps(out))
            os.replace(tmp, path)        # a concurrent reader sees all or nothing
    return out
