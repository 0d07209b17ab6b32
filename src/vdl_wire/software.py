"""This software's version: what `vdl --version` and `vdl-broker --version` print, and what the
client sends as ApiVersions' ClientSoftwareVersion (KIP-511: letters, digits, '-' and '.')."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "vdl-for-spark"


@functools.cache
def software_version() -> str:
    """The installed distribution's version ("unknown" when run from a tree that was not installed)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
