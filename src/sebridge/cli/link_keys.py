"""The link key and the approval links' signer, from `[http]` and the store: the runtime
signs messages' links with it, the HTTP wiring checks them and the fleet page's tokens,
`sebridge calendar-url` derives the feed's token. web/links.py is imported only when
links are on: a daemon without them never loads sebridge.web before its first poll."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sebridge.config.loader import Config
from sebridge.store import Store

if TYPE_CHECKING:
    from sebridge.web.links import LinkSigner

__all__ = ["link_key", "link_signer"]


def link_signer(config: Config, store: Store) -> LinkSigner | None:
    """The approval links' signer when `[http] public_url` is set: under `link_secret`, else
    under a key generated once and kept in the store (a fleet sharing the store shares it)."""
    if not config.http.public_url:
        return None
    from sebridge.web.links import LinkSigner

    return LinkSigner(link_key(config, store))


def link_key(config: Config, store: Store) -> str:
    """The link key: `[http] link_secret`, else the key generated once and kept in the store
    (made now when there is none yet). It signs approval links and the fleet page's tokens."""
    from sebridge.web.links import LINK_KEY_SETTING, new_link_key

    key = config.http.link_secret.reveal() or store.settings.get(LINK_KEY_SETTING)
    return key or store.settings.remember_first(LINK_KEY_SETTING, new_link_key())
