"""Jinja2 environment over the built-in templates, overridable from a user's folder.

Jinja2 is imported, and the environment built, at the first template a process
renders or loads. `sebridge run` asks for that only after its first poll: a sink
whose templates are all built-in has them tried then (`later`, `warm`), because the
test suite renders every built-in one against the same samples; a user's override
is tried before, at start, where a broken one stops `run` with its name. See
docs/ARCHITECTURE.md, "Seams" (Config).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sebridge.kernel.errors import PermanentDeliveryError
from sebridge.model import Transition
from sebridge.model.leads import unreachable_line
from sebridge.model.title import title, title_vms
from sebridge.model.wording.hooks import hook_news
from sebridge.model.wording.outlook import (
    anyway_command,
    approve_command,
    approved_as,
    approver,
    retry_command,
    tells_next,
    until,
)

if TYPE_CHECKING:
    import jinja2

__all__ = ["Renderer", "relative"]

log = logging.getLogger("sebridge.integrations")

BUILTIN_TEMPLATES = Path(__file__).parents[1] / "templates"  # sebridge/templates/


def relative(moment: datetime | None, now: datetime) -> str:
    """ "in 14 min", "in 40 s", "3 min ago"; "" without a time: the one wording of a span
    (model/wording/outlook.py: until), so a message's NotBefore and its "Azure starts it anyway ...
    (in 14 min)" never say one span two ways. Templates call it as a filter (`relative`) or
    as the global `countdown` (kept: a user's template may call it)."""
    return until(moment, now)


def _unreachable(t: Transition) -> str:
    """A first message's sentence on the reminder leads its event's notice can never
    reach ("" when none): the transition's moment is the event's first sight."""
    return unreachable_line(t.unreachable, t.event.not_before, t.at)


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M:%S")


def _utc(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if moment else ""


class Renderer:
    """Renders named templates ("console/line.j2"); a file of the same name in
    `override_dir` wins over the built-in one."""

    def __init__(
        self, override_dir: str | Path | None = None, *, defer_builtin: bool = False
    ) -> None:
        """defer_builtin: `later` holds back the check of a folder no override touches
        (`sebridge run`: its first poll goes first); otherwise every check runs at once."""
        self._override = Path(override_dir) if override_dir else None
        self._defer = defer_builtin
        self._filters: dict[str, Any] = dict(clock=_clock, utc=_utc, relative=relative)
        self._checks: list[tuple[str, Callable[[], None]]] = []
        self._built: jinja2.Environment | None = None
        self._building = threading.Lock()  # the dispatcher and the warm-up may both ask

    @property
    def _env(self) -> jinja2.Environment:
        env = self._built
        if env is None:
            with self._building:
                if self._built is None:
                    self._built = self._environment()
                env = self._built
        return env

    def _environment(self) -> jinja2.Environment:
        import jinja2

        folders = [str(self._override)] if self._override else []
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader([*folders, str(BUILTIN_TEMPLATES)]),
            undefined=jinja2.StrictUndefined,
            # HTML pages are escaped by Jinja; chat formats escape with their own filters.
            autoescape=jinja2.select_autoescape(["html", "htm"], default_for_string=False),
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        env.filters.update(self._filters)
        # What happens next and who did what, in the one wording every sink shares.
        env.globals.update(
            countdown=relative,
            hook_news=hook_news,
            unreachable_line=_unreachable,
            approver=approver,
            approved_as=approved_as,
            approve_command=approve_command,
            retry_command=retry_command,
            anyway_command=anyway_command,
            tells_next=tells_next,
            # An event's title names the VMs it lists, never the delivering agent's.
            title=title,
            title_vms=lambda e: title_vms(e.resources),
        )
        return env

    def overridden(self, folder: str) -> bool:
        """Whether the override folder holds anything under `folder` ("console")."""
        if self._override is None:
            return False
        mine = self._override / folder
        return mine.is_dir() and any(mine.iterdir())

    def later(self, folder: str, check: Callable[[], None]) -> bool:
        """True when `check` (a sink's check of the templates in `folder`) is held back
        for `warm`: only built-in templates are in play and this renderer defers them."""
        if not self._defer or self.overridden(folder):
            return False
        self._checks.append((folder, check))
        return True

    def warm(self) -> None:
        """Run the checks `later` held back: the templates are compiled before the first
        message needs them. A failure is a built-in template's bug, said in the log (each
        delivery through that sink then fails with it); it does not stop the daemon."""
        checks, self._checks = self._checks, []
        for folder, check in checks:
            try:
                check()
            except Exception as exc:
                log.error("the built-in %s templates failed their check: %s", folder, exc)

    def add_filters(self, **filters: Any) -> None:
        """Sink-specific filters (e.g. Slack's mrkdwn escaping)."""
        self._filters.update(filters)
        if self._built is not None:
            self._built.filters.update(filters)

    def load(self, name: str) -> None:
        """Compile a template now: a missing or broken one raises jinja2.TemplateError."""
        self._env.get_template(name)

    def render(self, name: str, **context: Any) -> str:
        """Render a template. Raises jinja2.TemplateError (missing, broken, undefined name)."""
        return self._env.get_template(name).render(**context)

    def render_for(self, sink: str, name: str, **context: Any) -> str:
        """Render a sink's template; what goes wrong is a PermanentDeliveryError saying
        which template and where (a retry would render it the same way)."""
        import jinja2  # loaded by the environment already; the name for the errors below

        try:
            return self.render(name, **context)
        except jinja2.TemplateSyntaxError as exc:
            where = exc.filename or exc.name or name
            raise PermanentDeliveryError(
                f"{sink}: template {name} is broken: {where}, line {exc.lineno}: {exc.message}"
            ) from None
        except jinja2.TemplateNotFound as exc:
            raise PermanentDeliveryError(f"{sink}: template {name}: {exc.name} not found") from None
        except (jinja2.TemplateError, TypeError, ValueError, AttributeError) as exc:
            raise PermanentDeliveryError(f"{sink}: template {name} failed: {exc}") from None
