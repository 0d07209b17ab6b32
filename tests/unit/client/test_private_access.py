"""Only vdl_client/client.py touches a VdlClient's private members: every other module of src/
and tests/ builds on its public API (send, call, retrying, connection, ...), so the client's
state (leaders, controller, connections) changes in one place. Read with `ast`: an attribute
`x._name` is flagged when `_name` is one of VdlClient's private members and `x` is not `self`
or `cls`, or when `x` is named like a client (`client`, `self._client`, `VdlClient`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[3]
CLIENT = ROOT / "src" / "vdl_client" / "client.py"
CLIENT_NAME = re.compile(r"(^|_)client$|^VdlClient$", re.IGNORECASE)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_members() -> set[str]:
    """VdlClient's private methods and the private attributes it sets on itself."""
    tree = ast.parse(CLIENT.read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "VdlClient")
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    names |= {n.attr for n in ast.walk(cls)
              if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"}
    return {name for name in names if _private(name)}


def _holder(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def reach_ins(source: str, members: set[str]) -> list[str]:
    """`holder._name` for every private member access the rule forbids, in source order."""
    found = []
    for node in sorted(ast.walk(ast.parse(source)), key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        holder = _holder(node.value)
        if holder in ("self", "cls"):
            continue
        if node.attr in members or (holder is not None and CLIENT_NAME.search(holder)):
            found.append(f"{ast.unparse(node.value)}.{node.attr} (line {node.lineno})")
    return found


def test_the_rule_sees_the_reach_ins_it_forbids() -> None:
    source = ("client._retrying('x', f)\n"
              "self._client._drop(key)\n"
              "VdlClient._check(0, 'x')\n"
              "vdl.client._anything\n"
              "self._leaders.clear()\n"
              "connection._sock.close()\n"
              "client.send(route, request)\n")
    assert reach_ins(source, {"_retrying", "_drop", "_check", "_leaders"}) == [
        "client._retrying (line 1)", "self._client._drop (line 2)", "VdlClient._check (line 3)",
        "vdl.client._anything (line 4)"]


def test_no_module_outside_client_py_touches_the_clients_private_members() -> None:
    members = private_members()
    assert {"_send_node", "_leader", "_metadata", "_nodes", "_leaders", "_connections"} <= members
    offenders = {}
    for path in sorted([*(ROOT / "src").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]):
        if path == CLIENT or "egg-info" in path.parts:
            continue
        found = reach_ins(path.read_text(), members)
        if found:
            offenders[str(path.relative_to(ROOT))] = found
    assert offenders == {}
