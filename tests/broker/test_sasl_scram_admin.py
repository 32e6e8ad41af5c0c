"""AlterUserScramCredentials and DescribeUserScramCredentials with Kafka's answers, and
where the credentials live: the embedded store's file (they survive a restart) and, in a
cluster, Kafka's /config/users znodes, seen by every broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from kafka import KafkaAdminClient
from kafka.admin import UserScramCredentialDeletion as Deletion
from kafka.admin import UserScramCredentialUpsertion as Upsertion
from kafka.errors import ClusterAuthorizationFailedError

from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.testing import EmbeddedBroker
from cluster_support import Cluster
from kafka_wire import RawConnection
from sasl_support import (
    PLAIN_USERS,
    add_scram_user,
    admin,
    confluent_conf,
    sasl_broker,
    sasl_broker_config,
)


def test_scram_admin_errors_kafka_python(bootstrap: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert admin.alter_user_scram_credentials([
            Upsertion("ann", "SCRAM-SHA-256", "pw"),
            Upsertion("ann", "SCRAM-SHA-512", "pw", iterations=16384),
            Upsertion("ben", "SCRAM-SHA-256", "pw", iterations=16385),
            Upsertion("cid", "SCRAM-SHA-256", "pw", iterations=4095),
            Upsertion("dan", "SCRAM-SHA-256", "pw"), Deletion("dan", "SCRAM-SHA-256"),
            Deletion("eve", "SCRAM-SHA-512"),
        ]) == {"ann": None, "ben": "Too many iterations", "cid": "Too few iterations",
               "dan": "A user credential cannot be altered twice in the same request",
               "eve": "Attempt to delete a user credential that does not exist"}
        described = admin.describe_user_scram_credentials()
        assert list(described) == ["ann"]  # nothing of the refused users was applied
        assert sorted((int(c["mechanism"]), c["iterations"])
                      for c in described["ann"]["credential_infos"]) == [(1, 4096), (2, 16384)]
        described = admin.describe_user_scram_credentials(["ann", "zed", ""])
        assert described["zed"]["error"] == ("Attempt to describe a user credential that does "
                                             "not exist: zed")
        assert described[""]["error"] == "Username must not be empty"
        assert admin.alter_user_scram_credentials([Deletion("ann", "SCRAM-SHA-256")]) == {
            "ann": None}
        infos = admin.describe_user_scram_credentials(["ann"])["ann"]["credential_infos"]
        assert [int(c["mechanism"]) for c in infos] == [2]
    finally:
        admin.close()


def test_scram_admin_unknown_mechanism_and_duplicate_describe(bootstrap: str) -> None:
    upsert = m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name="fay", mechanism=3, iterations=4096, salt=b"s", salted_password=b"p")
    with RawConnection(bootstrap) as conn:
        answer = conn.request(51, 0, m.AlterUserScramCredentialsRequest(upsertions=[upsert]))
        assert [(r.user, r.error_code, r.error_message) for r in answer.results] == [
            ("fay", ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")]
        name = m.DescribeUserScramCredentialsRequest.UserName
        answer = conn.request(50, 0, m.DescribeUserScramCredentialsRequest(
            users=[name(name="gil"), name(name="gil")]))
        assert [(r.user, r.error_code) for r in answer.results] == [
            ("gil", ErrorCode.DUPLICATE_RESOURCE)]


def test_scram_credentials_survive_a_restart(tmp_path: Path) -> None:
    config = sasl_broker_config()
    with EmbeddedBroker(data_dir=tmp_path, config=config) as broker:
        add_scram_user(broker.bootstrap_servers, "hal", "hal-pw")
    with EmbeddedBroker(data_dir=tmp_path, config=config) as broker:
        producer = Producer(confluent_conf(broker.bootstrap_servers, "SCRAM-SHA-512", "hal",
                                           "hal-pw"))
        producer.produce("after-restart", b"x")
        assert producer.flush(15) == 0


@pytest.mark.broker_process
def test_scram_credentials_in_zookeeper(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path, 2).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[1].bootstrap)
        try:
            assert admin.alter_user_scram_credentials(
                [Upsertion("ivy/ops", "SCRAM-SHA-256", "pw", iterations=8192)]) == {
                    "ivy/ops": None}
        finally:
            admin.close()
        with cluster.zk() as zk:
            # Kafka's layout: the sanitized user name, {"version":1,"config":{...}}
            data = json.loads(zk.get("/config/users/ivy%2Fops")[0])
        assert data["version"] == 1
        fields = dict(f.split("=", 1) for f in data["config"]["SCRAM-SHA-256"].split(","))
        assert sorted(fields) == ["iterations", "salt", "server_key", "stored_key"]
        assert fields["iterations"] == "8192"

        def seen_by_broker_2() -> bool:
            other = KafkaAdminClient(bootstrap_servers=cluster.brokers[2].bootstrap)
            try:
                found = other.describe_user_scram_credentials(["ivy/ops"])["ivy/ops"]
            finally:
                other.close()
            return found["error"] is None
        cluster.wait_for(seen_by_broker_2, "broker 2 sees the credential")
    finally:
        cluster.stop()


def test_sasl_principal_decides_with_an_authorizer() -> None:
    """The SASL user is the principal ACLs judge: the super user may manage credentials,
    alice may not, and alice's produce is denied until an ACL allows it."""
    with sasl_broker(**{"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                        "super.users": "User:admin"}) as b:
        bootstrap = b.bootstrap_servers
        add_scram_user(bootstrap, "bob", "bob-pw")  # as User:admin
        root = admin(bootstrap)
        assert "bob" in root.describe_user_scram_credentials().result(15)
        # kafka-python's admin: librdkafka 2.16 crashes on a DescribeUserScramCredentials
        # answer with a top-level error (CLUSTER_AUTHORIZATION_FAILED, as Kafka answers)
        alice = KafkaAdminClient(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="PLAIN", sasl_plain_username="alice",
                                 sasl_plain_password=PLAIN_USERS["alice"])
        try:
            with pytest.raises(ClusterAuthorizationFailedError):
                alice.describe_user_scram_credentials()
            assert alice.alter_user_scram_credentials([Deletion("bob", "SCRAM-SHA-256")]) == {
                "bob": "Cluster authorization failed."}
        finally:
            alice.close()
        codes: list[int] = []
        producer = Producer(confluent_conf(bootstrap, "SCRAM-SHA-256", "bob", "bob-pw"))
        producer.produce("bobs-topic", b"x",
                         on_delivery=lambda err, _: codes.append(err.code() if err else 0))
        producer.flush(10)
        assert codes == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
