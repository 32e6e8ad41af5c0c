"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka's share consumer):
records shared by several consumers, acknowledgements, delivery counts, lock expiry, a
consumer killed mid-batch, the share-partition figures on `/metrics` and in the console;
and nothing of it served with `group.share.enable=false`.

One broker for the module, with a short lock duration (LOCK_MS) and delivery limit; each
test uses its own topic and group.
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient
from test_http_metrics import base_url, scrape, value

from ads.protocol import codec
from ads.protocol import messages as m
from ads.records.batch import iter_batch_headers
from ads.testing import EmbeddedBroker
from conftest import create_topic
from http_support import http_call
from kafka_wire import RawConnection
from share_support import share_state_request, share_worker

LOCK_MS = 1500
DELIVERY_LIMIT = 3
CONFIG = {
    "group.share.enable": "true",
    "group.share.auto.offset.reset": "earliest",
    "group.share.heartbeat.interval.ms": "300",
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
    "offsets.topic.num.partitions": "1",
    "share.coordinator.state.topic.num.partitions": "1",
    "http.listener": "127.0.0.1:0",
}
SHARE_APIS = {76, 77, 78, 79}
K = m.ApiKey


@pytest.fixture(scope="module")
def share_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(config=CONFIG) as b:
        yield b


@pytest.fixture(scope="module")
def bs(share_broker: EmbeddedBroker) -> str:
    return share_broker.bootstrap_servers


def produce(bootstrap: str, topic: str, count: int, partitions: int = 2,
            pause_s: float = 0.0) -> None:
    """`count` records, one batch each, spread over the partitions."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(count):
        p.produce(topic, b"v%d" % i, partition=i % partitions)
        p.flush(10)
        if pause_s:
            time.sleep(pause_s)


def consumer(bootstrap: str, group: str, topic: str, **extra: object) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, **extra})
    c.subscribe([topic])
    return c


def poll(c: ShareConsumer, timeout: float) -> list[Message]:
    msgs = list(c.poll(timeout))
    errors = [msg.error() for msg in msgs if msg.error() is not None]
    assert not errors, errors
    return msgs


def describe(bootstrap: str, group: str) -> m.ShareGroupDescribeResponse.DescribedGroup:
    with RawConnection(bootstrap) as conn:
        r = conn.request(K.SHARE_GROUP_DESCRIBE, 1, m.ShareGroupDescribeRequest(
            group_ids=[group]))
    return r.groups[0]


def wait_members(bootstrap: str, group: str, count: int, timeout: float = 15.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        g = describe(bootstrap, group)
        if len(g.members) == count and all(mem.assignment.topic_partitions
                                           for mem in g.members):
            return
        time.sleep(0.1)
    raise AssertionError(f"{count} members did not join {group}")


def wait_spread(bootstrap: str, group: str, members: int, partitions: int,
                timeout: float = 15.0) -> None:
    """Until `members` members each hold their own partitions, together all `partitions`
    of them: the simple assignor's settled assignment when there are as many partitions as
    members, so no partition is shared (a member sharing a partition may lose every fetch
    race for its records)."""
    deadline = time.time() + timeout
    held: list[list[int]] = []
    while time.time() < deadline:
        held = [sorted(p for tp in mem.assignment.topic_partitions for p in tp.partitions)
                for mem in describe(bootstrap, group).members]
        owned = [p for ps in held for p in ps]
        if len(held) == members and all(held) and sorted(owned) == list(range(partitions)):
            return
        time.sleep(0.1)
    raise AssertionError(f"{group}'s assignment did not settle: {held}")


def api_keys(bootstrap: str) -> dict[int, tuple[int, int]]:
    with RawConnection(bootstrap) as conn:
        r = conn.request(K.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
    return {k.api_key: (k.min_version, k.max_version) for k in r.api_keys}


def test_share_groups_advertised_by_default(ads_broker: EmbeddedBroker) -> None:
    keys = api_keys(ads_broker.bootstrap_servers)
    assert {k: keys[k] for k in SHARE_APIS} == {76: (1, 1), 77: (1, 1), 78: (1, 2),
                                                79: (1, 2)}


def test_share_groups_refused_when_turned_off() -> None:
    with EmbeddedBroker(config={"group.share.enable": "false"}) as b:
        bootstrap = b.bootstrap_servers
        assert not SHARE_APIS & set(api_keys(bootstrap))
        with RawConnection(bootstrap) as conn:  # refused as an unknown API: it closes
            conn.send_raw(codec.encode_request(K.SHARE_GROUP_HEARTBEAT, 1, 1, "t",
                                               m.ShareGroupHeartbeatRequest(
                                                   group_id="g", member_id="m", member_epoch=0,
                                                   subscribed_topic_names=["t"])))
            assert conn.is_closed()


def _start_offset(samples: dict, group: str, topic: str, partition: int) -> float:
    """The share-partition start offset on `/metrics`; -1 before the partition has one."""
    try:
        return value(samples, "ads_share_partition_start_offset", group=group, topic=topic,
                     partition=str(partition))
    except KeyError:
        return -1


def wait_all_acknowledged(b: EmbeddedBroker, group: str, topic: str,
                          ends: dict[int, int], timeout: float = 20.0) -> None:
    """Until the share-partition start offset of each partition is at its end: every record
    acknowledged, so none can be delivered again (a lock that expires redelivers only
    records past the start offset)."""
    deadline = time.time() + timeout
    starts: dict[int, float] = {}
    while time.time() < deadline:
        samples = scrape(b)
        starts = {p: _start_offset(samples, group, topic, p) for p in ends}
        if starts == ends:
            return
        time.sleep(0.1)
    raise AssertionError(f"share-partition start offsets {starts}, expected {ends}")


def test_share_groups_consumers_process_every_record_once(
        share_broker: EmbeddedBroker, bs: str) -> None:
    create_topic(bs, "sg-once", 3)
    group, total = "sg-once", 60
    consumers = [consumer(bs, group, "sg-once", **{"max.poll.records": 4}) for _ in range(3)]
    seen: list[tuple[int, int, int, int]] = []  # consumer, partition, offset, count
    lock = threading.Lock()
    stop = threading.Event()

    def run(index: int, c: ShareConsumer) -> None:
        while not stop.is_set():
            for msg in poll(c, 0.2):  # implicit mode: accepted on the next poll
                with lock:
                    seen.append((index, msg.partition(), msg.offset(), msg.delivery_count()))
        c.close()  # sends the last poll's acknowledgements

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(consumers)]
    for t in threads:
        t.start()
    try:
        wait_spread(bs, group, 3, 3)
        produce(bs, "sg-once", total, partitions=3, pause_s=0.01)
        wait_all_acknowledged(share_broker, group, "sg-once", dict.fromkeys(range(3), total // 3))
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    per_record = Counter((p, o) for _, p, o, _ in seen)
    assert sorted(per_record) == sorted((i % 3, i // 3) for i in range(total))
    assert set(per_record.values()) == {1}, "a record was delivered twice"
    assert {count for *_, count in seen} == {1}
    assert {index for index, *_ in seen} == {0, 1, 2}, "every consumer gets records"


def test_share_groups_release_reject_and_delivery_limit(bs: str) -> None:
    create_topic(bs, "sg-acks", 1)
    produce(bs, "sg-acks", 3, partitions=1)
    c = consumer(bs, "sg-acks", "sg-acks", **{"share.acknowledgement.mode": "explicit"})
    counts: dict[int, list[int]] = {0: [], 1: [], 2: []}
    deadline = time.time() + 20
    try:
        while time.time() < deadline and len(counts[0]) < DELIVERY_LIMIT:
            for msg in poll(c, 0.3):
                counts[msg.offset()].append(msg.delivery_count())
                # 0 is released every time, 1 rejected, 2 accepted.
                kind = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT,
                        2: AcknowledgeType.ACCEPT}[msg.offset()]
                c.acknowledge(msg, kind)
            c.commit_sync(10)
        later = [msg.offset() for msg in poll(c, 1.0)]
        described = describe(bs, "sg-acks")
        with RawConnection(bs) as conn:
            listed = conn.request(K.LIST_GROUPS, 5, m.ListGroupsRequest(types_filter=["share"]))
    finally:
        c.close()
    assert ("sg-acks", "share", "Stable") in [
        (g.group_id, g.group_type, g.group_state) for g in listed.groups]
    assert (described.group_state, described.assignor_name) == ("Stable", "simple")
    [member] = described.members
    assert [(a.topic_name, a.partitions) for a in member.assignment.topic_partitions] == [
        ("sg-acks", [0])]
    assert counts == {0: [1, 2, 3], 1: [1], 2: [1]}
    assert later == []  # 0 is archived at the limit, 1 when rejected, 2 is done


def share_figures(b: EmbeddedBroker, group: str, topic: str) -> dict[str, float]:
    samples = scrape(b)
    labels = {"group": group, "topic": topic, "partition": "0"}
    return {name: value(samples, f"ads_share_partition_{name}", **labels)
            for name in ("start_offset", "in_flight_records", "acquired_records",
                         "acknowledged_records_total", "archived_records_total",
                         "redelivered_records_total")}


def test_share_groups_metrics_and_console(share_broker: EmbeddedBroker) -> None:
    bs, name = share_broker.bootstrap_servers, "sg-metrics"
    create_topic(bs, name, 1)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 50})
    for i in range(6):  # one batch: acquired whole by one share fetch
        p.produce(name, b"v%d" % i, partition=0)
    assert p.flush(10) == 0
    c = consumer(bs, name, name, **{"share.acknowledgement.mode": "explicit",
                                    "client.id": "metered-reader"})
    try:
        got: list[Message] = []
        deadline = time.time() + 15
        while len(got) < 6 and time.time() < deadline:
            got += poll(c, 0.3)
        assert [msg.offset() for msg in got] == list(range(6))
        held = share_figures(share_broker, name, name)
        # 0, 1 and 5 accepted, 2 rejected, 3 and 4 released (and delivered again).
        kinds = [AcknowledgeType.ACCEPT] * 2 + [AcknowledgeType.REJECT] + [
            AcknowledgeType.RELEASE] * 2 + [AcknowledgeType.ACCEPT]
        for msg, kind in zip(got, kinds, strict=True):
            c.acknowledge(msg, kind)
        c.commit_sync(10)
        after_first = share_figures(share_broker, name, name)
        again: list[Message] = []
        while len(again) < 2 and time.time() < deadline:
            for msg in poll(c, 0.3):
                again.append(msg)
                c.acknowledge(msg, AcknowledgeType.ACCEPT)
            c.commit_sync(10)
        assert [(msg.offset(), msg.delivery_count()) for msg in again] == [(3, 2), (4, 2)]
        done = share_figures(share_broker, name, name)
        url = base_url(share_broker)
        listing = http_call(url + "/groups").body
        page = http_call(url + f"/groups/{name}").body
    finally:
        c.close()
    assert held == {"start_offset": 0, "in_flight_records": 6, "acquired_records": 6,
                    "acknowledged_records_total": 0, "archived_records_total": 0,
                    "redelivered_records_total": 0}
    # 3 and 4 are in flight: available, or acquired again by the consumer's next fetch.
    assert {k: after_first[k] for k in ("start_offset", "in_flight_records",
                                        "acknowledged_records_total",
                                        "archived_records_total")} == {
        "start_offset": 3, "in_flight_records": 2, "acknowledged_records_total": 3,
        "archived_records_total": 1}
    assert done == {"start_offset": 6, "in_flight_records": 0, "acquired_records": 0,
                    "acknowledged_records_total": 5, "archived_records_total": 1,
                    "redelivered_records_total": 2}
    assert f'<a href="/groups/{name}">{name}</a></td><td>Stable</td><td>share</td>' in listing
    assert "metered-reader" in page and f"<td>{name} 0</td>" in page
    # topic, partition, start, end, in flight, acquired, acknowledged, archived, redelivered
    assert (f"<tr><td>{name}</td><td>0</td><td>6</td><td>6</td><td>0</td><td>0</td>"
            "<td>5</td><td>1</td><td>2</td></tr>") in page


def test_share_groups_locks_expire_to_another_consumer(bs: str) -> None:
    # One partition: the simple assignor gives it to both members (two members, one
    # partition), so the other member can be handed what the idle one holds.
    create_topic(bs, "sg-lock", 1)
    produce(bs, "sg-lock", 6, partitions=1)
    idle = consumer(bs, "sg-lock", "sg-lock", **{"share.acknowledgement.mode": "explicit"})
    taken: list[Message] = []
    deadline = time.time() + 15
    while not taken and time.time() < deadline:
        taken = poll(idle, 0.3)  # then it stops acknowledging (and polling)
    held = {(msg.partition(), msg.offset()) for msg in taken}
    acquired_at = time.time()
    assert held
    other = consumer(bs, "sg-lock", "sg-lock")
    got: dict[tuple[int, int], int] = {}
    first_held_at = None
    try:
        while len(got) < 6 and time.time() < deadline + 10:
            for msg in poll(other, 0.3):
                key = (msg.partition(), msg.offset())
                got[key] = msg.delivery_count()
                if key in held and first_held_at is None:
                    first_held_at = time.time()
    finally:
        other.close()
        idle.close()
    assert sorted(got) == [(0, i) for i in range(6)]
    assert {got[k] for k in held} == {2}  # delivered again, once
    # Not before the lock expired (the records may have been fetched a poll before).
    assert first_held_at is not None and first_held_at - acquired_at >= LOCK_MS / 1000 - 0.5
    # Deleting the group (both members left) deletes its share-partitions' state.
    assert state_start(bs, "sg-lock", "sg-lock", 0) == 0
    wait_members(bs, "sg-lock", 0)
    admin = AdminClient({"bootstrap.servers": bs})
    admin.delete_consumer_groups(["sg-lock"])["sg-lock"].result(10)
    assert state_start(bs, "sg-lock", "sg-lock", 0) == -1


def state_start(bootstrap: str, group: str, topic: str, partition: int) -> int:
    """The share-partition's start offset as its share coordinator has it (-1: no state)."""
    with RawConnection(bootstrap) as conn:
        meta = conn.request(K.METADATA, 12, m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)]))
        r = conn.request(K.READ_SHARE_GROUP_STATE_SUMMARY, 1, share_state_request(
            K.READ_SHARE_GROUP_STATE_SUMMARY, group, meta.topics[0].topic_id, partition))
    return int(r.results[0].partitions[0].start_offset)


def test_share_groups_consumer_killed_mid_batch_loses_nothing(bs: str) -> None:
    # One partition, which the simple assignor gives to the killed member and the next
    # one alike until the killed one's session times out.
    create_topic(bs, "sg-kill", 1)
    produce(bs, "sg-kill", 16, partitions=1)
    with share_worker(bs, "sg-kill", "sg-kill") as worker:
        worker.kill()  # mid-batch: the held records are not acknowledged
    acked, held = worker.acked, worker.held
    assert worker.committed
    assert acked and held
    c = consumer(bs, "sg-kill", "sg-kill")
    got: dict[tuple[int, int], int] = {}
    deadline = time.time() + 20
    try:
        while len(got) < 16 - len(acked) and time.time() < deadline:
            for msg in poll(c, 0.3):
                got[(msg.partition(), msg.offset())] = msg.delivery_count()
        extra = [msg.offset() for msg in poll(c, 0.5)]
    finally:
        c.close()
    assert sorted(set(got) | acked) == [(0, i) for i in range(16)]
    assert not set(got) & acked, "an acknowledged record was delivered again"
    assert {got[k] for k in held} == {2}  # redelivered once the killed member's lock expired
    assert extra == []


def share_fetch(conn: RawConnection, group: str, member: str, epoch: int,
                parts: list[tuple[object, int]], acks: dict[tuple[object, int], list[
                    tuple[int, int, list[int]]]] | None = None,
                max_records: int = 100, max_wait_ms: int = 0, version: int = 1,
                **fields: object) -> m.ShareFetchResponse:
    """A ShareFetch of `parts` with `acks`; `fields` set the request's other fields."""
    Q = m.ShareFetchRequest  # noqa: N806
    acks = acks or {}
    topics: dict[object, list[m.ShareFetchRequest.FetchTopic.FetchPartition]] = {}
    for topic_id, index in parts:
        topics.setdefault(topic_id, []).append(Q.FetchTopic.FetchPartition(
            partition_index=index, acknowledgement_batches=[
                Q.FetchTopic.FetchPartition.AcknowledgementBatch(
                    first_offset=f, last_offset=la, acknowledge_types=t)
                for f, la, t in acks.get((topic_id, index), [])]))
    settings: dict[str, object] = {"max_wait_ms": max_wait_ms, "min_bytes": 1,
                                   "max_records": max_records, "batch_size": max_records}
    return conn.request(K.SHARE_FETCH, version, Q(
        group_id=group, member_id=member, share_session_epoch=epoch,
        topics=[Q.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
        **{**settings, **fields}))


def test_share_groups_sessions_and_acknowledgement_errors_on_the_wire(bs: str) -> None:
    """Kafka's error codes for share sessions and acknowledgements, and the records sent as
    whole batches with the acquired offset ranges."""
    create_topic(bs, "sg-wire", 1)
    produce(bs, "sg-wire", 3, partitions=1)
    with RawConnection(bs) as conn:
        meta = conn.request(K.METADATA, 12, m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name="sg-wire")]))
        tid = meta.topics[0].topic_id
        part = (tid, 0)
        E = m.ShareFetchResponse  # noqa: N806
        assert share_fetch(conn, "sg-wire", "w1", 3, [part]).error_code == 122  # not found
        assert share_fetch(conn, "sg-wire", "w1", 0, [part], {part: [(0, 0, [1])]}
                           ).error_code == 42  # INVALID_REQUEST: acks in a new session
        # The first fetch waits while the share-partition's state is read (and initialized).
        r: E = share_fetch(conn, "sg-wire", "w1", 0, [part], max_records=2, max_wait_ms=5000)
        [p] = r.responses[0].partitions
        assert (r.error_code, p.error_code, r.acquisition_lock_timeout_ms) == (0, 0, LOCK_MS)
        # Two records asked, one batch each: two whole batches, offsets 0-1, first delivery.
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in p.acquired_records] == [(0, 1, 1)]
        records = bytes(p.records)
        assert [(h.base_offset, h.last_offset) for h in iter_batch_headers(records)] == [
            (0, 0), (1, 1)]
        assert share_fetch(conn, "sg-wire", "w1", 2, [part]).error_code == 123  # stale epoch
        # Another member cannot acknowledge w1's records; w1 can, once.
        r2 = share_fetch(conn, "sg-wire", "w2", 0, [part])
        assert [(a.first_offset, a.last_offset) for a in
                r2.responses[0].partitions[0].acquired_records] == [(2, 2)]
        bad = share_fetch(conn, "sg-wire", "w2", 1, [part], {part: [(0, 1, [1])]})
        assert bad.responses[0].partitions[0].acknowledge_error_code == 121
        # 0 accepted, 1 released: the same request acquires 1 again, second delivery.
        ok = share_fetch(conn, "sg-wire", "w1", 1, [part], {part: [(0, 1, [1, 2])]})
        [p] = ok.responses[0].partitions
        assert p.acknowledge_error_code == 0
        assert [(a.first_offset, a.last_offset, a.delivery_count)
                for a in p.acquired_records] == [(1, 1, 2)]
        assert share_fetch(conn, "sg-wire", "w1", 2, [part]).responses == []  # nothing new
        A = m.ShareAcknowledgeRequest  # noqa: N806
        AP = A.AcknowledgeTopic.AcknowledgePartition  # noqa: N806
        ack = conn.request(K.SHARE_ACKNOWLEDGE, 1, A(
            group_id="sg-wire", member_id="w1", share_session_epoch=0))
        assert ack.error_code == 123  # ShareAcknowledge cannot open a session
        final = conn.request(K.SHARE_ACKNOWLEDGE, 1, A(
            group_id="sg-wire", member_id="w1", share_session_epoch=-1, topics=[
                A.AcknowledgeTopic(topic_id=tid, partitions=[AP(
                    partition_index=0, acknowledgement_batches=[AP.AcknowledgementBatch(
                        first_offset=1, last_offset=1, acknowledge_types=[1])])])]))
        assert [p.error_code for t in final.responses for p in t.partitions] == [0]
        assert share_fetch(conn, "sg-wire", "w1", 4, [part]).error_code == 122  # closed
        unknown = share_fetch(conn, "sg-wire", "w3", 0, [(uuid.uuid4(), 0), (tid, 7)])
        assert sorted(p.error_code for t in unknown.responses for p in t.partitions) == [
            3, 100]  # UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID


def test_share_groups_share_state_apis_on_the_wire(bs: str) -> None:
    """The share coordinator's APIs as brokers send them: FindCoordinator key type 2, and
    Kafka's error codes for unknown share-partitions and old epochs."""
    create_topic(bs, "sg-state", 1)
    with RawConnection(bs) as conn:
        meta = conn.request(K.METADATA, 12, m.MetadataRequest(
            topics=[m.MetadataRequest.MetadataRequestTopic(name="sg-state")]))
        tid = meta.topics[0].topic_id
        key = f"sg-state-g:{base64.urlsafe_b64encode(tid.bytes).decode().rstrip('=')}:0"
        found = conn.request(K.FIND_COORDINATOR, 4, m.FindCoordinatorRequest(
            key_type=2, coordinator_keys=[key])).coordinators[0]
        assert (found.error_code, found.node_id) == (0, 1)

        def call(api: int, version: int = 0, group: str = "sg-state-g", topic: object = tid,
                 **fields: object) -> object:
            r = conn.request(api, version, share_state_request(api, group, topic, 0, **fields))
            return r.results[0].partitions[0]

        read = call(K.READ_SHARE_GROUP_STATE, leader_epoch=3)
        assert (read.error_code, read.start_offset) == (0, -1)  # no state yet
        batches = [(5, 6, 2, 1), (7, 7, 0, 2)]
        assert call(K.WRITE_SHARE_GROUP_STATE, 1, leader_epoch=3, state_epoch=0,
                    start_offset=5, state_batches=batches).error_code == 0
        read = call(K.READ_SHARE_GROUP_STATE, leader_epoch=3)
        assert (read.error_code, read.start_offset, read.state_epoch) == (0, 5, 0)
        assert [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                for b in read.state_batches] == batches
        summary = call(K.READ_SHARE_GROUP_STATE_SUMMARY, 1)
        assert (summary.start_offset, summary.leader_epoch,
                summary.delivery_complete_count) == (5, 3, 2)
        assert call(K.WRITE_SHARE_GROUP_STATE, leader_epoch=2).error_code == 74  # fenced
        assert call(K.INITIALIZE_SHARE_GROUP_STATE, state_epoch=1,
                    start_offset=9).error_code == 0
        assert call(K.WRITE_SHARE_GROUP_STATE, leader_epoch=3, state_epoch=0
                    ).error_code == 124  # FENCED_STATE_EPOCH
        read = call(K.READ_SHARE_GROUP_STATE, leader_epoch=3)
        assert (read.start_offset, read.state_epoch, read.state_batches) == (9, 1, [])
        assert call(K.DELETE_SHARE_GROUP_STATE).error_code == 0
        assert call(K.READ_SHARE_GROUP_STATE, leader_epoch=3).start_offset == -1
        assert call(K.READ_SHARE_GROUP_STATE, topic=uuid.uuid4()).error_code == 3
        assert call(K.READ_SHARE_GROUP_STATE, group="").error_code == 42  # INVALID_REQUEST


def acquired(r: m.ShareFetchResponse) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in r.responses for p in t.partitions for a in p.acquired_records]


def ack_errors(r: m.ShareFetchResponse | m.ShareAcknowledgeResponse) -> list[int]:
    return [p.acknowledge_error_code if isinstance(r, m.ShareFetchResponse) else p.error_code
            for t in r.responses for p in t.partitions]


def test_share_groups_v2_acquire_modes_and_max_bytes_on_the_wire(bs: str) -> None:
    """ShareFetch v2's record_limit acquire mode hands out at most MaxRecords records,
    splitting a batch (KIP-1206); batch_optimized keeps whole batches; MaxBytes 0 gets
    nothing, as from Kafka."""
    create_topic(bs, "sg-v2", 1)
    produce(bs, "sg-v2", 2, partitions=1)  # offsets 0 and 1, one batch each
    p = Producer({"bootstrap.servers": bs, "linger.ms": 200})
    for i in range(4):  # offsets 2-5, one batch
        p.produce("sg-v2", b"b%d" % i, partition=0)
    p.flush(10)
    with RawConnection(bs) as conn:
        tid = conn.request(K.METADATA, 12, m.MetadataRequest(topics=[
            m.MetadataRequest.MetadataRequestTopic(name="sg-v2")])).topics[0].topic_id
        part = (tid, 0)
        r = share_fetch(conn, "sg-v2", "m1", 0, [part], max_records=1, max_wait_ms=5000,
                        version=2, share_acquire_mode=1)
        assert acquired(r) == [(0, 0, 1)]
        r = share_fetch(conn, "sg-v2", "m1", 1, [part], max_records=3, version=2,
                        share_acquire_mode=1)
        assert acquired(r) == [(1, 3, 1)]  # the batch 2-5 split after 3
        batches = [(h.base_offset, h.last_offset)
                   for h in iter_batch_headers(bytes(r.responses[0].partitions[0].records))]
        assert batches == [(1, 1), (2, 5)]  # batches are sent whole
        nothing = share_fetch(conn, "sg-v2", "m1", 2, [part], max_wait_ms=2000, version=2,
                              max_bytes=0)
        assert (nothing.error_code, nothing.responses) == (0, [])
        # batch_optimized (mode 0) acquires up to a batch's end: 4 and 5 though 1 was asked.
        r = share_fetch(conn, "sg-v2", "m2", 0, [part], max_records=1, version=2)
        assert acquired(r) == [(4, 5, 1)]


def test_share_groups_v2_renew_on_the_wire(bs: str) -> None:
    """RENEW (KIP-1222) keeps records acquired past their lock duration without another
    delivery; Kafka's checks: RENEW only at v2 with IsRenewAck, and a ShareFetch that
    renews asks for nothing and gets nothing."""
    create_topic(bs, "sg-renew", 1)
    produce(bs, "sg-renew", 4, partitions=1)
    with RawConnection(bs) as conn, RawConnection(bs) as other:
        tid = conn.request(K.METADATA, 12, m.MetadataRequest(topics=[
            m.MetadataRequest.MetadataRequestTopic(name="sg-renew")])).topics[0].topic_id
        part = (tid, 0)
        r = share_fetch(conn, "sg-renew", "r1", 0, [part], max_records=4, max_wait_ms=5000,
                        version=2)
        assert acquired(r) == [(0, 3, 1)]
        acquired_at = time.monotonic()
        renew = {part: [(0, 1, [4])]}
        quiet = {"max_records": 0, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 0}
        # Refused: at v1, without IsRenewAck, and with fetch parameters (the whole request).
        assert ack_errors(share_fetch(conn, "sg-renew", "r1", 1, [part], renew,
                                      max_records=0)) == [42]
        assert ack_errors(share_fetch(conn, "sg-renew", "r1", 2, [part], renew, version=2,
                                      **quiet)) == [42]
        assert share_fetch(conn, "sg-renew", "r1", 3, [part], renew, version=2,
                           is_renew_ack=True).error_code == 42
        A = m.ShareAcknowledgeRequest  # noqa: N806
        AP = A.AcknowledgeTopic.AcknowledgePartition  # noqa: N806

        def acknowledge(epoch: int, types: list[int], version: int = 2,
                        is_renew_ack: bool = True) -> m.ShareAcknowledgeResponse:
            return conn.request(K.SHARE_ACKNOWLEDGE, version, A(
                group_id="sg-renew", member_id="r1", share_session_epoch=epoch,
                is_renew_ack=is_renew_ack, topics=[A.AcknowledgeTopic(topic_id=tid, partitions=[
                    AP(partition_index=0, acknowledgement_batches=[AP.AcknowledgementBatch(
                        first_offset=0, last_offset=1, acknowledge_types=types)])])]))

        assert ack_errors(acknowledge(3, [4], version=1, is_renew_ack=False)) == [42]
        # Offsets 0 and 1 renewed every half lock duration (by ShareFetch and by
        # ShareAcknowledge, which says how long the lock lasts); 2 and 3 are not renewed.
        epoch = 4
        while time.monotonic() - acquired_at < 2 * LOCK_MS / 1000:
            time.sleep(LOCK_MS / 3000)
            if epoch % 2:
                a = acknowledge(epoch, [4])
                assert (ack_errors(a), a.acquisition_lock_timeout_ms) == ([0], LOCK_MS)
            else:
                f = share_fetch(conn, "sg-renew", "r1", epoch, [part], renew, version=2,
                                is_renew_ack=True, **quiet)
                assert (ack_errors(f), acquired(f)) == ([0], [])  # it fetches nothing
            epoch += 1
        # Another member gets 2 and 3 again, never the renewed ones.
        r = share_fetch(other, "sg-renew", "r2", 0, [part], max_wait_ms=3000, version=2)
        assert acquired(r) == [(2, 3, 2)]
        # Still r1's after twice the lock duration: accepted (once), never delivered again.
        assert ack_errors(acknowledge(epoch, [1], is_renew_ack=False)) == [0]
        assert acquired(share_fetch(other, "sg-renew", "r2", 1, [part], max_wait_ms=300,
                                    version=2)) == []
