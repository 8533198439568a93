"""One import space for tests/: every module of this folder is imported by one name.

pytest puts tests/ on sys.path (the conftest's folder, no __init__.py: "prepend" import
mode), so the tests, the fakes and the scripts they load import `helpers`, `pg`,
`fakes.slack`, `link_bridge`... by those names alone. pyproject's `pythonpath = ["."]`
puts the repository root there too (for `sebridge` from a checkout), through which
`tests.helpers` would also import: the same file as a second module, with globals of its
own (a second FakeSlack class, whose instances fail `isinstance` against the first; a
second lock, registry or counter). conftest's `one_import_space` fixture looks at the end
of each session (each worker's) and fails it when any module of tests/ was loaded by a
second name or under `tests.`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def loaded_twice(modules: Mapping[str, ModuleType]) -> list[str]:
    """Each file of tests/ imported under more than one name, or by a `tests.` name, as
    "path: name, name" (empty: one import space)."""
    names: dict[Path, list[str]] = {}
    for name, module in list(modules.items()):
        file = getattr(module, "__file__", None)
        if file is None:
            continue
        path = Path(file).resolve()
        if path.is_relative_to(HERE):
            names.setdefault(path, []).append(name)
    return [
        f"{path.relative_to(HERE.parent)}: {', '.join(sorted(found))}"
        for path, found in sorted(names.items())
        if len(found) > 1 or any(n == "tests" or n.startswith("tests.") for n in found)
    ]
