"""An ADS broker inside the current Python process, for tests.

The broker runs on its own event loop in a daemon thread and listens on a real socket, so
any client library talks to it exactly as to a standalone broker.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import threading
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from ads.broker.config import load_broker_config
from ads.broker.server import Broker
from ads.storage.fileio import OS_FILE_IO, FileIO

R = TypeVar("R")


class EmbeddedBroker:
    def __init__(self, data_dir: str | Path | None = None, port: int = 0,
                 config: Mapping[str, object] | None = None, host: str = "127.0.0.1",
                 node_id: int = 1, file_io: FileIO = OS_FILE_IO) -> None:
        """`file_io`: the file layer the broker's logs write through (``FaultyFileIO`` to
        inject disk faults)."""
        self._file_io = file_io
        self.broker: Broker | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._tmp: str | None = None
        if data_dir is None:
            self._tmp = tempfile.mkdtemp(prefix="ads-embedded-")
            data_dir = self._tmp
        self.data_dir = Path(data_dir)
        flags = {
            "log.dirs": str(self.data_dir),
            "listeners": f"PLAINTEXT://{host}:{port}",
            "node.id": str(node_id),
        }
        sets = [f"{k}={v}" for k, v in (config or {}).items()]
        try:
            self._config, _warnings = load_broker_config(None, flags, sets)
        except BaseException:
            self.close()
            raise

    @property
    def bootstrap_servers(self) -> str:
        assert self.broker is not None, "broker not started"
        return f"{self.broker.endpoint.host}:{self.broker.endpoint.port}"

    def bootstrap_for(self, listener_name: str) -> str:
        """host:port of the broker's advertised endpoint on `listener_name`."""
        assert self.broker is not None, "broker not started"
        endpoint = self.broker.endpoint.on(listener_name)
        if endpoint is None:
            raise KeyError(f"no listener {listener_name}")
        return f"{endpoint.host}:{endpoint.port}"

    @property
    def port(self) -> int:
        assert self.broker is not None, "broker not started"
        return self.broker.endpoint.port

    def start(self) -> EmbeddedBroker:
        ready = threading.Event()
        failure: list[BaseException] = []
        loop = asyncio.new_event_loop()
        self._loop = loop
        self.broker = Broker(self._config, file_io=self._file_io)

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                assert self.broker is not None
                loop.run_until_complete(self.broker.start())
            except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
                failure.append(exc)
                # What the failed start left on the loop (cancelled tasks) ends with it.
                loop.run_until_complete(asyncio.sleep(0))
                loop.close()
                self._loop = None
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

        self._thread = threading.Thread(target=run, name="ads-embedded-broker", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def call(self, fn: Callable[..., R], *args: object) -> R:
        """Runs `fn(*args)` on the broker's loop thread and returns its result."""
        assert self._loop is not None

        async def wrapper() -> R:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(wrapper(), self._loop).result(timeout=30)

    def run(self, work: Coroutine[object, object, R], timeout_s: float = 30.0) -> R:
        """Runs the coroutine on the broker's loop thread and returns its result."""
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(work, self._loop).result(timeout=timeout_s)

    def stop(self) -> None:
        if self._loop is None or self.broker is None:
            return
        loop = self._loop
        asyncio.run_coroutine_threadsafe(self.broker.stop(), loop).result(timeout=30)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._loop = None

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> EmbeddedBroker:
        try:
            return self.start()
        except BaseException:
            self.close()  # __exit__ is not called for a failed __enter__
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
