"""The streams with Delta tables on one node: a StreamTable (writer.py) per local replica whose
stream has `vdl.table.path`, started, replaced and stopped as configs and replicas change.

It answers what the rest of the broker asks about tables: the table state DescribeConfigs shows
(read-only `vdl.table.status.*` entries), and how far retention may go on a stream with a
table (`retention_limit`: only segments whose records are all in the table).

This module imports no optional package: writer.py (deltalake, pyarrow, numpy) is imported when
the first stream with a table appears here; without those packages the stream's table reports
the error, and its log keeps every record (retention deletes nothing untiered).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vdl_broker.cluster.stream_configs import TableSettings
from vdl_broker.tables import INSTALL_HINT, missing_packages

if TYPE_CHECKING:
    from vdl_broker.server.broker import Broker

log = logging.getLogger(__name__)

RECONCILE_S = 1.0
WORKER_THREADS = 2  # Delta commits of different streams in parallel (deltalake releases the GIL)


def app_id(cluster_id: str, stream: str, created_index: int) -> str:
    """The Delta app transaction id of a stream's writer: one per cluster, stream and incarnation
    (a stream deleted and created again under the same name is another writer)."""
    return f"vdl-{cluster_id}-{stream}-{created_index}"


@dataclass
class TableCounters:
    """What this node did for a stream's table (kept across writer restarts, for the metrics)."""

    commits: int = 0  # Delta commits made
    dead_letters: int = 0  # records written to the dead-letter table
    records: int = 0  # records written to the table


@dataclass
class _Unavailable:
    """A stream whose table this node cannot write (packages missing): only its error."""

    partition: Any
    settings: TableSettings
    error: str
    app_id: str
    end_offset: None = None
    leading: bool = False

    def lag_records(self) -> int:
        return -1

    def lag_seconds(self) -> float:
        return -1.0

    async def stop(self) -> None:
        return None


class TableService:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self._tables: dict[str, Any] = {}  # stream -> StreamTable | _Unavailable
        self.counters: dict[str, TableCounters] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._warming: Future[bool] | None = None  # loading the Delta write path (writer.py `warm_up`)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop(), name="tables")

    def holds_tiered_replica(self) -> bool:
        return any(p.settings is not None and p.settings.table is not None and not p.closed
                   for p in self.broker.replicas.all())

    async def prepare(self) -> bool:
        """Once the node serves (Broker.start starts this service last): when it holds a replica
        of a stream with a table (and the packages are installed), load what its first Delta
        commit would (writer.py `warm_up`: pyarrow, deltalake, pyarrow's pandas bridge,
        deltalake's runtime), so that becoming the stream's writer later is no step in memory or
        threads of a serving process, and a restart's path to serving does not pay for it
        (~0.5 s of CPU). A node without such a replica loads nothing (idle nodes stay small); one
        that gets a replica later (a reassignment, a new tiered stream) loads them then
        (`_open`). Returns whether it loaded."""
        if self._warming is None and (not self.holds_tiered_replica() or missing_packages()):
            return False
        return await asyncio.wrap_future(self._warm_up())

    def _warm_up(self) -> Future[bool]:
        """writer.py `warm_up` on a worker, once per process (whoever asks first)."""
        if self._warming is None:
            self._warming = self._pool().submit(self._load_write_path)
        return self._warming

    def _load_write_path(self) -> bool:
        started, cpu = time.monotonic(), time.process_time()
        try:
            from vdl_broker.tables.writer import warm_up  # deltalake, pyarrow: only now

            warm_up()
        except Exception as error:  # a broken install: the stream's table reports it when opened
            log.warning("node %d: loading the tiering libraries failed: %s: %s", self.broker.node_id,
                        type(error).__name__, error)
            return False
        log.info("node %d: tiering libraries loaded in %.2f s (%.2f s CPU)", self.broker.node_id,
                 time.monotonic() - started, time.process_time() - cpu)
        return True

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="vdl-tables")
        return self._executor

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
        for name in list(self._tables):
            await self._tables.pop(name).stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    async def _loop(self) -> None:
        await self.prepare()  # first: writer.py is then imported on the worker, not on the event loop
        while True:
            try:
                await self.reconcile()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("node %d: reconciling stream tables failed", self.broker.node_id)
            await asyncio.sleep(RECONCILE_S)

    async def reconcile(self) -> None:
        """One table per local replica whose stream has a table, with its current settings."""
        state = self.broker.metadata.state
        cluster_id = state.cluster_id
        wanted: dict[str, tuple[Any, TableSettings, str]] = {}
        for partition in self.broker.replicas.all():
            settings = partition.settings.table if partition.settings is not None else None
            info = state.streams.get(partition.name)
            if settings is not None and info is not None and cluster_id is not None and not partition.closed:
                wanted[partition.name] = (partition, settings, app_id(cluster_id, info.name, info.created_index))
        for name in list(self._tables):
            table = self._tables[name]
            target = wanted.get(name)
            if target is None or target != (table.partition, table.settings, table.app_id):
                del self._tables[name]
                await table.stop()
        for name, (partition, settings, writer_id) in wanted.items():
            if name not in self._tables:
                self._tables[name] = self._open(partition, settings, writer_id)
        for name in set(self.counters) - set(wanted):
            del self.counters[name]  # the stream is gone from here (its series with it)

    def tables(self) -> dict[str, Any]:
        return dict(self._tables)

    def _open(self, partition: Any, settings: TableSettings, writer_id: str) -> Any:
        missing = missing_packages()
        if missing:
            error = f"this node cannot write Delta tables: {', '.join(missing)} not installed ({INSTALL_HINT})"
            log.error("stream %s has the table %s but %s", partition.name, settings.path, error)
            return _Unavailable(partition, settings, error, writer_id)
        from vdl_broker.tables.writer import StreamTable  # deltalake, pyarrow: only now

        # The node's first tiered replica (at start, or a new stream, a reassignment): the whole
        # write path now, on the worker before this table's first call, whether it leads or
        # follows (its memory then follows the replicas it holds, not a leadership).
        self._warm_up()
        try:
            table = StreamTable(partition, settings, writer_id, self._pool(),
                                self.counters.setdefault(partition.name, TableCounters()))
        except Exception as error:  # e.g. a schema this version cannot store
            log.error("stream %s: its table %s cannot be written: %s", partition.name, settings.path, error)
            return _Unavailable(partition, settings, f"{type(error).__name__}: {error}", writer_id)
        table.start()
        log.info("node %d: stream %s is tiered to %s (%s)", self.broker.node_id, partition.name, settings.path,
                 settings.format)
        return table

    # -- questions from the rest of the broker --------------------------------------------------

    def table(self, stream: str) -> Any:
        return self._tables.get(stream)

    def tiered_end(self, stream: str) -> int | None:
        """Every offset below this is in the stream's table (None: unknown yet)."""
        table = self._tables.get(stream)
        return None if table is None else table.end_offset

    def status(self, stream: str) -> list[tuple[str, str, str]]:
        """(name, value, doc) of the table's state, for DescribeConfigs (read-only entries)."""
        table = self._tables.get(stream)
        if table is None:
            return []
        end = table.end_offset
        entries = [
            ("vdl.table.status.last.offset", str(end - 1 if end is not None else -1),
             "the last offset in the table (-1: none yet)"),
            ("vdl.table.status.lag.records", str(table.lag_records()), "committed records not in the table yet"),
            ("vdl.table.status.lag.seconds", f"{table.lag_seconds():.1f}",
             "how long the oldest of them has waited (the leader's view)"),
            ("vdl.table.status.writer", "this node (leader)" if table.leading else "the stream's leader",
             "which node writes the table"),
        ]
        counters = getattr(table, "counters", None)
        if counters is not None:
            entries += [("vdl.table.status.commits", str(counters.commits), "Delta commits made by this node"),
                        ("vdl.table.status.dead.letters", str(counters.dead_letters),
                         "records this node wrote to the dead-letter table")]
        if table.error:
            entries.append(("vdl.table.status.error", table.error, "the last tiering error"))
        return entries


def retention_limit(stream_log: Any, applied_index: int, tiered_end: int | None) -> int:
    """The highest Raft index retention may delete up to on a stream with a table: entries whose
    records are all below `tiered_end` (none while it is unknown)."""
    if tiered_end is None or tiered_end <= stream_log.log_start_offset:
        return stream_log.first_index - 1
    if tiered_end >= stream_log.log_end_offset:
        return applied_index
    return min(applied_index, stream_log.index_for_offset(tiered_end) - 1)
