"""The tiering writer of one stream on one node (asyncio; Delta work runs in a worker thread).

On the stream's leader it appends committed records to the stream's Delta table: it reads
whole stored batches from the log, never at or above the high watermark, and hands them to a
worker thread, which re-reads the table's transaction version (where the table really is: a
deposed or new leader may have written meanwhile), converts the records (convert.py) and
commits them with the transaction (app id, last offset) — see delta.py for why that is exactly
once. Committed records only (KIP-98): the range ends at the last stable offset, and transaction
markers and aborted transactions' records take their offsets but no rows (the table then says so
in its properties, delta.py's mark_committed_only). A commit is made when the oldest record not yet in the table has waited about
`vdl.table.lag.ms` (less the time commits take), or sooner when a lot is pending.

On every replica it keeps `end_offset` (all offsets below it are in the table): the leader knows
it first hand, the others re-read it from the table now and then. Retention on a stream with a
table deletes only segments below it (service.py).

The leader also compacts small files and vacuums old ones on the stream's schedule. A failure
(table unreachable, schema changed under it) is kept as the table's error, logged, and retried
with a growing pause; tiering never stops the stream.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import time
from collections import deque
from concurrent.futures import Executor
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from vdl_broker.cluster.stream_configs import TableSettings
from vdl_broker.log.entry import OffsetOutOfRange
from vdl_broker.tables.convert import DEAD_LETTER_SCHEMA, RAW_FIELDS, partition_columns, table_schema
from vdl_broker.tables.convert import convert as convert_records
from vdl_broker.tables.delta import DeltaTarget, TransactionConflict
from vdl_broker.tables.service import TableCounters

log = logging.getLogger(__name__)

MAX_COMMIT_RECORDS = 2_000_000  # flush at once when this many wait
MAX_COMMIT_BYTES = 128 << 20  # stored batch bytes read for one commit
POLL_S = 0.1  # how often a leader with records waiting checks whether to commit
FOLLOWER_REFRESH_S = 5.0  # how often a follower re-reads the table's end
RETRY_MIN_S, RETRY_MAX_S = 0.5, 30.0

WARM_UP_APP_ID = "vdl-warm-up"


def warm_up() -> None:
    """Everything a node's first Delta commit loads, done once in a scratch table that is then
    deleted: importing pyarrow and deltalake; building rows from Python values, on which
    pyarrow imports pandas when it is installed (its pandas bridge: ~60 MB of libraries);
    deltalake's Rust runtime and its worker threads, and its allocator's first arenas (a
    create, an append with a transaction, a snapshot's add actions read back). The service
    runs it as the node starts serving (service.py `prepare`): a node that leads a tiered stream
    later then costs no more memory than its followers, and the cost shows once, at start, not
    when the node first writes a table."""
    schema = pa.schema(RAW_FIELDS)
    rows = pa.Table.from_pylist([{"offset": 0, "timestamp": None, "key": None, "value": b"", "headers": None}],
                                schema=schema)
    with tempfile.TemporaryDirectory(prefix="vdl-tables-warm-up-") as scratch:
        target = DeltaTarget(scratch, schema, [], stats_columns=["offset", "timestamp"])
        target.next_offset(WARM_UP_APP_ID, 0)  # creates the table; the snapshot to commit against
        target.append(rows, WARM_UP_APP_ID, 0)
        target.stats()


class StreamTable:
    """One stream's table on this node. `partition` is the stream's server.partition.Partition."""

    def __init__(self, partition: Any, settings: TableSettings, app_id: str, executor: Executor,
                 counters: TableCounters | None = None) -> None:
        self.partition = partition
        self.name = partition.name
        self.settings = settings
        self.app_id = app_id
        self.executor = executor
        # Statistics: a raw table's offset and timestamp (the Spark source picks files by offset);
        # a json table's for every column (its readers filter on them).
        stats = ["offset", "timestamp"] if settings.format == "raw" else None
        self.target = DeltaTarget(settings.path, table_schema(settings), partition_columns(settings),
                                  stats_columns=stats)
        self.dead_target = (DeltaTarget(settings.dead_letter_path, DEAD_LETTER_SCHEMA, [],
                                        stats_columns=["offset", "timestamp"])
                            if settings.format == "json" else None)
        self.end_offset: int | None = None  # every offset below is in the table
        self.error: str | None = None
        self.counters = counters if counters is not None else TableCounters()
        self.pending_since: float | None = None  # monotonic time the oldest record not in the table was seen
        self.leading = False
        self._commit_times: deque[float] = deque([0.2], maxlen=8)  # recent commits' durations (s)
        self._task: asyncio.Task[None] | None = None
        self._last_compact = self._last_vacuum = time.monotonic()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"table-{self.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
            self._task = None

    # -- what others see ---------------------------------------------------------------------

    def lag_records(self) -> int:
        end = self.end_offset
        return max(0, self.partition.last_stable_offset - (end if end is not None else self.partition.log_start_offset))

    def lag_seconds(self) -> float:
        """How long the oldest record not in the table has waited (the leader's view; 0 elsewhere)."""
        since = self.pending_since
        return 0.0 if since is None else max(0.0, time.monotonic() - since)

    # -- the loop ----------------------------------------------------------------------------

    async def _run(self) -> None:
        pause = RETRY_MIN_S
        while True:
            try:
                if self.partition.is_leader:
                    self.leading = True
                    await self._lead()
                else:
                    self.leading = False
                    await self._follow()
                pause = RETRY_MIN_S
            except asyncio.CancelledError:
                raise
            except TransactionConflict as conflict:
                log.info("stream %s: another writer committed to the table first (%s): re-reading it",
                         self.name, conflict)
            except Exception as error:  # the table's error; tiering retries
                self.error = f"{type(error).__name__}: {error}"
                log.warning("stream %s: tiering to %s failed, retrying in %.1f s: %s", self.name,
                            self.settings.path, pause, self.error)
                await asyncio.sleep(pause)
                pause = min(pause * 2, RETRY_MAX_S)

    async def _in_thread(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    async def _follow(self) -> None:
        """Not the leader: learn the table's end now and then (retention needs it)."""
        version = await self._in_thread(self.target.transaction_version, self.app_id)
        if version is not None:
            self.end_offset = version + 1
        self.pending_since = None
        self.error = None
        deadline = time.monotonic() + FOLLOWER_REFRESH_S
        while time.monotonic() < deadline and not self.partition.is_leader:
            await asyncio.sleep(POLL_S * 2)

    async def _lead(self) -> None:
        partition = self.partition
        cursor = await self._in_thread(self.target.next_offset, self.app_id, partition.log_start_offset)
        self.end_offset = cursor
        await self._schedule_compaction()
        self.error = None
        while partition.is_leader:
            start = partition.log_start_offset
            if cursor < start:
                self.error = (f"offsets [{cursor}, {start}) were deleted from the log before they reached the "
                              f"table (retention before the table was set?)")
                log.warning("stream %s: %s", self.name, self.error)
                cursor = start
            # Never past the last stable offset: an open transaction may still abort (KIP-98).
            high_watermark = partition.last_stable_offset
            now = time.monotonic()
            if high_watermark <= cursor:
                self.pending_since = None
                await self._housekeeping()
                await self._wait_for_records()
                continue
            if self.pending_since is None:
                self.pending_since = now
            due = self.pending_since + self._flush_delay_s()
            if now < due and high_watermark - cursor < MAX_COMMIT_RECORDS:
                await asyncio.sleep(min(POLL_S, due - now))
                continue
            data, end = self._read(cursor, high_watermark)
            if end <= cursor:
                await asyncio.sleep(POLL_S)
                continue
            # Every transaction below the last stable offset is decided: its aborted ones are known.
            aborted = [(a.producer_id, a.first_offset, a.last_offset) for a in partition.aborted_between(cursor, end)]
            read_at = time.monotonic()
            started = time.monotonic()
            moved, dead = await self._in_thread(self._commit, data, cursor, end, aborted)
            self._commit_times.append(time.monotonic() - started)
            if moved != end:  # another writer got there first: go on from where the table is
                log.info("stream %s: the table is at offset %d, not %d: another writer committed", self.name,
                         moved, cursor)
                cursor = self.end_offset = moved
                continue
            self.counters.commits += 1
            self.counters.records += end - cursor
            self.counters.dead_letters += dead
            cursor = self.end_offset = end
            if partition.last_stable_offset <= end:
                self.pending_since = None
            elif end == high_watermark:  # all read were written; newer records came after the read
                self.pending_since = read_at
            self.error = None
            await self._housekeeping()

    def _flush_delay_s(self) -> float:
        """Commit early enough that the oldest waiting record is in the table within lag.ms,
        even when the commit is as slow as the slowest of the last few (a loaded machine)."""
        lag_s = self.settings.lag_ms / 1000
        return max(lag_s / 2, lag_s - 1.5 * max(self._commit_times) - POLL_S)

    async def _wait_for_records(self) -> None:
        future = self.partition.changed_future()
        try:
            async with asyncio.timeout(1.0):
                await asyncio.shield(future)
        except TimeoutError:
            pass
        finally:
            future.cancel()

    def _read(self, start: int, high_watermark: int) -> tuple[list[bytes | bytearray | memoryview], int]:
        """Whole stored batches from `start`, all below the high watermark, as the log hands
        them out (views of the tail cache's buffers or of segment mappings): the worker thread may
        read them, as they are committed (never truncated) and a mapping lives while a view of
        it does (retention only unlinks the file)."""
        parts: list[bytes | bytearray | memoryview] = []
        position, size = start, 0
        while position < high_watermark and size < MAX_COMMIT_BYTES:
            try:
                result = self.partition.log.read(position, MAX_COMMIT_BYTES - size, max_offset=high_watermark)
            except OffsetOutOfRange:
                break
            if not result.buffers or result.next_offset <= position:
                break
            parts += result.buffers
            size += result.size
            position = result.next_offset
        return parts, position

    def _commit(self, data: list[bytes | bytearray | memoryview], start: int, end: int,
                aborted: list[tuple[int, int, int]]) -> tuple[int, int]:
        """Worker thread: append the committed records of [start, end) unless the table moved
        (a range of markers and aborted records only is an append of no rows, moving the
        transaction on); returns (where the table now ends, dead letters written)."""
        where = self.target.next_offset(self.app_id, start)
        if where != start:
            return where, 0
        converted = convert_records(data, start, end, self.settings, aborted)
        if converted.skipped:
            self.target.mark_committed_only(self.app_id, start)
            where = self.target.next_offset(self.app_id, start)  # the snapshot to commit against
            if where != start:
                return where, 0
        dead = 0
        if self.dead_target is not None and converted.dead_letters.num_rows:
            # Dead letters first, with their own transaction: offsets below the dead-letter
            # table's version are there already (an earlier attempt whose main commit lost).
            done = self.dead_target.next_offset(self.app_id, 0)
            letters = converted.dead_letters.filter(pc.greater_equal(converted.dead_letters["offset"], done))
            if letters.num_rows:
                self.dead_target.append(letters, self.app_id, end - 1)
                dead = letters.num_rows
        self.target.append(converted.rows, self.app_id, end - 1)
        return end, dead

    async def _schedule_compaction(self) -> None:
        """As a writer starts leading: compaction is due `compact.interval.ms` after the table's
        oldest small file was written, not after this writer started. Timed from the writer's
        start, a stream whose leadership moves (or whose leader restarts) more often than the
        interval never compacted: its table's files, and the memory of every writer holding its
        snapshot, grew with every commit."""
        settings = self.settings
        if settings.compact_interval_ms <= 0:
            return
        oldest = await self._in_thread(self.target.oldest_small_file_ms, settings.compact_target_bytes)
        if oldest is not None:
            waited = max(0.0, time.time() - oldest / 1000)
            self._last_compact = min(self._last_compact, time.monotonic() - waited)

    async def _housekeeping(self) -> None:
        """Compaction and vacuum when due (leader only, between commits)."""
        now = time.monotonic()
        settings = self.settings
        if settings.compact_interval_ms > 0 and now - self._last_compact >= settings.compact_interval_ms / 1000:
            self._last_compact = now
            try:
                metrics = await self._in_thread(self.target.compact, settings.compact_target_bytes)
                log.info("stream %s: table compacted: %s files added, %s removed", self.name,
                         metrics.get("numFilesAdded"), metrics.get("numFilesRemoved"))
            except Exception as error:  # a concurrent commit, a transient store error: next time
                log.warning("stream %s: compacting the table failed: %s", self.name, error)
        if settings.vacuum_interval_ms > 0 and now - self._last_vacuum >= settings.vacuum_interval_ms / 1000:
            self._last_vacuum = now
            try:
                removed = await self._in_thread(self.target.vacuum, settings.vacuum_retention_ms)
                log.info("stream %s: table vacuumed: %d files deleted", self.name, len(removed))
            except Exception as error:
                log.warning("stream %s: vacuuming the table failed: %s", self.name, error)
