"""What a hook's output is masked of: every secret value the config holds (config/masked.py),
however it was given (inline, `${VAR}`, `*_file`), and the pieces of them a program may
print on their own."""

from __future__ import annotations

import base64
import secrets
import sys
from datetime import UTC, datetime
from pathlib import Path

from sebridge.config.loader import Config
from sebridge.config.masked import secret_values
from sebridge.hooks.process import run_hook
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.kernel.redact import Masker
from sebridge.model import ScheduledEvent

TEAMS = "https://prod-00.westeurope.logic.azure.com:443/workflows/0123abcd/triggers/manual/paths/invoke?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig=SiGnAtUrE0123456789abcdef"
LINK_KEY = "k3y-Hq7Tz2Wd9Lr4Xv8Bn3Kp6Sm1Fg5Jc0"


def test_every_secret_of_every_section_however_given(tmp_path: Path) -> None:
    (tmp_path / "app").write_text("xapp-1-from-a-file\n")
    (tmp_path / "jira").write_text("ATATT-jira-from-a-file\n")
    config = from_mapping(
        {
            "store": {"url": "postgresql://sebridge:p%40ss%2Fword@db.example/sebridge"},
            "http": {"link_secret": LINK_KEY},
            "slack": {
                "bot_token": "xoxb-${BOT_PART}",
                "app_token_file": str(tmp_path / "app"),
                "channel": "C0123456789",
            },
            "jira": {
                "url": "https://example.atlassian.net",
                "email": "ops@example.com",
                "api_token_file": str(tmp_path / "jira"),
                "project": "OPS",
            },
            "teams": {"webhook_url": "${TEAMS_URL}"},
        },
        environ={"BOT_PART": "4242-bot-part", "TEAMS_URL": TEAMS, "PGPASSWORD": "pg-env-pw"},
    )
    values = secret_values(config)
    for value in (
        "xoxb-4242-bot-part",  # the secret as used
        "4242-bot-part",  # and the variable's own value, which `env` prints alone
        "xapp-1-from-a-file",
        "ATATT-jira-from-a-file",
        TEAMS,
        "SiGnAtUrE0123456789abcdef",  # a piece of the webhook URL a server echoes
        LINK_KEY,
        "p@ss/word",  # the store URL's password, decoded
        "p%40ss%2Fword",  # and as written
        "pg-env-pw",  # libpq's PGPASSWORD beside a PostgreSQL store
    ):
        assert value in values, value
    # what is no secret stays as it is
    assert not {"ops@example.com", "C0123456789", "sebridge", "db.example"} & set(values)
    shown = Masker(values).mask(f"BOT_PART=4242-bot-part\n{TEAMS}\nsig=SiGnAtUrE0123456789abcdef")
    assert shown == "BOT_PART=***\n***\nsig=***"


def test_a_config_without_secrets_masks_nothing() -> None:
    config = from_mapping({"store": {"url": "sqlite:////var/lib/sebridge/state.db"}}, environ={})
    assert secret_values(config) == ()
    assert not Masker(secret_values(config))


def test_pgpassword_is_no_secret_of_a_sqlite_store() -> None:
    config = from_mapping({}, environ={"PGPASSWORD": "unrelated"})
    assert secret_values(config) == ()


def test_secrets_not_read_are_not_there_to_mask() -> None:
    config = from_mapping(
        {"slack": {"bot_token": "${T}", "app_token": "xapp-1", "channel": "C0123456789"}},
        environ={"T": "xoxb-1"},
        read_secrets=False,
    )
    assert secret_values(config) == ()


def test_the_values_never_show_in_the_configs_repr() -> None:
    config = from_mapping(
        {"slack": {"bot_token": "${T}", "app_token": "xapp-1", "channel": "C0123456789"}},
        environ={"T": "xoxb-in-a-variable"},
    )
    assert isinstance(config, Config) and config.secret_parts
    assert "xoxb-in-a-variable" not in repr(config)


def test_a_hooks_env_values_are_not_shown_by_redacted() -> None:
    config = from_mapping(
        {"hooks": {"drain": {"command": ["/bin/true"], "env": {"VAULT_TOKEN": "${V}"}}}},
        environ={"V": "hvs.never-shown"},
    )
    assert config.hooks["drain"].env == {"VAULT_TOKEN": "hvs.never-shown"}
    shown = config.redacted()["hooks"]["drain"]
    assert shown["env"] == {"VAULT_TOKEN": "***"} and shown["command"] == ["/bin/true"]


def test_a_hook_printing_its_env_and_the_common_forms_of_secrets_shows_none(
    tmp_path: Path,
) -> None:
    """Issue 37, item 4: an `env` value, `curl -v`'s Basic header (base64 of user:token),
    a webhook key without its whsec_ prefix and an SMTP AUTH PLAIN line, each printed by
    a real hook run with the daemon's mask; a short env value is a word and stays."""
    key = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
    token, password, vault = (
        "ATATT-" + secrets.token_hex(12),
        "pw-" + secrets.token_hex(8),
        "s.V4ultT0ken9",
    )
    basic = base64.b64encode(f"ops@example.com:{token}".encode()).decode()
    plain = base64.b64encode(f"\0mailer\0{password}".encode()).decode()
    hook = tmp_path / "drain.py"
    hook.write_text(
        "import os\n"
        "print('VAULT_TOKEN=' + os.environ['VAULT_TOKEN'] + ' POOL=' + os.environ['POOL'])\n"
        f"print('> Authorization: Basic {basic}')\n"
        f"print('key {key.removeprefix('whsec_')}')\n"
        f"print('AUTH PLAIN {plain}')\n"
    )
    config = from_mapping(
        {
            "jira": {
                "url": "https://example.atlassian.net",
                "email": "ops@example.com",
                "api_token": token,
                "project": "OPS",
            },
            "email": {
                "host": "smtp.example.com",
                "from": "sebridge@example.com",
                "to": ["ops@example.com"],
                "username": "mailer",
                "password": password,
            },
            "webhook": {"url": "https://hooks.example.com/in", "secret": key},
            "hooks": {
                "drain": {
                    "command": [sys.executable, str(hook)],
                    "env": {"VAULT_TOKEN": vault, "POOL": "web"},
                }
            },
        },
        environ={},
    )
    event = ScheduledEvent(
        "E1", "Reboot", "Scheduled", ("vm1",), not_before=datetime(2026, 11, 29, tzinfo=UTC)
    )
    outcome = run_hook(
        config.hooks["drain"],
        event,
        stage="prepare",
        vm_name="vm1",
        mask=Masker(secret_values(config)),
    )
    assert outcome.succeeded, outcome.output
    assert outcome.output == (
        "VAULT_TOKEN=*** POOL=web\n> Authorization: Basic ***\nkey ***\nAUTH PLAIN ***\n"
    )
