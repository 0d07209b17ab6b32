"""The packages' imports point one way (DESIGN.md, Layout): every import statement in src/, at
module level or inside a function, is read with `ast` and checked against the allowed edges.

    vdl_wire        nothing of ours
    vdl_broker      vdl_wire                      (never the client: what both need is in vdl_wire)
    vdl_client      vdl_wire                      (no numpy or pyarrow either)
    vdl_connector   vdl_client, vdl_wire          (never the broker)
    vdl_dev         everything
    pyspark_vdl     vdl_connector
"""

from __future__ import annotations

import ast
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
