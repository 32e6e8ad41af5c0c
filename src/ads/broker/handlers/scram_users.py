"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0.

Credentials live in the users' entity configs (`/config/users/<user>` in ZooKeeper, the
embedded store's file otherwise), key = mechanism name, value Kafka's stored form
(`ads.security.scram`), so they reach every broker's SCRAM logins through the store's view.
The client sends the salt and the salted password, never the password; the broker derives
StoredKey and ServerKey from them.

Errors, per user, as Kafka's ZooKeeper-mode broker answers them: an empty user name
(UNACCEPTABLE_CREDENTIAL for alter, RESOURCE_NOT_FOUND for describe), an unknown mechanism
(UNSUPPORTED_SASL_MECHANISM), iterations outside 4096..16384 (UNACCEPTABLE_CREDENTIAL "Too
few iterations" / "Too many iterations"), the same user and mechanism twice in one alter
(DUPLICATE_RESOURCE), the same user twice in one describe (DUPLICATE_RESOURCE), deleting or
describing a credential that does not exist (RESOURCE_NOT_FOUND). A user with any error
has none of its alterations applied.

With an authorizer, describing needs DESCRIBE and altering ALTER on the cluster
(`ads.broker.permissions`); denied, every user named gets CLUSTER_AUTHORIZATION_FAILED (and
describe's top-level error too), as Kafka answers.

Gap: Kafka's ZooKeeper-mode brokers answer NOT_CONTROLLER unless they are the controller;
every ADS broker answers (admin clients send these to the controller anyway).
"""

from __future__ import annotations

import logging
from collections import Counter

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.metadata.acl import CLUSTER_NAME
from ads.metadata.entity_config import USERS, entity_path, parse_entity_path
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode
from ads.security.scram import BY_TYPE, MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS
from ads.security.scram import ScramCredential as Credential

log = logging.getLogger("ads.broker")

AlterResult = m.AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
DescribeResult = m.DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeResult.CredentialInfo
DENIED = "Cluster authorization failed."


def _upsertion_problem(u: m.AlterUserScramCredentialsRequest.ScramCredentialUpsertion
                       ) -> tuple[ErrorCode, str] | None:
    if not u.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if u.mechanism not in BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if u.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if u.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not u.salt or not u.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


async def handle_alter(ctx: RequestContext, req: m.AlterUserScramCredentialsRequest
                       ) -> m.AlterUserScramCredentialsResponse:
    rule = P.CLUSTER_ALTER
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        users = sorted({x.name for x in req.upsertions} | {x.name for x in req.deletions})
        return m.AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            AlterResult(user=u, error_code=rule.error, error_message=DENIED) for u in users])
    results: list[AlterResult] = []
    invalid: dict[str, tuple[ErrorCode, str]] = {}
    for d in req.deletions:
        if not d.name:
            invalid[""] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif d.mechanism not in BY_TYPE:
            invalid[d.name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    for u in req.upsertions:
        problem = _upsertion_problem(u)
        if problem is not None:
            invalid[u.name] = problem
    results += [AlterResult(user=user, error_code=code, error_message=message)
                for user, (code, message) in invalid.items()]
    pairs = [(x.name, x.mechanism) for x in req.upsertions if x.name not in invalid]
    pairs += [(x.name, x.mechanism) for x in req.deletions if x.name not in invalid]
    duplicated = {user for (user, _), n in Counter(pairs).items() if n > 1}
    results += [AlterResult(user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                            error_message="A user credential cannot be altered twice in the "
                                          "same request") for user in sorted(duplicated)]
    store = ctx.broker.metadata
    users = list(dict.fromkeys(user for user, _ in pairs if user not in duplicated))
    missing = {d.name for d in req.deletions if d.name in users
               and BY_TYPE[d.mechanism].name not in store.entity_configs.get(
                   entity_path(user=d.name), {})}
    results += [AlterResult(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                            error_message="Attempt to delete a user credential that does not "
                                          "exist") for user in sorted(missing)]
    for user in (u for u in users if u not in missing):
        changes: dict[str, str | None] = {
            BY_TYPE[d.mechanism].name: None for d in req.deletions if d.name == user}
        for u in req.upsertions:
            if u.name == user:
                mech = BY_TYPE[u.mechanism]
                changes[mech.name] = mech.credential(
                    bytes(u.salt), bytes(u.salted_password), u.iterations).to_config()
        try:
            await store.alter_entity_configs(entity_path(user=user), changes)
        except Exception as exc:  # the store's failure is this user's answer, not the request's
            log.warning("altering the SCRAM credentials of user %r failed: %s", user, exc)
            results.append(AlterResult(user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                       error_message=str(exc)))
            continue
        log.info("SCRAM credentials of user %r altered: %s", user,
                 ", ".join(f"{k} {'deleted' if v is None else 'set'}" for k, v in changes.items()))
        results.append(AlterResult(user=user, error_code=ErrorCode.NONE, error_message=None))
    return m.AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


def _described(user: str, configs: dict[str, str] | None, explicit: bool
               ) -> DescribeResult | None:
    infos = []
    for name, mech in MECHANISMS.items():
        text = (configs or {}).get(name)
        if text is None:
            continue
        try:
            iterations = Credential.from_config(text).iterations
        except ValueError as exc:
            return DescribeResult(user=user, error_code=ErrorCode.UNKNOWN_SERVER_ERROR,
                                  error_message=f"Error processing describe user SCRAM "
                                                f"credential configs request: {exc}")
        infos.append(CredentialInfo(mechanism=mech.type_id, iterations=iterations))
    if infos:
        return DescribeResult(user=user, error_code=ErrorCode.NONE, error_message=None,
                              credential_infos=infos)
    if not explicit:
        return None
    return DescribeResult(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                          error_message="Attempt to describe a user credential that does not "
                                        f"exist: {user}")


async def handle_describe(ctx: RequestContext, req: m.DescribeUserScramCredentialsRequest
                          ) -> m.DescribeUserScramCredentialsResponse:
    rule = P.CLUSTER_DESCRIBE
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        return m.DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=rule.error, error_message=DENIED,
            results=[DescribeResult(user=u.name, error_code=rule.error, error_message=DENIED)
                     for u in req.users or []])
    # Read through, as Kafka's ZooKeeper mode reads ZooKeeper: a credential set through
    # another broker is described at once.
    view = await ctx.broker.metadata.read_entity_configs()
    results: list[DescribeResult] = []
    if not req.users:
        by_user = {}
        for path, configs in view.items():
            if path.startswith(f"{USERS}/") and path.count("/") == 1:
                user = parse_entity_path(path)[0]
                assert user is not None
                by_user[user] = dict(configs)
        for user in sorted(by_user):
            found = _described(user, by_user[user], explicit=False)
            if found is not None:
                results.append(found)
    else:
        counts = Counter(u.name for u in req.users)
        for user in counts:
            if not user:
                results.append(DescribeResult(user=user, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                              error_message="Username must not be empty"))
            elif counts[user] > 1:
                results.append(DescribeResult(
                    user=user, error_code=ErrorCode.DUPLICATE_RESOURCE,
                    error_message="Cannot describe SCRAM credentials for the same user twice "
                                  f"in a single request: {user}"))
            else:
                stored = view.get(entity_path(user=user))
                found = _described(user, dict(stored) if stored else None, explicit=True)
                assert found is not None
                results.append(found)
    return m.DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results)


HANDLERS = [
    ApiHandler(m.DescribeUserScramCredentialsRequest, m.DescribeUserScramCredentialsResponse,
               0, 0, handle_describe),
    ApiHandler(m.AlterUserScramCredentialsRequest, m.AlterUserScramCredentialsResponse,
               0, 0, handle_alter),
]
