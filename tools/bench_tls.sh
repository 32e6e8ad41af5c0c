#!/usr/bin/env bash
# TLS's cost on the fetch path: one broker with a PLAINTEXT and an SSL listener, one topic
# written once, then `ads bench consume` reading it all over PLAINTEXT and over SSL,
# alternating, in one run. Prints each run's JSON and the broker's CPU time (user + system).
# Certificates are made with openssl in a temporary directory, removed at the end.
#
# Usage: tools/bench_tls.sh [RECORDS] [RECORD_SIZE] [ROUNDS]   (defaults 2000000 100 3)
set -euo pipefail
cd "$(dirname "$0")/.."
ADS=${ADS:-.venv/bin/ads}
RECORDS=${1:-2000000}
SIZE=${2:-100}
ROUNDS=${3:-3}
WORK=$(mktemp -d /tmp/ads-bench-tls.XXXXXX)
PLAIN=29290
TLS=29291

(
    cd "$WORK"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout ca.key -out ca.pem -days 1 -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout broker.key -out broker.csr -subj "/CN=localhost" 2>/dev/null
    echo "subjectAltName=DNS:localhost,IP:127.0.0.1" > san.ext
    openssl x509 -req -in broker.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
        -out broker.pem -days 1 -extfile san.ext 2>/dev/null
    cat broker.key broker.pem > broker-keystore.pem
    printf 'security.protocol=SSL\nssl.ca.location=%s/ca.pem\n' "$WORK" > ssl.properties
)
$ADS broker --data-dir "$WORK/data" \
    --set "listeners=PLAINTEXT://127.0.0.1:$PLAIN,SSL://127.0.0.1:$TLS" \
    --set ssl.keystore.type=PEM --set "ssl.keystore.location=$WORK/broker-keystore.pem" \
    > "$WORK/broker.log" 2>&1 &
BROKER=$!
cleanup() {
    kill "$BROKER" 2>/dev/null || true
    wait "$BROKER" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

for _ in $(seq 60); do
    $ADS topics create tls --partitions 1 --bootstrap-server 127.0.0.1:$PLAIN \
        >/dev/null 2>&1 && break
    sleep 0.5
done
$ADS bench produce --bootstrap-server 127.0.0.1:$PLAIN --topic tls --num-records "$RECORDS" \
    --record-size "$SIZE" --acks 1 --json | tail -1

cpu_ms() {
    echo $(( $(awk '{print $14 + $15}' "/proc/$BROKER/stat") * 1000 / $(getconf CLK_TCK) ))
}
for round in $(seq "$ROUNDS"); do
    for listener in PLAINTEXT SSL; do
        if [ "$listener" = SSL ]; then
            args=(--bootstrap-server 127.0.0.1:$TLS --command-config "$WORK/ssl.properties")
        else
            args=(--bootstrap-server 127.0.0.1:$PLAIN)
        fi
        before=$(cpu_ms)
        result=$($ADS bench consume "${args[@]}" --topic tls --num-records "$RECORDS" \
            --json | tail -1)
        after=$(cpu_ms)
        echo "round $round $listener broker_cpu_ms=$((after - before)) $result"
    done
done
