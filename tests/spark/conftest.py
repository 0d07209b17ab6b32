"""Brokers for the Spark tests (the shared SparkSession fixture is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import BrokerProcess, start_broker


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One single-node broker per test module (no fsync: tests only)."""
    process = start_broker(tmp_path_factory.mktemp("broker"), fsync=False)
    yield process
    process.kill()


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return str(tmp_path / "checkpoint")
