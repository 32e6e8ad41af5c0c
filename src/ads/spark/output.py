"""The output directory of ``ads pipeline load``: data files and the offsets they hold,
committed together.

Layout of an output directory::

    PATH/topic=T/date=YYYY-MM-DD/part-*.parquet   published data (Hive-style partitions)
    PATH/_ads/lock                                held (flock) by the one loader running
    PATH/_ads/commits/00000000000000000007.json   commit of batch 7 (20-digit batch id)
    PATH/_ads/staging/00000000000000000008-<id>/  files of a batch not yet published

Readers of ``PATH`` (Spark, pyarrow) skip names starting with ``_``, so they see only
published files.

A commit file is UTF-8 JSON, written once::

    {"version": 1,
     "batch": 7,                                  this batch's id (ids increase by one)
     "staging": "00000000000000000007-<id>",      where its files were written
     "files": ["topic=T/date=.../part-....parquet", ...],   paths relative to PATH
     "offsets": {"T": {"0": 1200, "1": 1187}},    next offset to load, per partition
     "records": {"T": {"0": 1200, "1": 1187}},    records loaded so far, per partition
     "batch_records": 812,                        records in this batch
     "bootstrap_servers": "host:9092",
     "committed_at_ms": 1700000000000}

Commit protocol: a batch is written to its own staging directory; then its commit file is
written to a temporary name, fsynced, renamed into ``commits/`` and the directory fsynced:
that rename is the commit point, and it carries the data's offsets. Then the files move
from staging to their published paths (renames within one file system) and the staging
directory is removed.

Crash recovery (``recover``, run before every load while holding the lock): the newest
commit's files that are still in its staging directory are moved into place (roll
forward); every other staging directory belongs to a batch that never committed and is
deleted (roll back). So a loader killed at any instant and run again publishes every
record exactly once: what committed is published once, what did not is loaded again from
the committed offsets.
"""

from __future__ import annotations

import fcntl
import json
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ads.common.files import atomic_write, fsync_dir

__all__ = ["Commit", "OutputError", "OutputLog"]

VERSION = 1
_ADS = "_ads"


class OutputError(Exception):
    """The output directory is unusable: locked by another loader or holding a commit this
    version cannot read."""


@dataclass(frozen=True, slots=True)
class Commit:
    batch: int
    staging: str
    files: tuple[str, ...]
    offsets: dict[str, dict[str, int]]
    records: dict[str, dict[str, int]]
    batch_records: int
    bootstrap_servers: str
    committed_at_ms: int

    def to_json(self) -> str:
        return json.dumps({
            "version": VERSION, "batch": self.batch, "staging": self.staging,
            "files": list(self.files), "offsets": self.offsets, "records": self.records,
            "batch_records": self.batch_records, "bootstrap_servers": self.bootstrap_servers,
            "committed_at_ms": self.committed_at_ms,
        }, indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: Path) -> Commit:
        try:
            data = json.loads(text)
            if data.get("version") != VERSION:
                raise OutputError(f"{source}: unknown commit version {data.get('version')!r}")
            return cls(int(data["batch"]), str(data["staging"]), tuple(data["files"]),
                       data["offsets"], data["records"], int(data["batch_records"]),
                       str(data["bootstrap_servers"]), int(data["committed_at_ms"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise OutputError(f"{source}: unreadable commit: {exc}") from exc


class OutputLog:
    """The commit log and staging area of one output directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.meta = self.root / _ADS
        self.commits = self.meta / "commits"
        self.staging = self.meta / "staging"

    @contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive use of the directory; released by the kernel if the process dies."""
        self.commits.mkdir(parents=True, exist_ok=True)
        self.staging.mkdir(parents=True, exist_ok=True)
        with (self.meta / "lock").open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise OutputError(f"{self.root} is in use by another loader") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _commit_paths(self) -> list[Path]:
        if not self.commits.is_dir():
            return []
        return sorted(p for p in self.commits.iterdir()
                      if p.suffix == ".json" and p.stem.isdigit())

    def latest(self) -> Commit | None:
        paths = self._commit_paths()
        if not paths:
            return None
        return Commit.from_json(paths[-1].read_text(encoding="utf-8"), paths[-1])

    def recover(self) -> None:
        """Finish publishing the newest commit and drop uncommitted staging directories."""
        latest = self.latest()
        if latest is not None and (self.staging / latest.staging).exists():
            self._publish(latest)
        if self.staging.is_dir():
            for leftover in self.staging.iterdir():
                shutil.rmtree(leftover, ignore_errors=True)
        for tmp in self.commits.glob("*.tmp") if self.commits.is_dir() else ():
            tmp.unlink(missing_ok=True)

    def new_staging(self, batch: int) -> Path:
        path = self.staging / f"{batch:020d}-{uuid.uuid4().hex}"
        path.mkdir(parents=True)
        return path

    @staticmethod
    def data_files(staging: Path) -> list[str]:
        """Data files written under ``staging``, relative to it (no markers, no checksums,
        nothing hidden)."""
        out = []
        for path in sorted(staging.rglob("*")):
            rel = path.relative_to(staging)
            if path.is_file() and not any(part.startswith(("_", ".")) for part in rel.parts):
                out.append(rel.as_posix())
        return out

    def commit(self, batch: int, staging: Path, offsets: Mapping[str, Mapping[str, int]],
               records: Mapping[str, Mapping[str, int]], batch_records: int,
               bootstrap_servers: str) -> Commit:
        """Commits a staged batch with the offsets it reaches, then publishes its files."""
        commit = Commit(batch, staging.name, tuple(self.data_files(staging)),
                        {t: dict(p) for t, p in offsets.items()},
                        {t: dict(p) for t, p in records.items()}, batch_records,
                        bootstrap_servers, int(time.time() * 1000))
        final = self.commits / f"{batch:020d}.json"
        if final.exists():
            raise OutputError(f"{final} already exists: another loader committed batch {batch}")
        atomic_write(final, commit.to_json().encode("utf-8"))
        self._publish(commit)
        return commit

    def _publish(self, commit: Commit) -> None:
        staging = self.staging / commit.staging
        touched: set[Path] = set()
        for rel in commit.files:
            source = staging / rel
            target = self.root / rel
            if not source.exists():
                continue  # moved before a crash
            target.parent.mkdir(parents=True, exist_ok=True)
            source.rename(target)
            touched.add(target.parent)
        for directory in touched:
            fsync_dir(directory)
        shutil.rmtree(staging, ignore_errors=True)
