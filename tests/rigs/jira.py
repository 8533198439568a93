"""Jira's rig: the fake Jira Cloud; wiki escaping and Jira's limits on summary and text."""

from __future__ import annotations

import base64
import secrets
import threading
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

from fakes.jira import TEXT_LIMIT, FakeJira, java_length
from rigs.base import Rig, assert_displayable, registered
from sebridge.integrations.jira import Jira
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.render import Renderer
from sebridge.model.message import Message, Sink


class JiraRig(Rig):
    integration = registered(Jira)
    throttles: ClassVar[Mapping[int, float]] = {429: 1.0, 503: 1.0}

    def __init__(self) -> None:
        super().__init__()
        self.fake = FakeJira("cloud", token=f"ATATT3x-{secrets.token_hex(16)}")

    def section(self) -> dict[str, Any]:
        f = self.fake
        return {"url": f.url, "email": f.email, "api_token": f.token, "project": "OPS"}

    def port(self) -> int:
        return int(urlsplit(self.fake.url).port or 0)

    def impatient(self, seconds: float) -> Sink:
        settings = self.config().section(self.name)  # no key: (5 s, 20 s) fixed
        sink = JiraSink(JiraApi(settings, timeout=(5.0, seconds)), Renderer())
        self._sinks.append(sink)
        return sink

    def answer(self, status: int, retry_after: int | None = None) -> None:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        body = {"errorMessages": [f"refused {self.fake.token}"], "errors": {}}
        self.fake.fail("POST", "issue", status, headers=headers, body=body)

    def hang(self) -> None:
        release = threading.Event()
        self.fake.fail("POST", "issue", 201, after=True, hold=release)
        self._held(release)

    def secrets(self) -> list[str]:
        f = self.fake
        return [f.token, base64.b64encode(f"{f.email}:{f.token}".encode()).decode()]

    def delivered(self) -> int:
        return len(self.fake.issues)

    def check_arrived(self, sent: Sequence[Message]) -> None:
        (issue,) = self.fake.issues.values()
        comments = [c["body"] for c in issue["comments"]]
        assert len(comments) == len(sent) - 1
        assert java_length(issue["summary"]) <= 255 and "\n" not in issue["summary"]
        assert all(java_length(text) <= TEXT_LIMIT for text in [issue["description"], *comments])
        assert_displayable([issue["summary"], issue["description"], *comments])
        # wiki markup in what Jira renders (the summary is plain text)
        assert_displayable([issue["description"], *comments], markup=("{code}", "[x|http"))
