"""One module per API family; each lists the versions it implements in `HANDLERS`."""

from __future__ import annotations

from ads.broker.dispatch import ApiHandler
from ads.broker.handlers import (
    api_versions,
    configs,
    consumer_groups,
    fetch,
    group_offsets,
    groups,
    metadata,
    offsets,
    produce,
    producer_id,
    topics,
    transactions,
)


def all_handlers() -> list[ApiHandler]:
    modules = [api_versions, metadata, produce, fetch, offsets, topics, configs, producer_id,
               groups, group_offsets, consumer_groups, transactions]
    return [h for module in modules for h in module.HANDLERS]
