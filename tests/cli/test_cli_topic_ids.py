"""Topic ids are shown in Kafka's form (`Uuid.toString`: URL-safe base64 without padding),
the form Kafka's tools print and accept, never standard base64 or a UUID."""

from __future__ import annotations

from ads.testing import EmbeddedBroker
from cli_process import ads
from conftest import topic_with_telling_id


def test_cli_topics_describe_shows_kafka_topic_id(ads_broker: EmbeddedBroker) -> None:
    name, topic_id = topic_with_telling_id(ads_broker, "ids")
    done = ads("topics", "describe", name, "--bootstrap-server", ads_broker.bootstrap_servers)
    assert done.returncode == 0, done.stderr
    head = dict(f.split(": ", 1) for f in done.stdout.splitlines()[0].split("\t"))
    assert head["TopicId"] == topic_id
