"""`ads top` against a broker's /metrics: one frame printed with --once shows the topic's
rate over the interval and the group's lag; the frame of two scrapes shows the rate of the
records produced between them."""

from __future__ import annotations

import io
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from rich.console import Console

from ads.cli.main import main
from ads.cli.top import frame, scrape
from ads.testing import EmbeddedBroker
from conftest import create_topic


def produce(bootstrap: str, topic: str, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        p.produce(topic, value=b"v%d" % i)
    assert p.flush(15) == 0


def test_cli_top_once_shows_rates_and_lag(capsys) -> None:  # type: ignore[no-untyped-def]
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "watched")
        produce(bootstrap, "watched", 40)
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watchers",
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition("watched", 0, 15)], asynchronous=False)
        c.close()

        before = scrape(url + "/metrics")
        produce(bootstrap, "watched", 100)
        after = scrape(url + "/metrics")
        console = Console(file=io.StringIO(), width=160, record=True)
        console.print(frame(before, after, url))
        text = console.export_text()
        row = next(line for line in text.splitlines() if "watched" in line)
        rate = float(row.split("│")[2].strip().replace(",", ""))
        assert abs(rate - 100 / (after.time_s - before.time_s)) < 0.2
        lag_row = next(line for line in text.splitlines() if "watchers" in line)
        assert [c.strip() for c in lag_row.split("│")[2:4]] == ["Empty", "125"]

        # The command itself: records produced during its interval show as a rate.
        producer = threading.Thread(target=lambda: (time.sleep(0.3),
                                                    produce(bootstrap, "watched", 50)))
        producer.start()
        assert main(["top", "--url", url, "--once", "--interval", "3", "--width", "160"]) == 0
        producer.join()
        out = capsys.readouterr().out
        row = next(line for line in out.splitlines() if "watched" in line)
        assert float(row.split("│")[2].strip().replace(",", "")) > 0
        lag_row = next(line for line in out.splitlines() if "watchers" in line)
        assert lag_row.split("│")[3].strip() == "175"


def test_cli_top_unreachable(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["top", "--url", "http://127.0.0.1:9", "--once", "--interval", "0.1"]) == 1
    assert "cannot read http://127.0.0.1:9/metrics" in capsys.readouterr().err
