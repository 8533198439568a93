"""The instance metadata (`/metadata/instance[/compute]`) a client may read beside events.

Clients use it to learn their own VM name (to check an event's Resources),
its Azure tags, and to label notifications; the simulator serves a plausible,
stable document. Tags come as Microsoft documents them: `tags`, one string
"name:value;name2:value2", and (api-version 2019-06-04 and later) `tagsList`,
a list of {"name", "value"} objects that holds a ";" or ":" a value may contain.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["INSTANCE_API_VERSIONS", "NEWEST_INSTANCE_VERSIONS", "compute_document"]

# Instance metadata api-versions IMDS has published (a reasonable set, not
# necessarily complete); "latest" is rejected as for scheduled events.
INSTANCE_API_VERSIONS: tuple[str, ...] = (
    "2017-03-01",
    "2017-04-02",
    "2017-08-01",
    "2017-10-01",
    "2017-12-01",
    "2018-02-01",
    "2018-04-02",
    "2018-10-01",
    "2019-02-01",
    "2019-03-11",
    "2019-04-30",
    "2019-06-01",
    "2019-06-04",
    "2019-08-01",
    "2019-08-15",
    "2019-11-01",
    "2020-06-01",
    "2020-07-15",
    "2020-09-01",
    "2020-10-01",
    "2020-12-01",
    "2021-01-01",
    "2021-02-01",
    "2021-03-01",
    "2021-05-01",
    "2021-08-01",
    "2021-10-01",
    "2021-11-01",
    "2021-11-15",
    "2021-12-13",
    "2022-02-01",
    "2022-03-01",
    "2022-05-01",
    "2022-07-01",
    "2022-08-01",
    "2022-09-01",
    "2022-11-01",
    "2023-07-01",
    "2023-11-15",
    "2024-03-15",
    "2024-07-17",
)
NEWEST_INSTANCE_VERSIONS: tuple[str, ...] = tuple(reversed(INSTANCE_API_VERSIONS[-3:]))

_SUBSCRIPTION_ID = "00000000-0000-4000-8000-5e6b71d6e000"
_RESOURCE_GROUP = "sebridge-simulator"


# The first api-version whose compute section carries `tagsList`.
TAGS_LIST_SINCE = "2019-06-04"


def compute_document(
    vm_name: str, tags: Mapping[str, str] | None = None, version: str = TAGS_LIST_SINCE
) -> dict[str, Any]:
    """The compute section of instance metadata for a simulated VM named `vm_name`, with
    its Azure `tags` (none: empty), as `version` (an instance api-version) shapes it."""
    tags = dict(tags or {})
    # Derived from the name so the same VM keeps the same vmId across restarts.
    vm_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"sebridge-simulator/{vm_name}"))
    return {
        "azEnvironment": "AzurePublicCloud",
        "location": "westeurope",
        "name": vm_name,
        "offer": "0001-com-ubuntu-server-jammy",
        "osType": "Linux",
        "platformFaultDomain": "0",
        "platformUpdateDomain": "0",
        "provider": "Microsoft.Compute",
        "publisher": "Canonical",
        "resourceGroupName": _RESOURCE_GROUP,
        "resourceId": (
            f"/subscriptions/{_SUBSCRIPTION_ID}/resourceGroups/{_RESOURCE_GROUP}"
            f"/providers/Microsoft.Compute/virtualMachines/{vm_name}"
        ),
        "sku": "22_04-lts-gen2",
        "subscriptionId": _SUBSCRIPTION_ID,
        "tags": ";".join(f"{name}:{value}" for name, value in tags.items()),
        "version": "latest",
        "vmId": vm_id,
        "vmScaleSetName": "",
        "vmSize": "Standard_D2s_v3",
        "zone": "",
        **(
            {"tagsList": [{"name": k, "value": v} for k, v in tags.items()]}
            if version >= TAGS_LIST_SINCE
            else {}
        ),
    }
