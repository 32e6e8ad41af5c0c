#!/usr/bin/env bash
# Replication's cost: one producer, 100-byte records, acks=all, against a topic with
# replication factor 3 (min.insync.replicas=2) on `ads cluster up --brokers 3`, and the same
# producer against a replication-factor-1 topic on one broker, alternating, in one run.
# Prints each run's `ads bench produce` JSON and the brokers' CPU time (user + system).
#
# Usage: tools/bench_replication.sh [RECORDS] [ROUNDS]   (defaults 2000000 and 3)
set -euo pipefail
cd "$(dirname "$0")/.."
ADS=${ADS:-.venv/bin/ads}
RECORDS=${1:-2000000}
ROUNDS=${2:-3}
WORK=$(mktemp -d /tmp/ads-bench-replication.XXXXXX)
CLUSTER_PORT=29091
SINGLE_PORT=29190

$ADS cluster up --brokers 3 --data-dir "$WORK/cluster" --base-port $CLUSTER_PORT \
    --zookeeper-port 29181 > "$WORK/cluster.log" 2>&1 &
UP=$!
$ADS broker --data-dir "$WORK/single" --port $SINGLE_PORT > "$WORK/single.log" 2>&1 &
SINGLE=$!
cleanup() {
    kill "$UP" "$SINGLE" 2>/dev/null || true
    wait "$UP" "$SINGLE" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

CLUSTER=127.0.0.1:$CLUSTER_PORT,127.0.0.1:$((CLUSTER_PORT + 1)),127.0.0.1:$((CLUSTER_PORT + 2))
for _ in $(seq 60); do
    $ADS topics create r3 --partitions 3 --replication-factor 3 \
        --config min.insync.replicas=2 --bootstrap-server "$CLUSTER" >/dev/null 2>&1 && break
    sleep 1
done
for _ in $(seq 60); do
    $ADS topics create r1 --partitions 3 --replication-factor 1 \
        --bootstrap-server 127.0.0.1:$SINGLE_PORT >/dev/null 2>&1 && break
    sleep 1
done
sleep 3  # the followers join the ISRs

cpu_ms() {  # user + system time of the given processes, in ms
    local total=0 pid
    for pid in "$@"; do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo $((total * 1000 / $(getconf CLK_TCK)))
}
BROKERS=$(pgrep -P "$UP" -f "ads.cli.main broker|ads broker" | tr '\n' ' ')

for round in $(seq "$ROUNDS"); do
    for target in single cluster; do
        if [ "$target" = single ]; then
            bootstrap=127.0.0.1:$SINGLE_PORT; topic=r1; pids=$SINGLE
        else
            bootstrap=$CLUSTER; topic=r3; pids=$BROKERS
        fi
        before=$(cpu_ms $pids)
        result=$($ADS bench produce --bootstrap-server "$bootstrap" --topic $topic \
            --num-records "$RECORDS" --record-size 100 --acks all --json | tail -1)
        after=$(cpu_ms $pids)
        echo "round $round $target broker_cpu_ms=$((after - before)) $result"
    done
done
