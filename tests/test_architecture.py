"""The import-boundary check of ARCHITECTURE.md: no module of respect_jax imports a higher layer.

Every import statement of the package is read with ``ast`` (those inside functions too: a lazy import is
still a dependency), mapped to its top-level unit (``respect_jax.<unit>``) and checked against the
layer table below, which ARCHITECTURE.md documents. A unit may import its own unit and any unit of a lower
layer; units of one layer may not import each other unless the pair is listed in :data:`SAME_LAYER`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "respect_jax"

#: layer of every top-level unit of the package, lowest first (ARCHITECTURE.md, "Layers")
LAYERS: dict[str, int] = {
    # 0: data and plumbing that know nothing of scheduling
    "graphs": 0, "resources": 0, "reporting": 0, "compile_cache": 0, "pytree": 0,
    # 1: the cost model and its NumPy twin; reading and writing schedule files
    "costs": 1, "reference": 1, "schedule_files": 1,
    # 2: the MDP, the hill-climbing moves every solver and decoder shares, figures of a schedule
    "env": 2, "local_search": 2, "viz": 2,
    # 3: solvers (exact, heuristic, batched Gumbel); 4: labelling with them; 5: the learned schedulers
    "solvers": 3, "labels": 4, "policy": 5,
    # 6: the training harness; 7: what trains on it or deploys
    "train": 6, "respect_pointer": 7, "edge_cluster": 7, "realtime": 7, "coral": 7,
    # 8: evaluation, benchmarks and experiments across them; 9: the Python API; 10: command lines
    "benchmarks": 8, "policy_evaluation": 8, "experiments": 8, "api": 9, "cli": 10,
}

#: (importer, imported) pairs allowed although they break the rule, each with its reason (ARCHITECTURE.md)
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("solvers", "api"): "respect_jax.solvers is callable as rj.solvers() (the API function it shadows): one lazy call",
}


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "respect_jax" and len(parts) > 1 else None


def _imports_of(source: str, package: list[str]) -> set[str]:
    """Every respect_jax module that ``source`` (a module of package ``package``, e.g. ["respect_jax",
    "solvers"]) imports: absolute and relative imports, at any depth of the file."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return {m for m in found if m.startswith("respect_jax")}


def _imports(path: Path) -> set[str]:
    return _imports_of(path.read_text(), list(path.relative_to(PACKAGE.parent).parts[:-1]))


def _edges() -> dict[tuple[str, str], list[str]]:
    """(importer unit, imported unit) -> files, for every import across units."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        if len(rel.parts) == 2 and path.name == "__init__.py":
            continue  # respect_jax/__init__.py: the public surface re-exports the API
        importer = _unit(".".join(rel.with_suffix("").parts))
        for module in _imports(path):
            imported = _unit(module)
            if imported and importer and imported != importer:
                edges.setdefault((importer, imported), []).append(str(rel))
    return edges


def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")}
    missing = sorted(units - set(LAYERS))
    assert not missing, f"add these units to LAYERS (and ARCHITECTURE.md): {missing}"


def test_no_module_imports_a_higher_layer():
    bad = []
    for (importer, imported), files in sorted(_edges().items()):
        if (importer, imported) in EXCEPTIONS:
            continue
        low, high = LAYERS[imported], LAYERS[importer]
        if low >= high:
            bad.append(f"{importer} (layer {high}) imports {imported} (layer {low}) in {', '.join(sorted(set(files)))}")
    assert not bad, "\n".join(bad)


def test_the_exceptions_are_still_needed():
    edges = _edges()
    stale = [pair for pair in EXCEPTIONS if pair not in edges]
    assert not stale, f"remove these exceptions (no such import any more): {stale}"


@pytest.mark.parametrize("source", [
    "from respect_jax.cli.common import x\n",
    "import respect_jax.cli.common\n",
    "def f():\n    from ..cli import common\n",
    "def f():\n    from ...respect_jax.cli import common\n",
])
def test_the_reader_sees_top_level_lazy_and_relative_imports(source):
    """An upward import is found wherever and however it is written (a check that cannot fail is no check)."""
    found = _imports_of(source, ["respect_jax", "solvers"])
    assert any(_unit(m) == "cli" for m in found), found
