"""The controller against a real ZooKeeper, without brokers: its writes are fenced by the
controller epoch."""

from __future__ import annotations

import time
import uuid

from kazoo.client import KazooClient

from ads.controller.controller import Controller
from ads.metadata import zk_layout as zl
from ads.metadata.model import BrokerEndpoint


def wait(check, timeout_s: float = 10.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def add_topic(zk: KazooClient, name: str, replicas: dict[int, list[int]]) -> None:
    zk.create(zl.topic_path(name), zl.encode_assignment(zl.TopicAssignment(uuid.uuid4(),
                                                                            replicas)))


def test_controller_writes_states_then_stops_when_deposed(zk: KazooClient) -> None:
    zk.create(zl.broker_path(1), zl.encode_broker(BrokerEndpoint(1, "h", 1)), ephemeral=True)
    controller = Controller(zk, 1)
    controller.start()
    try:
        wait(lambda: controller.active)
        add_topic(zk, "t", {0: [1]})
        wait(lambda: zk.exists(zl.state_path("t", 0)) is not None)
        state = zl.decode_state(zk.get(zl.state_path("t", 0))[0])
        assert (state.leader, state.leader_epoch, state.controller_epoch) == (1, 0, 1)

        # Another controller wins elsewhere: the epoch moves on behind this one's back.
        zk.set(zl.CONTROLLER_EPOCH, zl.encode_epoch(2))
        add_topic(zk, "u", {0: [1]})
        wait(lambda: not controller.active)
        time.sleep(0.5)
        assert zk.exists(zl.state_path("u", 0)) is None  # its write was refused
    finally:
        controller.stop()


def test_controller_deletes_queued_topics(zk: KazooClient) -> None:
    zk.create(zl.broker_path(1), zl.encode_broker(BrokerEndpoint(1, "h", 1)), ephemeral=True)
    controller = Controller(zk, 1)
    controller.start()
    try:
        add_topic(zk, "gone", {0: [1], 1: [1]})
        zk.create(zl.config_path("gone"), zl.encode_config({}))
        wait(lambda: zk.exists(zl.state_path("gone", 1)) is not None)
        zk.create(zl.delete_path("gone"), b"")
        wait(lambda: zk.exists(zl.topic_path("gone")) is None)
        assert zk.exists(zl.config_path("gone")) is None
        assert zk.get_children(zl.DELETE_TOPICS) == []
    finally:
        controller.stop()
