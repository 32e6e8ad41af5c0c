"""FindCoordinator names this broker only once its coordinator can answer for the key.

The first group or transactional request creates the coordinator's internal topic. From
the moment the topic is in the metadata, the metadata names this broker as each
partition's leader, while the partitions' files are still being made and the coordinator
holds none of them: a request for a key then is NOT_COORDINATOR. A FindCoordinator asked
in that moment must not answer before the partitions are led here and their loads have
begun; requests sent as soon as it answers are COORDINATOR_LOAD_IN_PROGRESS until the load
ends (clients retry it), never NOT_COORDINATOR (a client would look for the coordinator
again, and a client that checks answers one by one would fail). The window is held open
here: the worker making the partitions' files and the loads wait for the test.
"""

from __future__ import annotations

import asyncio
import select
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_wire import RawConnection

WAIT_S = 30.0


@dataclass(frozen=True)
class Held:
    embedded: EmbeddedBroker
    making: threading.Event  # set: the internal topic's files are made
    loading: threading.Event  # set: the coordinators read their partitions


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Held]:
    with EmbeddedBroker(data_dir=tmp_path / "data") as embedded:
        broker = embedded.broker
        assert broker is not None
        making, loading = threading.Event(), threading.Event()
        make = broker.topics._make_logs

        def held_make(*args: Any) -> None:
            assert making.wait(WAIT_S)
            make(*args)

        broker.topics._make_logs = held_make  # type: ignore[method-assign]
        for runtime in (broker.group_coordinator.runtime,
                        broker.transaction_coordinator.runtime):
            _hold_reads(runtime.topic, loading)
        try:
            yield Held(embedded, making, loading)
        finally:
            making.set()
            loading.set()


def _hold_reads(topic: Any, loading: threading.Event) -> None:
    read = topic.read_batches

    async def held_read(partition: int) -> AsyncIterator[bytes]:
        deadline = time.monotonic() + WAIT_S
        while not loading.is_set():  # the event loop keeps serving meanwhile
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        async for batch in read(partition):
            yield batch

    topic.read_batches = held_read


def _init_producer_id(conn: RawConnection, key: str) -> ErrorCode:
    answer = conn.request(m.ApiKey.INIT_PRODUCER_ID, 4, m.InitProducerIdRequest(
        transactional_id=key, transaction_timeout_ms=60_000))
    return ErrorCode(answer.error_code)


def _describe_group(conn: RawConnection, key: str) -> ErrorCode:
    answer = conn.request(m.ApiKey.DESCRIBE_GROUPS, 5, m.DescribeGroupsRequest(groups=[key]))
    return ErrorCode(answer.groups[0].error_code)


# key type, internal topic, a request of the coordinator for the key
KINDS: dict[str, tuple[int, str, Callable[[RawConnection, str], ErrorCode]]] = {
    "transactions": (1, "__transaction_state", _init_producer_id),
    "groups": (0, "__consumer_offsets", _describe_group),
}


def _metadata_names_this_broker(embedded: EmbeddedBroker, topic: str) -> bool:
    broker = embedded.broker
    assert broker is not None
    state = embedded.call(lambda: broker.metadata.topics.get(topic))
    return state is not None and all(p.leader == broker.node_id for p in state.partitions)


def _answered(conn: RawConnection, within_s: float) -> bool:
    return bool(select.select([conn.conn.sock], [], [], within_s)[0])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_coordinator_ready_named_only_once_led_and_loading(held: Held, kind: str) -> None:
    key_type, topic, ask = KINDS[kind]
    embedded = held.embedded
    broker = embedded.broker
    assert broker is not None
    with RawConnection(embedded.bootstrap_servers) as finder, \
            RawConnection(embedded.bootstrap_servers) as other:
        finder.conn.send(m.ApiKey.FIND_COORDINATOR, 3,
                         m.FindCoordinatorRequest(key="k", key_type=key_type))
        deadline = time.monotonic() + WAIT_S
        while not _metadata_names_this_broker(embedded, topic):
            assert time.monotonic() < deadline, f"{topic} never reached the metadata"
            time.sleep(0.01)
        # The metadata names this broker, its coordinator does not hold the partition yet:
        # the window in which FindCoordinator must not name it.
        assert ask(other, "k") is ErrorCode.NOT_COORDINATOR
        assert not _answered(finder, 0.3), "FindCoordinator answered before the leadership"
        held.making.set()
        found = finder.conn.receive()
        assert (found.error_code, found.node_id) == (ErrorCode.NONE, broker.node_id)
        # Asked at once, with the loads held: loading, not "not the coordinator".
        assert ask(finder, "k") is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        again = other.request(m.ApiKey.FIND_COORDINATOR, 3,
                              m.FindCoordinatorRequest(key="k", key_type=key_type))
        assert (again.error_code, again.node_id) == (ErrorCode.NONE, broker.node_id)
        held.loading.set()
        deadline = time.monotonic() + WAIT_S
        error = ask(finder, "k")
        while error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
            time.sleep(0.02)
            error = ask(finder, "k")
        assert error is ErrorCode.NONE
