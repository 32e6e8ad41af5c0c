"""AlterReplicaLogDirs on a broker with one log directory, Apache Kafka against ADS: the same
request over a real socket to each, the same answers per partition (the directory a replica
is in already, a path that is no log directory, a partition the cluster does not have, a topic
name too long for a move's directory name, a partition named under two directories), and
the same versions advertised."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from kafka_reference import KafkaReference
from kafka_wire import RawConnection

pytestmark = pytest.mark.kafka_reference

Req = m.AlterReplicaLogDirsRequest
Dir = Req.AlterReplicaLogDir
DirTopic = Dir.AlterReplicaLogDirTopic
LONG = "x" * 220  # a valid topic name; with "-0" and a future suffix, over 255 characters


def _log_dir(conn: RawConnection) -> str:
    described = conn.request(m.ApiKey.DESCRIBE_LOG_DIRS, 4, m.DescribeLogDirsRequest(
        topics=None))
    (result,) = described.results
    return str(result.log_dir)


def _answers(bootstrap: str) -> tuple[dict[str, str], tuple[int, int] | None]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("moves", 1, 1)])["moves"].result(15)
    with RawConnection(bootstrap) as conn:
        here = _log_dir(conn)
        request = Req(dirs=[
            Dir(path="/no/such/dir", topics=[DirTopic(name="moves", partitions=[0]),
                                             DirTopic(name="elsewhere", partitions=[0])]),
            Dir(path=here, topics=[DirTopic(name="moves", partitions=[0, 7]),
                                   DirTopic(name="absent", partitions=[0]),
                                   DirTopic(name=LONG, partitions=[0])]),
            Dir(path=here + "/", topics=[DirTopic(name="slash", partitions=[0])]),
        ])
        response = conn.request(m.ApiKey.ALTER_REPLICA_LOG_DIRS, 2, request)
        versions = conn.request(m.ApiKey.API_VERSIONS, 3, m.ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
    errors = {f"{t.topic_name[:8]}-{p.partition_index}": ErrorCode(p.error_code).name
              for t in response.results for p in t.partitions}
    served = next(((k.min_version, k.max_version) for k in versions.api_keys
                   if k.api_key == m.ApiKey.ALTER_REPLICA_LOG_DIRS), None)
    return errors, served


def test_alter_replica_log_dirs_with_one_log_dir_matches_kafka(
        kafka: KafkaReference, ads: EmbeddedBroker) -> None:
    expected = {
        "moves-0": "NONE",  # named under a missing dir first, then its own: the last counts
        "moves-7": "UNKNOWN_TOPIC_OR_PARTITION",
        "absent-0": "UNKNOWN_TOPIC_OR_PARTITION",
        "elsewher-0": "LOG_DIR_NOT_FOUND",
        "slash-0": "LOG_DIR_NOT_FOUND",  # the path as given, not normalized
        "xxxxxxxx-0": "INVALID_TOPIC_EXCEPTION",
    }
    kafka_errors, kafka_versions = _answers(kafka.bootstrap)
    assert kafka_errors == expected, kafka.log(tail=3000)
    ads_errors, ads_versions = _answers(ads.bootstrap_servers)
    assert ads_errors == expected
    assert ads_versions == kafka_versions == (1, 2)
