"""Test fakes: stand-ins for outside services, written from their documentation and served on
127.0.0.1 so that the real client libraries talk to them over real sockets."""

from .jira import FakeJira
from .slack import FakeSlack

__all__ = ["FakeJira", "FakeSlack"]
