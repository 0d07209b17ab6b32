"""What the kernel says of a running process."""

from __future__ import annotations

from pathlib import Path


def mapped_files(pid: int) -> set[str]:
    """The files the process has mapped (/proc/<pid>/maps: the path is the 6th field)."""
    lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {fields[5] for fields in map(str.split, lines) if len(fields) > 5}
