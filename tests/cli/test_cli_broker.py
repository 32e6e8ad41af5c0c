"""`ads broker`: config errors stop start-up with exit status 2; the start line and the
clean stop are logged."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from broker_process import free_port

# Every test here runs `ads broker` in a subprocess, some only to see it refuse to start.
pytestmark = pytest.mark.broker_process


def _ads(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ads.cli.main", *args], capture_output=True,
                          text=True, timeout=30, check=False)


@pytest.mark.parametrize("bad", ["log.segment.bytes=abc", "num.partitions=0",
                                 "log.message.timestamp.type=Sometimes", "nonsense",
                                 "gc.full.collection.interval.ms=0", "gc.freeze.enable=maybe"])
def test_cli_broker_invalid_config_exits_2(tmp_path: Path, bad: str) -> None:
    done = _ads("broker", "--data-dir", str(tmp_path), "--port", "0", "--set", bad)
    assert done.returncode == 2
    assert done.stderr.count("\n") <= 2 and "Traceback" not in done.stderr
    key = bad.split("=")[0]
    assert key in done.stderr


def test_cli_broker_invalid_config_file_exits_2(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("# a Kafka server.properties\nlog.retention.hours=forever\n")
    done = _ads("broker", "--config", str(props), "--data-dir", str(tmp_path / "d"))
    assert done.returncode == 2
    assert "log.retention.hours" in done.stderr


@pytest.mark.parametrize("sets, key", [
    (["inter.broker.listener.name=INTERNAL"], "inter.broker.listener.name"),
    (["inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"],
     "inter.broker.listener.name"),
])
def test_cli_broker_bad_inter_broker_listener_exits_2(tmp_path: Path, sets: list[str],
                                                      key: str) -> None:
    args = ["broker", "--data-dir", str(tmp_path), "--port", "0"]
    for s in sets:
        args += ["--set", s]
    done = _ads(*args)
    assert done.returncode == 2, done.stderr
    assert key in done.stderr and "Traceback" not in done.stderr


def test_cli_broker_config_file_flags_and_set(tmp_path: Path) -> None:
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=3\nsome.unknown.key=1\nlog.dirs=/nonexistent/ignored\n")
    data = tmp_path / "data"
    port = free_port()
    # --data-dir (a flag) beats the file's log.dirs; --set beats the file's num.partitions.
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "ads.cli.main", "broker", "--config", str(props),
         "--data-dir", str(data), "--port", str(port), "--set", "num.partitions=5"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    bootstrap = f"127.0.0.1:{port}"
    try:
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("auto-created", b"x")
        assert producer.flush(20) == 0
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics("auto-created", timeout=10)
        assert len(md.topics["auto-created"].partitions) == 5
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert "some.unknown.key" in out and "WARNING" in out
    assert f"listening on 127.0.0.1:{port}" in out and str(data) in out
    assert "stopped cleanly" in out
    assert not Path("/nonexistent/ignored").exists()


@pytest.mark.parametrize("sets, key", [
    (["ssl.keystore.type=PEM", "ssl.keystore.location=/nonexistent/broker.pem"],
     "ssl.keystore.location"),
    ([], "ssl.keystore.location"),  # an SSL listener without a key store
    (["ssl.keystore.location=KEYSTORE"], "ssl.keystore.type"),  # JKS is not read
    (["ssl.keystore.type=PEM", "ssl.keystore.location=ENCRYPTED", "ssl.key.password=wrong"],
     "ssl.keystore.location"),
    (["ssl.keystore.type=PEM", "ssl.keystore.location=KEYSTORE", "ssl.client.auth=required",
      "ssl.truststore.type=PEM", "ssl.truststore.location=BROKER_KEY"],
     "ssl.truststore.location"),  # a key is no certificate
    (["ssl.keystore.type=PEM", "ssl.keystore.location=KEYSTORE",
      "ssl.principal.mapping.rules=RULE:^CN=(.*)$/$1/X"], "ssl.principal.mapping.rules"),
    (["listener.name.ssl.ssl.keystore.type=PEM",
      "listener.name.ssl.ssl.keystore.location=/nonexistent/ssl.pem"],
     "ssl.keystore.location"),
])
def test_cli_broker_bad_tls_settings_exit_2(tmp_path: Path, sets: list[str], key: str) -> None:
    from tls_support import make_pki  # noqa: PLC0415 - openssl only where needed

    pki = make_pki(tmp_path / "pki")
    sets = [s.replace("KEYSTORE", str(pki.broker_keystore))
            .replace("BROKER_KEY", str(pki.broker_key))
            .replace("ENCRYPTED", str(pki.broker_encrypted_keystore)) for s in sets]
    args = ["broker", "--data-dir", str(tmp_path / "d"), "--set",
            f"listeners=PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:0"]
    for s in sets:
        args += ["--set", s]
    done = _ads(*args)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert key in done.stderr and "listener SSL" in done.stderr
