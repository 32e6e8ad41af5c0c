"""The console's two write actions, off unless `console.read.only=false`: deleting a topic
and deleting an empty consumer group.

Both are POST only (`/topics/NAME/delete`, `/groups/ID/delete`); a GET of those paths is 405.
Against cross-site request forgery every POST must carry the token this process drew at
start (`secrets`), which the pages embed in their forms: another site can make a browser
send a POST but cannot read a page of this origin to learn the token. A POST whose `Origin`
names another host is refused as well. With `console.read.only=true` (the default) every
action is 403 and the pages show no buttons.

The work is done by the broker's own admin paths, so the console obeys the rules the Kafka
APIs do: `handlers.topics.delete_topic` (DeleteTopics: unknown topics,
`delete.topic.enable`) and the group coordinator's `delete_groups` (DeleteGroups: a group
with members is NON_EMPTY_GROUP). There are no ACLs yet, so nothing narrower than the
configuration guards them.
"""

from __future__ import annotations

import hmac
import logging
import secrets
from http import HTTPStatus
from urllib.parse import urlsplit

from ads.broker.handlers.topics import delete_topic
from ads.broker.http import console
from ads.broker.http.observed import ObservedBroker
from ads.net.http import HttpRequest, HttpResponse
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.broker.http")

TOKEN_FIELD = "csrf_token"  # noqa: S105 - the form field's name, not a secret
_NOT_FOUND = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.GROUP_ID_NOT_FOUND)


def action_target(path: str) -> tuple[str, str] | None:
    """("topics" or "groups", name) when `path` is one of the delete actions."""
    parts = [p for p in path.split("/") if p]
    if len(parts) == 3 and parts[0] in ("topics", "groups") and parts[2] == "delete":
        return parts[0], parts[1]
    return None


class ConsoleActions:
    def __init__(self, broker: ObservedBroker, read_only: bool) -> None:
        self._broker = broker
        self.read_only = read_only
        self.token = secrets.token_urlsafe(32)

    @property
    def page_token(self) -> str | None:
        """What the pages embed in their forms; None: they show no write buttons."""
        return None if self.read_only else self.token

    async def post(self, request: HttpRequest, kind: str, name: str) -> HttpResponse:
        refused = self._refusal(request)
        if refused:
            log.warning("console %s of %s %r refused: %s", request.method, kind, name, refused)
            return _page(HTTPStatus.FORBIDDEN, "Refused", refused)
        if kind == "topics":
            error = await delete_topic(self._broker, name)
            what = f"topic {name}"
        else:
            error = (await self._broker.group_coordinator.delete_groups([name]))[0]
            what = f"group {name}"
        if error == ErrorCode.NONE:
            log.info("console deleted %s", what)
            return _page(HTTPStatus.OK, "Deleted", f"Deleted {what}.", f"/{kind}")
        status = HTTPStatus.NOT_FOUND if error in _NOT_FOUND else HTTPStatus.CONFLICT
        log.info("console could not delete %s: %s", what, error.name)
        return _page(status, "Not deleted", f"Could not delete {what}: {error.name}.",
                     f"/{kind}")

    def _refusal(self, request: HttpRequest) -> str | None:
        if request.method != "POST":
            return None  # the caller answers 405 before
        if self.read_only:
            return "the console is read-only (console.read.only=true)"
        origin = request.headers.get("origin")
        if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get(
                "host", ""):
            return "the request came from another site's page"
        if not hmac.compare_digest(request.form.get(TOKEN_FIELD, "").encode(),
                                   self.token.encode()):
            return "the form's token is missing or stale: reload the page"
        return None


def _page(status: int, title: str, message: str, back: str = "/") -> HttpResponse:
    return HttpResponse(status, console.notice(title, message, back), "text/html; charset=utf-8")
