"""`ads top` on a real terminal: the command runs in a detached tmux session (Debian's tmux,
`make system-deps`) against a broker's /metrics while confluent-kafka produces, and the
screen tmux renders (`capture-pane -p`) shows the broker line and a non-zero records-in
rate on the topic's row."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from confluent_kafka import Producer

from ads.testing import EmbeddedBroker
from conftest import create_topic

TMUX = shutil.which("tmux")
ADS = Path(sys.executable).with_name("ads")


def tmux(socket: str, *args: str) -> str:
    assert TMUX, "`make system-deps` installs tmux"
    done = subprocess.run([TMUX, "-L", socket, *args], capture_output=True, text=True,
                          timeout=10, check=True)
    return done.stdout


def topic_rate(screen: str, topic: str) -> float | None:
    """The records-in rate on the topic's row of the screen, if the row is drawn."""
    for line in screen.splitlines():
        cells = [c.strip() for c in line.split("│")]
        if len(cells) > 2 and cells[1] == topic:
            try:
                return float(cells[2].replace(",", ""))
            except ValueError:
                return None
    return None


def test_cli_top_in_tmux_shows_the_topics_rate() -> None:
    socket = f"ads-top-test-{os.getpid()}"
    with EmbeddedBroker(config={"http.listener": "127.0.0.1:0"}) as b:
        assert b.broker is not None and b.broker.ops_http is not None
        url = "http://%s:%d" % b.broker.ops_http.address
        bootstrap = b.bootstrap_servers
        create_topic(bootstrap, "on-screen")
        stop = threading.Event()

        def produce() -> None:
            p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
            sent = 0
            while not stop.is_set() and sent < 100_000:
                for _ in range(20):
                    p.produce("on-screen", value=b"v%d" % sent)
                    sent += 1
                p.flush(5)
                time.sleep(0.05)
            assert p.flush(15) == 0

        producer = threading.Thread(target=produce)
        screen = ""
        try:
            tmux(socket, "new-session", "-d", "-s", "top", "-x", "160", "-y", "50",
                 str(ADS), "top", "--url", url, "--interval", "0.5")
            producer.start()
            deadline = time.monotonic() + 30
            rate = None
            while time.monotonic() < deadline:
                screen = tmux(socket, "capture-pane", "-p", "-t", "top")
                rate = topic_rate(screen, "on-screen")
                if rate:
                    break
                time.sleep(0.3)
            assert rate and rate > 0, f"no rate for the topic on the screen:\n{screen}"
            assert f"ADS {url}/metrics" in screen
            assert "records in/s" in screen and "consumer groups" in screen
        finally:
            stop.set()
            if producer.is_alive():
                producer.join(30)
            subprocess.run([TMUX or "tmux", "-L", socket, "kill-server"],
                           capture_output=True, timeout=10, check=False)
