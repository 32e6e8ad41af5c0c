"""One module per API family; each lists the versions it implements in `HANDLERS`."""

from __future__ import annotations

from typing import Any

from ads.broker.dispatch import ApiHandler
from ads.broker.handlers import (
    acls,
    api_versions,
    client_quotas,
    configs,
    consumer_groups,
    fetch,
    group_offsets,
    groups,
    leadership,
    log_dirs,
    metadata,
    offsets,
    produce,
    producer_id,
    reassignments,
    sasl,
    scram_users,
    share_groups,
    share_state,
    topics,
    transactions,
)


def all_handlers(cluster: bool = False, log_dir_count: int = 1, share: bool = False
                 ) -> list[ApiHandler[Any, Any]]:
    """`cluster`: the broker runs on ZooKeeper, and also takes the controller's requests
    from other brokers; `log_dir_count`: how many directories it keeps partitions in;
    `share`: `group.share.enable`, share groups are served (otherwise their APIs are
    neither advertised nor answered, as unknown ones)."""
    modules = [api_versions, metadata, produce, fetch, offsets, topics, configs, producer_id,
               groups, group_offsets, consumer_groups, leadership, transactions, acls,
               client_quotas, sasl, scram_users, log_dirs]
    extra = [*leadership.CLUSTER_HANDLERS, *reassignments.CLUSTER_HANDLERS] if cluster else []
    if log_dir_count == 1:  # replicas do not move between directories (docs/storage.md)
        extra += log_dirs.HANDLERS_ONE_LOG_DIR
    if share:
        extra += share_groups.HANDLERS + share_state.HANDLERS
    return [h for module in modules for h in module.HANDLERS] + extra
