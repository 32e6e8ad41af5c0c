"""`ads top --once` run as a subprocess, its output a pipe as in a script."""

from __future__ import annotations

from confluent_kafka import Consumer, TopicPartition

from ads.testing import EmbeddedBroker
from broker_process import free_port
from cli_process import ads
from conftest import create_topic

# Names that an 80-column table cuts to the same prefix.
LONG = "payments.settlement.eu-west.reconciliation-events-v"


def test_cli_top_once_to_a_pipe_prints_whole_names_and_group_state() -> None:
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        for n in (1, 2):
            create_topic(b.bootstrap_servers, f"{LONG}{n}")
        c = Consumer({"bootstrap.servers": b.bootstrap_servers,
                      "group.id": f"{LONG}-readers", "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(f"{LONG}1", 0, 0)], asynchronous=False)
        c.close()
        done = ads("top", "--url", url, "--once", "--interval", "0.2")
    assert (done.returncode, done.stderr) == (0, "")
    lines = done.stdout.splitlines()
    for n in (1, 2):
        assert sum(f"│ {LONG}{n} " in line for line in lines) == 1, done.stdout
    header = next(line for line in lines if "┃ group" in line)
    assert [c.strip() for c in header.split("┃")[1:3]] == ["group", "state"]
    row = next(line for line in lines if f"{LONG}-readers" in line)
    assert [c.strip() for c in row.split("│")[1:3]] == [f"{LONG}-readers", "Empty"]
    assert all(line == line.rstrip() for line in lines)


def test_cli_top_without_http_listener_names_the_setting() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = ads("top", "--url", url, "--once", "--interval", "0.1", timeout=30)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"ads top: cannot read {url}/metrics: ")
    assert "http.listener" in done.stderr
