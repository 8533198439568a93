"""deploy/sebridge.service does what its comments say (issue 10, item 8): secrets stay in
root-only files, and the dynamic user the service runs as gets them through LoadCredential=."""

from __future__ import annotations

import re
from pathlib import Path

from sebridge.config import DispatchConfig
from sebridge.integrations.registry import config_from_mapping as from_mapping

UNIT = Path(__file__).resolve().parent.parent / "deploy" / "sebridge.service"


def directives() -> dict[str, list[str]]:
    """Every `Key=value` of the unit (comments left out), values in file order."""
    found: dict[str, list[str]] = {}
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(("#", ";", "[")) and "=" in line:
            key, _, value = line.partition("=")
            found.setdefault(key.strip(), []).append(value.strip())
    return found


def comments() -> str:
    lines = UNIT.read_text(encoding="utf-8").splitlines()
    return "\n".join(line[1:].strip() for line in lines if line.startswith("#"))


def test_the_dynamic_user_gets_the_root_only_secrets_through_load_credential(
    tmp_path: Path,
) -> None:
    unit = directives()
    assert unit["DynamicUser"] == ["yes"]
    # The folder the comments tell a person to create root-only is the one loaded.
    (folder,) = re.findall(r"install -d -m 0700 (\S+)", comments())
    (credential,) = unit["LoadCredential"]
    cred_id, _, path = credential.partition(":")
    assert path == folder
    # The config line the comments show reads the secret where systemd puts it:
    # a folder's files as ${CREDENTIALS_DIRECTORY}/<id>_<file name>.
    (written,) = re.findall(rf"> {re.escape(folder)}/(\S+)\)", comments())
    (key, value) = re.findall(r'^(\w+_file) = "([^"]+)"$', comments(), re.M)[0]
    assert value == f"${{CREDENTIALS_DIRECTORY}}/{cred_id}_{written}"
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / f"{cred_id}_{written}").write_text("xoxb-from-systemd\n")
    config = from_mapping(
        {"slack": {key: value, "channel": "C0123456789", "app_token": "xapp-1"}},
        environ={"CREDENTIALS_DIRECTORY": str(credentials)},
    )
    assert config.section("slack").bot_token.reveal() == "xoxb-from-systemd"


def test_a_stop_fits_inside_the_units_stop_timeout() -> None:
    (timeout,) = directives()["TimeoutStopSec"]
    longest_grace = DispatchConfig.__dataclass_fields__["shutdown_grace_seconds"].metadata["le"]
    assert longest_grace + 1 < float(timeout)
