"""Routes of `http.listener`, and the lifecycle of the HTTP server and the plot sampler.

| path | answer |
|---|---|
| `/metrics` | Prometheus text format (`collector.py`), via prometheus_client |
| `/healthz` | 200 while the process runs its event loop |
| `/readyz` | 200 once logs are loaded and the broker serves, registered and not fenced |
| `/`, `/topics[/NAME[/messages]]`, `/groups[/ID]` | the console's pages (`console.py`) |
| `/api/...` | the JSON the pages refresh themselves from |
| `/static/...` | the console's script, style and the vendored uPlot |

| POST `/topics/NAME/delete`, `/groups/ID/delete` | the console's actions (`actions.py`):
403 unless `console.read.only=false` |

Anything else is 404; a POST to a page is 405. Only the two actions change the broker.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from importlib import resources
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from ads.broker.http import console
from ads.broker.http.actions import ConsoleActions, action_target
from ads.broker.http.collector import BrokerCollector
from ads.broker.http.observed import ObservedBroker
from ads.broker.http.samples import Sampler
from ads.net.http import HttpListener, HttpRequest, HttpResponse, text_response

log = logging.getLogger("ads.broker.http")

_STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
MAX_HTTP_CONNECTIONS = 64


def json_response(data: Any, status: int = HTTPStatus.OK) -> HttpResponse:
    return HttpResponse(status, json.dumps(data).encode(), "application/json")


class OpsHttp:
    """The HTTP endpoints of one broker (started after its Kafka listener)."""

    def __init__(self, broker: ObservedBroker, host: str, port: int,
                 sample_interval_ms: int, read_only: bool = True) -> None:
        self.broker = broker
        self.actions = ConsoleActions(broker, read_only)
        self.registry = CollectorRegistry(auto_describe=False)
        self.listener = HttpListener(self.handle, host, port, MAX_HTTP_CONNECTIONS)
        self.registry.register(BrokerCollector(broker, lambda: self.listener.connection_count))
        self.sampler = Sampler(broker, sample_interval_ms)
        self.address = (host, port)
        self._static: dict[str, HttpResponse] = {}

    async def start(self) -> tuple[str, int]:
        self.address = await self.listener.start()
        self.sampler.sample()
        self.broker.schedule("console-samples", self.sampler.interval_ms, self.sampler.sample)
        return self.address

    async def stop(self) -> None:
        await self.listener.stop()

    async def handle(self, request: HttpRequest) -> HttpResponse:
        path = request.path.rstrip("/") or "/"
        target = action_target(path)
        if target is not None:
            if request.method != "POST":
                return HttpResponse(HTTPStatus.METHOD_NOT_ALLOWED, b"POST only\n",
                                    headers=(("Allow", "POST"),))
            return await self.actions.post(request, *target)
        if request.method == "POST":
            return HttpResponse(HTTPStatus.METHOD_NOT_ALLOWED, b"GET and HEAD only\n",
                                headers=(("Allow", "GET, HEAD"),))
        if path == "/metrics":
            return HttpResponse(HTTPStatus.OK, generate_latest(self.registry),
                                CONTENT_TYPE_LATEST)
        if path == "/healthz":
            return text_response(HTTPStatus.OK, "ok\n")
        if path == "/readyz":
            reason = self._not_ready()
            if reason:
                return text_response(HTTPStatus.SERVICE_UNAVAILABLE, f"not ready: {reason}\n")
            return text_response(HTTPStatus.OK, "ready\n")
        if path.startswith("/static/"):
            return self._static_file(path[len("/static/"):])
        if path.startswith("/api/"):
            data = self._api(path[len("/api"):], request)
            if data is None:
                return text_response(HTTPStatus.NOT_FOUND, "not found\n")
            return json_response(data)
        page = console.page(self.broker, path, request.query, self.actions.page_token)
        if page is None:
            return HttpResponse(HTTPStatus.NOT_FOUND, console.not_found(path),
                                "text/html; charset=utf-8")
        return HttpResponse(HTTPStatus.OK, page, "text/html; charset=utf-8")

    def _not_ready(self) -> str | None:
        b = self.broker
        if not b.started:
            return "starting or stopping"
        if b.metadata.fenced:
            return "the cluster metadata session is lost"
        if b.node_id not in b.metadata.brokers:
            return "not registered with the cluster"
        return None

    def _api(self, path: str, request: HttpRequest) -> Any:
        if path == "/series":
            return self.sampler.series()
        return console.api(self.broker, path, request.query)

    def _static_file(self, name: str) -> HttpResponse:
        cached = self._static.get(name)
        if cached is not None:
            return cached
        suffix = name[name.rfind("."):] if "." in name else ""
        content_type = _STATIC_TYPES.get(suffix)
        if content_type is None or "/" in name or name.startswith("."):
            return text_response(HTTPStatus.NOT_FOUND, "not found\n")
        resource = resources.files("ads.broker.http").joinpath("static", name)
        if not resource.is_file():
            return text_response(HTTPStatus.NOT_FOUND, "not found\n")
        response = HttpResponse(HTTPStatus.OK, resource.read_bytes(), content_type)
        self._static[name] = response
        return response


async def start_ops_http(broker: ObservedBroker, listener: str, sample_interval_ms: int,
                         read_only: bool = True) -> OpsHttp:
    """Starts the endpoints on `listener` (HOST:PORT, validated by the config)."""
    host, _, port = listener.rpartition(":")
    ops = OpsHttp(broker, host.strip("[]"), int(port), sample_interval_ms, read_only)
    await ops.start()
    log.info("HTTP endpoints (metrics, health, console) on http://%s:%d/", *ops.address)
    return ops
