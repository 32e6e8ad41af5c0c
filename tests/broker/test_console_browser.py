"""The web console in Debian's headless Chromium, driven by selenium through chromedriver:
the topics page lists a created topic, the group page shows the lag a workload left, the
overview's plot and tables update without a reload, and a record holding HTML is shown as
text; read-only by default, with `console.read.only=false` a topic deleted with the topic
page's button is gone for a confluent-kafka AdminClient. A screenshot of each page visited
is kept in the test's temporary directory (pytest keeps the last runs' directories)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select

from ads.testing import EmbeddedBroker
from conftest import create_topic, topic_with_telling_id

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
HOSTILE = b'<script>window.__injected = 1</script><img src=x onerror="window.__injected=2">'


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    assert CHROMIUM and CHROMEDRIVER, "`make system-deps` installs chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(check: Callable[[], object], what: str, timeout_s: float = 30) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = check()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def screenshot(browser: webdriver.Chrome, directory: Path, name: str) -> None:
    """Keeps the page as `directory/name.png`, a test artifact."""
    path = directory / f"{name}.png"
    assert browser.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v, key=b"key")
    assert p.flush(15) == 0


def commit_after(bootstrap: str, topic: str, group: str, offset: int) -> None:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    deadline = time.monotonic() + 30
    seen = 0
    while seen < offset and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    assert seen >= offset
    c.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    c.close()


def test_console_in_chromium(browser: webdriver.Chrome, tmp_path: Path) -> None:
    config = {"http.listener": "127.0.0.1:0", "console.sample.interval.ms": "300"}
    with EmbeddedBroker(config=config) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        host, port = b.broker.ops_http.address
        url = f"http://{host}:{port}"
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "browsed")
        produce(bootstrap, "browsed", [HOSTILE] + [b"record-%d" % i for i in range(49)])
        commit_after(bootstrap, "browsed", "console-group", 20)

        browser.get(url + "/topics")
        row = browser.find_element(By.XPATH, "//table[@class='topics']//tr[td/a='browsed']")
        assert row.find_elements(By.TAG_NAME, "td")[4].text == "50"  # its high watermark
        screenshot(browser, tmp_path, "topics")

        browser.get(url + "/topics/browsed")
        assert browser.find_element(By.TAG_NAME, "h1").text == "Topic browsed"
        assert not browser.find_elements(By.CSS_SELECTOR, "form.danger")  # read-only
        refused = browser.execute_script(
            "return fetch('/topics/browsed/delete', {method: 'POST', headers: "
            "{'Content-Type': 'application/x-www-form-urlencoded'}, body: 'csrf_token=x'})"
            ".then(r => r.status)")
        assert refused == 403
        screenshot(browser, tmp_path, "topic")

        browser.get(url + "/groups/console-group")
        assert browser.find_element(By.ID, "total-lag").text == "30"
        screenshot(browser, tmp_path, "group")

        browser.get(url + "/topics/browsed/messages?partition=0&offset=0&count=5")
        first_value = browser.find_element(
            By.XPATH, "//table[@class='messages']/tbody/tr[1]/td[4]").text
        assert first_value == HOSTILE.decode()  # shown as text, not run
        assert browser.execute_script("return window.__injected === undefined")
        screenshot(browser, tmp_path, "messages")

        browser.get(url + "/")
        browser.execute_script("window.__sameDocument = true")

        def points() -> int:
            return int(browser.execute_script(
                "var e = document.getElementById('rates-plot');"
                "return e && e.dataset.points ? e.dataset.points : 0") or 0)

        drawn = wait_for(points, "the rates plot to draw points")
        assert browser.find_elements(By.CSS_SELECTOR, "#rates-plot canvas")
        produce(bootstrap, "browsed", [b"more-%d" % i for i in range(10)])
        wait_for(lambda: points() > int(drawn), "the plot to take new samples")  # type: ignore[call-overload]
        lag_cell = "//table[@class='groups']//tr[td/a='console-group']/td[3]"
        wait_for(lambda: browser.find_element(By.XPATH, lag_cell).text == "40",
                 "the overview's lag to follow the new records")
        # The non-zero rate the plot got came from the samples the page fetched itself.
        rates = browser.execute_script(
            "return fetch('/api/series').then(r => r.json()).then(s => s.messages_in)")
        assert max(rates) > 0
        assert browser.execute_script("return window.__sameDocument === true"), \
            "the page was reloaded"
        screenshot(browser, tmp_path, "overview")


def test_console_in_chromium_deletes_a_topic(browser: webdriver.Chrome, tmp_path: Path) -> None:
    config = {"http.listener": "127.0.0.1:0", "console.read.only": "false"}
    with EmbeddedBroker(config=config) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "unwanted")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        assert "unwanted" in admin.list_topics(timeout=10).topics

        browser.get(url + "/topics/unwanted")
        screenshot(browser, tmp_path, "topic-with-delete")

        def click_delete() -> bool:
            # The page refreshes its <main> every two seconds: find the button afresh.
            try:
                browser.find_element(By.CSS_SELECTOR, "form.danger button").click()
                return True
            except StaleElementReferenceException:
                return False

        wait_for(click_delete, "the delete button to take a click", 10)
        wait_for(lambda: EC.alert_is_present()(browser), "the confirmation", 10)
        browser.switch_to.alert.accept()
        wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, "p.notice"),
                 "the deletion's answer")
        assert browser.find_element(By.CSS_SELECTOR, "p.notice").text == \
            "Deleted topic unwanted."
        screenshot(browser, tmp_path, "topic-deleted")
        assert "unwanted" not in admin.list_topics(timeout=10).topics
        browser.get(url + "/topics")
        assert not browser.find_elements(
            By.XPATH, "//table[@class='topics']//tr[td/a='unwanted']")
        screenshot(browser, tmp_path, "topics-after-delete")


def test_console_in_chromium_shows_kafka_topic_id(browser: webdriver.Chrome,
                                                  tmp_path: Path) -> None:
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        name, topic_id = topic_with_telling_id(b, "ids")
        browser.get(f"{url}/topics/{name}")
        assert browser.find_element(By.CSS_SELECTOR, "h1 + p.muted").text == f"id {topic_id}"
        screenshot(browser, tmp_path, "topic-id")


def test_console_in_chromium_messages_by_isolation_level(browser: webdriver.Chrome,
                                                         tmp_path: Path) -> None:
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "txns")
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "console-tx"})
        p.init_transactions(30)
        for values, commit in (([b"kept-0", b"kept-1", b"kept-2"], True),
                               ([b"dropped-0", b"dropped-1"], False)):
            p.begin_transaction()
            for v in values:
                p.produce("txns", v)
            assert p.flush(30) == 0  # written, so that the abort has records to abort
            if commit:
                p.commit_transaction(30)
            else:
                p.abort_transaction(30)
        produce(bootstrap, "txns", [b"plain"])

        def table() -> list[tuple[str, str, str]]:
            rows = browser.find_elements(By.XPATH, "//table[@class='messages']/tbody/tr")
            cells = [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in rows]
            return [(c[0], c[3], c[5]) for c in cells]

        browser.get(f"{url}/topics/txns/messages?partition=0")
        assert table() == [("0", "kept-0", ""), ("1", "kept-1", ""), ("2", "kept-2", ""),
                           ("7", "plain", "")]
        summary = browser.find_element(By.ID, "messages-summary").text
        assert "read_committed" in summary and "aborted transactions" in summary
        screenshot(browser, tmp_path, "messages-read-committed")

        Select(browser.find_element(By.NAME, "isolation")).select_by_value("read_uncommitted")
        browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
        wait_for(lambda: "isolation=read_uncommitted" in browser.current_url,
                 "the page for read_uncommitted")
        rows = table()
        assert [(o, m) for o, _, m in rows] == [
            ("0", ""), ("1", ""), ("2", ""), ("3", "COMMIT marker"), ("4", "aborted"),
            ("5", "aborted"), ("6", "ABORT marker"), ("7", "")]
        assert [v for o, v, _ in rows if o in ("4", "5")] == ["dropped-0", "dropped-1"]
        assert "read_uncommitted" in browser.find_element(By.ID, "messages-summary").text
        screenshot(browser, tmp_path, "messages-read-uncommitted")


def test_console_in_chromium_empty_group_says_since_when(browser: webdriver.Chrome,
                                                         tmp_path: Path) -> None:
    config = {"http.listener": "127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}
    with EmbeddedBroker(config=config) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "left")
        produce(bootstrap, "left", [b"r-%d" % i for i in range(12)])
        commit_after(bootstrap, "left", "gone-home", 5)  # joins, commits, leaves
        left_at = datetime.now(timezone.utc)

        browser.get(url + "/groups/gone-home")
        text = browser.find_element(By.ID, "group-empty").text
        assert text.startswith("The group has no members: it is empty since ")
        assert text.endswith("; its committed offsets and their lag are below.")
        since = datetime.fromisoformat(browser.find_element(
            By.CSS_SELECTOR, "#group-empty time").get_attribute("datetime") or "")
        assert abs((since - left_at).total_seconds()) < 30
        offsets = browser.find_elements(By.XPATH, "//table[@class='offsets']/tbody/tr")
        assert [[td.text for td in r.find_elements(By.TAG_NAME, "td")] for r in offsets] == [
            ["left", "0", "5", "12", "7"]]
        assert browser.find_element(By.ID, "total-lag").text == "7"
        screenshot(browser, tmp_path, "group-empty")


def test_console_in_chromium_lag_plot_folds_groups(browser: webdriver.Chrome,
                                                   tmp_path: Path) -> None:
    config = {"http.listener": "127.0.0.1:0", "console.sample.interval.ms": "300"}
    with EmbeddedBroker(config=config) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "lagged")
        produce(bootstrap, "lagged", [b"r-%d" % i for i in range(100)])
        for n in range(12):  # group g-NN lags 5 * (NN + 1) records
            c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{n:02d}",
                          "enable.auto.commit": False})
            c.commit(offsets=[TopicPartition("lagged", 0, 100 - 5 * (n + 1))],
                     asynchronous=False)
            c.close()

        def series() -> list[str]:
            text = browser.execute_script(
                "var e = document.getElementById('lag-plot');"
                "return e && e.dataset.series ? e.dataset.series : ''")
            return str(text).split("\n") if text else []

        def legend() -> list[str]:
            labels = browser.find_elements(By.CSS_SELECTOR, "#lag-plot .u-legend .u-label")
            return [label.text for label in labels][1:]  # the first is the time axis

        top = ["g-11", "g-10", "g-09", "g-08", "g-07"]
        browser.get(url + "/")
        wait_for(lambda: series() == [*top, "other 7 groups (sum)"], "the top five and the rest")
        assert legend() == [*top, "other 7 groups (sum)"]
        screenshot(browser, tmp_path, "lag-top")

        browser.find_element(By.CSS_SELECTOR, "#lag-pick summary").click()
        boxes = browser.find_elements(By.CSS_SELECTOR, "#lag-pick input[type=checkbox]")
        assert [box.get_attribute("value") for box in boxes] == [
            f"g-{n:02d}" for n in range(11, -1, -1)]
        assert [box.is_selected() for box in boxes] == [True] * 5 + [False] * 7
        browser.find_element(By.CSS_SELECTOR, "#lag-pick input[value='g-00']").click()
        wait_for(lambda: series() == [*top, "g-00", "other 6 groups (sum)"],
                 "the group picked by hand")
        assert legend() == [*top, "g-00", "other 6 groups (sum)"]
        screenshot(browser, tmp_path, "lag-picked")

        browser.find_element(By.CSS_SELECTOR, "#lag-pick button.top").click()
        wait_for(lambda: series() == [*top, "other 7 groups (sum)"], "the top five again")
