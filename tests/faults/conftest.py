"""Fixtures for the process-level fault tests. The module's 3-node cluster (`dev_cluster`, and
`cluster` with every node running around each test) comes from tests/conftest.py."""

from __future__ import annotations

import pytest

from tests.faults.harness import ProbeLog


@pytest.fixture
def probes() -> ProbeLog:
    return ProbeLog()
