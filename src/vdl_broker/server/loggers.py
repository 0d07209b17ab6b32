"""A node's loggers as Kafka's BROKER_LOGGER config resource (KIP-412): DescribeConfigs lists
them with their effective levels, IncrementalAlterConfigs sets (SET) or unsets (DELETE) a
logger's level at runtime. The change is this process's only: nothing stores it, so a restart
goes back to the node's `log_level` setting, as a Kafka broker goes back to its log4j config.

The loggers are the root logger, named "root" as Kafka names it (# Kafka: LoggingController.
ROOT_LOGGER), and every logger of the `vdl_broker` hierarchy the process holds, the package
loggers between them included (setting `vdl_broker.raft` sets every Raft module's). Levels
are Kafka's names (# Kafka: LogLevelConfig.VALID_LOG_LEVELS) over Python's: FATAL is CRITICAL,
WARN is WARNING, and TRACE a level below DEBUG.

Plain functions over a `logging.Manager` (the process's by default), so a test drives them on
a hierarchy of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from vdl_broker.cluster.stream_configs import AlterOp

ROOT = "root"
PACKAGE = "vdl_broker"

TRACE = 5  # Python has no TRACE: a level below DEBUG, which nothing in VDL logs at today
logging.addLevelName(TRACE, "TRACE")

# Kafka's level names and the Python levels they set, most severe first.
LEVELS: dict[str, int] = {"FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
                          "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": TRACE}
# As Kafka lists them in its error message: sorted (# Kafka: RuntimeLoggerManager).
VALID_LEVELS = ", ".join(sorted(LEVELS))


class LoggerProblem(ValueError):
    """A logger change refused; `invalid_config` tells INVALID_CONFIG (an unknown logger, a
    level Kafka does not accept) from INVALID_REQUEST (an operation a logger cannot take)."""

    def __init__(self, message: str, invalid_config: bool) -> None:
        super().__init__(message)
        self.invalid_config = invalid_config


@dataclass(frozen=True)
class LoggerChange:
    """One IncrementalAlterConfigs entry on a BROKER_LOGGER resource: a logger name, the
    operation (AlterOp) and the level (None or ignored for DELETE)."""

    name: str
    operation: int
    level: str | None


def _manager(manager: logging.Manager | None) -> logging.Manager:
    return manager if manager is not None else logging.Logger.manager


def level_name(level: int) -> str:
    """Kafka's name of a Python level: the most severe Kafka level it lets through (a level
    between two of Kafka's logs what the lower one would not)."""
    for name, value in LEVELS.items():
        if level >= value:
            return name
    return "TRACE"


def _effective(name: str, manager: logging.Manager) -> int:
    """The level a logger (or a package node no module created yet) logs at: its own, else its
    nearest ancestor's, else the root's -- Python's Logger.getEffectiveLevel, without creating
    the logger."""
    while name:
        found = manager.loggerDict.get(name)
        if isinstance(found, logging.Logger) and found.level != logging.NOTSET:
            return found.level
        name = name.rpartition(".")[0]
    return manager.root.level


def loggers(manager: logging.Manager | None = None) -> dict[str, str]:
    """Every logger a BROKER_LOGGER resource shows, by name, with its effective level's Kafka
    name: root first, then the `vdl_broker` hierarchy in name order."""
    manager = _manager(manager)
    names = sorted(name for name in list(manager.loggerDict)
                   if name == PACKAGE or name.startswith(PACKAGE + "."))
    return {ROOT: level_name(manager.root.level), **{name: level_name(_effective(name, manager)) for name in names}}


def _logger(name: str, manager: logging.Manager) -> logging.Logger:
    return manager.root if name == ROOT else manager.getLogger(name)


def check(changes: Iterable[LoggerChange], manager: logging.Manager | None = None) -> None:
    """Raise LoggerProblem for the first change Kafka refuses (# Kafka: RuntimeLoggerManager.
    validateLogLevelConfigs): an unknown logger, a level not one of Kafka's (exact, upper
    case), unsetting root, or APPEND / SUBTRACT / an unknown operation."""
    known = loggers(manager)
    for change in changes:
        if change.operation == AlterOp.SET:
            if change.name not in known:
                raise LoggerProblem(f"Logger {change.name} does not exist!", invalid_config=True)
            if change.level not in LEVELS:
                raise LoggerProblem(f"Cannot set the log level of {change.name} to {change.level} as it is not a "
                                    f"supported log level. Valid log levels are {VALID_LEVELS}", invalid_config=True)
        elif change.operation == AlterOp.DELETE:
            if change.name not in known:
                raise LoggerProblem(f"Logger {change.name} does not exist!", invalid_config=True)
            if change.name == ROOT:
                raise LoggerProblem(f"Removing the log level of the {ROOT} logger is not allowed",
                                    invalid_config=False)
        elif change.operation in (AlterOp.APPEND, AlterOp.SUBTRACT):
            raise LoggerProblem(f"{AlterOp(change.operation).name} operation is not allowed for the BROKER_LOGGER "
                                f"resource", invalid_config=False)
        else:
            raise LoggerProblem(f"Unknown operation type {change.operation} is not allowed for the BROKER_LOGGER "
                                f"resource", invalid_config=False)


def apply(changes: Iterable[LoggerChange], manager: logging.Manager | None = None) -> list[str]:
    """Apply changes `check` accepted: SET gives the logger the level, DELETE takes its own
    level away so it logs at its parent's. Returns a line per change, for the node's log."""
    manager = _manager(manager)
    done = []
    for change in changes:
        logger = _logger(change.name, manager)
        if change.operation == AlterOp.SET:
            assert change.level is not None  # check() refused anything else
            logger.setLevel(LEVELS[change.level])
            done.append(f"Updated the log level of {change.name} to {change.level}")
        else:
            logger.setLevel(logging.NOTSET)
            done.append(f"Unset the log level of {change.name}")
    return done
