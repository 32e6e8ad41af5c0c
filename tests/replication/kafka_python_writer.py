"""An idempotent acks=all kafka-python producer in its own process, for tests that kill
brokers under it (the library leaves refused connections' sockets to the garbage
collector, whose warnings would land in whatever test runs next).

Usage: python kafka_python_writer.py BOOTSTRAP TOPIC PARTITIONS
Writes "k-<n>" round-robin over the partitions until stdin closes, then flushes and prints
one "ack PARTITION OFFSET VALUE" or "error MESSAGE" line per record, then "sent N".
"""

from __future__ import annotations

import sys
import threading
import time

from kafka import KafkaProducer


def main() -> None:
    bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                             linger_ms=5, retries=2**31 - 1, delivery_timeout_ms=120000,
                             request_timeout_ms=10000, retry_backoff_ms=100)
    results: list[str] = []
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    sent = 0
    while not stop.is_set():
        value = f"k-{sent}"
        future = producer.send(topic, value=value.encode(), partition=sent % partitions)
        future.add_callback(lambda md, v=value: results.append(f"ack {md.partition} "
                                                               f"{md.offset} {v}"))
        future.add_errback(lambda exc: results.append(f"error {exc!r}"))
        sent += 1
        time.sleep(0.002)
    producer.flush(120)
    producer.close(30)
    print("\n".join(results), flush=True)
    print(f"sent {sent}", flush=True)


if __name__ == "__main__":
    main()
