"""What a Slack user is called, so every channel names people, not member ids.

A click carries its user's name (the block_actions payload's `user.name`, or
`user.username`); when one does not, users.info is asked once and the answer
kept, so a burst of clicks costs one call. When Slack cannot answer (no
`users:read` scope, a network error), the member id stands in: Slack itself
still shows it as a mention.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

__all__ = ["SlackNames"]

log = logging.getLogger(__name__)

CACHE_SECONDS = 3600.0  # people seldom rename themselves; an hour-old name is fine
_MAX_KEPT = 1000  # names kept at most (one per approver: a workspace's approvers are few)


class SlackNames:
    """Names of Slack users by member id (users.info), cached."""

    def __init__(self, client: WebClient, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._clock = clock
        self._names: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def name_of(self, user_id: str, given: str = "") -> str:
        """What `user_id` is called: `given` (the click's own name) when there is one, else
        users.info's answer (kept for CACHE_SECONDS), else the id itself."""
        if given.strip():
            with self._lock:
                self._keep(user_id, given.strip())
            return given.strip()
        with self._lock:
            kept = self._names.get(user_id)
            if kept and self._clock() - kept[0] < CACHE_SECONDS:
                return kept[1]
            try:
                response = self._client.users_info(user=user_id)
            except (SlackApiError, OSError) as exc:
                error = exc.response.get("error") if isinstance(exc, SlackApiError) else exc
                log.warning("cannot look up the name of Slack user %s (%s)", user_id, error)
                return kept[1] if kept else user_id
            name = _name(response.get("user") or {}) or user_id
            self._keep(user_id, name)
            return name

    def _keep(self, user_id: str, name: str) -> None:
        if len(self._names) >= _MAX_KEPT and user_id not in self._names:
            self._names.clear()
        self._names[user_id] = (self._clock(), name)


def _name(user: dict[str, object]) -> str:
    """A users.info user's name as people see it: the profile's display name, else the
    real name, else the user name."""
    profile = user.get("profile")
    profile = profile if isinstance(profile, dict) else {}
    for value in (profile.get("display_name"), profile.get("real_name"), user.get("name")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""
