"""`ads transactions list | describe` against a broker with an open and a committed
transaction, and their errors."""

from __future__ import annotations

from confluent_kafka import Producer
from test_cli_groups import Cap, run, table

from conftest import create_topic


def test_cli_transactions_list_and_describe(bootstrap: str, capsys: Cap) -> None:
    create_topic(bootstrap, "cli-tx", 2)
    done = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-done"})
    done.init_transactions(15)
    done.begin_transaction()
    done.produce("cli-tx", value=b"x", partition=0)
    done.commit_transaction(15)
    open_ = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cli-open"})
    open_.init_transactions(15)
    open_.begin_transaction()
    open_.produce("cli-tx", value=b"y", partition=1)
    open_.flush(15)

    code, out, _ = run(capsys, "transactions", "list", "--bootstrap-server", bootstrap)
    rows = table(out)
    assert code == 0
    assert rows[0] == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "TRANSACTION-STATE"]
    assert [(r[0], r[3]) for r in rows[1:]] == [("cli-done", "CompleteCommit"),
                                                ("cli-open", "Ongoing")]
    code, out, _ = run(capsys, "transactions", "list", "--bootstrap-server", bootstrap,
                       "--state", "Ongoing")
    assert [r[0] for r in table(out)[1:]] == ["cli-open"]

    code, out, _ = run(capsys, "transactions", "describe", "--bootstrap-server", bootstrap,
                       "--transactional-id", "cli-open")
    header, row = table(out)
    described = dict(zip(header, row, strict=True))
    assert code == 0
    assert described["TRANSACTION-STATE"] == "Ongoing"
    assert described["TOPIC-PARTITIONS"] == "cli-tx-1"
    assert int(described["TRANSACTION-DURATION-MS"]) >= 0
    open_.abort_transaction(15)

    code, _, err = run(capsys, "transactions", "describe", "--bootstrap-server", bootstrap,
                       "--transactional-id", "nobody")
    assert code == 1 and "TRANSACTIONAL_ID_NOT_FOUND" in err
    code, _, err = run(capsys, "transactions", "list", "--bootstrap-server", bootstrap,
                       "--state", "Sleeping")
    assert code == 2 and "unknown state Sleeping" in err
