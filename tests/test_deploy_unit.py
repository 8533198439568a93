"""deploy/systemd/sebridge.service does what its comments say (issue 10, item 8): secrets
stay in root-only files, and the dynamic user the service runs as gets them through
LoadCredential=; `sebridge check` from a shell reads the same files (issue 17, item 2), and
the unit starts the sebridge getting started (docs/getting-started.md) installs.
tests/test_install.py runs that page's install and verifies the unit with systemd-analyze."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pages import page
from sebridge.config.loader import DispatchConfig
from sebridge.config.unit_credentials import CREDENTIAL_ID, FOLDER, UnitCredentials
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.kernel.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "deploy" / "systemd" / "sebridge.service"


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


def test_the_units_cgroup_ends_with_it() -> None:
    """What a hook left outside its group and environment dies with the unit (issue 37,
    item 7): a daemon restarted after kill -9 could not recognise it."""
    assert directives()["KillMode"] == ["control-group"]


def image_environment(containerfile: Path) -> dict[str, str]:
    """The NAME=value pairs of a Containerfile's ENV instructions (continued lines joined)."""
    text = containerfile.read_text(encoding="utf-8").replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["ENV"]:
            found.update(word.partition("=")[::2] for word in words[1:])
    return found


def test_the_unit_and_the_images_run_with_one_malloc_arena() -> None:
    """glibc's arenas capped where sebridge is shipped, not by sebridge itself: the unit
    and the image set MALLOC_ARENA_MAX, and the Kubernetes image is built on that image."""
    assert "MALLOC_ARENA_MAX=1" in directives()["Environment"]
    image = ROOT / "deploy" / "container" / "Containerfile"
    assert image_environment(image)["MALLOC_ARENA_MAX"] == "1"
    kubernetes = ROOT / "deploy" / "kubernetes" / "Containerfile"
    bases = [line.split()[1] for line in kubernetes.read_text().splitlines() if line[:5] == "FROM "]
    assert bases[-1] == "${SEBRIDGE_IMAGE}"  # the last stage: the image above, kubectl added
    assert "MALLOC_ARENA_MAX" not in image_environment(kubernetes)


def test_check_from_a_shell_reads_the_files_the_unit_loads(tmp_path: Path) -> None:
    (credential,) = directives()["LoadCredential"]
    assert credential == f"{CREDENTIAL_ID}:{FOLDER}"
    # What LoadCredential= shows the service as <id>_<file>, check reads as <folder>/<file>.
    (tmp_path / "slack-bot-token").write_text("xoxb-on-disk\n")
    unit = UnitCredentials(str(tmp_path))
    config = from_mapping(
        {
            "slack": {
                "bot_token_file": f"${{CREDENTIALS_DIRECTORY}}/{CREDENTIAL_ID}_slack-bot-token",
                "channel": "C0123456789",
                "app_token": "xapp-1",
            }
        },
        environ=unit.environ({}),
        locate=unit.locate,
    )
    assert config.section("slack").bot_token.reveal() == "xoxb-on-disk"


def test_the_unit_starts_the_sebridge_getting_started_installs() -> None:
    readme = page("getting-started.md")
    (venv,) = re.findall(r"^python3 -m venv (\S+)$", readme, re.M)
    (start,) = directives()["ExecStart"]
    assert start.split() == [
        f"{venv}/bin/sebridge",
        "run",
        "--config",
        "/etc/sebridge/sebridge.toml",
    ]
    assert f"deploy/systemd/{UNIT.name} /etc/systemd/system/{UNIT.name}" in readme


DROP_IN = UNIT.parent / f"{UNIT.name}.d" / "lb-hooks.conf"
HOOKS = ROOT / "deploy" / "hooks"


def drop_in_directives() -> dict[str, str]:
    found = {}
    for line in DROP_IN.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            found[key.strip()] = value.strip()
    return found


def test_the_lb_hooks_drop_in_lets_the_sandbox_write_where_the_hooks_write() -> None:
    """The unit's sandbox is read-only (ProtectSystem=strict) for a dynamic user that
    gains no privileges: lb-drain and lb-undrain can change their file only through the
    drop-in, which opens that folder and nothing more, to the group the hooks page makes."""
    assert directives()["NoNewPrivileges"] == ["yes"]
    assert directives()["ProtectSystem"] == ["strict"]
    written = {
        match
        for hook in ("lb-drain", "lb-undrain")
        for match in re.findall(r"^(?:rm -f|touch) (/\S+)$", (HOOKS / hook).read_text(), re.M)
    }
    assert len(written) == 1
    folder = str(Path(written.pop()).parent)
    drop_in = drop_in_directives()
    assert drop_in == {
        "SupplementaryGroups": drop_in["SupplementaryGroups"],
        "ReadWritePaths": folder,
    }
    readme = page("hooks.md")
    group = drop_in["SupplementaryGroups"]
    assert f"\ngroupadd --system {group}\n" in readme
    assert f"\ninstall -d -o root -g {group} -m 0775 {folder}\n" in readme
    installed = f"/etc/systemd/system/{UNIT.name}.d/{DROP_IN.name}"
    assert f"\ninstall -D -m 0644 {DROP_IN.relative_to(ROOT)} {installed}\n" in readme


def test_the_unit_with_its_drop_ins_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed")
    # ExecStart must name an executable: this Python's sebridge stands in for /opt's.
    sebridge = Path(sys.executable).parent / "sebridge"
    unit = tmp_path / UNIT.name
    unit.write_text(
        UNIT.read_text(encoding="utf-8").replace("/opt/sebridge/bin/sebridge", str(sebridge)),
        encoding="utf-8",
    )
    drop_ins = sorted((UNIT.parent / f"{UNIT.name}.d").glob("*.conf"))
    assert [d.name for d in drop_ins] == ["environment.conf", DROP_IN.name]
    shutil.copytree(UNIT.parent / f"{UNIT.name}.d", tmp_path / f"{UNIT.name}.d")
    done = subprocess.run(
        [analyze, "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert UNIT.name not in done.stderr, done.stderr  # the drop-ins' paths name it too


ENV_MARK = "<!-- tests/test_deploy_unit.py runs these lines but systemctl"


@pytest.mark.slow  # five CLI processes against PostgreSQL
def test_the_store_pages_commands_read_the_environment_file_the_drop_in_gives_the_service(
    tmp_path: Path, sim: Simulator, pg_url: str
) -> None:
    """The store's lines (docs/configuration.md), /etc/sebridge moved into tmp_path, a PostgreSQL store whose URL names
    the variable the file sets: the file they write is the one environment.conf names, and
    check, events, history, policy explain and approve, run from a shell without the
    variable, each read it from there; without the file, each exits 2 naming store.url
    and the variable."""
    readme = page("configuration.md")
    after = readme[readme.index(ENV_MARK) :]
    block = re.search(r"```sh\n(.*?)```", after, re.S)
    assert block is not None
    write, install, *commands = block.group(1).splitlines()
    drop_in = UNIT.parent / f"{UNIT.name}.d" / "environment.conf"
    (env_file,) = re.findall(r"^EnvironmentFile=(\S+)$", drop_in.read_text(), re.M)
    assert f"> {env_file})" in write
    assert install.endswith(f"/etc/systemd/system/{UNIT.name}.d/{drop_in.name}")
    (variable,) = re.findall(r'"(\w+)=', write)
    shell = [c for c in commands if not c.startswith("systemctl")]
    assert [c.split()[1] for c in shell] == ["check", "events", "history", "policy", "approve"]

    etc = tmp_path / "etc" / "sebridge"
    etc.mkdir(parents=True)
    # Trust authentication here: the password is not checked, only that it was given.
    user, _, rest = pg_url.removeprefix("postgresql://").partition("@")
    url = f"postgresql://{user}:${{{variable}}}@{rest}"
    (etc / "sebridge.toml").write_text(
        f'[imds]\nendpoint = "{sim.url}"\nvm_name = "vm0"\n[store]\nurl = "{url}"\n',
        encoding="utf-8",
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop(variable, None)
    env.pop("SEBRIDGE_CONFIG", None)
    event_id = sim.schedule("Reboot", resources=["vm0"])

    def run(command: str) -> subprocess.CompletedProcess[str]:
        command = command.replace("/etc/sebridge", str(etc)).replace("EVENT_ID", event_id)
        return subprocess.run(
            ["sh", "-c", command], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    assert run(write).returncode == 0
    assert stat.S_IMODE((etc / "environment").stat().st_mode) == 0o600
    check, events, history, explain, approve = shell
    done = run(check)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok: environment: {variable} read from {etc}/environment" in done.stdout
    once = run("sebridge once --config /etc/sebridge/sebridge.toml")  # the first poll
    assert once.returncode == 0, once.stdout + once.stderr
    for command in (events, history, explain):
        done = run(command)
        assert done.returncode == 0, (command, done.stdout + done.stderr)
        assert event_id in done.stdout, (command, done.stdout)
    done = run(approve)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sim.start_requests == [event_id]

    (etc / "environment").unlink()
    for command in (check, events, history, explain, approve):
        alone = run(command)
        assert alone.returncode == 2, (command, alone.stdout + alone.stderr)
        assert f"store.url: environment variable {variable} is not set" in alone.stderr


def test_a_variable_the_shell_sets_wins_and_a_bad_line_is_named_by_number(
    tmp_path: Path,
) -> None:
    """The file gives what the shell lacks; a line the service's systemd would not read
    as NAME=value is a configuration error naming the file and line, not its text."""
    from sebridge.config.unit_environment import UnitEnvironment

    path = tmp_path / "environment"
    path.write_text(
        '# comment\n; another\n\nA=\'x y\'\nB="q\\"uote"\nC= bare value \n', encoding="utf-8"
    )
    environ, taken = UnitEnvironment(str(path)).environ({"C": "shell"})
    assert (environ["A"], environ["B"], environ["C"], taken) == (
        "x y",
        'q"uote',
        "shell",
        ["A", "B"],
    )
    path.write_text("A=1\nPGPASSWORD='secret\n", encoding="utf-8")
    with pytest.raises(ConfigError) as raised:
        UnitEnvironment(str(path)).environ({})
    assert str(raised.value).startswith(f"{path} line 2: not NAME=value")
    assert "secret" not in str(raised.value)
