"""Where the installed systemd unit lets the service write a JSON lines file.

deploy/systemd/sebridge.service runs with ProtectSystem=strict: the whole file
system is read-only to the service but for its StateDirectory (/var/lib/NAME),
its private /tmp and /var/tmp (PrivateTmp=yes: not the host's), and every
ReadWritePaths= of the unit and its drop-ins. A `jsonl.path` elsewhere fails
with "Read-only file system" at every line, forever; a drop-in line
`ReadWritePaths=FOLDER` allows it. `sebridge check` reads the installed unit
(UNIT_DIR/sebridge.service and sebridge.service.d/*.conf) to say so; the
daemon says the same fix when a write fails so (sink.py). See
docs/ARCHITECTURE.md, "Config".
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["UNIT_DIR", "UNIT_NAME", "drop_in_fix", "unit_forbids"]

UNIT_DIR = "/etc/systemd/system"
UNIT_NAME = "sebridge.service"


def drop_in_fix(folder: str, unit_dir: str = UNIT_DIR) -> str:
    """The drop-in that lets the service write in `folder`, said in one line."""
    return (
        f"allow it with a drop-in, {unit_dir}/{UNIT_NAME}.d/jsonl.conf: "
        f'"[Service]" then "ReadWritePaths={folder}", then `systemctl daemon-reload`'
        " and restart sebridge"
    )


def unit_forbids(path: str, unit_dir: str = UNIT_DIR) -> str | None:
    """Why the installed unit's sandbox forbids writing `path`, with the fix; None when
    it allows it, or no unit with ProtectSystem=strict is installed there."""
    settings = _directives(Path(unit_dir))
    if not settings or settings.get("ProtectSystem", [""])[-1] != "strict":
        return None
    folder = os.path.dirname(os.path.abspath(path))
    writable = [f"/var/lib/{name}" for name in _words(settings.get("StateDirectory", []))]
    writable += [p.lstrip("-") for p in _words(settings.get("ReadWritePaths", []))]
    if any(_under(folder, allowed) for allowed in writable):
        return None
    if settings.get("PrivateTmp", ["no"])[-1] == "yes" and (
        _under(folder, "/tmp") or _under(folder, "/var/tmp")  # noqa: S108 - the unit's, named
    ):
        return (
            f"{path} is in the service's private {folder.split('/')[1]} (the unit's"
            " PrivateTmp=yes): the daemon writes it where no other process looks"
        )
    return (
        f"the unit ({unit_dir}/{UNIT_NAME}) has ProtectSystem=strict: the service cannot"
        f" write {path}; {drop_in_fix(folder, unit_dir)}"
    )


def _directives(unit_dir: Path) -> dict[str, list[str]]:
    """Every Key=value of the unit and its drop-ins (in systemd's order), or {} when
    the unit is not installed."""
    unit = unit_dir / UNIT_NAME
    if not unit.is_file():
        return {}
    drop_ins = sorted((unit_dir / f"{UNIT_NAME}.d").glob("*.conf"))
    found: dict[str, list[str]] = {}
    for file in (unit, *drop_ins):
        try:
            text = file.read_text(encoding="utf-8")
        except OSError:
            continue
        for raw in text.splitlines():
            line = raw.strip()
            if line and not line.startswith(("#", ";", "[")) and "=" in line:
                key, _, value = line.partition("=")
                found.setdefault(key.strip(), []).append(value.strip())
    return found


def _words(values: list[str]) -> list[str]:
    return [word for value in values for word in value.split()]


def _under(folder: str, allowed: str) -> bool:
    allowed = os.path.normpath(allowed)
    return folder == allowed or folder.startswith(allowed.rstrip("/") + "/")
