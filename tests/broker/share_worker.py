"""A share consumer in its own process, for the test that kills one mid-batch.

Usage: python tests/broker/share_worker.py BOOTSTRAP GROUP TOPIC [KEY=VALUE ...]
(the KEY=VALUE pairs are added to the consumer's settings)
Polls with explicit acknowledgement: the records of its first poll that returns any are
accepted and committed synchronously ("acked PARTITION OFFSET" each, then "committed" if
every acknowledgement was answered without error, else "commit failed"); the
records of the next such poll are printed ("held PARTITION OFFSET" each, then "holding")
and never acknowledged: the process then waits to be killed.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import ShareConsumer


def main(bootstrap: str, group: str, topic: str, *settings: str) -> None:
    c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "share.acknowledgement.mode": "explicit", "max.poll.records": 4,
                       **dict(s.split("=", 1) for s in settings)})
    c.subscribe([topic])
    polls = 0
    while polls < 2:
        msgs = [m for m in c.poll(0.5) if m.error() is None]
        if not msgs:
            continue
        polls += 1
        word = "acked" if polls == 1 else "held"
        for m in msgs:
            print(word, m.partition(), m.offset(), flush=True)
        if polls == 1:
            for m in msgs:
                c.acknowledge(m)
            results = c.commit_sync(10)
            ok = bool(results) and all(e is None for e in results.values())
            print("committed" if ok else "commit failed", flush=True)
    print("holding", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main(*sys.argv[1:])
