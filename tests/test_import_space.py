"""One import space (tests/import_space.py): a file of tests/ loaded by two names is found,
whichever two; one name each is not. The session-wide check is conftest's
`one_import_space`."""

from __future__ import annotations

import importlib.util
import sys

import helpers
from fakes import slack
from import_space import loaded_twice


def test_a_module_imported_by_two_names_is_found() -> None:
    spec = importlib.util.spec_from_file_location("tests.helpers", helpers.__file__)
    assert spec is not None and spec.loader is not None
    second = importlib.util.module_from_spec(spec)  # what `from tests.helpers import` makes
    spec.loader.exec_module(second)
    assert second.wait_until is not helpers.wait_until  # two copies of every global
    found = loaded_twice({"helpers": helpers, "tests.helpers": second, "slack": slack})
    assert found == ["tests/helpers.py: helpers, tests.helpers"]


def test_a_tests_dot_name_alone_is_found() -> None:
    assert loaded_twice({"tests.fakes.slack": slack}) == ["tests/fakes/slack.py: tests.fakes.slack"]


def test_this_session_has_one_import_space_so_far() -> None:
    assert loaded_twice(sys.modules) == []
    assert loaded_twice({"helpers": helpers, "fakes.slack": slack}) == []
