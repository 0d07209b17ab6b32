"""Streams that are Delta tables: the tiering writer and what it needs.

Tiering needs the optional packages deltalake, pyarrow and numpy (the `tables` extra, part of
`spark` too); a plain install of the broker has none of them, so nothing here imports them at
module level, and a stream given a table on a node without them is refused (or, on a node that
becomes its leader later, reported as the table's error) with a message saying what to install.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

REQUIRED_PACKAGES = ("deltalake", "pyarrow", "numpy")
INSTALL_HINT = "pip install 'vdl-for-spark[tables]'"


def missing_packages() -> list[str]:
    return [name for name in REQUIRED_PACKAGES if not _importable(name)]


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder refusing it counts as missing
        return False


def table_problem(config: Mapping[str, Any]) -> str | None:
    """Why this node cannot take a config that gives a stream a table, or None."""
    if not config.get("vdl.table.path"):
        return None
    missing = missing_packages()
    if not missing:
        return None
    return (f"vdl.table.path: this node cannot write Delta tables: {', '.join(missing)} not installed "
            f"({INSTALL_HINT})")
