"""Entity configs: what Kafka keeps per user and per client id (quotas, SCRAM credentials),
per broker (dynamic broker configs, KIP-226: `/config/brokers/<id>`, and the cluster's
default, `/config/brokers/<default>`) and per group (group configs, KIP-848 and KIP-932:
`/config/groups/<group>`, where Kafka 4.x, without ZooKeeper, keeps them in its metadata
log).

Kafka's ZooKeeper mode stores them at `/config/users/<user>`, `/config/clients/<client-id>`
and `/config/users/<user>/clients/<client-id>`, each `{"version":1,"config":{...}}`. The
store's view is keyed by that path under `/config` ("users/alice", "clients/<default>",
"users/alice/clients/app-1"). Names are sanitized as Kafka's `Sanitizer` does (URL-encoded,
so a name holding "/" stays one path element); `<default>`, the entity that applies to
everyone without a config of their own, is written as is.
"""

from __future__ import annotations

from urllib.parse import quote, unquote

DEFAULT = "<default>"
USERS = "users"
CLIENTS = "clients"
BROKERS = "brokers"
GROUPS = "groups"


def broker_entity_path(node_id: int | None) -> str:
    """The path of one broker's dynamic configs, or the cluster default's (None)."""
    return f"{BROKERS}/{DEFAULT if node_id is None else node_id}"


def group_entity_path(group_id: str) -> str:
    """The path of one group's configs."""
    return f"{GROUPS}/{sanitize(group_id)}"


def sanitize(name: str) -> str:
    """Kafka's `Sanitizer.sanitize`: Java's URLEncoder with "*" and spaces percent-encoded;
    only letters, digits and "._-" stay as they are."""
    return quote(name, safe="").replace("~", "%7E")


def desanitize(name: str) -> str:
    return unquote(name)


def _element(name: str) -> str:
    return name if name == DEFAULT else sanitize(name)


def entity_path(user: str | None = None, client: str | None = None) -> str:
    """The path of a user's, a client id's or a user's client id's configs."""
    if user is not None and client is not None:
        return f"{USERS}/{_element(user)}/{CLIENTS}/{_element(client)}"
    if user is not None:
        return f"{USERS}/{_element(user)}"
    if client is not None:
        return f"{CLIENTS}/{_element(client)}"
    raise ValueError("an entity names a user, a client id or both")


def parse_entity_path(path: str) -> tuple[str | None, str | None]:
    """(user, client id) of a path `entity_path` makes; ValueError for any other path."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == USERS:
        return desanitize(parts[1]), None
    if len(parts) == 2 and parts[0] == CLIENTS:
        return None, desanitize(parts[1])
    if len(parts) == 4 and parts[0] == USERS and parts[2] == CLIENTS:
        return desanitize(parts[1]), desanitize(parts[3])
    raise ValueError(f"not a user or client entity path: {path!r}")


def apply_changes(current: dict[str, str], changes: dict[str, str | None]) -> dict[str, str]:
    """`current` with `changes` made: a None value removes its key."""
    result = dict(current)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result
