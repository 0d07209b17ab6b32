"""README's Layout matches the tree: every path it lists exists, every module it names exists
where it says, and every package and top-level directory of src/ is listed."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENTRY = re.compile(r"^( {0,2})(\S+)\s")  # a listed path: at the margin, or indented two under one
MODULE = re.compile(r"\b([\w/]+\.py)\b")


def layout() -> list[tuple[Path, str]]:
    """(path, its description) of every entry of README's Layout block."""
    text = (REPO / "README.md").read_text()
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    entries: list[tuple[Path, str]] = []
    top = REPO
    for line in block.splitlines()[1:]:
        match = ENTRY.match(line)
        if match and match.group(2) not in ("the", "a"):
            indent, name = match.groups()
            path = (top / name) if indent else REPO / name
            if not indent:
                top = path
            entries.append((path, line[match.end():]))
        elif entries:
            path, description = entries[-1]
            entries[-1] = (path, description + " " + line.strip())
    return entries


def test_every_listed_path_exists() -> None:
    missing = [str(path.relative_to(REPO)) for path, _ in layout() if not path.exists()]
    assert missing == []


def test_every_module_named_exists_where_it_is_listed() -> None:
    missing = []
    for path, description in layout():
        base = path if path.is_dir() else path.parent
        for name in MODULE.findall(description):
            # A name is relative to the entry (or, like cluster/groups.py under groups/, to its parent).
            if not any((b / name).exists() for b in (base, base.parent)) and not any(base.rglob(Path(name).name)):
                missing.append(f"{name} (under {base.relative_to(REPO)})")
    assert missing == []


def test_every_package_of_src_is_listed() -> None:
    listed = {path for path, _ in layout()}
    packages = [p for p in sorted((REPO / "src").iterdir()) if p.suffix == ".py" or (p / "__init__.py").exists()]
    packages += [p for p in sorted((REPO / "src" / "vdl_broker").iterdir()) if (p / "__init__.py").exists()]
    assert [str(p.relative_to(REPO)) for p in packages if p not in listed] == []
