"""Single Kafka requests through kafka-python's network client and protocol classes.

For reference tests that must see a broker's exact answer to one request (an error code
a client library would hide behind its own state machine), encoded by a codec that is not
ADS's own. Versions are pinned by the caller, so both brokers a test compares get the same
bytes.
"""

from __future__ import annotations

import time
from typing import Any

from kafka.net.compat import KafkaNetClient
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

GROUP, TRANSACTION = 0, 1
# COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS: the coordinator's internal topic is
# being created or loaded (a broker's first group or transactional request)
NOT_READY = frozenset({15, 14})
# COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS: InitProducerId is asked again
BUSY = frozenset({14, 51})
# NOT_COORDINATOR just after FindCoordinator named the broker: Kafka's broker publishes a new
# internal topic's leader to its metadata cache (which FindCoordinator reads) before its
# coordinator takes the partition on, so for a moment it names itself and then refuses. A
# client looks for the coordinator again and retries, as librdkafka and the Java client do.
NOT_COORDINATOR = 16


class Wire:
    """One connection to the broker at `bootstrap`; not thread-safe."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        self.timeout_ms = int(timeout * 1000)
        self.client = KafkaNetClient(bootstrap_servers=bootstrap,
                                     request_timeout_ms=self.timeout_ms)
        self.client.check_version(timeout_ms=self.timeout_ms)
        node = self.client.least_loaded_node(bootstrap_fallback=True)
        assert node is not None, f"no broker at {bootstrap}"
        self.node = node

    def request(self, request: Any) -> Any:
        """Sends `request` (a kafka.protocol message with its version set) and returns the
        decoded response, within the timeout."""
        return self.client.send_and_receive(self.node, request, timeout_ms=self.timeout_ms)

    def await_coordinator(self, key: str, key_type: int, timeout: float = 30.0) -> None:
        """Asks FindCoordinator for `key` (GROUP or TRANSACTION) until the broker names one,
        which makes it create the internal topic; an error other than "not yet" fails."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.request(FindCoordinatorRequest(key=key, key_type=key_type,
                                                         version=3))
            if answer.error_code == 0:
                return
            assert answer.error_code in NOT_READY, answer
            assert time.monotonic() < deadline, f"no coordinator for {key!r}: {answer}"
            time.sleep(0.1)

    def init_producer_id(self, txn_id: str | None, timeout_ms: int = 60_000,
                         timeout: float = 30.0) -> Any:
        """InitProducerId v4 (transactional when `txn_id` is set), asked again while the
        broker is busy (loading, or ending the id's previous transaction) or not yet the
        coordinator it named (after finding it again), until `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            if txn_id is not None:
                self.await_coordinator(txn_id, TRANSACTION, max(deadline - time.monotonic(), 0))
            answer = self.request(InitProducerIdRequest(
                transactional_id=txn_id, transaction_timeout_ms=timeout_ms, version=4))
            retry = answer.error_code in BUSY or (
                txn_id is not None and answer.error_code == NOT_COORDINATOR)
            if not retry or time.monotonic() > deadline:
                return answer
            time.sleep(0.1)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
