"""DescribeProducers, and `ads transactions find-hanging | abort` on a genuinely hanging
transaction: a producer SIGKILLed inside a transaction, then its coordinator's transaction
log lost, so no coordinator will ever end the transaction the partition holds open."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_transactions_confluent import _list_offsets, consume_all, describe, txn_producer
from test_transactions_other_clients import kafka_python_read

from ads.cli.main import main
from ads.protocol import messages as m
from broker_process import BrokerProcess
from conftest import create_topic
from kafka_wire import RawConnection

SETS = ("transaction.state.log.num.partitions=2", "offsets.topic.num.partitions=2")

# A transactional producer that writes one record and waits to be killed.
LOST_PRODUCER = """
import sys, time
from confluent_kafka import Producer
p = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": "hang-lost",
              "transaction.timeout.ms": 900000})
p.init_transactions(15)
p.begin_transaction()
p.produce("hang", value=b"lost-0", partition=0)
p.flush(15)
print("ready", flush=True)
time.sleep(120)
"""


Cap = pytest.CaptureFixture[str]


def run(capsys: Cap, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def node_id(bootstrap: str) -> int:
    with RawConnection(bootstrap) as conn:
        md = conn.request(m.ApiKey.METADATA, 9, m.MetadataRequest(topics=[]))
    return int(md.brokers[0].node_id)


def describe_producers(bootstrap: str) -> list[tuple[int, int, int, int]]:
    """(producer id, epoch, coordinator epoch, transaction start) of hang-0's producers."""
    DP = m.DescribeProducersRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.DESCRIBE_PRODUCERS, 0, DP(
            topics=[DP.TopicRequest(name="hang", partition_indexes=[0])]))
    part = resp.topics[0].partitions[0]
    assert part.error_code == 0
    return sorted((s.producer_id, s.producer_epoch, s.coordinator_epoch,
                   s.current_txn_start_offset) for s in part.active_producers)


def find_hanging(capsys: Cap, bootstrap: str, node: int) -> list[list[str]]:
    code, out, err = run(capsys, "transactions", "find-hanging", "--bootstrap-server",
                         bootstrap, "--broker-id", str(node), "--max-transaction-timeout", "0")
    assert code == 0, err
    rows = table(out)
    assert rows[0] == ["TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH",
                       "COORDINATOR-EPOCH", "START-OFFSET", "LAST-TIMESTAMP", "DURATION(MIN)"]
    return rows[1:]


@pytest.mark.broker_process
def test_transactions_hanging_found_and_aborted(tmp_path: Path, capsys: Cap) -> None:
    broker = BrokerProcess(tmp_path / "data", None, *SETS).start()
    lost: subprocess.Popen[bytes] | None = None
    try:
        bootstrap = broker.bootstrap
        node = node_id(bootstrap)
        create_topic(bootstrap, "hang", 1)
        ok = txn_producer(bootstrap, "hang-ok")
        ok.begin_transaction()
        for i in range(2):
            ok.produce("hang", value=f"before-{i}".encode(), partition=0)
        ok.commit_transaction(15)  # offsets 0-1, marker 2
        lost = subprocess.Popen([sys.executable, "-c", LOST_PRODUCER, bootstrap],  # noqa: S603
                                stdout=subprocess.PIPE)
        assert lost.stdout is not None and lost.stdout.readline() == b"ready\n"
        lost_state = describe(bootstrap, "hang-lost")
        assert lost_state.transaction_state == "Ongoing"
        lost.kill()
        lost.wait()
        producers = describe_producers(bootstrap)
        assert (lost_state.producer_id, lost_state.producer_epoch, -1, 3) in producers

        # Its coordinator still knows the transaction (and would abort it at its
        # timeout): it is not hanging.
        assert find_hanging(capsys, bootstrap, node) == []

        # The transaction log is lost: nobody will end the transaction any more.
        broker.kill9()
        for directory in (tmp_path / "data").glob("__transaction_state-*"):
            shutil.rmtree(directory)
        broker.start()
        after = txn_producer(bootstrap, "hang-after")
        after.begin_transaction()
        after.produce("hang", value=b"after-0", partition=0)
        after.commit_transaction(15)  # offset 4, marker 5: behind the hanging one
        assert _list_offsets(bootstrap, "hang", 1) == 3
        before = [b"before-0", b"before-1"]
        assert sorted(consume_all(bootstrap, "hang", 1, "read_committed", 2)) == before

        rows = find_hanging(capsys, bootstrap, node)
        assert [r[:6] for r in rows] == [["hang", "0", str(lost_state.producer_id),
                                          str(lost_state.producer_epoch), "-1", "3"]]
        code, _, err = run(capsys, "transactions", "find-hanging", "--bootstrap-server",
                           bootstrap, "--broker-id", str(node))
        assert code == 0 and table(_)[1:] == []  # younger than the default 15 minutes

        code, _, err = run(capsys, "transactions", "abort", "--bootstrap-server", bootstrap,
                           "--topic", "hang", "--partition", "0", "--start-offset", "4")
        assert code == 1 and "no open transaction starts at offset 4" in err
        code, out, err = run(capsys, "transactions", "abort", "--bootstrap-server", bootstrap,
                             "--topic", "hang", "--partition", "0", "--start-offset", "3")
        assert code == 0, err
        assert f"producer {lost_state.producer_id}" in out

        # The last stable offset moves past the ABORT marker (offset 6); read_committed
        # consumers go on and never see the aborted record.
        assert _list_offsets(bootstrap, "hang", 1) == 7
        expected = sorted([*before, b"after-0"])
        assert sorted(consume_all(bootstrap, "hang", 1, "read_committed", 3)) == expected
        assert sorted(kafka_python_read(bootstrap, "hang", 1, "read_committed")) == expected
        assert find_hanging(capsys, bootstrap, node) == []
        assert (lost_state.producer_id, lost_state.producer_epoch, 0, -1) in (
            describe_producers(bootstrap))
    finally:
        if lost is not None:
            if lost.poll() is None:
                lost.kill()
                lost.wait()
            if lost.stdout is not None:
                lost.stdout.close()
        if broker.proc is not None and broker.proc.poll() is None:
            broker.kill9()


def test_transactions_hanging_tools_bad_input(bootstrap: str, capsys: Cap) -> None:
    code, _, err = run(capsys, "transactions", "find-hanging", "--bootstrap-server", bootstrap)
    assert code == 2 and "--topic or --broker-id" in err
    code, _, err = run(capsys, "transactions", "find-hanging", "--bootstrap-server", bootstrap,
                       "--partition", "0")
    assert code == 2
    code, _, err = run(capsys, "transactions", "abort", "--bootstrap-server", bootstrap,
                       "--topic", "nowhere", "--partition", "0", "--start-offset", "0")
    assert code == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in err
    create_topic(bootstrap, "hang-usage", 1)
    code, _, err = run(capsys, "transactions", "abort", "--bootstrap-server", bootstrap,
                       "--topic", "hang-usage", "--partition", "0", "--producer-id", "5")
    assert code == 2 and "--producer-epoch" in err
    # DescribeProducers of a partition the broker does not have.
    DP = m.DescribeProducersRequest  # noqa: N806
    with RawConnection(bootstrap) as conn:
        resp = conn.request(m.ApiKey.DESCRIBE_PRODUCERS, 0, DP(
            topics=[DP.TopicRequest(name="hang-usage", partition_indexes=[0, 7])]))
    codes = [(p.partition_index, p.error_code) for p in resp.topics[0].partitions]
    assert codes == [(0, 0), (7, 3)]
