"""The documentation as a reader meets it (issue 36): a README of at most 300 lines whose
links lead somewhere, a site that `mkdocs build --strict` builds and that fails on a broken
link or a page left out of the navigation, and every command a page shows either run by a
test (the comment before the block names it) or listed below with why no test can run it.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from pages import README, ROOT, blocks, name_of, page, pages
from sebridge.imds.simulator import Simulator

# Blocks no test here can run, by (page, first line), each with why: what it needs is a
# real Slack app, Teams workflow, Jira site, cluster, registry, or root on the machine.
NOT_RUN = {
    (
        "README.md",
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/sebridge demo",
    ): "makes a venv in the checkout; tests/test_demo.py runs `sebridge demo` itself",
    (
        "getting-started.md",
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/sebridge demo",
    ): "makes a venv in the checkout; tests/test_demo.py runs `sebridge demo` itself",
    (
        "README.md",
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
        "PYTHON=.venv/bin/python bash scripts/check",
    ): "it is the test run itself (.ci/run runs scripts/check in a fresh venv)",
    (
        "CONTRIBUTING.md",
        "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && "
        "PYTHON=.venv/bin/python bash scripts/check",
    ): "it is the test run itself (.ci/run runs scripts/check in a fresh venv)",
    (
        "hooks.md",
        "groupadd --system sebridge-lb",
    ): "changes the machine (a system group, /var/www); tests/test_deploy_unit.py checks "
    "its lines against the drop-in and the hooks",
    (
        "channels/slack.md",
        "SLACK_BOT_TOKEN=xoxb-... SLACK_APP_TOKEN=xapp-... sebridge check --config "
        "/etc/sebridge/sebridge.toml",
    ): "needs a Slack app's tokens",
    (
        "channels/teams.md",
        "TEAMS_WEBHOOK_URL='https://prod-...' sebridge check --config /etc/sebridge/sebridge.toml",
    ): "needs a Teams workflow's URL",
    (
        "channels/jira.md",
        "JIRA_API_TOKEN=... sebridge check --config /etc/sebridge/sebridge.toml",
    ): "needs a Jira site",
    ("channels/jira.md", "sebridge simulate --port 8080 &"): "needs a Jira site",
    (
        "operations/container.md",
        "sudo bash deploy/container/build-and-smoke.sh",
    ): "needs root and podman: .ci/run runs it",
    (
        "operations/aks.md",
        "sudo podman build -f deploy/kubernetes/Containerfile -t "
        "example.azurecr.io/sebridge:0.1.0-kubectl .",
    ): "needs a container registry",
    (
        "operations/aks.md",
        "(umask 077; cat > pg_service.conf <<'END'",
    ): "needs a cluster",
    (
        "operations/aks.md",
        "kubectl apply -k deploy/kubernetes",
    ): "needs a cluster; tests/test_kubernetes.py renders and validates the directory",
}
RUN_BY = re.compile(r"<!--.*\b(tests/test_\w+\.py)\b.*-->")


def shell_blocks() -> list[tuple[str, str, str]]:
    """Every `sh` block of the README and the site: (page, its first line, the line
    before it)."""
    found = []
    for path in pages():
        name = name_of(path)
        for block in blocks(page(name), "sh", name=name):
            found.append((name, block.text.splitlines()[0], block.before))
    return found


def test_every_command_a_page_shows_is_run_by_the_test_its_comment_names() -> None:
    unrun = []
    for name, first, before in shell_blocks():
        marker = RUN_BY.search(before)
        if marker is None:
            if (name, first) not in NOT_RUN:
                unrun.append(f"{name}: {first}")
            continue
        test = ROOT / marker.group(1)
        assert test.is_file(), f"{name}: {first}: {test} does not exist"
        # The test reads the block from the page it is on (tests/pages.py), by its name.
        assert Path(name).name in test.read_text(encoding="utf-8"), f"{test} never reads {name}"
    assert not unrun, "blocks no test runs (name the test, or say why in NOT_RUN):\n" + "\n".join(
        unrun
    )


def test_every_block_said_not_to_run_is_still_on_its_page() -> None:
    shown = {(name, first) for name, first, _ in shell_blocks()}
    assert set(NOT_RUN) <= shown, set(NOT_RUN) - shown


def test_the_readme_fits_on_a_few_screens() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 300


def test_every_link_of_the_readme_leads_to_a_file_and_heading_that_exist() -> None:
    toc = pytest.importorskip("markdown.extensions.toc", reason="markdown (the docs extra)")
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert len(links) > 20
    for link in links:
        if link.startswith(("https://", "http://")):
            continue
        target, _, anchor = link.partition("#")
        path = ROOT / target
        assert path.exists(), link
        if anchor:
            headings = re.findall(r"^#{1,6} (.+)$", path.read_text(encoding="utf-8"), re.M)
            assert anchor in [toc.slugify(h, "-") for h in headings], link


def mkdocs_build(project: Path, into: Path) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        pytest.skip("mkdocs or mkdocs-material is not installed: pip install -e '.[docs]'")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(into)],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=False,
    )


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = mkdocs_build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "channels" / "slack" / "index.html").is_file()
    built = (tmp_path / "site" / "how-it-works" / "index.html").read_text(encoding="utf-8")
    assert '<pre class="mermaid">' in built  # the two flows: a diagram, not a code block


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("link", "contains a link 'no-such-page.md'"),
        ("anchor", "does not contain an anchor '#no-such-heading'"),
        ("orphan", 'not included in the "nav" configuration'),
    ],
)
def test_a_broken_link_or_a_page_left_out_of_the_nav_fails_the_build(
    tmp_path: Path, change: str, said: str
) -> None:
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs")
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    if change == "orphan":
        (project / "docs" / "orphan.md").write_text("# Nobody links here\n", encoding="utf-8")
    else:
        target = "no-such-page.md" if change == "link" else "cli.md#no-such-heading"
        with (project / "docs" / "index.md").open("a", encoding="utf-8") as index:
            index.write(f"\nSee [there]({target}).\n")
    done = mkdocs_build(project, tmp_path / "site")
    assert done.returncode != 0
    assert said in done.stderr, done.stderr


@pytest.mark.parametrize("name", ["README.md", "getting-started.md"])
def test_the_secret_file_line_makes_a_root_only_file_the_config_names(
    name: str, tmp_path: Path
) -> None:
    (block,) = [b for b in blocks(page(name), "sh") if b.text.startswith("(umask 077; printf %s")]
    (config,) = [b for b in blocks(page(name), "toml") if "bot_token_file" in b.text]
    credentials = tmp_path / "etc" / "sebridge" / "credentials"
    credentials.mkdir(parents=True, mode=0o700)
    line = block.text.replace("/etc/sebridge", str(tmp_path / "etc" / "sebridge"))
    subprocess.run(["bash", "-c", line], check=True, timeout=10)
    (written,) = credentials.iterdir()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    assert written.read_text() == "xoxb-..."
    # The unit hands the file to the service as sebridge_<file> (LoadCredential=sebridge:...).
    named = tomllib.loads(config.text)["slack"]["bot_token_file"]
    assert named == f"${{CREDENTIALS_DIRECTORY}}/sebridge_{written.name}"


def test_the_simulators_curl_lines_do_what_the_page_says() -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    (block,) = blocks(page("simulator.md"), "sh")
    schedule, read, fault = block.text.splitlines()
    with Simulator(port=0, vm_name="vm1") as sim:
        here = sim.url.removeprefix("http://")

        def run(line: str) -> str:
            done = subprocess.run(
                ["bash", "-c", line.replace("localhost:8080", here)],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
            return done.stdout

        made = json.loads(run(schedule))
        (event,) = json.loads(run(read))["Events"]
        assert (event["EventId"], event["EventType"], event["EventSource"]) == (
            made["id"],
            "Reboot",
            "User",
        )
        run(fault)
        request = urllib.request.Request(
            f"{sim.url}/metadata/scheduledevents?api-version=2020-07-01",
            headers={"Metadata": "true"},
        )
        for _ in range(3):
            with pytest.raises(urllib.error.HTTPError) as answer:
                urllib.request.urlopen(request, timeout=10)
            assert answer.value.code == 429
        with urllib.request.urlopen(request, timeout=10) as again:
            assert again.status == 200


def test_every_toml_block_a_page_shows_is_toml() -> None:
    """What a reader copies into their config parses; the tests of each feature load the
    blocks that are whole configs (tests/test_readme.py, test_instances.py...)."""
    shown = [b for path in pages() for b in blocks(page(name_of(path)), "toml", name=name_of(path))]
    assert len(shown) > 20
    for block in shown:
        try:
            tomllib.loads(block.text)
        except tomllib.TOMLDecodeError as error:
            pytest.fail(f"{block.page}, line {block.line}: {error}")


def channel_table(name: str) -> list[str]:
    """The rows of a page's table of channels, each link's target taken out."""
    text = page(name)
    rows = text[text.index("| channel | turned on by |") :].split("\n\n", 1)[0]
    return [re.sub(r"\]\([^)]*\)", "]", row) for row in rows.splitlines()]


def test_the_readme_and_the_channels_page_show_one_table_of_channels() -> None:
    assert channel_table("README.md") == channel_table("channels/index.md")
    assert len(channel_table("README.md")) == 2 + 9  # header, rule, and nine channels
