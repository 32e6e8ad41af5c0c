"""ControlledShutdown (key 7) v1-3, in cluster mode only, and ElectLeaders (key 43) v0-2.

Both are answered by the active controller (`ads.controller`), as in Kafka's ZooKeeper
mode; another broker answers NOT_CONTROLLER (per partition for ElectLeaders), and the
client finds the controller in Metadata and asks again.

ControlledShutdown: a broker about to stop asks the controller to move the leadership of
its replicated partitions elsewhere; the answer lists those it still leads (no other live
ISR member), and the broker asks again after `controlled.shutdown.retry.backoff.ms`
(`broker/shutdown.py`). A broker epoch older than its registration's is
STALE_BROKER_EPOCH, an unregistered broker BROKER_NOT_AVAILABLE. Version 0 (a request
header of its own) is not supported.

ElectLeaders: PREFERRED (0; v0 knows no other) or UNCLEAN (1) elections of the partitions
named, or of every partition when the list is null, in which case partitions that need no
election are left out of the answer, as Kafka does. Errors per partition: ELECTION_NOT_NEEDED,
PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (being deleted); a partition whose new
leader this broker has not seen within `timeout_ms` is REQUEST_TIMED_OUT. Without
ZooKeeper the broker is a cluster of one whose partitions are always led by their only,
preferred replica: every election is ELECTION_NOT_NEEDED.
"""

from __future__ import annotations

import asyncio
import logging

from ads.broker import permissions as P
from ads.broker.dispatch import ApiHandler, RequestContext
from ads.common.partitions import TopicPartition
from ads.controller import election
from ads.controller.controller import DeposedError
from ads.controller.election import Refused
from ads.metadata.acl import CLUSTER_NAME
from ads.metadata.zk_layout import LeaderAndIsr
from ads.protocol import messages as m
from ads.protocol.errors import ErrorCode

log = logging.getLogger("ads.broker.leadership")
Outcome = LeaderAndIsr | Refused
# How long the controller may take over a controlled shutdown before the broker asking is
# told to try again (it retries after its back-off).
SHUTDOWN_ANSWER_S = 30.0


async def _controlled_shutdown(ctx: RequestContext, req: m.ControlledShutdownRequest
                               ) -> m.ControlledShutdownResponse:
    rule = P.CLUSTER_ACTION
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        return m.ControlledShutdownResponse(error_code=rule.error, remaining_partitions=[])
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return m.ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
    epoch = req.broker_epoch if ctx.api_version >= 2 else -1
    try:
        code, remaining = await asyncio.wait_for(asyncio.wrap_future(
            controller.controlled_shutdown(req.broker_id, epoch)), SHUTDOWN_ANSWER_S)
    except DeposedError:
        return m.ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
    except TimeoutError:
        return m.ControlledShutdownResponse(error_code=ErrorCode.REQUEST_TIMED_OUT)
    return m.ControlledShutdownResponse(error_code=code, remaining_partitions=[
        m.ControlledShutdownResponse.RemainingPartition(topic_name=t, partition_index=p)
        for t, p in remaining])


def _requested(ctx: RequestContext, req: m.ElectLeadersRequest) -> list[TopicPartition]:
    if req.topic_partitions is None:
        return [TopicPartition(t.name, p.partition) for t in ctx.broker.metadata.topics.values()
                for p in t.partitions]
    return list(dict.fromkeys(TopicPartition(tp.topic, p) for tp in req.topic_partitions
                              for p in tp.partitions))


def _alone(ctx: RequestContext, election_type: int, partitions: list[TopicPartition]
           ) -> dict[TopicPartition, Outcome]:
    """A broker without ZooKeeper: the rules over its own metadata, changing nothing."""
    metadata = ctx.broker.metadata
    out: dict[TopicPartition, Outcome] = {}
    for tp in partitions:
        topic, index = tp
        state = metadata.topics.get(topic)
        if state is None or not 0 <= index < len(state.partitions):
            out[tp] = Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              "The partition does not exist.")
            continue
        p = state.partitions[index]
        current = LeaderAndIsr(p.leader, p.leader_epoch, p.isr, -1)
        rule = election.preferred if election_type == election.PREFERRED else election.unclean
        outcome = rule(current, p.replicas, set(metadata.brokers), (), -1)
        out[tp] = outcome if isinstance(outcome, Refused) else Refused(
            ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no controller to elect a leader")
    return out


async def _elect(ctx: RequestContext, req: m.ElectLeadersRequest) -> m.ElectLeadersResponse:
    rule = P.CLUSTER_ALTER
    if not ctx.authorize(rule.resource, CLUSTER_NAME, rule.operation):
        # Kafka answers the error on the request (v1+) and on every partition named.
        return m.ElectLeadersResponse(
            throttle_time_ms=0, error_code=rule.error, replica_election_results=[
                m.ElectLeadersResponse.ReplicaElectionResult(topic=t.topic, partition_result=[
                    m.ElectLeadersResponse.ReplicaElectionResult.PartitionResult(
                        partition_id=p, error_code=rule.error, error_message=None)
                    for p in t.partitions]) for t in req.topic_partitions or []])
    broker = ctx.broker
    partitions = _requested(ctx, req)
    election_type = req.election_type if ctx.api_version >= 1 else election.PREFERRED
    timeout_s = max(req.timeout_ms, 0) / 1000.0
    controller = broker.controller
    results: dict[TopicPartition, Outcome]
    if election_type not in (election.PREFERRED, election.UNCLEAN):
        results = {tp: Refused(ErrorCode.INVALID_REQUEST,
                               f"Unknown election type {election_type}") for tp in partitions}
    elif controller is None:
        results = _alone(ctx, election_type, partitions)
    elif not controller.active:
        results = {tp: Refused(ErrorCode.NOT_CONTROLLER) for tp in partitions}
    else:
        try:
            results = await asyncio.wait_for(asyncio.wrap_future(
                controller.elect_leaders(election_type, partitions)), timeout_s)
        except DeposedError:
            results = {tp: Refused(ErrorCode.NOT_CONTROLLER) for tp in partitions}
        except TimeoutError:
            results = {tp: Refused(ErrorCode.REQUEST_TIMED_OUT) for tp in partitions}
        await _until_seen(ctx, results, timeout_s)
    if req.topic_partitions is None:
        results = {tp: r for tp, r in results.items()
                   if not (isinstance(r, Refused) and r.code == ErrorCode.ELECTION_NOT_NEEDED)}
    elected = sum(isinstance(r, LeaderAndIsr) for r in results.values())
    if elected:
        log.info("%s election asked by %s: %d partitions have a new leader",
                 "preferred" if election_type == election.PREFERRED else "unclean",
                 ctx.connection.peer, elected)
    by_topic: dict[str, list[m.ElectLeadersResponse.ReplicaElectionResult.PartitionResult]] = {}
    for (topic, index), outcome in results.items():
        code, message = ((outcome.code, outcome.message) if isinstance(outcome, Refused)
                         else (ErrorCode.NONE, None))
        by_topic.setdefault(topic, []).append(
            m.ElectLeadersResponse.ReplicaElectionResult.PartitionResult(
                partition_id=index, error_code=code, error_message=message))
    return m.ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                  replica_election_results=[
        m.ElectLeadersResponse.ReplicaElectionResult(topic=t, partition_result=parts)
        for t, parts in by_topic.items()])


async def _until_seen(ctx: RequestContext, results: dict[TopicPartition, Outcome],
                      timeout_s: float) -> None:
    """Waits until this broker's metadata shows each new leader, as Kafka's delayed
    election does; those still unseen at `timeout_s` become REQUEST_TIMED_OUT."""
    metadata = ctx.broker.metadata

    def seen(tp: TopicPartition, state: LeaderAndIsr) -> bool:
        topic = metadata.topics.get(tp.topic)
        if topic is None or tp.partition >= len(topic.partitions):
            return True  # deleted meanwhile: nothing to wait for
        return topic.partitions[tp.partition].leader_epoch >= state.leader_epoch

    new = {tp: s for tp, s in results.items() if isinstance(s, LeaderAndIsr)}
    if not new:
        return
    await metadata.wait(lambda: all(seen(tp, s) for tp, s in new.items()), timeout_s)
    for tp, state in new.items():
        if not seen(tp, state):
            results[tp] = Refused(ErrorCode.REQUEST_TIMED_OUT)


HANDLERS = [ApiHandler(m.ElectLeadersRequest, m.ElectLeadersResponse, 0, 2, _elect)]
CLUSTER_HANDLERS = [ApiHandler(m.ControlledShutdownRequest, m.ControlledShutdownResponse,
                               1, 3, _controlled_shutdown)]
