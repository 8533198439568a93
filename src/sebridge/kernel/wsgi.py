"""The WSGI types every route speaks (PEP 3333), so routes need not import the server."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["StartResponse", "WsgiApp"]

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
