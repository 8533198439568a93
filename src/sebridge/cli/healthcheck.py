"""The container image's HEALTHCHECK (deploy/container/Containerfile):
`python -m sebridge.cli.healthcheck`.

It asks GET /healthz at the address the config's `[http] listen` gives (0.0.0.0 and
:: asked on loopback), so the check follows the config instead of assuming a port.
A config without `[http] listen` runs no HTTP server unless an integration needs one:
then there is no /healthz to ask, and the check passes saying so (the container's
own state, running or exited with its restart policy, is then the only signal;
docs/operations/container.md). Exit 0 healthy, 1 not (or the config does not
load: `run` would exit 2 too).
"""

from __future__ import annotations

import sys
import urllib.error
import urllib.request

from sebridge.integrations.registry import load_config
from sebridge.kernel.errors import ConfigError

__all__ = ["main"]

TIMEOUT = 4.0  # within the HEALTHCHECK's --timeout=5s


def main() -> int:
    try:
        config = load_config(read_secrets=False)
    except ConfigError as exc:
        print(f"healthcheck: configuration error: {exc}", file=sys.stderr)
        return 1
    if "http.listen" not in config.given:
        print("healthcheck: no [http] listen in the config: no /healthz to ask, not checked")
        return 0
    # Every address (0.0.0.0, ::) is asked on loopback: asked, never bound.
    wildcard = {"0.0.0.0": "127.0.0.1", "::": "::1"}  # noqa: S104
    host = wildcard.get(config.http.listen_host, config.http.listen_host)
    url = f"http://{f'[{host}]' if ':' in host else host}:{config.http.listen_port}/healthz"
    try:
        # Never through a proxy: the address is this container's own.
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url, timeout=TIMEOUT) as answer:
            print(f"healthcheck: {url}: {answer.status}")
            return 0
    except urllib.error.HTTPError as exc:
        print(f"healthcheck: {url}: {exc.code}: {exc.read(2000).decode(errors='replace')}")
    except OSError as exc:
        print(f"healthcheck: {url}: {exc}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
