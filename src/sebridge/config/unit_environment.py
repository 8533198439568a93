"""Where the CLI, run from a shell, finds the environment variables the service gets.

deploy/systemd/sebridge.service.d/environment.conf hands the service the variables
of /etc/sebridge/environment (`EnvironmentFile=`): `${PG_PASSWORD}` in store.url,
libpq's PGPASSWORD. A root shell has none of them, so every command but `run` reads
the same file (the inverse of what EnvironmentFile= does, as
config/unit_credentials.py is for LoadCredential=): the file `environment` in the
config file's folder, which is that file as docs/operations/systemd.md installs both. A
variable the shell already has wins: an operator's export is meant. The file is systemd's
format as docs/operations/systemd.md writes it: one NAME=value a line, the value bare, in
single quotes (literal) or in double quotes (with backslash escapes); blank lines and
lines starting with # or ; are skipped. A line that is none of these is a configuration
error naming the file and the line's number, never its text (it may hold a secret). See
docs/ARCHITECTURE.md, "Config".
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from sebridge.config.loader import DEFAULT_PATH, ENV_VAR
from sebridge.kernel.errors import ConfigError

__all__ = ["FILE", "NAME", "UnitEnvironment", "beside_config"]

NAME = "environment"  # beside the config file: /etc/sebridge/environment as installed
FILE = f"/etc/sebridge/{NAME}"
_LINE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "$": "$", "`": "`"}


@dataclass(frozen=True)
class UnitEnvironment:
    """The unit's environment file, read the way systemd hands it to the service.

    Args:
        path: the file the drop-in's EnvironmentFile= line names.
    """

    path: str = FILE

    def environ(self, environ: Mapping[str, str]) -> tuple[Mapping[str, str], list[str]]:
        """`environ` with the file's variables it lacks, and the names taken from the
        file. A file that is missing or unreadable (the service's own user) adds none."""
        try:
            with open(self.path, encoding="utf-8") as file:
                text = file.read()
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            return environ, []
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot read it: {exc.strerror}") from None
        values = parse(text, self.path)
        taken = [name for name in values if name not in environ]
        return {**environ, **{name: values[name] for name in taken}}, taken


def beside_config(config: str | None, environ: Mapping[str, str]) -> str:
    """The environment file for a config file chosen as the loader chooses it (--config,
    else $SEBRIDGE_CONFIG, else the default): NAME in its folder."""
    chosen = config or environ.get(ENV_VAR) or DEFAULT_PATH
    return os.path.join(os.path.dirname(os.path.abspath(chosen)), NAME)


def parse(text: str, path: str) -> dict[str, str]:
    """NAME -> value from an environment file's text."""
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        match = _LINE.fullmatch(stripped)
        value = _value(match.group(2)) if match else None
        if match is None or value is None:
            raise ConfigError(
                f"{path} line {number}: not NAME=value, NAME='value' or NAME=\"value\""
            )
        values[match.group(1)] = value
    return values


def _value(raw: str) -> str | None:
    """The value as systemd reads it; None when a quote is left open."""
    if raw[:1] == "'":
        return raw[1:-1] if len(raw) > 1 and raw.endswith("'") and "'" not in raw[1:-1] else None
    if raw[:1] == '"':
        out, i = [], 1
        while i < len(raw):
            char = raw[i]
            if char == "\\" and i + 1 < len(raw):
                out.append(_ESCAPES.get(raw[i + 1], "\\" + raw[i + 1]))
                i += 2
            elif char == '"':
                return "".join(out) if i == len(raw) - 1 else None
            else:
                out.append(char)
                i += 1
        return None
    return raw.rstrip()
