"""An event IMDS lists that sebridge cannot follow: the stand-in it is announced under.

An EventId holding NUL or a lone surrogate can be neither stored (UTF-8 has no
lone surrogates, PostgreSQL's text no NUL) nor sent back in StartRequests as
it came: imds/parse.py reads the rest of the event under a stand-in id, and
the daemon announces it once as a problem (it starts at NotBefore without an
approval). See docs/ARCHITECTURE.md, "Hostile text".
"""

from __future__ import annotations

import json

__all__ = ["stand_in_id", "why"]

SHOWN = 60  # characters of the raw EventId a note shows


def stand_in_id(event_id: str) -> str:
    """The id an unreadable EventId is announced under: stable (the same raw id gives the
    same stand-in, after a restart and in every agent of a fleet), displayable and
    storable (ASCII), and never a real one's (IMDS's ids are GUIDs)."""
    import hashlib  # here: it loads OpenSSL, for the rare document that needs a stand-in

    digest = hashlib.sha256(event_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"unreadable-{digest[:24]}"


def why(event_id: str) -> str:
    """What makes it unreadable, for people: its start as JSON's ASCII escapes show it
    (displayable anywhere), and what it holds."""
    shown = json.dumps(event_id[:SHOWN])
    if len(event_id) > SHOWN:
        shown = f'{shown[:-1]}..."'
    held = ["NUL"] if "\x00" in event_id else []
    if any(0xD800 <= ord(c) <= 0xDFFF for c in event_id):
        held.append("a lone surrogate")
    return f"its EventId {shown} holds {' and '.join(held)}"
