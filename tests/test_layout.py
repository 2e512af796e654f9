"""The package's layout: no import circles, and README's source-tree table is true.

The house reads dump -> topology -> kernel port -> model -> measurement ->
comparison -> chart -> book. An import circle hides which of two modules is
the foundation, so every import of a numalab module, at module level or
inside a function, is an edge here, and the graph must have no cycle.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "src" / "numalab"


def _modules() -> dict[str, Path]:
    """Module name -> file, for every .py file of the package."""
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(ROOT / "src").with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _resolve(module: str, is_pkg: bool, level: int, name: str | None) -> str:
    """Absolute module named by ``from <level dots><name> import``."""
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_pkg:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph() -> nx.DiGraph:
    """Directed graph: an edge a -> b when module a imports numalab module b.

    ``from pkg import name`` counts as importing ``pkg.name`` when that is a
    module, else as importing ``pkg``. Imports of a module's own ancestor
    packages are left out: Python runs a package's ``__init__`` before any of
    its modules whatever the module says.
    """
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node.level, node.module)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in mods else base)
            for t in targets:
                while t and t not in mods:
                    t = t.rpartition(".")[0]
                if t and t != mod and not mod.startswith(t + "."):
                    g.add_edge(mod, t)
    return g


def test_graph_sees_known_edges():
    g = import_graph()
    # a module-level, a relative and a function-level import
    assert g.has_edge("numalab.models.probe.calibrate", "numalab.models.probe.sim")
    assert g.has_edge("numalab.models.irq.sweep", "numalab.models.irq.load")
    assert g.has_edge("numalab.models.refcount.sim", "numalab.measure.atomics")


def test_no_import_circle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c + c[:1]) for c in cycles[:5])


def test_circle_detector_finds_a_planted_circle():
    g = import_graph()
    g.add_edge("numalab.models.probe.sim", "numalab.models.probe.calibrate")
    assert list(nx.simple_cycles(g))


def _table_paths() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("### Source tree", 1)[1].split("\n### ", 1)[0]
    paths = []
    for row in section.splitlines():
        if row.startswith("| `"):
            first = row.split("|")[1]
            paths += re.findall(r"`([^`]+)`", first)
    return paths


def test_readme_source_tree_paths_exist():
    paths = _table_paths()
    assert len(paths) > 10
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"README's source-tree table names missing paths: {missing}"


def test_readme_source_tree_covers_the_package():
    """Every module and subpackage directly under src/numalab/ and
    src/numalab/models/ has a row (or is inside one that has)."""
    paths = {p.rstrip("/") for p in _table_paths()}
    entries = [p for p in PKG.iterdir() if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
               and p.name not in ("__init__.py", "__main__.py")]
    entries += [p for p in (PKG / "models").iterdir() if p.is_dir() and (p / "__init__.py").exists()]
    missing = []
    for p in entries:
        rel = str(p.relative_to(ROOT))
        if not any(rel == q or rel.startswith(q + "/") for q in paths):
            missing.append(rel)
    assert not missing, f"README's source-tree table leaves out: {missing}"
