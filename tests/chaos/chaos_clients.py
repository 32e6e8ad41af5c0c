"""The clients of the exactly-once chaos scenario (tests/chaos/test_chaos_exactly_once.py),
each a confluent-kafka loop in a thread that records what it was told, for the checks.

- `IdempotentWriter`: numbered records, acks=all with idempotence, round-robin over the
  partitions; each delivery report (partition and offset, or the error) is kept.
- `TxnWriter`: transactions spanning two topics, some aborted on purpose. Each `Txn`
  keeps its records and every commit/abort call with what it returned; its outcome follows
  from those calls alone (`Txn.outcome`).
- `Copier`: consume-transform-produce from a read_committed consumer to a transactional
  producer, the consumer's offsets sent in each transaction; after a failed transaction it
  seeks back to the group's committed offsets, so what it wrote and what it committed as
  read always go together.
- `GroupReader`: a member of a read_committed consumer group that commits what it read
  after each batch; every record it read is kept.
- `OffsetSampler`: the committed offsets of groups, asked about once a second.

A thread never dies with an exception the loop did not expect: it is kept in `crash`, shown
in the report and failing the `clients_finished` check.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

# Generous: one fault at a time can hold a request for a session time-out plus an election,
# and the broker shares two cores with everything else here.
MESSAGE_TIMEOUT_MS = 180_000
TXN_TIMEOUT_MS = 60_000
END_TIMEOUT_S = 60.0  # one commit_transaction / abort_transaction call
END_ATTEMPTS = 3  # a timed-out call may be made again: it resumes where it stood
INIT_TIMEOUT_S = 60.0
# librdkafka's send_offsets_to_transaction can wait past its own timeout, forever, for a
# group coordinator that went away (its coordinator requests never check their timeout,
# and a coordinator dropped from the metadata is not looked up again: librdkafka issues
# 5456 and 5511). A call still running this long after its timeout is taken as hung.
HANG_MARGIN_S = 30.0
# librdkafka debug contexts (e.g. "eos,protocol") for the transactional clients, whose logs
# go to stderr (`make chaos` keeps them in chaos-results/clients.log): to explain a stall
# the report shows.
CLIENT_DEBUG = os.environ.get("ADS_CHAOS_CLIENT_DEBUG", "")


def _debug() -> dict[str, str]:
    return {"debug": CLIENT_DEBUG} if CLIENT_DEBUG else {}


class Timeline:
    """What happened when, in seconds from the scenario's start, from every thread."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.wall_start = time.time()
        self._events: list[tuple[float, str, str]] = []
        self._lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.start

    def add(self, source: str, what: str) -> None:
        with self._lock:
            self._events.append((self.now(), source, what))

    def lines(self) -> list[str]:
        with self._lock:
            events = sorted(self._events, key=lambda e: e[0])
        return [f"{t:9.2f}s  {source:<12} {what}" for t, source, what in events]


def describe(err: KafkaError) -> str:
    kind = "fatal" if err.fatal() else "retriable" if err.retriable() else (
        "abortable" if err.txn_requires_abort() else "error")
    return f"{err.name()} ({kind}): {err.str()}"


class Worker(threading.Thread):
    def __init__(self, name: str, bootstrap: str, timeline: Timeline) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap = bootstrap
        self.timeline = timeline
        # stopping: finish the work under way and return. abandoned: the test is over
        # (a check failed or timed out): give up at the next wait instead of retrying.
        self.stopping = threading.Event()
        self.abandoned = threading.Event()
        self.crash: str | None = None
        self.finished = False
        self._noted: dict[str, int] = {}

    def run(self) -> None:
        try:
            self.loop()
            self.finished = True
        except Exception as exc:  # noqa: BLE001 - kept for the report, not lost with the thread
            self.crash = f"{type(exc).__name__}: {exc}"
            self.timeline.add(self.name, f"stopped by an unexpected error: {self.crash}")

    def loop(self) -> None:
        raise NotImplementedError

    def note(self, what: str, kind: str = "", limit: int = 0) -> None:
        """Into the timeline; with `limit`, only the first of each kind (a client retrying
        through a fault repeats the same error many times)."""
        if limit:
            self._noted[kind] = self._noted.get(kind, 0) + 1
            if self._noted[kind] > limit:
                return
        self.timeline.add(self.name, what)

    def give_up_if_abandoned(self) -> None:
        if self.abandoned.is_set():
            raise RuntimeError("abandoned by the test")


class IdempotentWriter(Worker):
    def __init__(self, name: str, bootstrap: str, timeline: Timeline, topic: str,
                 partitions: int, rate: float = 40.0) -> None:
        super().__init__(name, bootstrap, timeline)
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.sent: dict[bytes, int] = {}  # value: partition
        self.acked: dict[bytes, tuple[int, int]] = {}  # value: (partition, offset)
        self.failed: dict[bytes, str] = {}
        self._fatal = False

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is None:
            self.acked[msg.value()] = (msg.partition(), msg.offset())
            return
        self.failed[msg.value()] = describe(err)
        self.note(f"delivery failed: {describe(err)}", "delivery", 5)
        self._fatal = self._fatal or err.fatal()

    def _producer(self) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5, "retry.backoff.ms": 100,
                         "message.timeout.ms": MESSAGE_TIMEOUT_MS,
                         "error_cb": self._client_error})

    def _client_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = True
            self.note(f"producer error: {describe(err)}")

    def loop(self) -> None:
        producer = self._producer()
        n = 0
        while not self.stopping.is_set():
            if self._fatal:
                # An idempotent producer that hit a fatal error sends nothing more; what it
                # still held is neither acknowledged nor failed (unknown to the checks).
                self.note("fatal producer error: a new producer takes over")
                producer = self._producer()
                self._fatal = False
            value = f"{self.name}-{n:07d}".encode()
            try:
                producer.produce(self.topic, value=value, partition=n % self.partitions,
                                 on_delivery=self._delivered)
            except BufferError:
                producer.poll(0.5)
                continue
            self.sent[value] = n % self.partitions
            n += 1
            producer.poll(0)
            self.stopping.wait(1.0 / self.rate)
        deadline = time.monotonic() + MESSAGE_TIMEOUT_MS / 1000 + 30
        left = producer.flush(0)
        while left and not self.abandoned.is_set() and time.monotonic() < deadline:
            left = producer.flush(5)
        if left:
            self.note(f"{left} records neither acknowledged nor failed at the end")
        self.note(f"stopped: {len(self.sent)} sent, {len(self.acked)} acknowledged, "
                  f"{len(self.failed)} failed")


@dataclass
class Txn:
    """One transaction as its producer saw it. Its records are (topic, partition, value);
    `calls` lists each begin/commit/abort and what it returned."""

    writer: str
    seq: int
    planned: str  # "commit" or "abort"
    records: list[tuple[str, int, bytes]]
    calls: list[str] = field(default_factory=list)
    commit_called: bool = False
    commit_ok: bool = False
    abort_ok: bool = False

    @property
    def outcome(self) -> str:
        """committed: a commit call returned OK. aborted: an abort call returned OK (also
        after a commit that failed with an abortable error: it was never committed), or
        commit was never asked, so the transaction can only have been aborted (by us, by its
        time-out, or by the next instance fencing this one). unknown: commit asked, never
        confirmed, no abort confirmed: it must be visible whole or not at all."""
        if self.commit_ok:
            return "committed"
        if self.abort_ok or not self.commit_called:
            return "aborted"
        return "unknown"


class TxnProducerLoop(Worker):
    """A transactional producer that is replaced (the new instance fences the old one and
    ends what it left open) whenever it cannot go on."""

    def __init__(self, name: str, bootstrap: str, timeline: Timeline, txn_id: str) -> None:
        super().__init__(name, bootstrap, timeline)
        self.timeline_started_s = timeline.now()
        self.txn_id = txn_id
        self.instances = 0
        self.errors: list[str] = []
        self.commit_times: list[float] = []  # seconds of the timeline, each confirmed commit

    def new_producer(self) -> Producer:
        """A producer with transactions initialized; tries until it gets one (bounded by
        the test's join deadline: a broker that never answers leaves the thread running)."""
        while True:
            self.give_up_if_abandoned()
            producer = Producer({"bootstrap.servers": self.bootstrap,
                                 "transactional.id": self.txn_id,
                                 "transaction.timeout.ms": TXN_TIMEOUT_MS,
                                 "message.timeout.ms": TXN_TIMEOUT_MS, "linger.ms": 5,
                                 "retry.backoff.ms": 100, **_debug()})
            try:
                producer.init_transactions(INIT_TIMEOUT_S)
            except KafkaException as exc:
                self.error(f"init_transactions: {describe(exc.args[0])}")
                time.sleep(1.0)
                continue
            self.instances += 1
            if self.instances > 1:
                self.note(f"producer instance {self.instances} initialized")
            return producer

    def error(self, what: str) -> None:
        self.errors.append(what)
        self.note(what, "error", 40)

    def longest_wait(self) -> str:
        """The longest time without a confirmed commit, for the report: liveness, which
        the checks leave alone (a busy machine stretches it)."""
        times = [self.timeline_started_s, *self.commit_times]
        if len(times) < 2:
            return "no commit"
        gap, at = max((b - a, a) for a, b in zip(times, times[1:], strict=False))
        return f"longest wait for a commit {gap:.1f} s (from {at:.1f} s)"

    def end(self, producer: Producer, txn: Txn, commit: bool) -> bool:
        """Commits or aborts; False when the producer must be replaced."""
        name = "commit" if commit else "abort"
        for _ in range(END_ATTEMPTS):
            if commit:
                txn.commit_called = True
            try:
                if commit:
                    producer.commit_transaction(END_TIMEOUT_S)
                else:
                    producer.abort_transaction(END_TIMEOUT_S)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                txn.calls.append(f"{name}: {describe(err)}")
                self.error(f"{self.txn_id} #{txn.seq} {name}: {describe(err)}")
                if err.retriable() and not self.abandoned.is_set():
                    continue
                if commit and err.txn_requires_abort():
                    return self.end(producer, txn, commit=False)
                return False
            txn.calls.append(f"{name}: OK")
            txn.commit_ok, txn.abort_ok = commit, not commit
            if commit:
                self.commit_times.append(self.timeline.now())
            return True
        return False


class TxnWriter(TxnProducerLoop):
    def __init__(self, name: str, bootstrap: str, timeline: Timeline, txn_id: str,
                 topics: tuple[str, str], partitions: int, abort_ratio: float,
                 seed: int) -> None:
        super().__init__(name, bootstrap, timeline, txn_id)
        self.topics, self.partitions, self.abort_ratio = topics, partitions, abort_ratio
        self.rng = random.Random(seed)
        self.txns: list[Txn] = []

    def _plan(self, seq: int) -> Txn:
        records = []
        for tag, topic in zip("ab", self.topics, strict=True):
            for k in range(self.rng.randint(1, 3)):
                records.append((topic, self.rng.randrange(self.partitions),
                                f"{self.name}-{seq:06d}-{tag}{k}".encode()))
        planned = "abort" if self.rng.random() < self.abort_ratio else "commit"
        return Txn(self.name, seq, planned, records)

    def _one(self, producer: Producer, txn: Txn) -> bool:
        try:
            producer.begin_transaction()
            for topic, partition, value in txn.records:
                producer.produce(topic, value=value, partition=partition)
            if txn.planned == "abort":
                # Written to the logs first, so the abort has records to hide.
                producer.flush(TXN_TIMEOUT_MS / 1000)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            txn.calls.append(f"write: {describe(err)}")
            self.error(f"{self.txn_id} #{txn.seq} write: {describe(err)}")
            return not err.fatal() and self.end(producer, txn, commit=False)
        except BufferError:  # the local queue full: the cluster is not taking writes
            txn.calls.append("write: local queue full")
            self.error(f"{self.txn_id} #{txn.seq} write: local queue full")
            producer.flush(TXN_TIMEOUT_MS / 1000)
            return self.end(producer, txn, commit=False)
        return self.end(producer, txn, commit=txn.planned == "commit")

    def loop(self) -> None:
        producer: Producer | None = self.new_producer()
        seq = 0
        while not self.stopping.is_set():
            if producer is None:
                producer = self.new_producer()
            txn = self._plan(seq)
            seq += 1
            self.txns.append(txn)
            if not self._one(producer, txn):
                self.note(f"{self.txn_id} #{txn.seq}: a new producer takes over")
                producer = None
            self.stopping.wait(0.05)
        if producer is None:
            # The new instance ends what the last one left open, instead of leaving it to
            # the transaction time-out (it would hold the last stable offset meanwhile).
            self.new_producer()
        counts = {k: sum(1 for t in self.txns if t.outcome == k)
                  for k in ("committed", "aborted", "unknown")}
        self.note(f"stopped: {len(self.txns)} transactions {counts}")


class Copier(TxnProducerLoop):
    """Copies `source` to the same partitions of `sink`, each value prefixed with
    `PREFIX`, exactly once. `ends` (set by the test once the source's writers stopped) are
    the offsets to copy up to before it returns."""

    PREFIX = b"copy:"

    def __init__(self, name: str, bootstrap: str, timeline: Timeline, txn_id: str,
                 group: str, source: str, sink: str, partitions: int) -> None:
        super().__init__(name, bootstrap, timeline, txn_id)
        self.group, self.source, self.sink, self.partitions = group, source, sink, partitions
        self.read: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.ends: dict[int, int] | None = None
        self.committed_txns = 0
        self.failed_txns = 0
        self.rewinds = 0
        self._eof: dict[int, int] = {}
        # The offset after the last record read, per partition: what a transaction commits
        # as read. Kept here rather than asked of the consumer, whose position for a
        # partition it has delivered nothing from since a seek is not the seek's.
        self._next: dict[int, int] = {}
        # Producers left with a call hung in librdkafka: kept, as destroying one while the
        # call runs in another thread would not be safe.
        self.hung: list[Producer] = []

    def _consumer(self) -> Consumer:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "enable.partition.eof": True,
                             **_debug()})
        consumer.assign([TopicPartition(self.source, p) for p in range(self.partitions)])
        return consumer

    def _copied_to_end(self) -> bool:
        ends = self.ends
        return ends is not None and all(self._eof.get(p, -1) >= end for p, end in ends.items())

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the group's committed offsets: what the failed transaction read is read
        again (its output was aborted, or committed along with those offsets). A
        read_committed consumer asks for stable offsets, so an offset commit still pending
        in a transaction is waited for rather than skipped."""
        self.rewinds += 1
        self._eof.clear()
        self._next.clear()
        while True:
            self.give_up_if_abandoned()
            try:
                committed = consumer.committed(
                    [TopicPartition(self.source, p) for p in range(self.partitions)], 60)
                break
            except KafkaException as exc:
                self.error(f"committed offsets: {describe(exc.args[0])}")
                time.sleep(1.0)
        for tp in committed:
            if tp.offset >= 0:
                self._next[tp.partition] = tp.offset
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            consumer.seek(TopicPartition(self.source, tp.partition, offset))

    def _copy(self, producer: Producer, consumer: Consumer, batch: list[Message]
              ) -> tuple[bool, bool]:
        """One transaction: (committed, whether the producer can go on)."""
        txn = Txn(self.name, self.committed_txns + self.failed_txns, "commit", [])
        try:
            producer.begin_transaction()
            for m in batch:
                producer.produce(self.sink, value=self.PREFIX + m.value(), key=m.key(),
                                 partition=m.partition())
            offsets = [TopicPartition(self.source, p, o) for p, o in sorted(self._next.items())]
            if not self._returned(lambda: producer.send_offsets_to_transaction(
                    offsets, consumer.consumer_group_metadata(), END_TIMEOUT_S)):
                self.error(f"{self.txn_id} send_offsets_to_transaction still waiting "
                           f"{END_TIMEOUT_S + HANG_MARGIN_S:.0f} s later (a client hang)")
                self.hung.append(producer)
                return False, False  # a new instance fences this one and ends its transaction
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            self.error(f"{self.txn_id} write: {describe(err)}")
            return False, not err.fatal() and self.end(producer, txn, commit=False)
        usable = self.end(producer, txn, commit=True)
        return txn.commit_ok, usable

    @staticmethod
    def _returned(call: Callable[[], object]) -> bool:
        """Runs `call` in a thread of its own; False when it has not returned within its
        timeout and `HANG_MARGIN_S`. Its exception, if it raised one, is raised here."""
        raised: list[BaseException] = []

        def run() -> None:
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                raised.append(exc)

        thread = threading.Thread(target=run, name="copier-call", daemon=True)
        thread.start()
        thread.join(END_TIMEOUT_S + HANG_MARGIN_S)
        if thread.is_alive():
            return False
        if raised:
            raise raised[0]
        return True

    def loop(self) -> None:
        consumer = self._consumer()
        producer = self.new_producer()
        while not self.stopping.is_set() and not self._copied_to_end():
            batch = []
            for m in consumer.consume(200, 0.5):
                err = m.error()
                if err is None:
                    self._eof.pop(m.partition(), None)  # more than the end seen before
                    self._next[m.partition()] = m.offset() + 1
                    batch.append(m)
                elif err.code() == KafkaError._PARTITION_EOF:
                    self._eof[m.partition()] = m.offset()
                else:
                    self.error(f"consume: {describe(err)}")
            if not batch:
                continue
            self.read.extend((m.partition(), m.offset(), m.value()) for m in batch)
            committed, usable = self._copy(producer, consumer, batch)
            if committed:
                self.committed_txns += 1
                continue
            self.failed_txns += 1
            if not usable:
                # Before reading the committed offsets: the new instance ends what the old
                # one left open, so they are final.
                self.note(f"{self.txn_id}: a new producer takes over")
                producer = self.new_producer()
            self._rewind(consumer)
        consumer.close()
        self.note(f"stopped: {self.committed_txns} transactions committed, "
                  f"{self.failed_txns} failed, {self.rewinds} rewinds, "
                  f"{len(self.read)} records read")


class GroupReader(Worker):
    """A read_committed group member; `eof` (shared by the members) holds the end offset
    each partition was last read to."""

    def __init__(self, name: str, bootstrap: str, timeline: Timeline, group: str,
                 topics: list[str], eof: dict[tuple[str, int], int]) -> None:
        super().__init__(name, bootstrap, timeline)
        self.group, self.topics, self.eof = group, topics, eof
        self.read: list[tuple[str, int, int, bytes]] = []  # (topic, partition, offset, value)
        self.commits = 0
        self.commit_errors = 0

    def loop(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "enable.partition.eof": True})
        consumer.subscribe(self.topics)
        while not self.stopping.is_set():
            got = False
            for m in consumer.consume(500, 0.5):
                err = m.error()
                if err is None:
                    self.read.append((m.topic(), m.partition(), m.offset(), m.value()))
                    got = True
                elif err.code() == KafkaError._PARTITION_EOF:
                    self.eof[(m.topic(), m.partition())] = m.offset()
                else:
                    self.note(f"consume: {describe(err)}", err.name(), 3)
            if got:
                self._commit(consumer)
        self._commit(consumer)
        consumer.close()
        self.note(f"stopped: {len(self.read)} records read, {self.commits} commits, "
                  f"{self.commit_errors} failed")

    def _commit(self, consumer: Consumer) -> None:
        # The stored offsets of the current assignment only: never a partition this member
        # has lost to another in a rebalance.
        try:
            consumer.commit(asynchronous=False)
            self.commits += 1
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.code() == KafkaError._NO_OFFSET:
                return
            self.commit_errors += 1
            self.note(f"commit: {describe(err)}", "commit", 5)


class OffsetSampler(Worker):
    """Committed offsets of the groups over time: `history[(group, topic, partition)]` is
    [(seconds, offset)] in the order the answers came, one question at a time.

    Asked through a consumer of each group that never joins it (OffsetFetch with the
    group's id, stable offsets not required): librdkafka's admin ListConsumerGroupOffsets
    crashes the process in its OffsetFetch error path (it reaches for a consumer group the
    admin client does not have) when a coordinator has just moved."""

    def __init__(self, name: str, bootstrap: str, timeline: Timeline,
                 groups: dict[str, list[str]], partitions: int) -> None:
        super().__init__(name, bootstrap, timeline)
        self.groups, self.partitions = groups, partitions  # group: its topics
        self.history: dict[tuple[str, str, int], list[tuple[float, int]]] = {}
        self.samples = 0
        self.errors = 0

    def sample(self, consumers: dict[str, Consumer]) -> None:
        for group, consumer in consumers.items():
            asked = [TopicPartition(t, p) for t in self.groups[group]
                     for p in range(self.partitions)]
            try:
                answer = consumer.committed(asked, 15)
            except KafkaException as exc:
                self.errors += 1
                self.note(f"offsets of {group}: {describe(exc.args[0])}", "error", 5)
                continue
            at = self.timeline.now()
            self.samples += 1
            for tp in answer:
                if tp.error is None and tp.offset >= 0:
                    self.history.setdefault((group, tp.topic, tp.partition), []).append(
                        (at, tp.offset))

    def loop(self) -> None:
        consumers = {g: Consumer({"bootstrap.servers": self.bootstrap, "group.id": g,
                                  "enable.auto.commit": False}) for g in self.groups}
        try:
            while not self.stopping.is_set():
                self.sample(consumers)
                self.stopping.wait(1.0)
            self.sample(consumers)
        finally:
            for consumer in consumers.values():
                consumer.close()
