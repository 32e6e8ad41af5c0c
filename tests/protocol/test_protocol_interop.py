"""Cross-checks against an independent implementation: aiokafka's hand-written protocol structs.

Round trips through our own codec prove consistency only; these prove the bytes are the ones
a real client writes and reads.
"""

from __future__ import annotations

import uuid

from aiokafka.protocol import admin as ak_admin
from aiokafka.protocol import fetch as ak_fetch
from aiokafka.protocol import metadata as ak_metadata
from aiokafka.protocol import produce as ak_produce
from aiokafka.protocol.api import RequestHeader_v1, RequestHeader_v2

from ads.protocol import codec
from ads.protocol import messages as m


def test_protocol_interop_produce_request_v3() -> None:
    theirs = ak_produce.ProduceRequest_v3(
        transactional_id="tx", required_acks=-1, timeout=1500,
        topics=[("orders", [(0, b"batch-0"), (3, b"batch-3")])])
    ours = m.ProduceRequest.decode(theirs.encode(), 3)
    assert ours.transactional_id == "tx"
    assert (ours.acks, ours.timeout_ms) == (-1, 1500)
    topic = ours.topic_data[0]
    assert topic.name == "orders"
    assert [(p.index, bytes(p.records)) for p in topic.partition_data] == [
        (0, b"batch-0"), (3, b"batch-3")]
    assert ours.encode(3) == theirs.encode()


def test_protocol_interop_fetch_request_v4() -> None:
    theirs = ak_fetch.FetchRequest_v4(
        replica_id=-1, max_wait_time=500, min_bytes=1, max_bytes=52428800,
        isolation_level=1, topics=[("t", [(0, 42, 1048576), (1, 7, 1024)])])
    ours = m.FetchRequest.decode(theirs.encode(), 4)
    assert (ours.replica_id, ours.max_wait_ms, ours.min_bytes, ours.max_bytes,
            ours.isolation_level) == (-1, 500, 1, 52428800, 1)
    parts = ours.topics[0].partitions
    assert [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in parts] == [
        (0, 42, 1048576), (1, 7, 1024)]
    assert ours.encode(4) == theirs.encode()


def test_protocol_interop_metadata_request_null_topics() -> None:
    theirs = ak_metadata.MetadataRequest_v1(topics=None)
    assert m.MetadataRequest.decode(theirs.encode(), 1).topics is None
    theirs4 = ak_metadata.MetadataRequest_v4(topics=["a", "b"], allow_auto_topic_creation=True)
    ours = m.MetadataRequest.decode(theirs4.encode(), 4)
    assert [t.name for t in ours.topics] == ["a", "b"]
    assert ours.allow_auto_topic_creation is True


def test_protocol_interop_flexible_delete_records_v2() -> None:
    theirs = ak_admin.DeleteRecordsRequest_v2(
        topics=[("t", [(0, 100, {}), (1, 200, {})], {})], timeout_ms=3000, tags={})
    ours = m.DeleteRecordsRequest.decode(theirs.encode(), 2)
    assert ours.timeout_ms == 3000
    assert [(p.partition_index, p.offset) for p in ours.topics[0].partitions] == [
        (0, 100), (1, 200)]
    assert ours.encode(2) == theirs.encode()
    R = m.DeleteRecordsResponse
    resp = R(throttle_time_ms=5, topics=[R.DeleteRecordsTopicResult(name="t", partitions=[
        R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult(
            partition_index=0, low_watermark=100, error_code=0)])])
    decoded = ak_admin.DeleteRecordsResponse_v2.decode(resp.encode(2))
    assert decoded.throttle_time_ms == 5
    assert decoded.topics[0][0] == "t"
    assert decoded.topics[0][1][0][:3] == (0, 100, 0)


def test_protocol_interop_fetch_response_v4() -> None:
    F = m.FetchResponse
    PD = F.FetchableTopicResponse.PartitionData
    ours = F(throttle_time_ms=3, responses=[F.FetchableTopicResponse(topic="t", partitions=[
        PD(partition_index=2, error_code=0, high_watermark=10, last_stable_offset=9,
           aborted_transactions=[PD.AbortedTransaction(producer_id=77, first_offset=4)],
           records=b"records-bytes")])])
    theirs = ak_fetch.FetchResponse_v4.decode(ours.encode(4))
    assert theirs.throttle_time_ms == 3
    topic, partitions = theirs.topics[0]
    assert topic == "t"
    assert partitions[0] == (2, 0, 10, 9, [(77, 4)], b"records-bytes")


def test_protocol_interop_metadata_response_v5() -> None:
    R = m.MetadataResponse
    ours = R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=1, host="localhost", port=9092, rack=None)],
        cluster_id="cluster", controller_id=1,
        topics=[R.MetadataResponseTopic(error_code=0, name="t", is_internal=False, partitions=[
            R.MetadataResponseTopic.MetadataResponsePartition(
                error_code=0, partition_index=0, leader_id=1, replica_nodes=[1],
                isr_nodes=[1], offline_replicas=[])])])
    theirs = ak_metadata.MetadataResponse_v5.decode(ours.encode(5))
    assert theirs.brokers == [(1, "localhost", 9092, None)]
    assert theirs.cluster_id == "cluster"
    assert theirs.topics == [(0, "t", False, [(0, 0, 1, [1], [1], [])])]


def test_protocol_interop_api_versions_response() -> None:
    A = m.ApiVersionsResponse
    ours = A(error_code=0, api_keys=[A.ApiVersion(api_key=0, min_version=0, max_version=11),
                                     A.ApiVersion(api_key=18, min_version=0, max_version=4)],
             throttle_time_ms=0)
    theirs = ak_admin.ApiVersionResponse_v1.decode(ours.encode(1))
    assert theirs.api_versions == [(0, 0, 11), (18, 0, 4)]


def test_protocol_interop_request_headers() -> None:
    req = ak_admin.DeleteRecordsRequest_v2(topics=[], timeout_ms=1, tags={})
    theirs = RequestHeader_v2(req, correlation_id=12, client_id="aiokafka").encode()
    header, offset = codec.decode_request_header(theirs + req.encode())
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (
        21, 2, 12, "aiokafka")
    assert offset == len(theirs)
    ours = codec.encode_request(21, 2, 12, "aiokafka", m.DeleteRecordsRequest(timeout_ms=1))
    assert ours[4:] == theirs + req.encode()
    old = ak_metadata.MetadataRequest_v1(topics=["x"])
    theirs1 = RequestHeader_v1(old, correlation_id=3, client_id="c").encode()
    assert codec.encode_request(3, 1, 3, "c", m.MetadataRequest(
        topics=[m.MetadataRequest.MetadataRequestTopic(name="x")]))[4:] == theirs1 + old.encode()


def test_protocol_interop_uuid_wire_order() -> None:
    topic_id = uuid.UUID("0123456789abcdef0123456789abcdef")
    data = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(
        topic_id=topic_id, name="n")]).encode(10)
    assert bytes.fromhex("0123456789abcdef0123456789abcdef") in data
