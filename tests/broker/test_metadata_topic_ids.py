"""Metadata v12 requests that name topics by topic id, as Kafka's Java client sends them to
resolve a KIP-848 assignment (topic ids) to names: the name left at its default, ""."""

from __future__ import annotations

import uuid

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from conftest import create_topic
from kafka_wire import RawConnection

MR = m.MetadataRequest


def _metadata(bootstrap: str, *topics: MR.MetadataRequestTopic) -> m.MetadataResponse:
    with RawConnection(bootstrap) as conn:
        resp: m.MetadataResponse = conn.request(m.ApiKey.METADATA, 12, MR(
            topics=list(topics), allow_auto_topic_creation=False))
        return resp


def test_metadata_topic_id_names_the_topic_whatever_the_name(
        ads_broker: EmbeddedBroker) -> None:
    bootstrap = ads_broker.bootstrap_servers
    create_topic(bootstrap, "by-id", partitions=2)
    by_name = _metadata(bootstrap, MR.MetadataRequestTopic(name="by-id")).topics[0]
    assert by_name.error_code == ErrorCode.NONE
    topic_id = by_name.topic_id
    assert topic_id != uuid.UUID(int=0)
    for name in ("", None):
        [found] = _metadata(bootstrap, MR.MetadataRequestTopic(topic_id=topic_id,
                                                               name=name)).topics
        assert (found.error_code, found.name, found.topic_id) == (ErrorCode.NONE, "by-id",
                                                                  topic_id)
        assert sorted(p.partition_index for p in found.partitions) == [0, 1]
    unknown = uuid.uuid4()
    [missing] = _metadata(bootstrap, MR.MetadataRequestTopic(topic_id=unknown, name="")).topics
    assert (missing.error_code, missing.topic_id) == (ErrorCode.UNKNOWN_TOPIC_ID, unknown)
