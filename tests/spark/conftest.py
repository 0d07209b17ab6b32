"""One SparkSession (local[2]) for the whole Spark test run, plus brokers for the tests.

A session takes ~10 s to start here, so it is created once per run. PYSPARK_PYTHON points the
Python workers at this interpreter (the venv holding vdl_connector and pyspark_vdl).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cluster import BrokerProcess, start_broker


@pytest.fixture(scope="session")
def spark():  # noqa: ANN201 - pyspark imported lazily so collection stays fast
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2, 4]")  # 2 cores; a failed task is retried (issue 7)
        .appName("vdl-connector-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One single-node broker per test module (no fsync: tests only)."""
    process = start_broker(tmp_path_factory.mktemp("broker"), fsync=False)
    yield process
    process.kill()


@pytest.fixture
def checkpoint(tmp_path: Path) -> str:
    return str(tmp_path / "checkpoint")
