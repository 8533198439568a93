"""Where `sebridge check`, run from a shell, finds the secrets the service finds.

deploy/systemd/sebridge.service hands the service every file of
/etc/sebridge/credentials with `LoadCredential=sebridge:/etc/sebridge/credentials`:
systemd shows the file NAME to the service as
`${CREDENTIALS_DIRECTORY}/sebridge_NAME`, the path the config's `*_file` keys
name. In a shell CREDENTIALS_DIRECTORY is not set; `check` then reads such a
path from the folder itself (`/etc/sebridge/credentials/NAME`): the inverse of
what LoadCredential= does, nothing copied anywhere. See docs/ARCHITECTURE.md,
"Config".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CREDENTIAL_ID", "FOLDER", "UnitCredentials"]

FOLDER = "/etc/sebridge/credentials"
CREDENTIAL_ID = "sebridge"  # the ID before the colon of the unit's LoadCredential=
_VARIABLE = "CREDENTIALS_DIRECTORY"


@dataclass(frozen=True)
class UnitCredentials:
    """The unit's credentials folder, read the way the service sees it.

    Args:
        folder: the folder the unit's LoadCredential= line loads.
    """

    folder: str = FOLDER

    def applies(self, environ: Mapping[str, str]) -> bool:
        """Outside the service (CREDENTIALS_DIRECTORY unset) with the folder present."""
        return not environ.get(_VARIABLE) and os.path.isdir(self.folder)

    def environ(self, environ: Mapping[str, str]) -> Mapping[str, str]:
        """`environ`, with CREDENTIALS_DIRECTORY naming the folder when this applies."""
        if not self.applies(environ):
            return environ
        return {**environ, _VARIABLE: self.folder}

    def locate(self, path: str) -> str:
        """The file systemd would have loaded as `path`: FOLDER/sebridge_NAME -> FOLDER/NAME."""
        folder, _, name = path.rpartition("/")
        prefix = f"{CREDENTIAL_ID}_"
        if os.path.normpath(folder) == os.path.normpath(self.folder) and name.startswith(prefix):
            return f"{folder}/{name[len(prefix) :]}"
        return path
