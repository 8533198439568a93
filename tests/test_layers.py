"""The package's layers as docs/ARCHITECTURE.md's "Layout" draws them: at most twelve units
(the folders under src/sebridge), no circle between them, a longest chain of at most ten,
and the style guide's "never" rules (STYLE sections 1, 8 and 9) as a table, each row a
rule with its reason. Imports made only for type checking and imports inside functions
count: a circle is a circle, and a rule broken, however it is written."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sebridge"

# (importer, forbidden, why). importer: a unit ("store") or a module ("integrations/base.py"),
# as a path under src/sebridge; "*" is every module. forbidden: what it may not import, a
# dotted name and everything under it ("sebridge.store" forbids sebridge.store.duties too).
_SQL = "only store/ runs SQL"
_NOTIFIERS = "notifiers never touch the store: the store is handed to the core, not to a sink"
_NARROW = (
    "an integration receives the narrow things it uses (its settings, a way to approve, a "
    "clock), not the runtime: the shapes it shares with it are words of model/"
)
_CONFIG = "config/ imports no integration: the composition root hands the loader their sections"
_PERSISTENCE = "persistence imports nothing above it (approval use case, metrics, hooks, ...)"
_WORDS = "shared words live in model/, below everything that speaks them"

_EVERY_UNIT = "cli web integrations engine hooks approval policy config store imds model kernel"


def _none_of(importer: str, units: str, why: str) -> tuple[tuple[str, str, str], ...]:
    """Rows saying `importer` imports none of `units` (names apart by spaces)."""
    return tuple((importer, f"sebridge.{unit}", why) for unit in units.split())


NEVER: tuple[tuple[str, str, str], ...] = (
    ("*", "sqlite3", _SQL),
    ("*", "psycopg", _SQL),
    ("integrations", "sebridge.store", _NOTIFIERS),
    ("integrations", "sebridge.engine", _NARROW + " (model/services.py: Service, Job)"),
    ("integrations", "sebridge.approval", _NARROW + " (model/approval_request.py; a Desk)"),
    ("integrations", "sebridge.hooks", _NARROW + " (model/wording/hooks.py)"),
    ("integrations", "sebridge.imds", _NARROW),
    ("integrations", "sebridge.policy", _NARROW),
    ("integrations", "sebridge.web", _NARROW + " (its routes are handed to the server)"),
    ("integrations", "sebridge.cli", _NARROW),
    ("integrations", "sebridge.config.loader", _NARROW + ", not the whole Config"),
    ("integrations", "sebridge.config.core", _NARROW + ", not the core's sections"),
    ("config", "sebridge.integrations", _CONFIG),
    ("store", "sebridge.approval", _PERSISTENCE + ": not the approval use case"),
    ("store", "sebridge.engine", _PERSISTENCE + ": not the metrics, not the runtime"),
    *_none_of("store", "hooks integrations web cli policy config imds", _PERSISTENCE),
    *_none_of(
        "model", "store approval engine hooks integrations web cli policy config imds", _WORDS
    ),
    *_none_of("kernel", _EVERY_UNIT.replace("kernel", ""), "the kernel imports no other unit"),
)

# Where a rule knowingly does not hold: (importer, forbidden) -> why.
EXCEPT: dict[tuple[str, str], str] = {
    ("store", "sqlite3"): "the store is who runs SQL",
    ("store", "psycopg"): "the store is who runs SQL",
    ("integrations/registry.py", "sebridge.config.loader"): (
        "the composition root: the one module that knows every integration hands the "
        "loader their sections (load_config)"
    ),
}


def imported(tree: ast.AST, module: str) -> Iterator[tuple[int, str]]:
    """Every name `tree` imports, with its line: at the top, under TYPE_CHECKING, inside a
    function, relative ones made absolute (`module` is the importing module's name).
    `from a.b import c` yields a.b and a.b.c: c may be a module."""
    package = module.split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level] + ([base] if base else []))
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


@cache
def modules() -> tuple[tuple[str, tuple[tuple[int, str], ...]], ...]:
    """(path under src/sebridge, what it imports) for every module of the package."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        parts = ["sebridge", *rel.with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = [*parts[:-1], "__init__"]  # relative imports count from the package
        tree = ast.parse(path.read_text(), str(path))
        found.append((rel.as_posix(), tuple(imported(tree, ".".join(parts)))))
    return tuple(found)


def _applies(importer: str, path: str) -> bool:
    return importer == "*" or path == importer or path.startswith(importer.rstrip("/") + "/")


def _under(name: str, forbidden: str) -> bool:
    return name == forbidden or name.startswith(forbidden + ".")


def _excepted(path: str, forbidden: str) -> bool:
    return any(_applies(i, path) and f == forbidden for i, f in EXCEPT)


@cache
def unit_graph() -> dict[str, set[str]]:
    """unit -> the other units its modules import."""
    graph: dict[str, set[str]] = {}
    for path, names in modules():
        if "/" not in path:
            continue  # the package's own __init__ and __main__ are no unit
        unit = path.split("/")[0]
        deps = graph.setdefault(unit, set())
        for _, name in names:
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


_IDS = [f"{importer} never {forbidden}" for importer, forbidden, _ in NEVER]


@pytest.mark.parametrize(("importer", "forbidden", "why"), NEVER, ids=_IDS)
def test_a_never_rule_holds(importer: str, forbidden: str, why: str) -> None:
    broken = {
        f"{path}:{line}": name  # one import statement, said once
        for path, names in modules()
        if _applies(importer, path) and not _excepted(path, forbidden)
        for line, name in reversed(names)
        if _under(name, forbidden)
    }
    assert broken == {}, f"{why}: " + "; ".join(f"{at} imports {n}" for at, n in broken.items())


@pytest.mark.parametrize(("importer", "forbidden", "why"), NEVER, ids=_IDS)
def test_a_never_rule_names_what_exists(importer: str, forbidden: str, why: str) -> None:
    """A misspelt row would hold for ever: its importer is a module or unit of the package,
    and what it forbids is a sebridge module or something the package imports."""
    assert importer == "*" or (PACKAGE / importer).exists(), importer
    if forbidden.startswith("sebridge."):
        where = PACKAGE.joinpath(*forbidden.split(".")[1:])
        assert where.is_dir() or where.with_suffix(".py").is_file(), forbidden
    else:
        assert any(_under(n, forbidden) for _, names in modules() for _, n in names), forbidden


def test_every_exception_is_used() -> None:
    """An exception no import needs is a hole left open: each one excuses a real import."""
    for importer, forbidden in EXCEPT:
        assert any(
            _applies(importer, path) and _under(name, forbidden)
            for path, names in modules()
            for _, name in names
        ), (importer, forbidden)


def test_imports_under_type_checking_inside_functions_and_relative_ones_are_seen() -> None:
    source = """
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from sebridge.store import Store
def f():
    import sebridge.engine.daemon
    from ..model import records
"""
    names = {name for _, name in imported(ast.parse(source), "sebridge.integrations.base")}
    assert {"sebridge.store.Store", "sebridge.engine.daemon", "sebridge.model.records"} <= names
