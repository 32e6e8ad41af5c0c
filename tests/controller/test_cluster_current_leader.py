"""KIP-951 on a 3-broker cluster: a Produce (v10+) or Fetch (v16+) sent to a broker that
does not lead the partition is answered NOT_LEADER_OR_FOLLOWER with the leader's id and
epoch in `current_leader` and its endpoint in `node_endpoints`."""

from __future__ import annotations

import pytest
from test_controller_cluster import create, leaders

from ads.client import Connection
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.records.batch import build_batch
from cluster_support import Cluster

pytestmark = [pytest.mark.broker_process, pytest.mark.timeout(240)]
NOT_LEADER = ErrorCode.NOT_LEADER_OR_FOLLOWER


def produce(conn: Connection, version: int, topic: str, partition: int) -> m.ProduceResponse:
    req = m.ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
            m.ProduceRequest.TopicProduceData.PartitionProduceData(
                index=partition, records=bytes(build_batch([(None, b"v")])))])])
    resp = conn.request(m.ApiKey.PRODUCE, version, req)
    assert isinstance(resp, m.ProduceResponse)
    return resp


def fetch(conn: Connection, version: int, topic: str, topic_id: object,
          partition: int) -> m.FetchResponse:
    ft = m.FetchRequest.FetchTopic(topic=topic, partitions=[
        m.FetchRequest.FetchTopic.FetchPartition(partition=partition, fetch_offset=0,
                                                 partition_max_bytes=1 << 20)])
    if version >= 13:
        ft.topic_id = topic_id  # type: ignore[assignment]
    req = m.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                         topics=[ft])
    resp = conn.request(m.ApiKey.FETCH, version, req)
    assert isinstance(resp, m.FetchResponse)
    return resp


def test_cluster_not_leader_answers_name_the_current_leader(cluster: Cluster) -> None:
    c = cluster
    create(c, "kip951", 3)
    c.wait_for(lambda: all(v > 0 for v in leaders(c, "kip951").values()), "leaders")
    led = leaders(c, "kip951")
    partition, leader = 0, led[0]
    other = next(n for n in c.brokers if n != leader)
    with Connection.connect(c.brokers[other].bootstrap, timeout_s=10) as conn:
        md = conn.request(m.ApiKey.METADATA, 12, m.MetadataRequest(topics=[
            m.MetadataRequest.MetadataRequestTopic(name="kip951")]))
        assert isinstance(md, m.MetadataResponse)
        topic = md.topics[0]
        epoch = next(p.leader_epoch for p in topic.partitions
                     if p.partition_index == partition)
        expected = m.ProduceResponse.NodeEndpoint(
            node_id=leader, host="127.0.0.1", port=c.brokers[leader].port, rack=None)

        for version in (10, 11):
            resp = produce(conn, version, "kip951", partition)
            part = resp.responses[0].partition_responses[0]
            assert part.error_code == NOT_LEADER
            assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (
                leader, epoch)
            assert [(e.node_id, e.host, e.port) for e in resp.node_endpoints] == [
                (expected.node_id, expected.host, expected.port)]
        old = produce(conn, 9, "kip951", partition).responses[0].partition_responses[0]
        assert old.error_code == NOT_LEADER and old.current_leader.leader_id == -1

        for version in (16, 17):
            fresp = fetch(conn, version, "kip951", topic.topic_id, partition)
            fpart = fresp.responses[0].partitions[0]
            assert fpart.error_code == NOT_LEADER
            assert (fpart.current_leader.leader_id, fpart.current_leader.leader_epoch) == (
                leader, epoch)
            assert [(e.node_id, e.host, e.port) for e in fresp.node_endpoints] == [
                (expected.node_id, expected.host, expected.port)]
        # Before v16 the fields are left at their defaults, as Kafka leaves them.
        fpart = fetch(conn, 15, "kip951", topic.topic_id, partition).responses[0].partitions[0]
        assert fpart.error_code == NOT_LEADER and fpart.current_leader.leader_id == -1

    # The leader itself takes the same produce.
    with Connection.connect(c.brokers[leader].bootstrap, timeout_s=10) as conn:
        ok = produce(conn, 11, "kip951", partition)
        assert ok.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        assert ok.node_endpoints == []
