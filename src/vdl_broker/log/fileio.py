"""Small durable-file helpers shared by the log modules."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fdatasync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


IOV_MAX = 1024


def writev_all(fd: int, parts: list[bytes | bytearray | memoryview], total: int = -1) -> None:
    """Write every buffer in order with as few writev calls as possible (no user-space join).
    `total` (their summed length, when the caller knows it) saves a pass over the buffers."""
    if 0 <= total and len(parts) <= IOV_MAX:
        written = os.writev(fd, parts)
        if written < total:
            write_all(fd, memoryview(b"".join(parts))[written:])
        return
    for start in range(0, len(parts), IOV_MAX):
        group = parts[start:start + IOV_MAX]
        total = sum(len(p) for p in group)
        written = os.writev(fd, group)
        if written < total:  # short write (rare on regular files): finish the rest plainly
            write_all(fd, memoryview(b"".join(group))[written:])


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Temp file, fsync, rename, fsync the directory: the file is either old or new, never torn."""
    temp = path.with_name(path.name + ".tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        # Disk full: give the space back at once (the old file is untouched).
        os.close(fd)
        temp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(temp, path)
    if durable:
        fsync_dir(path.parent)
