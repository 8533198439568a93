"""`sebridge calendar-url`: the fleet's calendar feed's URL, to subscribe a team calendar to.

The URL is `[http] public_url` + `/calendar/<token>.ics`; the token is an HMAC of the
link key (web/fleet_tokens.py), so the same on every agent of a fleet and as long as
the key stays. Exit 0 printed; 1 the store failed; 2 `[web] page` is off or
`[http] public_url` is empty (the URL would lead nowhere). See docs/fleet-page.md.
"""

from __future__ import annotations

import sys
from typing import TextIO

from sebridge.cli.exits import FAILED, OK, USAGE
from sebridge.cli.link_keys import link_key
from sebridge.cli.runtime import missing_store, open_store
from sebridge.config.loader import Config
from sebridge.kernel.errors import StoreError

__all__ = ["calendar_url"]


def calendar_url(config: Config, out: TextIO | None = None) -> int:
    """Print the feed's URL (the link key configured, else the one kept in the store)."""
    out = out or sys.stdout
    if not config.web.page:
        return _usage("web.page is false: the fleet page and its calendar are off (404)")
    if not config.http.public_url:
        return _usage("http.public_url is empty: set the https:// address people reach it at")
    if not config.http.link_secret.reveal() and missing_store(config) is not None:
        print(
            f"sebridge: no store at {missing_store(config)} yet, so no link key: start"
            " `sebridge run` once, or set http.link_secret",
            file=sys.stderr,
        )
        return FAILED
    from sebridge.web.fleet_wiring import calendar_url as url

    try:
        store = open_store(config)
        try:
            key = link_key(config, store)
        finally:
            store.close()
    except StoreError as exc:
        print(f"sebridge: cannot read the link key from the store: {exc}", file=sys.stderr)
        return FAILED
    print(url(config.http.public_url, key), file=out)
    return OK


def _usage(why: str) -> int:
    print(f"sebridge: calendar-url: {why}", file=sys.stderr)
    return USAGE
