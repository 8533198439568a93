"""The Instance Metadata Service: client and document parsing. The only IMDS-aware code."""

from sebridge.imds.client import API_VERSIONS, DEFAULT_API_VERSION, DEFAULT_ENDPOINT, ImdsClient
from sebridge.imds.parse import parse_document, parse_not_before

__all__ = [
    "API_VERSIONS",
    "DEFAULT_API_VERSION",
    "DEFAULT_ENDPOINT",
    "ImdsClient",
    "parse_document",
    "parse_not_before",
]
