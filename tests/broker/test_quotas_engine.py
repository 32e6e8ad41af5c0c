"""The quota engine's rules, against Kafka's: which entity's quota applies to a client
(the eight levels in order), who shares a measured rate, and the throttle time of Kafka's
sampled rate. The clients' side is in test_quotas_clients.py."""

from __future__ import annotations

from ads.broker.quotas import ClientQuotaManager, ClientQuotas, Rate
from ads.metadata.entity_config import DEFAULT, entity_path

LEVELS = [("alice", "app"), ("alice", DEFAULT), ("alice", None), (DEFAULT, "app"),
          (DEFAULT, DEFAULT), (DEFAULT, None), (None, "app"), (None, DEFAULT)]


def _quotas(levels: list[tuple[str | None, str | None]]) -> ClientQuotas:
    quotas = ClientQuotas(samples=2, window_s=1)
    quotas.update({entity_path(user, client): {"producer_byte_rate": str(1000 * (i + 1))}
                   for i, (user, client) in enumerate(levels)})
    return quotas


def _bound(manager: ClientQuotaManager, principal: str, client_id: str) -> float | None:
    return manager.max_value_in_window(principal, client_id, 0)


def test_quotas_engine_precedence_is_kafkas() -> None:
    # With levels i.. set, the client (alice, app) gets level i's quota.
    for i in range(len(LEVELS)):
        quotas = _quotas(LEVELS[i:])
        assert _bound(quotas.produce, "User:alice", "app") == 1000.0, LEVELS[i]
    # Others fall through to the defaults that match them.
    quotas = _quotas(LEVELS)
    assert _bound(quotas.produce, "User:bob", "app") == 4000.0  # users/<default>/clients/app
    assert _bound(quotas.produce, "User:bob", "other") == 5000.0
    assert _bound(quotas.produce, "User:alice", "other") == 2000.0
    only_clients = _quotas([(None, "app"), (None, DEFAULT)])
    assert _bound(only_clients.produce, "User:bob", "app") == 1000.0
    assert _bound(only_clients.produce, "User:bob", "x") == 2000.0
    assert _bound(only_clients.produce, "User:bob", "") is None  # no client id: no quota
    assert not _quotas([]).produce.enabled
    assert _bound(_quotas([("alice", None)]).produce, "User:bob", "app") is None


def test_quotas_engine_who_shares_a_rate() -> None:
    user_quota = _quotas([("alice", None)])
    manager = user_quota.produce
    # every client id of alice adds to one rate: 600 + 600 bytes over a 1000 B/s quota
    assert manager.record("User:alice", "a", 600, 0) == 0
    assert manager.record("User:alice", "b", 600, 0) > 0
    per_client = _quotas([(None, DEFAULT)]).produce
    assert per_client.record("User:alice", "a", 600, 0) == 0
    assert per_client.record("User:alice", "b", 600, 0) == 0  # a rate of its own


def test_quotas_engine_throttle_time_is_kafkas() -> None:
    manager = _quotas([(None, "app")]).produce  # 1000 B/s, two samples of 1 s
    # 3000 bytes at once: measured over one whole sample (samples - 1), 3000 B/s;
    # (3000 - 1000) / 1000 * 1000 ms.
    assert manager.record("User:ANONYMOUS", "app", 3000, 0) == 2000
    assert manager.throttled == 1 and manager.throttle_ms_total == 2000
    # Two samples later the burst is forgotten.
    assert manager.record("User:ANONYMOUS", "app", 500, 2000) == 0
    manager.unrecord("User:ANONYMOUS", "app", 500, 2000)
    assert manager.record("User:ANONYMOUS", "app", 1000, 2000) == 0


def test_quotas_engine_rate_windows() -> None:
    rate = Rate(samples=3, window_ms=1000, now_ms=0)
    rate.record(1000, 0)
    assert rate.measure(0) == (500.0, 2000)  # counted as at least two whole samples
    rate.record(1000, 2500)
    assert rate.measure(2500) == (800.0, 2500)
    assert rate.measure(2900) == (2000 / 2.9, 2900)
    # the first sample, last added to 3 windows ago, is dropped: two windows again
    assert rate.measure(3500) == (500.0, 2000)
    assert rate.measure(6000)[0] == 0.0  # every sample obsolete
