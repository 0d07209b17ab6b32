"""Shared fixtures: real `vdl-broker` processes (see tests/support/cluster.py)."""

from __future__ import annotations

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
