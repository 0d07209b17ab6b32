"""The packages' imports point one way (the README's "Layout"): every import statement in src/, at
module level or inside a function, is read with `ast` and checked against the allowed edges.

    vdl_wire        nothing of ours
    vdl_broker      vdl_wire                      (never the client: what both need is in vdl_wire)
    vdl_client      vdl_wire                      (no numpy or pyarrow either)
    vdl_connector   vdl_client, vdl_wire          (never the broker)
    vdl_dev         everything
    pyspark_vdl     vdl_connector

Inside the broker, the Raft core (the pure modules of vdl_broker/raft, RAFT_CORE) imports only
itself and no I/O (no log/, server/, asyncio, sockets or clocks); the log takes from raft only the
core's value types (Entry, EntryType); the rest of vdl_broker/raft is the driver (RAFT_DRIVER),
and every module there is one or the other.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

SRC = Path(__file__).resolve().parents[2] / "src"
OURS = {"vdl_wire", "vdl_broker", "vdl_client", "vdl_connector", "vdl_dev", "pyspark_vdl"}
ALLOWED = {
    "vdl_wire": set(),
    "vdl_broker": {"vdl_wire"},
    "vdl_client": {"vdl_wire"},
    "vdl_connector": {"vdl_client", "vdl_wire"},
    "vdl_dev": OURS - {"vdl_dev", "pyspark_vdl"},
    "pyspark_vdl": {"vdl_connector"},
}
# Third-party packages a package must not import at all, wherever the import sits.
FORBIDDEN_THIRD_PARTY = {"vdl_client": {"numpy", "pyarrow", "pandas", "pyspark"},
                         "vdl_wire": {"pyspark", "pandas"},
                         "vdl_broker": {"pyspark"}}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in a file; relative imports stay in their package."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
    return found


def package_of(path: Path) -> str:
    return path.relative_to(SRC).parts[0].removesuffix(".py")


def edges_against_the_order() -> list[str]:
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        package = package_of(path)
        for line, module in imported_modules(path):
            top = module.split(".")[0]
            where = f"{path.relative_to(SRC)}:{line} imports {module}"
            if top in OURS and top != package and top not in ALLOWED[package]:
                wrong.append(where)
            if top in FORBIDDEN_THIRD_PARTY.get(package, ()):
                wrong.append(where)
    return wrong


def test_every_package_imports_only_what_it_may() -> None:
    assert edges_against_the_order() == []


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from vdl_client.connection import request_once\n")
    assert imported_modules(module) == [(1, "os"), (4, "vdl_client.connection")]


def test_every_source_package_is_in_the_order() -> None:
    assert {package_of(p) for p in SRC.rglob("*.py")} == OURS


RAFT = SRC / "vdl_broker" / "raft"
# Sans-IO: fed messages, ticks and proposals; answers with Ready bundles.
RAFT_CORE = {"__init__", "types", "config", "state", "node", "election", "replication", "follower",
             "recovery", "confchange", "membership", "quiescence", "log", "progress", "storage",
             "liveness", "reconfigure", "wire", "clock", "crc_extend"}
# Runs the core over the log, the network and the clock.
RAFT_DRIVER = {"group", "group_state", "ready_loop", "write_failure", "lease", "snapshotting", "snapshots",
               "host", "transport", "throttle", "proposals", "persistence", "log_storage"}
NO_IO = {"asyncio", "threading", "socket", "ssl", "selectors", "subprocess", "time", "os", "pathlib"}


def test_every_raft_module_is_core_or_driver() -> None:
    modules = {path.stem for path in RAFT.glob("*.py")}
    assert modules == RAFT_CORE | RAFT_DRIVER
    assert not RAFT_CORE & RAFT_DRIVER


def core_edges_against_the_order() -> list[str]:
    wrong = []
    for name in sorted(RAFT_CORE):
        path = RAFT / f"{name}.py"
        for line, module in imported_modules(path):
            where = f"{path.relative_to(SRC)}:{line} imports {module}"
            parts = module.split(".")
            if parts[0] in NO_IO:
                wrong.append(where)
            elif parts[0] in OURS and not (parts[:2] == ["vdl_broker", "raft"]
                                           and (len(parts) == 2 or parts[2] in RAFT_CORE)):
                wrong.append(where)  # anything of ours but the core itself: log/, server/, the driver
    return wrong


def test_the_raft_core_imports_nothing_of_storage_servers_or_io() -> None:
    assert core_edges_against_the_order() == []


def test_the_log_takes_only_the_cores_value_types_from_raft() -> None:
    wrong = [f"{path.relative_to(SRC)}:{line} imports {module}"
             for path in sorted((SRC / "vdl_broker" / "log").rglob("*.py"))
             for line, module in imported_modules(path)
             if module.startswith("vdl_broker.") and not module.startswith("vdl_broker.log")
             and module != "vdl_broker.raft.types"]
    assert wrong == []


def test_the_core_check_sees_a_storage_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "vdl_broker" / "raft"
    fake.mkdir(parents=True)
    for name in RAFT_CORE:
        (fake / f"{name}.py").write_text("")
    (fake / "node.py").write_text("import asyncio\nfrom vdl_broker.raft.types import Entry\n"
                                  "from vdl_broker.log import StreamLog\nfrom vdl_broker.raft.group import RaftGroup\n")
    monkeypatch.setattr(sys.modules[__name__], "RAFT", fake)
    monkeypatch.setattr(sys.modules[__name__], "SRC", tmp_path)
    assert core_edges_against_the_order() == ["vdl_broker/raft/node.py:1 imports asyncio",
                                              "vdl_broker/raft/node.py:3 imports vdl_broker.log",
                                              "vdl_broker/raft/node.py:4 imports vdl_broker.raft.group"]
