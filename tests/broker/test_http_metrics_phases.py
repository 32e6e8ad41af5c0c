"""/metrics: request phases (queue and send time) and transaction metrics, scraped with
prometheus_client's parser after confluent-kafka workloads."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer
from test_http_metrics import consume_and_commit, ops_broker, produce, scrape, value

from ads.client import Connection
from ads.protocol import codec
from ads.protocol import messages as m
from ads.testing import EmbeddedBroker
from conftest import create_topic

__all__ = ["ops_broker"]


def _count(samples: dict, name: str, label: str, api: str) -> float:
    return samples.get((f"{name}_count", ((label, api),)), 0.0)


def _requests(samples: dict, api: str) -> float:
    return sum(v for (n, labels), v in samples.items()
               if n == "ads_requests_total" and ("request", api) in labels)


def test_queue_and_send_time_per_api(ops_broker: EmbeddedBroker) -> None:
    bootstrap = ops_broker.bootstrap_servers
    create_topic(bootstrap, "phased")
    # 400 records of 1 KiB: the consumer's first fetch carries a region over 64 KiB, which
    # goes out with sendfile.
    produce(bootstrap, "phased", [b"x" * 1024] * 400, partition=0)
    consume_and_commit(bootstrap, "phased", "phased-group", 400)
    samples = scrape(ops_broker)
    produces = _requests(samples, "Produce")
    assert produces >= 1
    # Every answered request was queued once; every produce response was sent (the
    # producer's flush returned after reading them all).
    for api in ("Produce", "Fetch", "Metadata", "ApiVersions", "OffsetCommit"):
        requests = _requests(samples, api)
        assert requests >= 1, api
        assert _count(samples, "ads_request_queue_time_seconds", "api", api) == requests
    assert _count(samples, "ads_request_send_time_seconds", "api", "Produce") == produces
    assert _count(samples, "ads_request_send_time_seconds", "api", "Metadata") \
        == _requests(samples, "Metadata")
    # A fetch still parked when its consumer left was answered but never sent.
    fetches_sent = _count(samples, "ads_request_send_time_seconds", "api", "Fetch")
    assert 1 <= fetches_sent <= _requests(samples, "Fetch")
    buckets = [(float(dict(labels)["le"]), v) for (n, labels), v in samples.items()
               if n == "ads_request_send_time_seconds_bucket" and ("api", "Fetch") in labels]
    assert max(v for _, v in buckets) == fetches_sent  # the +Inf bucket holds them all
    assert samples[("ads_request_queue_time_seconds_sum", (("api", "Produce"),))] >= 0


def test_queue_time_of_a_request_pipelined_behind_a_long_poll(
        ops_broker: EmbeddedBroker) -> None:
    """A request sent right behind a fetch that long-polls 400 ms waits for it: its queue
    time is at least that wait, so it lands in a bucket of 0.25 s or more."""
    bootstrap = ops_broker.bootstrap_servers
    create_topic(bootstrap, "idle")
    fetch = m.FetchRequest
    body = fetch(replica_id=-1, max_wait_ms=400, min_bytes=1, max_bytes=1 << 20,
                 isolation_level=0, session_id=0, session_epoch=-1,
                 topics=[fetch.FetchTopic(topic="idle", partitions=[
                     fetch.FetchTopic.FetchPartition(
                         partition=0, current_leader_epoch=-1, fetch_offset=0,
                         log_start_offset=-1, partition_max_bytes=1 << 20)])],
                 forgotten_topics_data=[], rack_id="")
    listing = codec.encode_request(m.ApiKey.LIST_GROUPS, 4, 2, "pipelined",
                                   m.ListGroupsRequest(states_filter=[], types_filter=[]))
    conn = Connection.connect(bootstrap, client_id="pipelined", timeout_s=10)
    try:
        conn.send_frame(codec.encode_request(m.ApiKey.FETCH, 11, 1, "pipelined", body)
                        + listing)
        conn.receive_frame()
        conn.receive_frame()
    finally:
        conn.close()
    samples = scrape(ops_broker)
    slow = sum(v for (n, labels), v in samples.items()
               if n == "ads_request_queue_time_seconds_bucket"
               and ("api", "ListGroups") in labels and dict(labels)["le"] == "0.1")
    assert _count(samples, "ads_request_queue_time_seconds", "api", "ListGroups") == 1
    assert slow == 0  # not within 0.1 s: it waited behind the fetch
    assert samples[("ads_request_queue_time_seconds_sum", (("api", "ListGroups"),))] >= 0.3


def test_transaction_metrics_after_a_commit_and_an_abort(ops_broker: EmbeddedBroker) -> None:
    bootstrap = ops_broker.bootstrap_servers
    create_topic(bootstrap, "txn-metered")
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "metered-txn",
                  "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce("txn-metered", value=b"kept")
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce("txn-metered", value=b"dropped")
    p.flush(15)
    p.abort_transaction(30)
    # EndTxn is answered once PREPARE_* is written; COMPLETE_* follows the markers.
    deadline = time.monotonic() + 15
    samples = scrape(ops_broker)
    while value(samples, "ads_transactions", state="CompleteAbort") != 1 \
            and time.monotonic() < deadline:
        time.sleep(0.1)
        samples = scrape(ops_broker)
    assert value(samples, "ads_transactions_committed_total") == 1
    assert value(samples, "ads_transactions_aborted_total") == 1
    assert value(samples, "ads_transactions", state="CompleteAbort") == 1
    for state in ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                  "Dead", "PrepareEpochFence"):
        assert value(samples, "ads_transactions", state=state) == 0, state
    # A read_committed consumer sees the committed record only.
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "txn-reader",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    c.subscribe(["txn-metered"])
    seen: list[bytes] = []
    deadline = time.monotonic() + 20
    while not seen and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            seen.append(msg.value())
    c.close()
    assert seen == [b"kept"]
