"""`ads users create | delete | list` against a SASL_PLAINTEXT broker, authenticated as the
PLAIN admin through --command-config; the users it makes log in with SCRAM."""

from __future__ import annotations

import io
import time
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from test_cli_groups import Cap, run, table

from sasl_support import PLAIN_USERS, confluent_conf, sasl_broker


def _logs_in(bootstrap: str, mechanism: str, user: str, password: str) -> bool:
    """Whether a producer logging in so gets a record written; False as soon as the
    broker refuses its authentication (librdkafka reports it through `error_cb`)."""
    refused: list[KafkaError] = []
    conf = confluent_conf(bootstrap, mechanism, user, password)
    conf["error_cb"] = lambda e: refused.append(e) if (
        e.code() == KafkaError._AUTHENTICATION) else None
    producer = Producer(conf)
    producer.produce("cli-users", b"x")
    deadline = time.monotonic() + 10
    while not refused and time.monotonic() < deadline:
        if producer.flush(0.2) == 0:
            return True
    return False


def test_cli_users_create_list_delete(tmp_path: Path, capsys: Cap,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      f"sasl.username=admin\nsasl.password={PLAIN_USERS['admin']}\n")
    with sasl_broker() as broker:
        bootstrap = broker.bootstrap_servers
        common = ("--bootstrap-server", bootstrap, "--command-config", str(config))
        code, out, err = run(capsys, "users", "create", "--user", "dave", "--password",
                             "dave-pw", "--iterations", "8192", *common)
        assert code == 0, err
        assert "SCRAM-SHA-256, SCRAM-SHA-512 credentials of user 'dave'" in out
        monkeypatch.setattr("sys.stdin", io.StringIO("erin-pw\n"))
        code, _, err = run(capsys, "users", "create", "--user", "erin", "--mechanism",
                           "SCRAM-SHA-512", *common)
        assert code == 0, err
        code, out, _ = run(capsys, "users", "list", *common)
        assert table(out) == [["USER", "MECHANISM", "ITERATIONS"],
                              ["dave", "SCRAM-SHA-256", "8192"],
                              ["dave", "SCRAM-SHA-512", "8192"],
                              ["erin", "SCRAM-SHA-512", "4096"]]
        assert _logs_in(bootstrap, "SCRAM-SHA-256", "dave", "dave-pw")
        assert _logs_in(bootstrap, "SCRAM-SHA-512", "erin", "erin-pw")
        assert not _logs_in(bootstrap, "SCRAM-SHA-256", "erin", "erin-pw")

        code, out, err = run(capsys, "users", "delete", "--user", "dave", "--mechanism",
                             "SCRAM-SHA-256", *common)
        assert code == 0, err
        assert not _logs_in(bootstrap, "SCRAM-SHA-256", "dave", "dave-pw")
        assert _logs_in(bootstrap, "SCRAM-SHA-512", "dave", "dave-pw")
        code, _, err = run(capsys, "users", "delete", "--user", "erin", *common)
        assert code == 0, err
        code, out, _ = run(capsys, "users", "list", "--user", "dave", *common)
        assert table(out)[1:] == [["dave", "SCRAM-SHA-512", "8192"]]

        # the broker's refusals, in Kafka's words
        code, _, err = run(capsys, "users", "create", "--user", "x", "--password", "p",
                           "--iterations", "1000", *common)
        assert code == 1
        assert "Too few iterations" in err
        code, _, err = run(capsys, "users", "delete", "--user", "dave", "--mechanism",
                           "SCRAM-SHA-256", *common)
        assert code == 1
        assert "Attempt to delete a user credential that does not exist" in err
        code, _, err = run(capsys, "users", "list", "--user", "nobody", *common)
        assert code == 1
        assert "Attempt to describe a user credential that does not exist: nobody" in err
        # without the admin's credentials the SASL listener does not answer
        code, _, err = run(capsys, "users", "list", "--bootstrap-server", bootstrap)
        assert code == 1
