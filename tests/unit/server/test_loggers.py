"""server/loggers.py on a logging hierarchy of the test's own: what a BROKER_LOGGER resource lists,
what a change sets, and the changes refused in Kafka's words."""

from __future__ import annotations

import logging

import pytest

from vdl_broker.cluster.stream_configs import AlterOp
from vdl_broker.server.loggers import TRACE, LoggerChange, LoggerProblem, apply, check, level_name, loggers


@pytest.fixture
def manager() -> logging.Manager:
    root = logging.RootLogger(logging.INFO)
    own = logging.Manager(root)
    root.manager = own
    for name in ("vdl_broker.raft.driver", "vdl_broker.raft.wire", "vdl_broker.server.broker", "asyncio"):
        own.getLogger(name)
    return own


def test_lists_root_and_the_vdl_broker_hierarchy_at_their_effective_levels(manager: logging.Manager) -> None:
    manager.getLogger("vdl_broker.raft.wire").setLevel(logging.WARNING)
    assert list(loggers(manager).items()) == [
        ("root", "INFO"), ("vdl_broker", "INFO"), ("vdl_broker.raft", "INFO"), ("vdl_broker.raft.driver", "INFO"),
        ("vdl_broker.raft.wire", "WARN"), ("vdl_broker.server", "INFO"), ("vdl_broker.server.broker", "INFO")]


def test_set_then_delete_a_logger_and_a_package(manager: logging.Manager) -> None:
    driver = manager.getLogger("vdl_broker.raft.driver")
    changes = [LoggerChange("vdl_broker.raft.driver", AlterOp.SET, "DEBUG"),
               LoggerChange("vdl_broker.server", AlterOp.SET, "ERROR")]
    check(changes, manager)
    assert apply(changes, manager) == ["Updated the log level of vdl_broker.raft.driver to DEBUG",
                                       "Updated the log level of vdl_broker.server to ERROR"]
    assert driver.getEffectiveLevel() == logging.DEBUG and driver.isEnabledFor(logging.DEBUG)
    assert manager.getLogger("vdl_broker.server.broker").getEffectiveLevel() == logging.ERROR
    listed = loggers(manager)
    assert (listed["vdl_broker.raft.driver"], listed["vdl_broker.server"], listed["vdl_broker.server.broker"],
            listed["vdl_broker.raft.wire"]) == ("DEBUG", "ERROR", "ERROR", "INFO")

    unset = [LoggerChange("vdl_broker.raft.driver", AlterOp.DELETE, None),
             LoggerChange("vdl_broker.server", AlterOp.DELETE, "")]
    check(unset, manager)
    assert apply(unset, manager) == ["Unset the log level of vdl_broker.raft.driver",
                                     "Unset the log level of vdl_broker.server"]
    assert not driver.isEnabledFor(logging.DEBUG)
    assert set(loggers(manager).values()) == {"INFO"}


def test_root_is_set_by_its_kafka_name(manager: logging.Manager) -> None:
    apply([LoggerChange("root", AlterOp.SET, "TRACE")], manager)
    assert manager.root.level == TRACE
    assert set(loggers(manager).values()) == {"TRACE"}


@pytest.mark.parametrize(("change", "message", "invalid_config"), [
    (LoggerChange("vdl_broker.nothing", AlterOp.SET, "DEBUG"), "Logger vdl_broker.nothing does not exist!", True),
    (LoggerChange("asyncio", AlterOp.DELETE, None), "Logger asyncio does not exist!", True),
    (LoggerChange("vdl_broker", AlterOp.SET, "debug"),
     "Cannot set the log level of vdl_broker to debug as it is not a supported log level. Valid log levels are "
     "DEBUG, ERROR, FATAL, INFO, TRACE, WARN", True),
    (LoggerChange("vdl_broker", AlterOp.SET, "OFF"),
     "Cannot set the log level of vdl_broker to OFF as it is not a supported log level. Valid log levels are "
     "DEBUG, ERROR, FATAL, INFO, TRACE, WARN", True),
    (LoggerChange("root", AlterOp.DELETE, None), "Removing the log level of the root logger is not allowed", False),
    (LoggerChange("vdl_broker", AlterOp.APPEND, "DEBUG"),
     "APPEND operation is not allowed for the BROKER_LOGGER resource", False),
    (LoggerChange("vdl_broker", AlterOp.SUBTRACT, "DEBUG"),
     "SUBTRACT operation is not allowed for the BROKER_LOGGER resource", False),
    (LoggerChange("vdl_broker", 7, "DEBUG"), "Unknown operation type 7 is not allowed for the BROKER_LOGGER resource",
     False),
])
def test_refusals_change_nothing(manager: logging.Manager, change: LoggerChange, message: str,
                                 invalid_config: bool) -> None:
    fine = LoggerChange("vdl_broker.raft", AlterOp.SET, "DEBUG")
    with pytest.raises(LoggerProblem) as refused:
        check([fine, change], manager)
    assert (str(refused.value), refused.value.invalid_config) == (message, invalid_config)
    assert set(loggers(manager).values()) == {"INFO"}


def test_level_names_are_kafkas() -> None:
    assert [level_name(level) for level in (60, 50, 45, 40, 30, 20, 15, 10, 5, 1, 0)] == [
        "FATAL", "FATAL", "ERROR", "ERROR", "WARN", "INFO", "DEBUG", "DEBUG", "TRACE", "TRACE", "TRACE"]
