"""DescribeTopicPartitions (KIP-966): topics by name with their partitions, paged by a
partition limit and a cursor, as Kafka's admin client pages through it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

Q = m.DescribeTopicPartitionsRequest
TOPICS = {"dtp-a": 5, "dtp-b": 1, "dtp-c": 3}


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with EmbeddedBroker(tmp_path_factory.mktemp("dtp"),
                        config={"max.request.partition.size.limit": "4"}) as b:
        for name, partitions in TOPICS.items():
            create_topic(b.bootstrap_servers, name, partitions)
        yield b.bootstrap_servers


def _ask(bootstrap: str, names: list[str], limit: int = 2000,
         cursor: tuple[str, int] | None = None) -> m.DescribeTopicPartitionsResponse:
    request = Q(topics=[Q.TopicRequest(name=n) for n in names], response_partition_limit=limit,
                cursor=None if cursor is None else Q.Cursor(topic_name=cursor[0],
                                                            partition_index=cursor[1]))
    with RawConnection(bootstrap) as conn:
        return conn.request(m.ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, request)


def _pages(bootstrap: str, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    pages, cursor = [], None
    for _ in range(20):
        r = _ask(bootstrap, names, limit, cursor)
        pages.append([(t.name, p.partition_index) for t in r.topics for p in t.partitions])
        if r.next_cursor is None:
            return pages
        cursor = (r.next_cursor.topic_name, r.next_cursor.partition_index)
    raise AssertionError("the cursor never ended")


def test_describe_topic_partitions_lists_named_topics_with_their_partitions(
        bootstrap: str) -> None:
    r = _ask(bootstrap, ["dtp-c", "dtp-b", "no-such-topic", "bad/name"])
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION), ("dtp-b", 0), ("dtp-c", 0),
        ("no-such-topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    c = r.topics[2]
    assert [p.partition_index for p in c.partitions] == [0, 1, 2]
    assert all((p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas)
               == (0, 1, [1], [1], []) for p in c.partitions)
    assert c.topic_id.int != 0 and not c.is_internal
    assert c.topic_authorized_operations > 0  # every operation, without an authorizer
    assert r.next_cursor is None


def test_describe_topic_partitions_pages_by_the_limit_and_the_cursor(bootstrap: str) -> None:
    everything = [(n, p) for n in sorted(TOPICS) for p in range(TOPICS[n])]
    # The client's limit (3), then the broker's (max.request.partition.size.limit=4).
    assert _pages(bootstrap, [], 3) == [everything[0:3], everything[3:6], everything[6:9]]
    assert _pages(bootstrap, [], 100) == [everything[0:4], everything[4:8], everything[8:9]]
    # Named topics page the same way; a page that ends with a topic names the next one.
    assert _pages(bootstrap, ["dtp-b", "dtp-c"], 1) == [[("dtp-b", 0)], [("dtp-c", 0)],
                                                        [("dtp-c", 1)], [("dtp-c", 2)]]
    r = _ask(bootstrap, ["dtp-b", "dtp-c"], 1)
    assert (r.next_cursor.topic_name, r.next_cursor.partition_index) == ("dtp-c", 0)


def test_describe_topic_partitions_refuses_a_cursor_outside_the_named_topics(
        bootstrap: str) -> None:
    r = _ask(bootstrap, ["dtp-a"], cursor=("dtp-b", 0))
    assert [(t.name, t.error_code) for t in r.topics] == [("dtp-b", ErrorCode.INVALID_REQUEST)]
