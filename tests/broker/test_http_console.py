"""The console's pages over HTTP (the browser test covers the script): records by offset,
by timestamp and in each format, escaped; a group's members and assignment; unknown topics,
groups and partitions; the fragments the pages refresh from."""

from __future__ import annotations

import html
import json
import time

from confluent_kafka import Consumer, Producer

from ads.testing import EmbeddedBroker
from conftest import create_topic
from http_support import http_call


def get(url: str) -> tuple[int, str]:
    answer = http_call(url)
    return answer.status, answer.body


def test_http_console_pages() -> None:
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "shown", partitions=2, **{"retention.ms": "3600000"})
        p = Producer({"bootstrap.servers": bootstrap})
        base_ts = 1_700_000_000_000
        for i in range(10):
            p.produce("shown", key=b"k%d" % i, value=json.dumps({"n": i}).encode(),
                      partition=0, timestamp=base_ts + i * 1000,
                      headers=[("h", b"<b>x</b>")])
        p.produce("shown", value=b"\x00\x01\xff", partition=1)
        assert p.flush(15) == 0

        status, page = get(url + "/topics/shown")
        assert status == 200 and "retention.ms" in page and "3600000" in page
        status, page = get(url + "/topics/shown/messages?partition=0&timestamp="
                           f"{base_ts + 6500}&count=2&format=json")
        assert status == 200
        assert "<td>7</td>" in page and "<td>8</td>" in page and "<td>6</td>" not in page
        assert html.escape('"n": 7') in page  # indented JSON, escaped
        assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
        status, page = get(url + "/topics/shown/messages?partition=1&offset=0&format=hex")
        assert "00 01 ff" in page
        status, page = get(url + "/topics/shown/messages?partition=5")
        assert status == 200 and "no partition 5" in page
        assert get(url + "/topics/absent")[0] == 404
        assert get(url + "/topics/absent/messages")[0] == 404
        assert get(url + "/groups/absent")[0] == 404

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "shown-group",
                      "client.id": "console-reader", "auto.offset.reset": "earliest"})
        c.subscribe(["shown"])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not c.assignment():
                c.poll(0.2)
            page = ""
            while time.monotonic() < deadline and "console-reader" not in page:
                c.poll(0.2)
                page = get(url + "/groups/shown-group")[1]
            assert "console-reader" in page and "shown 0, 1" in page
            fragment = get(url + "/groups/shown-group?fragment=1")[1]
            assert fragment.startswith("<h1>Group shown-group</h1>") and "<html" not in fragment
        finally:
            c.close()
        groups = json.loads(get(url + "/api/groups")[1])
        assert [g["group"] for g in groups] == ["shown-group"]
        topics = json.loads(get(url + "/api/topics")[1])
        assert {(t["topic"], t["partition"], t["high_watermark"]) for t in topics
                if t["topic"] == "shown"} == {("shown", 0, 10), ("shown", 1, 1)}
