"""Streams that are Delta tables: the tiering writer and what it needs.

Tiering needs the optional packages deltalake, pyarrow and numpy (the `tables` extra, part of
`spark` too); a plain install of the broker has none of them, so nothing here imports them at
module level, and a stream given a table on a node without them is refused (or, on a node that
becomes its leader later, reported as the table's error) with a message saying what to install.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping
from typing import Any

REQUIRED_PACKAGES = ("deltalake", "pyarrow", "numpy")
INSTALL_HINT = "pip install 'vdl-for-spark[tables]'"

# deltalake's Rust code allocates from a jemalloc of its own, which reads this variable once, when
# its library loads (tikv-jemallocator's `_rjem_` prefix). With jemalloc's default decay a tier
# writer's resident memory grew with its commits, 15-24 MB over 2,000 (a node committing every
# 2 s: +14 MB/h), and with freed pages returned at once 1.3-1.4 MB (+1 to +3 MB/h), at no CPU cost
# measurable in a tier writer's process (one arena alone did not do it: the decay did).
DELTALAKE_ALLOCATOR_VARIABLE = "_RJEM_MALLOC_CONF"
DELTALAKE_ALLOCATOR = "narenas:1,dirty_decay_ms:0,muzzy_decay_ms:0"


def configure_deltalake_allocator() -> None:
    """Give deltalake's allocator DELTALAKE_ALLOCATOR unless the operator set one: effective only
    before deltalake is first imported in this process (this package's import does it)."""
    os.environ.setdefault(DELTALAKE_ALLOCATOR_VARIABLE, DELTALAKE_ALLOCATOR)


# Every module that imports deltalake lives in this package: importing it first sets the allocator.
configure_deltalake_allocator()


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
