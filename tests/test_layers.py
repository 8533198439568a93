"""The package's layers as docs/ARCHITECTURE.md's "Layout" draws them: at most twelve units
(the folders under src/sebridge), no circle between them, a longest chain of at most ten,
and persistence importing nothing above it. Imports made only for type checking and
imports inside functions count: a circle is a circle however it is written."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sebridge"
# Below the store: what persistence may read. Everything else is a use of the store.
STORE_MAY_IMPORT = {"model", "kernel"}


@cache
def unit_graph() -> dict[str, set[str]]:
    """unit -> the other units its modules import."""
    graph: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        if len(parts) == 1:
            continue  # the package's own __init__ and __main__ are no unit
        unit = parts[0]
        deps = graph.setdefault(unit, set())
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                bits = name.split(".")
                other = bits[1] if bits[0] == "sebridge" and len(bits) > 1 else unit
                if other != unit and (PACKAGE / other).is_dir():
                    deps.add(other)
    return graph


def test_the_root_holds_only_units_and_at_most_twelve() -> None:
    loose = sorted(
        p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")
    )
    assert loose == []
    assert len(unit_graph()) <= 12, sorted(unit_graph())


def test_no_circle_between_units_and_a_chain_of_at_most_ten() -> None:
    graph = unit_graph()
    walking: list[str] = []

    @cache
    def depth(unit: str) -> int:
        assert unit not in walking, "circle: " + " -> ".join([*walking, unit])
        walking.append(unit)
        found = 1 + max((depth(d) for d in graph.get(unit, ())), default=0)
        walking.pop()
        return found

    assert max(depth(u) for u in graph) <= 10


def test_persistence_imports_nothing_above_it() -> None:
    assert unit_graph()["store"] <= STORE_MAY_IMPORT
    assert unit_graph()["model"] <= {"kernel"}
    assert unit_graph()["kernel"] == set()
