"""Client quotas as Kafka's ClientQuotaManager enforces them (KIP-13, KIP-55, KIP-124).

Three quotas, each with its own rates: `producer_byte_rate` (bytes of produce requests per
second), `consumer_byte_rate` (bytes of fetch responses per second) and
`request_percentage` (handler time, in percent of one thread: 100 is a thread kept busy).
They are set on entities kept in the metadata store's entity configs
(`ads.metadata.entity_config`): a user (the principal's name), a client id, or a user's
client id, each also as `<default>`. The quota of a (user, client id) is the first of, in
Kafka's order:

    1. users/<user>/clients/<client-id>     5. users/<default>/clients/<default>
    2. users/<user>/clients/<default>       6. users/<default>
    3. users/<user>                         7. clients/<client-id>
    4. users/<default>/clients/<client-id>  8. clients/<default>

Whom a rate is shared by follows Kafka's metric tags: a quota on a user is shared by all
its client ids, one on a client id by that client id's connections of every user, a
`<default>` one gives each user or client id a rate of its own.

Measuring (Kafka's `Rate` over a `SampledStat`): values go into samples of
`quota.window.size.seconds`, `quota.window.num` of which are kept; the rate is their sum
over the time since the oldest began, counted as at least `quota.window.num - 1` whole
samples, so a new client is not throttled by its first burst. A request that takes the
rate above the quota gets the time that brings it back down, `(rate - quota) / quota *
window`, which the handler puts in its response's `throttle_time_ms` and the network
layer mutes the connection for, after the response is written (KIP-219).

Cost: with no quota of a kind set, the request path reads one attribute (`enabled`); with
quotas, one dict lookup per request finds the rate of its (principal, client id), then a
few float operations. Per request, never per record.

Not thread-safe: used from the event loop only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from ads.metadata.entity_config import DEFAULT, parse_entity_path

log = logging.getLogger("ads.broker.quotas")

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
# Kafka's user and client-id quota keys and whether each must be a whole number.
QUOTA_KEYS: dict[str, bool] = {
    PRODUCER_BYTE_RATE: True,
    CONSUMER_BYTE_RATE: True,
    REQUEST_PERCENTAGE: False,
}
_CACHE_LIMIT = 10_000  # (principal, client id) pairs remembered before starting afresh
# A rate nobody added to for this long is forgotten once there are many (Kafka: 1 hour).
_INACTIVE_MS = 3_600_000
Entity = tuple[str | None, str | None]  # (user, client id); DEFAULT for <default>


class Rate:
    """Kafka's `Rate` of a `SampledStat`: per second, over `samples` windows of `window_ms`.

    Samples are [start_ms, last_ms, value]; one more than `samples` is kept, as Kafka does,
    so the oldest may overlap the start of the measured span."""

    __slots__ = ("_current", "_samples", "samples", "window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: int) -> None:
        self.samples = samples
        self.window_ms = window_ms
        self._samples: list[list[float]] = [[now_ms, now_ms, 0.0]]
        self._current = 0

    @property
    def last_ms(self) -> float:
        return max(s[1] for s in self._samples)

    def record(self, value: float, now_ms: int) -> None:
        sample = self._samples[self._current]
        if now_ms - sample[0] >= self.window_ms:
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current == len(self._samples):
                sample = [now_ms, now_ms, 0.0]
                self._samples.append(sample)
            else:
                sample = self._samples[self._current]
                sample[0] = sample[1] = now_ms
                sample[2] = 0.0
        sample[2] += value
        sample[1] = now_ms

    def window(self, now_ms: int) -> int:
        """The span the rate is measured over, in ms (obsolete samples purged first)."""
        expire = self.samples * self.window_ms
        for sample in self._samples:
            if now_ms - sample[1] >= expire:
                sample[0] = sample[1] = now_ms
                sample[2] = 0.0
        elapsed = now_ms - min(s[0] for s in self._samples)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return int(max(elapsed, 1))

    def measure(self, now_ms: int) -> tuple[float, int]:
        """(rate per second, the window it was measured over in ms)."""
        window = self.window(now_ms)
        return sum(s[2] for s in self._samples) * 1000.0 / window, window


@dataclass(slots=True)
class _Sensor:
    rate: Rate
    bound: float
    throttle_ms_total: int = 0  # for /metrics
    throttled: int = 0


class ClientQuotaManager:
    """One kind of quota (`key`): its configured entities and the rates measured."""

    def __init__(self, key: str, samples: int, window_s: int) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_s * 1000
        self.enabled = False
        self._quotas: dict[Entity, float] = {}
        self._sensors: dict[Entity, _Sensor] = {}  # by metric tags
        self._resolved: dict[tuple[str, str], _Sensor | None] = {}  # (principal, client id)
        self.throttle_ms_total = 0
        self.throttled = 0

    def update(self, quotas: dict[Entity, float]) -> None:
        """The entities' quotas of this kind, after a change to any entity config."""
        self._quotas = quotas
        self.enabled = bool(quotas)
        self._resolved.clear()
        for tags, sensor in list(self._sensors.items()):
            bound = self._limit(tags)
            if bound is None:
                del self._sensors[tags]
            elif bound != sensor.bound:
                log.info("%s quota of %s is now %s", self.key, _describe(tags), bound)
                sensor.bound = bound

    def _sensor(self, principal: str, client_id: str | None, now_ms: int) -> _Sensor | None:
        key = (principal, client_id or "")
        try:
            return self._resolved[key]
        except KeyError:
            pass
        if len(self._resolved) > _CACHE_LIMIT:
            self._resolved.clear()
        user = principal.partition(":")[2] or principal
        tags = self._tags(user, client_id or "")
        sensor = self._sensors.get(tags)
        if sensor is None:
            if len(self._sensors) > _CACHE_LIMIT:
                self._expire(now_ms)
            bound = self._limit(tags)
            if bound is not None:
                sensor = self._sensors[tags] = _Sensor(
                    Rate(self.samples, self.window_ms, now_ms), bound)
        self._resolved[key] = sensor
        return sensor

    def _expire(self, now_ms: int) -> None:
        """Forgets the rates of clients gone for an hour (each client id with a
        `<default>` quota has its own, so made-up client ids must not pile up)."""
        for tags, sensor in list(self._sensors.items()):
            if now_ms - sensor.rate.last_ms > _INACTIVE_MS:
                del self._sensors[tags]
        self._resolved.clear()

    def _tags(self, user: str, client: str) -> Entity:
        """Kafka's metric tags: the (user, client id) whose rate this client shares; ""
        where the quota does not look at that part."""
        q = self._quotas
        has_user_client = any(u is not None and c is not None for u, c in q)
        has_user = any(u is not None and c is None for u, c in q)
        has_client = any(u is None for u, _ in q)
        if not has_user_client and not has_user:
            return ("", client)
        if has_user and not has_user_client and not has_client:
            return (user, "")
        if has_user_client and not has_user and not has_client:
            return (user, client)
        if (user, client) in q or (user, DEFAULT) in q:
            return (user, client)
        if (user, None) in q:
            return (user, "")
        if (DEFAULT, client) in q or (DEFAULT, DEFAULT) in q:
            return (user, client)
        if (DEFAULT, None) in q:
            return (user, "")
        return ("", client)

    def _limit(self, tags: Entity) -> float | None:
        user, client = tags
        q = self._quotas
        if user and client:
            order: tuple[Entity, ...] = ((user, client), (user, DEFAULT), (DEFAULT, client),
                                         (DEFAULT, DEFAULT))
        elif user:
            order = ((user, None), (DEFAULT, None))
        elif client:
            order = ((None, client), (None, DEFAULT))
        else:
            return None
        for entity in order:
            bound = q.get(entity)
            if bound is not None:
                return bound
        return None

    def record(self, principal: str, client_id: str | None, value: float, now_ms: int) -> int:
        """Adds `value` to the client's rate; the ms it must be throttled for (0: none)."""
        sensor = self._sensor(principal, client_id, now_ms)
        if sensor is None:
            return 0
        sensor.rate.record(value, now_ms)
        rate, window = sensor.rate.measure(now_ms)
        if rate <= sensor.bound:
            return 0
        throttle_ms = round((rate - sensor.bound) / sensor.bound * window)
        sensor.throttled += 1
        sensor.throttle_ms_total += throttle_ms
        self.throttled += 1
        self.throttle_ms_total += throttle_ms
        return throttle_ms

    def unrecord(self, principal: str, client_id: str | None, value: float,
                 now_ms: int) -> None:
        """Takes back a recorded `value` (a throttled fetch sends nothing)."""
        sensor = self._sensor(principal, client_id, now_ms)
        if sensor is not None:
            sensor.rate.record(-value, now_ms)

    def max_value_in_window(self, principal: str, client_id: str | None, now_ms: int
                            ) -> float | None:
        """What the client may take in one measuring span (Kafka caps a fetch with it)."""
        sensor = self._sensor(principal, client_id, now_ms)
        if sensor is None:
            return None
        return sensor.bound * (self.samples - 1) * self.window_ms / 1000.0


def _describe(tags: Entity) -> str:
    user, client = tags
    return " ".join(p for p in (f"user {user}" if user else "",
                                f"client-id {client}" if client else "") if p)


class ClientQuotas:
    """The broker's three quota managers, fed from the metadata store's entity configs."""

    def __init__(self, samples: int, window_s: int) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_s)
        self.managers = (self.produce, self.fetch, self.request)

    def update(self, entity_configs: Mapping[str, Mapping[str, str]]) -> None:
        """Reads every entity's quotas anew (a change is rare; entities are few)."""
        by_key: dict[str, dict[Entity, float]] = {m.key: {} for m in self.managers}
        for path, configs in entity_configs.items():
            try:
                entity = parse_entity_path(path)
            except ValueError:
                continue
            for key, quotas in by_key.items():
                value = configs.get(key)
                if value is None:
                    continue
                try:
                    quotas[entity] = float(value)
                except ValueError:
                    log.warning("ignoring %s=%r of %s: not a number", key, value, path)
        for manager in self.managers:
            manager.update(by_key[manager.key])
