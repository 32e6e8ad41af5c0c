"""The log manager: every partition log in the broker's ``log.dirs``.

Each log directory holds one ``<topic>-<partition>`` directory per partition and these files
(formats in ``ads.storage.checkpoint``):

- ``recovery-point-offset-checkpoint``: per partition, the offset below which the log is
  fsynced and validated; recovery after an unclean shutdown starts there. A clean shutdown
  writes it once every log is on disk, so it then holds each log's end offset, which the
  next start takes as such without reading any segment.
- ``log-start-offset-checkpoint``: per partition, the log start offset (DeleteRecords and
  retention may leave it inside the first segment).
- ``replication-offset-checkpoint``: per partition, the high watermark.
- ``.kafka_cleanshutdown``: an empty marker written last by ``shutdown`` after every log was
  closed and made durable and the checkpoints written. Present at startup (with a readable
  recovery-point checkpoint): no log is scanned. It is removed, and the removal made durable
  (directory fsync), as soon as the directory is loaded, so a crash afterwards counts as
  unclean and the start after it does not trust end offsets the logs have since passed.
- ``.lock``: an empty file the broker holds a POSIX lock on (``lock_dirs``) from before it
  reads anything until ``shutdown``, as Kafka does, so two broker processes never use one
  directory; the kernel drops the lock when its process dies, so a lock that is free means
  no live process uses the directory. (POSIX record locks are per process: brokers in one
  process, as tests run them, do not exclude each other.)

Durability in bulk: where the system has ``syncfs`` (Linux), the shutdown closes a
directory's logs without fsyncing anything and then syncs the directory's file system once,
and a start after a crash recovers the logs without fsyncing and syncs once per directory
afterwards (then writes the checkpoints); a failed sync leaves the recovery points where
they were and withholds the marker. Elsewhere each changed log is fsynced on its own.

Crash rule: checkpoints are replaced atomically; a checkpoint that cannot be read is treated
as absent (recovery starts at offset 0, which is slow but safe), and an unreadable
recovery-point checkpoint makes the marker untrusted, as does a log it does not name (that
log is recovered from offset 0). Partition directories renamed
``<topic>-<partition>.<id>-delete`` by a topic deletion are removed at startup.

Threading: everything runs on the owner thread except ``flush_dirty`` and ``checkpoint``,
which a worker thread may run concurrently with appends (they take the locks they need).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from ads.common.clock import Clock
from ads.common.files import O_CLOEXEC, atomic_write, fsync_dir
from ads.common.partitions import TopicPartition
from ads.storage.checkpoint import read_offset_checkpoint, write_offset_checkpoint
from ads.storage.config import LogConfig
from ads.storage.errors import CheckpointError, KafkaStorageError, LogDirInUseError
from ads.storage.fileio import OS_FILE_IO, FileIO
from ads.storage.files import Scheduler
from ads.storage.log import Log, partition_dir_name
from ads.storage.open_files import DEFAULT_LIMIT, OpenFiles

__all__ = [
    "CLEAN_SHUTDOWN_FILE",
    "LOG_START_OFFSET_CHECKPOINT",
    "RECOVERY_POINT_CHECKPOINT",
    "REPLICATION_OFFSET_CHECKPOINT",
    "LogManager",
    "parse_partition_dir",
]

logger = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
LOCK_FILE = ".lock"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
DELETE_DIR_SUFFIX = "-delete"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """``("my.topic-x", 3)`` for ``my.topic-x-3``; ``None`` if the name is not a partition."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def _read_checkpoint(path: Path) -> dict[TopicPartition, int] | None:
    """The checkpoint's offsets; None (and a warning) if it cannot be read."""
    try:
        return read_offset_checkpoint(path)
    except CheckpointError as exc:
        logger.warning("ignoring unreadable checkpoint: %s", exc)
        return None


class LogManager:
    def __init__(
        self,
        log_dirs: Sequence[Path],
        *,
        clock: Clock,
        default_config: LogConfig,
        scheduler: Scheduler | None = None,
        topic_configs: Mapping[str, LogConfig] | None = None,
        file_io: FileIO = OS_FILE_IO,
        open_files_limit: int = DEFAULT_LIMIT,
    ) -> None:
        """``file_io`` is the file layer every log writes its segments through
        (``ads.storage.fileio``; tests pass a ``FaultyFileIO``); ``open_files_limit`` the
        most segment files every log together keeps open (``log.open.files.max``,
        ``ads.storage.open_files``)."""
        if not log_dirs:
            raise ValueError("at least one log directory is required")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.clock = clock
        self.default_config = default_config
        self._scheduler = scheduler
        self.open_files = OpenFiles(file_io, open_files_limit)
        self._topic_configs: dict[str, LogConfig] = dict(topic_configs or {})
        self._logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        # How many logs each directory holds: where the next new log goes (the least).
        self._dir_counts: dict[Path, int] = dict.fromkeys(self.log_dirs, 0)
        self._checkpoint_lock = threading.Lock()
        # create_log runs in worker threads (the broker makes new partitions' files off its
        # event loop) while the loop may delete logs: both change the maps under this lock.
        self._logs_lock = threading.Lock()
        self.recovered_logs = 0
        # The descriptor of each directory's .lock, held from lock_dirs to shutdown; also
        # what syncfs is called on, so it reports writeback errors since the start.
        self._dir_locks: dict[Path, int] = {}

    # ------------------------------------------------------------------------------ startup

    def lock_dirs(self) -> None:
        """Takes every log directory's ``.lock``; ``LogDirInUseError`` when another process
        holds one (nothing of that directory has been read or written then)."""
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | O_CLOEXEC, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                self.unlock_dirs()
                raise LogDirInUseError(
                    f"another process uses the log directory {log_dir} (it holds "
                    f"{log_dir / LOCK_FILE}); a directory serves one broker at a time") from exc
            self._dir_locks[log_dir] = fd

    def unlock_dirs(self) -> None:
        for fd in self._dir_locks.values():
            os.close(fd)  # closing the descriptor releases its lock
        self._dir_locks.clear()

    def _sync_dir(self, log_dir: Path) -> None:
        """syncfs of the file system holding ``log_dir``: every file written there, data
        and metadata (renames, creations, truncations), is on disk when it returns.
        Raises ``OSError`` if writeback failed there since the directory was locked."""
        fd = self._dir_locks.get(log_dir)
        if fd is not None:
            self.open_files.io.syncfs(fd)
            return
        fd = os.open(log_dir, os.O_RDONLY | O_CLOEXEC)  # a manager that never locked
        try:
            self.open_files.io.syncfs(fd)
        finally:
            os.close(fd)

    def startup(self) -> None:
        """Open every partition directory, recovering after an unclean shutdown."""
        started = time.monotonic()
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._load_dir(log_dir)
        if self.recovered_logs:
            # The recovery points just moved: a crash soon after starts from them.
            self.checkpoint()
        logger.info(
            "loaded %d logs (%d recovered after an unclean shutdown) in %.1f ms",
            len(self._logs),
            self.recovered_logs,
            (time.monotonic() - started) * 1000,
        )

    def _load_dir(self, log_dir: Path) -> None:
        """Opens the directory's logs. After a clean shutdown each ends where the
        recovery-point checkpoint says (written once every log was on disk), so no segment
        is read; a log the checkpoint does not name, or every log if the checkpoint cannot
        be read, is recovered from offset 0 as after a crash. Recovered logs are made
        durable together, with one sync of the file system."""
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        had_marker = marker.exists()
        recovery_points = _read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        clean = had_marker and recovery_points is not None
        if recovery_points is None:
            recovery_points = {}
        log_starts = _read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT) or {}
        high_watermarks = _read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT) or {}
        whole_fs_sync = self.open_files.io.has_syncfs
        recovered: list[Log] = []
        with os.scandir(log_dir) as listing:  # scandir: no stat per entry to tell dirs
            names = sorted(e.name for e in listing if e.is_dir())
        for name in names:
            path = log_dir / name
            if name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            tp = parse_partition_dir(name)
            if tp is None:
                logger.warning("ignoring %s: not a <topic>-<partition> directory", path)
                continue
            if tp in self._logs:
                raise RuntimeError(f"{tp} has directories in two log dirs: {path}")
            end = recovery_points.get(tp) if clean else None
            log = Log.open(
                path,
                tp[0],
                tp[1],
                self.config_for(tp[0]),
                clock=self.clock,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp, 0),
                clean_shutdown=end is not None,
                scheduler=self._scheduler,
                high_watermark=high_watermarks.get(tp),
                files=self.open_files,
                log_end_offset=end,
                durable=not whole_fs_sync,
            )
            if end is None:
                self.recovered_logs += 1
                recovered.append(log)
            self._place(tp, log, log_dir)
        if had_marker:
            marker.unlink(missing_ok=True)
            # Durable before any append: a marker that came back after a crash would make
            # the next start trust a log end offset the log has since passed.
            fsync_dir(log_dir)
        if recovered and whole_fs_sync:
            self._sync_recovered(log_dir, recovered)

    def _sync_recovered(self, log_dir: Path, logs: list[Log]) -> None:
        """One syncfs for what recovering ``logs`` wrote (truncations, rebuilt indexes and
        producer snapshots), then their recovery points move to their ends; if it fails
        they stay, and the next start recovers the same segments again."""
        try:
            self._sync_dir(log_dir)
        except OSError as exc:
            logger.error("%s: syncing the recovered logs failed: %s; they are recovered "  # noqa: TRY400
                         "again at the next start", log_dir, exc)
            return
        for log in logs:
            log.mark_flushed(log.log_end_offset)

    # ------------------------------------------------------------------------------ logs

    def config_for(self, topic: str) -> LogConfig:
        return self._topic_configs.get(topic, self.default_config)

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get(TopicPartition(topic, partition))

    def logs(self) -> list[Log]:
        return list(self._logs.copy().values())

    def create_log(self, topic: str, partition: int, config: LogConfig | None = None) -> Log:
        """The partition's log, created in the least loaded log directory if missing.

        Thread-safe: may run off the event loop (it makes a directory and fsyncs files).
        """
        tp = TopicPartition(topic, partition)
        with self._logs_lock:
            existing = self._logs.get(tp)
            if existing is not None:
                return existing
            if config is not None:
                self._topic_configs[topic] = config
            log_dir = min(self.log_dirs, key=self._dir_counts.__getitem__)
            path = log_dir / partition_dir_name(topic, partition)
            new = not path.exists()
            try:
                log = Log.open(
                    path,
                    topic,
                    partition,
                    self.config_for(topic),
                    clock=self.clock,
                    recovery_point=0,
                    log_start_offset=0,
                    clean_shutdown=new,
                    scheduler=self._scheduler,
                    files=self.open_files,
                )
            except BaseException:
                if new:  # what a full disk or file table let it make goes with it
                    shutil.rmtree(path, ignore_errors=True)
                raise
            self._place(tp, log, log_dir)
        return log

    def _place(self, tp: TopicPartition, log: Log, log_dir: Path) -> None:
        self._logs[tp] = log
        self._dir_of[tp] = log_dir
        self._dir_counts[log_dir] += 1

    def delete_log(self, topic: str, partition: int, *, at_once: bool = False) -> None:
        """Rename the partition directory to ``...-delete`` now, remove it after
        ``file.delete.delay.ms`` (readers may still hold its files), or now if ``at_once``
        (a log just made, that nothing has read)."""
        tp = TopicPartition(topic, partition)
        with self._logs_lock:
            log = self._logs.pop(tp, None)
            log_dir = self._dir_of.pop(tp, None)
            if log_dir is not None:
                self._dir_counts[log_dir] -= 1
        if log is None:
            return
        log.rename_dir(log.dir.with_name(f"{log.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"))
        delay = 0 if at_once else log.config.file_delete_delay_ms
        if self._scheduler is not None and delay > 0:
            self._scheduler(delay, log.delete)
        else:
            log.delete()

    def update_config(self, topic: str, config: LogConfig) -> None:
        self._topic_configs[topic] = config
        for (name, _), log in self._logs.copy().items():
            if name == topic:
                log.update_config(config)

    # -------------------------------------------------------------------------- maintenance

    def checkpoint(self) -> None:
        """Write the three offset checkpoints of every log directory (atomically)."""
        with self._checkpoint_lock:
            logs = self._logs.copy()
            dirs = self._dir_of.copy()
            for log_dir in self.log_dirs:
                mine = {tp: log for tp, log in logs.items() if dirs.get(tp) == log_dir}
                write_offset_checkpoint(
                    log_dir / RECOVERY_POINT_CHECKPOINT,
                    {tp: log.recovery_point for tp, log in mine.items()},
                )
                write_offset_checkpoint(
                    log_dir / LOG_START_OFFSET_CHECKPOINT,
                    {tp: log.log_start_offset for tp, log in mine.items()},
                )
                write_offset_checkpoint(
                    log_dir / REPLICATION_OFFSET_CHECKPOINT,
                    {tp: log.high_watermark for tp, log in mine.items()},
                )

    def flush_dirty(self, now_ms: int) -> int:
        """Flush the logs whose oldest unflushed write is ``flush.ms`` old; returns how many."""
        flushed = 0
        for log in self.logs():
            if log.unflushed_messages > 0 and now_ms - log.last_flush_ms >= log.config.flush_ms:
                try:
                    log.flush()
                except KafkaStorageError:
                    continue  # the log went offline (and said so); flush the others
                flushed += 1
        return flushed

    def cleanup(self, now_ms: int) -> int:
        """Apply retention to every log but the offline ones; returns the number of segments
        deleted."""
        return sum(log.enforce_retention(now_ms) for log in self.logs() if not log.offline)

    def remove_expired_producers(self, now_ms: int, producer_id_expiration_ms: int) -> int:
        return sum(
            log.producer_state.remove_expired(now_ms, producer_id_expiration_ms)
            for log in self.logs()
        )

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, then write the clean-shutdown markers.

        Where the system has ``syncfs`` (Linux), each directory's logs are closed without
        any fsync and then made durable by one sync of the file system, so the cost follows
        what was written rather than the number of logs; elsewhere each log with unflushed
        data is fsynced and each producer snapshot written durably, one by one. Either way
        every log's recovery point is then its log end offset, which the next start trusts.

        A log directory holding a log that went offline (a failed fsync) or could not be
        closed (no space for its producer snapshot), or whose sync failed, gets no marker,
        so the next start recovers it from its recovery point; a failed checkpoint leaves
        every directory without one. A full disk stops none of it: the directories are
        unlocked."""
        logs = self.logs()
        by_dir: dict[Path | None, list[Log]] = {}
        for log in logs:
            by_dir.setdefault(self._dir_of.get(TopicPartition(log.topic, log.partition)),
                              []).append(log)
        unclean: set[Path | None] = set()
        whole_fs_sync = self.open_files.io.has_syncfs
        for log_dir, mine in by_dir.items():
            if not whole_fs_sync:
                self._flush_each(mine)
            unclean.update(self._close_each(mine, log_dir, durable=not whole_fs_sync))
            if whole_fs_sync and log_dir is not None:
                try:
                    self._sync_dir(log_dir)
                except OSError as exc:
                    logger.error("%s: syncing the log directory failed: %s; recovered at "  # noqa: TRY400
                                 "the next start", log_dir, exc)
                    unclean.add(log_dir)
                    continue
                for log in mine:
                    log.mark_flushed(log.log_end_offset)
        try:
            self.checkpoint()
        except OSError as exc:
            logger.error("writing the offset checkpoints failed: %s; every log directory is "  # noqa: TRY400
                         "recovered at the next start", exc)
            unclean.update(self.log_dirs)
        unclean.update(self._dir_of.get(TopicPartition(log.topic, log.partition))
                       for log in logs if log.offline)
        for log_dir in self.log_dirs:
            if log_dir not in unclean:
                try:
                    atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, b"")
                except OSError as exc:
                    logger.error("%s: the clean-shutdown marker could not be written: %s; "  # noqa: TRY400
                                 "recovered at the next start", log_dir, exc)
        self.unlock_dirs()

    @staticmethod
    def _flush_each(logs: list[Log]) -> None:
        for log in logs:
            try:
                log.flush()
            except KafkaStorageError:
                pass  # offline now: its directory gets no clean-shutdown marker

    @staticmethod
    def _close_each(logs: list[Log], log_dir: Path | None, *, durable: bool) -> set[Path | None]:
        """Closes ``logs``; ``{log_dir}`` if one could not be closed, else nothing."""
        failed: set[Path | None] = set()
        for log in logs:
            try:
                log.close(durable=durable)
            except OSError as exc:  # each failure in one line below: no traceback
                logger.error("%s: closing failed: %s; recovered at the next start",  # noqa: TRY400
                             log.dir, exc)
                failed.add(log_dir)
        return failed
