"""Who may approve from Slack: configured user ids, and members of configured user groups.

Group members come from usergroups.users.list, cached so a burst of clicks
costs one call; when Slack cannot answer, the last known members are used,
and with none known nobody from that group is allowed (fail closed).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

__all__ = ["SlackApprovers"]

log = logging.getLogger(__name__)

CACHE_SECONDS = 300.0


class SlackApprovers:
    """Decides whether a Slack user may approve.

    Args:
        ids: user ids (U..., W...) and user-group ids (S...), as in slack.approvers.
    """

    def __init__(
        self,
        client: WebClient,
        ids: Iterable[str],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        ids = list(ids)
        self._users = frozenset(i for i in ids if not i.startswith("S"))
        self._groups = tuple(i for i in ids if i.startswith("S"))
        self._client = client
        self._clock = clock
        self._members: dict[str, tuple[float, frozenset[str]]] = {}
        self._lock = threading.Lock()

    def allows(self, user_id: str) -> bool:
        """Whether `user_id` is an approver (directly or through a group)."""
        if user_id in self._users:
            return True
        return any(user_id in self._group_members(group) for group in self._groups)

    def _group_members(self, group: str) -> frozenset[str]:
        with self._lock:
            cached = self._members.get(group)
            if cached and self._clock() - cached[0] < CACHE_SECONDS:
                return cached[1]
            try:
                response = self._client.usergroups_users_list(usergroup=group)
                members = frozenset(response.get("users") or ())
            except (SlackApiError, OSError) as exc:
                error = exc.response.get("error") if isinstance(exc, SlackApiError) else exc
                log.warning("cannot list members of user group %s (%s)", group, error)
                return cached[1] if cached else frozenset()
            self._members[group] = (self._clock(), members)
            return members
