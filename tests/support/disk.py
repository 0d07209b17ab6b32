"""Disk faults for tests: size-limited tmpfs mounts (root only), filling them, flipping bytes,
cutting files short."""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path


class TmpfsUnavailable(RuntimeError):
    """mount(8) refused a tmpfs (not root, or no mount namespace rights)."""


def mount_tmpfs(directory: Path, size: str) -> None:
    """Mount a tmpfs of `size` ("16m", "512m") at `directory` (created if missing)."""
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise TmpfsUnavailable(f"cannot mount a size-limited tmpfs here: {result.stderr.strip()}")


def unmount(directory: Path) -> None:
    subprocess.run(["umount", "-l", str(directory)], capture_output=True)


@contextlib.contextmanager
def small_disk(directory: Path, size: str) -> Iterator[Path]:
    """`directory` as a tmpfs of `size` for the block, unmounted after; the test is skipped,
    saying why, where no tmpfs can be mounted (not root)."""
    import pytest

    try:
        mount_tmpfs(directory, size)
    except TmpfsUnavailable as error:
        pytest.skip(str(error))
    try:
        yield directory
    finally:
        unmount(directory)


def fill(path: Path) -> int:
    """Write `path` until the file system is full; returns its size."""
    chunk = b"\0" * 65536
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        while True:
            try:
                os.write(fd, chunk)
            except OSError as error:
                if error.errno != errno.ENOSPC:
                    raise
                break
        # Finish the last page too, so not even a small write finds room.
        with contextlib.suppress(OSError):
            while os.write(fd, b"\0" * 512):
                pass
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def release(path: Path, keep_bytes: int = 0) -> None:
    os.truncate(path, keep_bytes)


def flip_byte(path: Path, position: int) -> None:
    """XOR one byte of `path` in place (a bit-rot stand-in that always changes the value)."""
    with open(path, "r+b") as f:
        f.seek(position)
        value = f.read(1)[0]
        f.seek(position)
        f.write(bytes([value ^ 0x5A]))


def cut_at_page(path: Path, position: int) -> None:
    """Cut the file at the page boundary at or before `position`: the pages after it are wholly
    past the end, and reading them through a mapping raises SIGBUS (a partly cut page reads as
    zeros past the end, which a CRC check finds)."""
    os.truncate(path, position - position % mmap.PAGESIZE)
