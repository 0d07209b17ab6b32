"""Shared fixtures: real `vdl-broker` processes (see tests/support/cluster.py)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cluster import BrokerProcess, start_broker


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers (`broker_factory(**config)`); every one is stopped at the end of the test."""
    started: list[BrokerProcess] = []
    counter = iter(range(1000))

    def factory(**config: Any) -> BrokerProcess:
        broker = start_broker(tmp_path / f"node{next(counter)}", **config)
        started.append(broker)
        return broker

    yield factory
    for broker in started:
        broker.kill()


@pytest.fixture
def broker(broker_factory: Callable[..., BrokerProcess]) -> BrokerProcess:
    return broker_factory()


@pytest.fixture(scope="module")
def module_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker shared by the tests of a module (they use distinct stream names)."""
    broker = start_broker(tmp_path_factory.mktemp("broker"), auto_create_streams=False)
    yield broker
    broker.kill()


# One SparkSession for the whole run (tests/spark, tests/demo): a session takes ~10 s to start
# here. PYSPARK_PYTHON points the Python workers at this interpreter (the venv holding
# vdl_connector and pyspark_vdl). Defined once, here: getOrCreate would silently hand a second
# definition the first one's settings.
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
