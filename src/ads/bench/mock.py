"""librdkafka's in-memory mock cluster as a broker to compare against.

The mock lives inside a librdkafka client handle: a handle configured with
`test.mock.num.brokers` starts that many mock brokers on loopback ports in its own threads.
`python -m ads.bench.mock` runs such a handle in a helper process, so the mock's CPU time and
memory are that process's and can be sampled like the ADS broker's. The handle is made
through the C API of the librdkafka that confluent-kafka ships, because only the C API can
pre-create topics (the mock does not implement CreateTopics) and name the bootstrap address.

Helper protocol (lines on stdin/stdout): the helper prints `bootstrap HOST:PORT` once the
mock listens; `create TOPIC PARTITIONS` answers `ok` or `error <text>`; end of input stops it.

Known limits of the mock, which the suite sizes its workloads around: it keeps about 5 MiB
or 100,000 batches per partition (older batches are dropped), returns at most one batch per
partition per fetch, and auto-creates topics it is asked about.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from ads.bench.processes import await_metadata

_PRODUCER = 0
_ERRSTR = 512


class MockError(Exception):
    """The mock cluster could not be started or refused a command."""


def _library_path() -> str:
    """The librdkafka bundled with confluent-kafka (else one installed on the system)."""
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is not None and spec.origin is not None:
        libs = Path(spec.origin).parent.parent / "confluent_kafka.libs"
        found = sorted(libs.glob("librdkafka*.so*"))
        if found:
            return str(found[0])
    name = ctypes.util.find_library("rdkafka")
    if name is None:
        raise MockError("librdkafka not found (confluent-kafka's bundled copy or the system's)")
    return name


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(_library_path())
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_conf_set.restype = ctypes.c_int
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_handle_mock_cluster.argtypes = [vp]
    lib.rd_kafka_handle_mock_cluster.restype = vp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_topic_create.restype = ctypes.c_int
    lib.rd_kafka_err2str.argtypes = [ctypes.c_int]
    lib.rd_kafka_err2str.restype = cp
    lib.rd_kafka_destroy.argtypes = [vp]
    return lib


class _Cluster:
    """The mock cluster inside this process (the helper's side)."""

    def __init__(self, num_brokers: int) -> None:
        self._lib = _load()
        conf = self._lib.rd_kafka_conf_new()
        err = ctypes.create_string_buffer(_ERRSTR)
        for key, value in (("test.mock.num.brokers", str(num_brokers)),
                           ("log_level", "3")):
            if self._lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), err, _ERRSTR):
                raise MockError(err.value.decode(errors="replace"))
        self._rk = self._lib.rd_kafka_new(_PRODUCER, conf, err, _ERRSTR)
        if not self._rk:
            raise MockError(err.value.decode(errors="replace"))
        self._mcluster = self._lib.rd_kafka_handle_mock_cluster(self._rk)
        if not self._mcluster:
            raise MockError("the client handle started no mock cluster")

    @property
    def bootstrap(self) -> str:
        raw: bytes = self._lib.rd_kafka_mock_cluster_bootstraps(self._mcluster)
        return raw.decode()

    def create_topic(self, name: str, partitions: int) -> None:
        code = self._lib.rd_kafka_mock_topic_create(self._mcluster, name.encode(), partitions, 1)
        if code:
            raise MockError(self._lib.rd_kafka_err2str(code).decode(errors="replace"))

    def close(self) -> None:
        self._lib.rd_kafka_destroy(self._rk)


def serve(num_brokers: int = 1) -> int:
    """The helper process: start the mock, announce it, obey commands until end of input."""
    try:
        cluster = _Cluster(num_brokers)
    except MockError as exc:
        print(f"error {exc}", flush=True)
        return 1
    print(f"bootstrap {cluster.bootstrap}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if len(words) == 3 and words[0] == "create":
            try:
                cluster.create_topic(words[1], int(words[2]))
            except (MockError, ValueError) as exc:
                print(f"error {exc}", flush=True)
            else:
                print("ok", flush=True)
        elif words:
            print(f"error unknown command {words[0]!r}", flush=True)
    cluster.close()
    return 0


class MockBroker:
    """Starts the helper process and talks to it (the suite's side)."""

    def __init__(self, num_brokers: int = 1) -> None:
        self._num_brokers = num_brokers
        self._proc: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.start_to_answer_s: float | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None, "mock not started"
        return self._proc.pid

    def start(self, timeout_s: float = 30.0) -> MockBroker:
        launched = time.monotonic()
        self._proc = subprocess.Popen(  # noqa: S603 - our own module, fixed arguments
            [sys.executable, "-m", "ads.bench.mock", str(self._num_brokers)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        words = self._reply().split(maxsplit=1)
        if len(words) != 2 or words[0] != "bootstrap":
            self.stop()
            raise MockError(f"mock helper did not start: {' '.join(words)}")
        self.bootstrap = words[1]
        try:
            await_metadata(self.bootstrap, self._proc, launched + timeout_s, "mock")
        except BaseException:
            self.stop()
            raise
        self.start_to_answer_s = time.monotonic() - launched
        return self

    def _reply(self) -> str:
        assert self._proc is not None and self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line:
            raise MockError(f"mock helper exited with status {self._proc.poll()}")
        return line.strip()

    def create_topic(self, name: str, partitions: int) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(f"create {name} {partitions}\n")
        self._proc.stdin.flush()
        reply = self._reply()
        if reply != "ok":
            raise MockError(f"mock refused topic {name}: {reply}")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> MockBroker:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
