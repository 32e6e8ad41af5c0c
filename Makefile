# ADS: `make run` starts a broker, `make test` installs what tests need and runs the suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.ads-installed
TEST_STAMP := $(VENV)/.ads-test-installed
COMPILED_STAMP := build/.ads-compiled
JS_STAMP := tests/js/node_modules/.ads-installed
KAFKA_REF_STAMP := tests/kafka_reference/target/.ads-installed
KAFKA_CONNECT_STAMP := tests/kafka_connect/target/.ads-installed
SPARK_KAFKA_STAMP := tests/spark_kafka/target/.ads-installed
SPARK_DELTA_STAMP := tools/spark_delta/target/.ads-installed
JAVA_STAMP := tests/java/target/.ads-built
JAVA_SOURCES := $(wildcard tests/java/src/main/java/ads/javaclients/*.java)
STREAMS_STAMP := tests/kafka_streams/target/.ads-built
STREAMS_SOURCES := $(wildcard tests/kafka_streams/src/main/java/ads/streams/*.java)

.PHONY: install compiler-deps spark-delta-jars run test test-pure test-deps system-deps lint fuzz chaos \
  clean

install: $(STAMP) $(COMPILED_STAMP) spark-delta-jars

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,compile]'
	touch $@

# The request path's hot modules, compiled with mypyc by the machine's C compiler into
# extensions beside their sources (git-ignored; docs/architecture.md, "Compiled modules").
# Without a compiler, or if mypyc fails, the tool says so and the sources serve; rebuilt
# only when one of these files changes. What each module gained: docs/benchmarks.md.
COMPILED := src/ads/net/server.py src/ads/net/regions.py \
  src/ads/protocol/codec.py src/ads/protocol/types.py \
  src/ads/broker/dispatch.py src/ads/broker/metrics.py \
  src/ads/broker/handlers/produce.py src/ads/broker/handlers/fetch.py \
  src/ads/replication/replica_manager.py src/ads/replication/partition.py \
  src/ads/replication/purgatory.py \
  src/ads/storage/local_log.py src/ads/records/batch.py
$(COMPILED_STAMP): $(COMPILED) tools/build_compiled.py Makefile | $(STAMP) compiler-deps
	$(PY) tools/build_compiled.py --stamp $@ $(COMPILED)

# What the build above needs, installed before it: a C compiler and the headers of the
# Python that runs ADS (Debian's pythonX.Y-dev; a Python built from source has its own).
compiler-deps: | $(STAMP)
	@{ command -v cc >/dev/null 2>&1 && $(PY) -c 'import os, sys, sysconfig; \
	  sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  DEV=$$($(PY) -c 'import sys; print("python%d.%d-dev" % sys.version_info[:2])'); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq gcc $$DEV; }

# Spark's Delta package for `ads pipeline table --writer spark`, prefetched into
# tools/spark_delta/target/jars (`--spark-jars` or ADS_SPARK_JARS name that folder; without
# it the job has Spark fetch the package by coordinates when it starts). The build matching
# the installed pyspark comes from ads.spark.delta_spark.DELTA_BUILDS; only what pyspark
# lacks is copied (tools/spark_delta/pom.xml). Skipped without Maven (`make test-deps`
# installs it); fetched again when the pom or pyproject.toml changes.
spark-delta-jars: | $(STAMP)
	@if command -v mvn >/dev/null 2>&1; then $(MAKE) --no-print-directory $(SPARK_DELTA_STAMP); \
	  else echo "no mvn: Spark's Delta package not prefetched (Spark fetches it itself)"; fi

$(SPARK_DELTA_STAMP): tools/spark_delta/pom.xml pyproject.toml | $(STAMP)
	rm -rf tools/spark_delta/target/jars
	build=$$($(PY) -c 'import pyspark; from ads.spark.delta_spark import delta_coordinates as c; _, a, v = c(pyspark.__version__); print(f"-Ddelta.artifact={a} -Ddelta.version={v}")') && \
	  cd tools/spark_delta && mvn -q -B dependency:copy-dependencies $$build \
	  -DincludeScope=runtime -DoutputDirectory=target/jars
	touch $@

run: install
	@echo "ADS console and metrics: http://127.0.0.1:9644/ (Prometheus: /metrics)"
	$(VENV)/bin/ads broker --data-dir ./data --host 127.0.0.1 --port 9092 \
	  --set http.listener=127.0.0.1:9644

test-deps: install $(TEST_STAMP) system-deps $(JS_STAMP) $(KAFKA_REF_STAMP) \
  $(KAFKA_CONNECT_STAMP) $(SPARK_KAFKA_STAMP) $(SPARK_DELTA_STAMP) $(JAVA_STAMP) \
  $(STREAMS_STAMP)

$(TEST_STAMP): pyproject.toml
	$(PY) -m pip install -q -e '.[test]'
	touch $@

# kafkajs, the Node.js client the tests drive (tests/js/package.json pins its version).
$(JS_STAMP): tests/js/package.json | system-deps
	cd tests/js && npm install --no-audit --no-fund --loglevel=error
	touch $@

# Apache Kafka's broker, the reference the tests in tests/reference compare ADS with, and
# its command-line tools (tests/kafka_tools): their jars and runtime dependencies by Maven
# coordinates (tests/kafka_reference/pom.xml), resolved by mvn (its local repository,
# ~/.m2, caches them) and copied into target/jars; fetched again only when the pom changes.
$(KAFKA_REF_STAMP): tests/kafka_reference/pom.xml | system-deps
	rm -rf tests/kafka_reference/target/jars
	cd tests/kafka_reference && mvn -q -B dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=target/jars
	touch $@

# Kafka Connect's runtime and FileStream connectors (tests/kafka_connect/pom.xml), the same
# way, for tests/kafka_tools/test_kafka_connect.py.
$(KAFKA_CONNECT_STAMP): tests/kafka_connect/pom.xml | system-deps
	rm -rf tests/kafka_connect/target/jars
	cd tests/kafka_connect && mvn -q -B dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=target/jars
	touch $@

# Spark's own Kafka connector (spark-sql-kafka-0-10) with kafka-clients and the rest of what
# it needs beside pyspark's jars (tests/spark_kafka/pom.xml), the same way: the Spark tests
# pass them to their sessions with spark.jars (docs/spark.md).
$(SPARK_KAFKA_STAMP): tests/spark_kafka/pom.xml | system-deps
	rm -rf tests/spark_kafka/target/jars
	cd tests/spark_kafka && mvn -q -B dependency:copy-dependencies \
	  -DincludeScope=runtime -DoutputDirectory=target/jars
	touch $@

# The Java programs that drive Apache Kafka's own client (tests/java/pom.xml pins
# kafka-clients 4.4.0; the kafka-3 profile builds the same sources against 3.9.1), compiled
# with their dependency jars into tests/java/target/kafka-<version>/ (docs/java-clients.md).
$(JAVA_STAMP): tests/java/pom.xml $(JAVA_SOURCES) | system-deps
	cd tests/java && mvn -q -B compile && mvn -q -B -Pkafka-3 compile
	touch $@

# The Kafka Streams application (tests/kafka_streams/pom.xml pins kafka-streams 4.4.0, which
# brings RocksDB's JNI library), compiled with its dependency jars into
# tests/kafka_streams/target/{classes,lib} (docs/java-clients.md, "Kafka Streams").
$(STREAMS_STAMP): tests/kafka_streams/pom.xml $(STREAMS_SOURCES) | system-deps
	cd tests/kafka_streams && mvn -q -B compile
	touch $@

# Debian packages the tests drive: kcat (librdkafka's command-line client), a Java runtime
# for Spark and for Apache Kafka's reference broker, a Java compiler and Maven (the Java
# client programs, and fetching that broker), zookeeper (the offset import from ZooKeeper is
# tested against a real server), Node.js with npm for kafkajs, chromium with its
# chromedriver (the console is tested in a headless browser), tmux (`ads top` is tested on
# a terminal tmux renders), and openssl (TLS tests make short-lived certificates with it).
system-deps:
	@command -v openssl >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openssl; }
	@command -v kcat >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq kcat; }
	@command -v java >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jre-headless; }
	@{ command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq openjdk-17-jdk-headless maven; }
	@test -f /usr/share/zookeeper/bin/zkServer.sh || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq zookeeper; }
	@{ command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm; }
	@{ command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; } || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium chromium-driver; }
	@command -v tmux >/dev/null 2>&1 || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq tmux; }

lint: test-deps
	$(VENV)/bin/ruff check src tests
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# pytest runs on TEST_WORKERS pytest-xdist workers (default 3: on this 2-core machine the
# suite waits more than it computes), whole files per worker, the longest first, never two
# Spark files at once (tests/file_lanes.py, docs/testing.md); TEST_WORKERS=1 runs it in
# one process. The slowest tests are listed at the end.
TEST_WORKERS ?= 3
PYTEST_WORKERS := $(if $(filter-out 1,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadfile,-p no:xdist)
test: test-deps
	$(PY) tools/build_compiled.py --verify $(COMPILED)
	$(VENV)/bin/ruff check src tests tools
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(PY) -m pytest -q $(PYTEST_WORKERS) --durations=25
	$(MAKE) test-pure

# The sources of the compiled modules, run as they are (ADS_PURE_PYTHON=1): the codec,
# records and storage tests, and a broker process (kill -9 under a confluent-kafka
# producer, then a consumer reads back everything acknowledged). `make test` runs the rest
# of the suite on the compiled modules only.
test-pure: test-deps
	ADS_PURE_PYTHON=1 $(PY) -m pytest -q tests/protocol tests/records tests/storage \
	  tests/common/test_compiled_modules.py \
	  tests/broker/test_restart.py::test_restart_kill9_during_produce_keeps_acknowledged

# The fuzz properties with many more examples than `make test` runs (ADS_FUZZ_EXAMPLES,
# default 5000 per property; docs/security.md, "Hostile input").
fuzz: test-deps
	tools/fuzz.sh

# The exactly-once chaos scenario of the suite (tests/chaos/, docs/chaos.md) with DURATION
# seconds of faults instead of 120: the report is written to chaos-results/chaos-report.txt
# and printed, the brokers' data and logs are kept in chaos-results/run, the client
# library's log in chaos-results/clients.log (CLIENT_DEBUG=eos,protocol adds librdkafka's
# debug contexts for the transactional clients). SEED=N makes the same choice of fault
# targets as the run whose report names that seed.
DURATION ?= 600
SEED ?=
CLIENT_DEBUG ?=
chaos: test-deps
	rm -rf chaos-results
	mkdir -p chaos-results
	ADS_CHAOS_DURATION_S=$(DURATION) ADS_CHAOS_SEED=$(SEED) ADS_CHAOS_REPORT_DIR=chaos-results \
	  ADS_CHAOS_CLIENT_DEBUG=$(CLIENT_DEBUG) $(PY) -m pytest -q -s \
	  tests/chaos/test_chaos_exactly_once.py --basetemp=chaos-results/run \
	  2> chaos-results/clients.log; \
	  status=$$?; cat chaos-results/chaos-report.txt 2>/dev/null; exit $$status

clean:
	find src -name '*.so' -delete
	rm -f src/ads/compiled.txt
	rm -rf $(VENV) build data bench-results chaos-results tests/js/node_modules \
	  tests/kafka_reference/target tests/kafka_connect/target tests/spark_kafka/target \
	  tools/spark_delta/target \
	  tests/java/target tests/kafka_streams/target
