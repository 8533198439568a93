"""glibc's malloc arenas are capped by `sebridge run`, unless the operator set them
(kernel/arenas.py). Each case in a fresh interpreter: the cap is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = "from sebridge.kernel.arenas import cap_malloc_arenas; print(cap_malloc_arenas())"


def capped(environ: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=environ, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.mark.skipif(os.confstr("CS_GNU_LIBC_VERSION") is None, reason="glibc only")
def test_capped_on_glibc() -> None:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert capped(environ) == "True"


def test_the_operators_setting_is_left_alone() -> None:
    environ = {**os.environ, "MALLOC_ARENA_MAX": "4"}
    assert capped(environ) == "False"
