"""This software's version: what `vdl --version` and `vdl-broker --version` print, and what the
client sends as ApiVersions' ClientSoftwareVersion (KIP-511: letters, digits, '-' and '.')."""

from __future__ import annotations

import argparse
import configparser
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

DISTRIBUTION = "vdl-for-spark"


@functools.cache
def software_version() -> str:
    """The installed distribution's version; run from a source tree that was not installed, the
    one its setup.cfg declares ("unknown" if neither says)."""
    from importlib.metadata import PackageNotFoundError, version  # tens of ms: only when asked

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        setup = configparser.ConfigParser()
        setup.read(Path(__file__).resolve().parents[2] / "setup.cfg")  # src/vdl_wire/ -> the tree's root
        return setup.get("metadata", "version", fallback="unknown")


class VersionAction(argparse.Action):
    """`--version`: prints "<prog> <release>" and exits; the release is looked up only then
    (argparse's own version action takes it when the parser is built, at every start)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str = "print the release and exit") -> None:
        super().__init__(option_strings, dest, nargs=0, default=default, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(f"{parser.prog} {software_version()}")
        parser.exit()
