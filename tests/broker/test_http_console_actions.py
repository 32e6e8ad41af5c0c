"""The console's write actions over HTTP: with the default `console.read.only=true` the pages
show no delete buttons and every delete POST is 403; with false, a POST carrying the page's
token deletes a topic (gone for a confluent-kafka AdminClient) or an empty group, a group
with members is NON_EMPTY_GROUP (409), and a missing or wrong token, another site's Origin
or a GET is refused."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.parse
import urllib.request

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from ads.testing import EmbeddedBroker
from conftest import create_topic
from http_support import http_call

TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def request(url: str, form: dict[str, str] | None = None, method: str = "POST",
            headers: dict[str, str] | None = None) -> tuple[int, str]:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    answer = http_call(url, method=method, data=data, headers=headers, timeout_s=30)
    return answer.status, answer.body


def topics(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return set(admin.list_topics(timeout=10).topics)


def groups(bootstrap: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return {g.group_id for g in admin.list_consumer_groups().result(timeout=15).valid}


def test_http_console_read_only_by_default_refuses_deletes() -> None:
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        create_topic(b.bootstrap_servers, "kept")
        status, page = request(url + "/topics/kept", method="GET")
        assert status == 200 and "csrf_token" not in page and "/delete" not in page
        token = b.broker.ops_http.actions.token  # even the right token is refused
        status, page = request(url + "/topics/kept/delete", {"csrf_token": token})
        assert status == 403 and "read-only" in page
        assert request(url + "/groups/anyone/delete", {"csrf_token": token})[0] == 403
        assert "kept" in topics(b.bootstrap_servers)


def test_http_console_deletes_topics_and_empty_groups() -> None:
    config = {"http.listener": "127.0.0.1:0", "console.read.only": "false"}
    with EmbeddedBroker(config=config) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "doomed")
        create_topic(bootstrap, "spared")
        status, page = request(url + "/topics/doomed", method="GET")
        assert status == 200
        token = TOKEN.search(page)
        assert token is not None and 'action="/topics/doomed/delete"' in page
        form = {"csrf_token": token[1]}

        assert request(url + "/topics/doomed/delete", method="GET")[0] == 405
        assert request(url + "/topics", form)[0] == 405
        assert request(url + "/topics/doomed/delete", {})[0] == 403
        assert request(url + "/topics/doomed/delete", {"csrf_token": "guess"})[0] == 403
        assert request(url + "/topics/doomed/delete", form,
                       headers={"Origin": "http://evil.example"})[0] == 403
        assert "doomed" in topics(bootstrap)

        status, page = request(url + "/topics/doomed/delete", form)
        assert status == 200 and "Deleted topic doomed" in page
        assert topics(bootstrap) & {"doomed", "spared"} == {"spared"}
        status, page = request(url + "/topics/doomed/delete", form)
        assert status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in page

        # A group with a member is not deleted; once the member left it is.
        p = Producer({"bootstrap.servers": bootstrap})
        p.produce("spared", value=b"v")
        assert p.flush(15) == 0
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": "leaving",
                      "auto.offset.reset": "earliest"})
        c.subscribe(["spared"])
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not c.assignment():
                c.poll(0.2)
            assert c.assignment()
            status, page = request(url + "/groups/leaving", method="GET")
            assert status == 200 and "/groups/leaving/delete" not in page
            assert "Only a group without members" in page
            status, page = request(url + "/groups/leaving/delete", form)
            assert status == 409 and "NON_EMPTY_GROUP" in page
        finally:
            c.close()
        assert "leaving" in groups(bootstrap)
        status, page = request(url + "/groups/leaving", method="GET")
        assert 'action="/groups/leaving/delete"' in page
        status, page = request(url + "/groups/leaving/delete", form)
        assert status == 200 and "Deleted group leaving" in page
        assert "leaving" not in groups(bootstrap)
        assert request(url + "/groups/leaving/delete", form)[0] == 404
