"""KIP-848 consumer groups (groups/consumer.py) on injected time: joining, the server-side
assignment, incremental revocation before reassignment, fencing, leaving, session and
rebalance timeouts, commits at the member epoch, and the stored form a new coordinator adopts."""

from __future__ import annotations

import itertools

from vdl_broker.groups.commits import consumer_group_state, restore_consumer_group
from vdl_broker.groups.consumer import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    ConsumerGroupState,
    HeartbeatRequestData,
    HeartbeatResult,
    assign,
    consumer_assignment,
    consumer_subscription,
)
from vdl_wire.errors import ErrorCode

STREAMS = ("s0", "s1", "s2", "s3")
SESSION_MS = 10_000
REBALANCE_MS = 30_000


def make() -> tuple[ConsumerGroupCoordinator, list[str]]:
    changed: list[str] = []
    counter = itertools.count()
    coordinator = ConsumerGroupCoordinator(lambda group_id: ConsumerGroupConfig(SESSION_MS, 500),
                                           on_changed=lambda group: changed.append(group.group_id),
                                           new_member_id=lambda: f"generated-{next(counter)}")
    return coordinator, changed


def beat(c: ConsumerGroupCoordinator, member: str, epoch: int, now: int = 0, owned: set[str] | None = None,
         topics: tuple[str, ...] | None = None, streams: tuple[str, ...] = STREAMS, **extra: object) -> HeartbeatResult:
    if epoch == 0 and topics is None:
        topics = STREAMS
    request = HeartbeatRequestData("g", member, epoch, rebalance_timeout_ms=REBALANCE_MS if epoch == 0 else -1,
                                   subscribed_topic_names=topics, owned=None if owned is None else frozenset(owned),
                                   client_id="client", client_host="/127.0.0.1", **extra)  # type: ignore[arg-type]
    return c.heartbeat(request, streams, now)


def test_a_lone_member_gets_every_subscribed_stream_at_once() -> None:
    c, changed = make()
    joined = beat(c, "m1", 0)
    assert joined == HeartbeatResult(ErrorCode.NONE, None, "m1", 1, frozenset(STREAMS))
    assert changed == ["g"]
    group = c.group("g")
    assert group is not None and group.state is ConsumerGroupState.STABLE
    assert (group.group_epoch, group.assignment_epoch) == (1, 1)
    # A heartbeat with nothing new: same epoch, no assignment sent, nothing to replicate.
    assert beat(c, "m1", 1, owned=set(STREAMS)) == HeartbeatResult(ErrorCode.NONE, None, "m1", 1, None)
    assert changed == ["g"]


def test_a_v0_member_without_an_id_gets_one() -> None:
    c, _ = make()
    assert beat(c, "", 0).member_id == "generated-0"


def test_a_second_member_waits_until_the_first_revoked() -> None:
    c, _ = make()
    beat(c, "m1", 0, now=0)
    second = beat(c, "m2", 0, now=100)
    # Its target is two streams, still owned by m1: it moves to epoch 2 with none of them yet.
    assert second == HeartbeatResult(ErrorCode.NONE, None, "m2", 2, frozenset())
    group = c.group("g")
    assert group is not None and group.state is ConsumerGroupState.RECONCILING
    assert group.target == {"m1": frozenset({"s0", "s1"}), "m2": frozenset({"s2", "s3"})}
    # m1 is told to revoke s2 and s3 and stays at epoch 1 until it has.
    revoke = beat(c, "m1", 1, now=200, owned=set(STREAMS))
    assert revoke == HeartbeatResult(ErrorCode.NONE, None, "m1", 1, frozenset({"s0", "s1"}))
    assert beat(c, "m2", 2, now=300, owned=set()) == HeartbeatResult(ErrorCode.NONE, None, "m2", 2, None)
    # m1 reports it let them go: it moves to epoch 2; m2 gets them on its next heartbeat.
    assert beat(c, "m1", 1, now=400, owned={"s0", "s1"}) == HeartbeatResult(ErrorCode.NONE, None, "m1", 2, None)
    assert beat(c, "m2", 2, now=500, owned=set()) == HeartbeatResult(ErrorCode.NONE, None, "m2", 2,
                                                                      frozenset({"s2", "s3"}))
    assert group.state is ConsumerGroupState.STABLE


def test_a_member_leaving_hands_its_streams_to_the_others() -> None:
    c, _ = make()
    beat(c, "m1", 0)
    beat(c, "m2", 0)
    beat(c, "m1", 1, owned=set(STREAMS))
    beat(c, "m1", 1, owned={"s0", "s1"})
    beat(c, "m2", 2, owned=set())
    left = beat(c, "m2", -1)
    assert left == HeartbeatResult(ErrorCode.NONE, None, "m2", -1, None)
    assert beat(c, "m1", 2, owned={"s0", "s1"}) == HeartbeatResult(ErrorCode.NONE, None, "m1", 3, frozenset(STREAMS))
    assert beat(c, "m1", -1).error is ErrorCode.NONE
    assert c.group("g") is None  # the last member left: the group is gone (its offsets stay)


def test_fencing_and_unknown_members() -> None:
    c, _ = make()
    beat(c, "m1", 0)
    assert beat(c, "m1", 5, owned=set(STREAMS)).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(c, "nobody", 1).error is ErrorCode.UNKNOWN_MEMBER_ID
    assert beat(c, "nobody", -1).error is ErrorCode.UNKNOWN_MEMBER_ID
    beat(c, "m2", 0)
    beat(c, "m1", 1, owned=set(STREAMS))
    beat(c, "m1", 1, owned={"s0", "s1"})  # m1 now at epoch 2
    # A member one epoch behind that owns nothing new lost a response: it is answered, not fenced.
    assert beat(c, "m1", 1, owned={"s0"}).error is ErrorCode.NONE
    # One behind but owning what is no longer its own, or not saying what it owns: fenced.
    assert beat(c, "m1", 1, owned={"s3"}).error is ErrorCode.FENCED_MEMBER_EPOCH
    assert beat(c, "m1", 1).error is ErrorCode.FENCED_MEMBER_EPOCH


def test_invalid_requests() -> None:
    c, _ = make()
    no_timeout = HeartbeatRequestData("g", "m", 0, subscribed_topic_names=STREAMS)
    assert c.heartbeat(no_timeout, STREAMS, 0).error is ErrorCode.INVALID_REQUEST
    assert beat(c, "", 1).error is ErrorCode.INVALID_REQUEST
    assert beat(c, "m", -3).error is ErrorCode.INVALID_REQUEST
    assert beat(c, "m", 0, server_assignor="sticky").error is ErrorCode.UNSUPPORTED_ASSIGNOR
    assert beat(c, "m", 0, server_assignor="range").error is ErrorCode.NONE


def test_session_timeout_removes_a_silent_member() -> None:
    c, _ = make()
    beat(c, "m1", 0, now=0)
    beat(c, "m2", 0, now=0)
    assert c.expire(SESSION_MS - 1, STREAMS) == []
    beat(c, "m2", 2, now=SESSION_MS - 1, owned=set())
    assert c.expire(SESSION_MS, STREAMS) == [("g", "m1")]
    group = c.group("g")
    assert group is not None and group.target == {"m2": frozenset(STREAMS)}
    assert beat(c, "m2", 2, now=SESSION_MS + 1, owned=set()).assignment == frozenset(STREAMS)


def test_each_group_has_the_session_timeout_of_its_config_from_its_next_heartbeat() -> None:
    configs = {"g": ConsumerGroupConfig(SESSION_MS, 500), "short": ConsumerGroupConfig(2_000, 500)}
    c = ConsumerGroupCoordinator(lambda group_id: configs[group_id])
    beat(c, "m1", 0, now=0)
    c.heartbeat(HeartbeatRequestData("short", "m2", 0, rebalance_timeout_ms=REBALANCE_MS, subscribed_topic_names=STREAMS),
                STREAMS, 0)
    assert c.expire(1_999, STREAMS) == []
    assert c.expire(2_000, STREAMS) == [("short", "m2")]
    # A changed config counts from the member's next heartbeat.
    configs["g"] = ConsumerGroupConfig(3_000, 500)
    assert c.expire(SESSION_MS - 1, STREAMS) == []
    beat(c, "m1", 1, now=SESSION_MS - 1, owned=set(STREAMS))
    assert c.expire(SESSION_MS - 1 + 2_999, STREAMS) == []
    assert c.expire(SESSION_MS - 1 + 3_000, STREAMS) == [("g", "m1")]


def test_a_member_that_does_not_revoke_in_time_is_removed() -> None:
    c, _ = make()
    beat(c, "m1", 0, now=0)
    beat(c, "m2", 0, now=0)
    beat(c, "m1", 1, now=1000, owned=set(STREAMS))  # told to revoke at 1000
    for now in range(2000, REBALANCE_MS, 2000):  # heartbeats go on, the revocation does not come
        beat(c, "m1", 1, now=now, owned=set(STREAMS))
        beat(c, "m2", 2, now=now, owned=set())
    assert c.expire(1000 + REBALANCE_MS - 1, STREAMS) == []
    assert c.expire(1000 + REBALANCE_MS, STREAMS) == [("g", "m1")]


def test_a_stream_created_later_is_assigned() -> None:
    c, _ = make()
    assert beat(c, "m1", 0, streams=("s0",)).assignment == frozenset({"s0"})
    assert beat(c, "m1", 1, owned={"s0"}, streams=("s0", "s1")) == HeartbeatResult(
        ErrorCode.NONE, None, "m1", 2, frozenset({"s0", "s1"}))


def test_commits_at_the_member_epoch() -> None:
    c, _ = make()
    beat(c, "m1", 0)
    assert c.check_commit("g", "m1", 1, version_with_epoch=True) is ErrorCode.NONE
    assert c.check_commit("g", "m1", 0, version_with_epoch=True) is ErrorCode.STALE_MEMBER_EPOCH
    assert c.check_commit("g", "m1", 2, version_with_epoch=True) is ErrorCode.FENCED_MEMBER_EPOCH
    assert c.check_commit("g", "m1", 0, version_with_epoch=False) is ErrorCode.ILLEGAL_GENERATION
    assert c.check_commit("g", "other", 1, version_with_epoch=True) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.check_commit("g", "", -1, version_with_epoch=True) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.check_commit("none", "", -1, version_with_epoch=True) is ErrorCode.NONE


def test_transactional_commits_at_the_member_epoch() -> None:
    """TxnOffsetCommit v3+ (KIP-447), as Kafka's ConsumerGroup.validateOffsetCommit: a stale epoch
    is ILLEGAL_GENERATION, a member that is gone UNKNOWN_MEMBER_ID, no member named passes."""
    c, _ = make()
    assert c.check_txn_commit("g", "m1", 3, None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.check_txn_commit("g", "", -1, None) is ErrorCode.NONE
    beat(c, "m1", 0)
    assert c.check_txn_commit("g", "m1", 1, None) is ErrorCode.NONE
    assert c.check_txn_commit("g", "m1", 0, None) is ErrorCode.ILLEGAL_GENERATION
    assert c.check_txn_commit("g", "m1", 2, None) is ErrorCode.FENCED_MEMBER_EPOCH
    assert c.check_txn_commit("g", "other", 1, None) is ErrorCode.UNKNOWN_MEMBER_ID
    assert c.check_txn_commit("g", "", -1, None) is ErrorCode.NONE
    assert c.check_txn_commit("g", "", -1, "instance") is ErrorCode.UNKNOWN_MEMBER_ID


def test_a_new_coordinator_adopts_the_stored_group() -> None:
    c, _ = make()
    beat(c, "m1", 0, now=0)
    beat(c, "m2", 0, now=0)
    beat(c, "m1", 1, now=0, owned=set(STREAMS))
    group = c.group("g")
    assert group is not None
    stored = consumer_group_state(group)
    assert stored is not None
    successor, _ = make()
    successor.adopt(restore_consumer_group("g", stored), now_ms=50_000)
    adopted = successor.group("g")
    assert adopted is not None
    assert (adopted.group_epoch, adopted.assignment_epoch, adopted.target) == (2, 2, group.target)
    assert {m: (x.epoch, x.owned, x.revoking) for m, x in adopted.members.items()} == {
        "m1": (1, frozenset({"s0", "s1"}), frozenset({"s2", "s3"})), "m2": (2, frozenset(), frozenset())}
    # The members carry on where they were, each with a fresh session.
    assert successor.expire(50_000 + SESSION_MS - 1, STREAMS) == []
    assert beat(successor, "m1", 1, now=50_001, owned={"s0", "s1"}).member_epoch == 2
    assert beat(successor, "m2", 2, now=50_002, owned=set()).assignment == frozenset({"s2", "s3"})


def test_uniform_assignment_is_even_and_sticky() -> None:
    c, _ = make()
    beat(c, "a", 0, topics=("s0", "s1", "s2"))
    beat(c, "b", 0, topics=("s0", "s1", "s2"))
    group = c.group("g")
    assert group is not None
    first = dict(group.target)
    assert sorted(len(v) for v in first.values()) == [1, 2]
    again = assign(group.members, STREAMS, first)
    assert again == first
    # A member subscribed to nothing gets nothing; a stream nobody subscribes to goes nowhere.
    beat(c, "c", 0, topics=("s9",))
    assert group.target["c"] == frozenset()


def test_classic_protocol_encodings_for_describe_groups() -> None:
    assert consumer_subscription(["b", "a"]) == b"\x00\x00\x00\x00\x00\x02\x00\x01a\x00\x01b\xff\xff\xff\xff"
    assert consumer_assignment(["a"]) == b"\x00\x00\x00\x00\x00\x01\x00\x01a\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"


def test_a_regex_subscription_follows_the_streams_it_matches() -> None:
    """KIP-848's SubscribedTopicRegex (franz-go's ConsumeRegex with its server-side balancer,
    the Java consumer's SubscriptionPattern): the coordinator resolves it, whole-name match,
    against the streams there are, and again as streams come and go."""
    c, changed = make()
    streams = ("orders-eu", "orders-us", "payments")
    joined = beat(c, "m1", 0, topics=None, subscribed_topic_regex="orders-.*", streams=streams)
    assert joined == HeartbeatResult(ErrorCode.NONE, None, "m1", 1, frozenset({"orders-eu", "orders-us"}))
    # Later heartbeats leave the regex out (unchanged): a new matching stream is assigned, a
    # stream whose name only contains a match is not.
    more = (*streams, "orders-asia", "old-orders-x")
    assert beat(c, "m1", 1, owned={"orders-eu", "orders-us"}, streams=more) == HeartbeatResult(
        ErrorCode.NONE, None, "m1", 2, frozenset({"orders-eu", "orders-us", "orders-asia"}))
    group = c.group("g")
    assert group is not None and group.members["m1"].regex == "orders-.*"
    # The stored group keeps the regex for a new coordinator.
    assert restore_consumer_group("g", consumer_group_state(group) or {}).members["m1"].regex == "orders-.*"
    # An empty regex drops it: the member subscribes to the names it gives, first revoking what
    # the regex gave it, then getting those.
    assert beat(c, "m1", 2, owned={"orders-eu", "orders-us", "orders-asia"}, topics=("payments",),
                subscribed_topic_regex="", streams=more) == HeartbeatResult(ErrorCode.NONE, None, "m1", 2, frozenset())
    assert beat(c, "m1", 2, owned=set(), streams=more) == HeartbeatResult(
        ErrorCode.NONE, None, "m1", 3, frozenset({"payments"}))
    assert group.members["m1"].regex is None and group.members["m1"].subscribed == ("payments",)
    assert changed


def test_an_invalid_regex_is_refused_naming_it() -> None:
    c, _ = make()
    refused = beat(c, "m1", 0, topics=None, subscribed_topic_regex="orders-(")
    assert refused.error is ErrorCode.INVALID_REGULAR_EXPRESSION
    assert refused.message is not None and "orders-(" in refused.message
    assert c.group("g") is None


def test_a_group_whose_members_all_left_resumes_its_group_epoch() -> None:
    """Kafka keeps an empty consumer group's epochs: a member joining it again starts above them."""
    coordinator = ConsumerGroupCoordinator(lambda group_id: ConsumerGroupConfig(SESSION_MS, 500), initial_epoch=lambda group_id: 4)
    assert beat(coordinator, "m1", 0).member_epoch == 5


def test_a_static_member_restarting_keeps_its_streams_without_a_rebalance() -> None:
    """KIP-345 under KIP-848 (Kafka's getOrMaybeCreateStaticConsumerGroupMember): a static
    member leaving with epoch -2 keeps its place and streams (no one else is given them); its
    instance joining again under a new member id takes them back at the same group epoch. Its
    instance id is UNRELEASED_INSTANCE_ID while the old member has not left, the old member id
    is FENCED_INSTANCE_ID once replaced, and the session timeout still removes a member that
    never comes back."""
    c, changed = make()
    beat(c, "m1", 0, instance_id="i1")
    beat(c, "m2", 0, instance_id="i2")
    beat(c, "m1", 1, owned=set(STREAMS), instance_id="i1")
    beat(c, "m1", 1, owned={"s0", "s1"}, instance_id="i1")
    beat(c, "m2", 2, owned=set(), instance_id="i2")
    group = c.group("g")
    assert group is not None and group.state is ConsumerGroupState.STABLE and group.group_epoch == 2
    # While m2 runs, a second process with its instance id is refused.
    assert beat(c, "m3", 0, instance_id="i2").error is ErrorCode.UNRELEASED_INSTANCE_ID

    assert beat(c, "m2", -2, instance_id="i2") == HeartbeatResult(ErrorCode.NONE, None, "m2", -2, None)
    assert changed[-1] == "g" and group.group_epoch == 2
    # m1 is not given m2's streams meanwhile.
    assert beat(c, "m1", 2, now=100, owned={"s0", "s1"}, instance_id="i1") == \
        HeartbeatResult(ErrorCode.NONE, None, "m1", 2, None)

    back = beat(c, "m3", 0, now=200, instance_id="i2")
    assert back == HeartbeatResult(ErrorCode.NONE, None, "m3", 2, frozenset({"s2", "s3"}))
    assert group.group_epoch == 2 and sorted(group.members) == ["m1", "m3"]
    assert group.target == {"m1": frozenset({"s0", "s1"}), "m3": frozenset({"s2", "s3"})}
    assert beat(c, "m3", 2, now=300, owned={"s2", "s3"}, instance_id="i2").error is ErrorCode.NONE
    assert group.state is ConsumerGroupState.STABLE
    assert beat(c, "m2", 2, now=300, owned={"s2", "s3"}, instance_id="i2").error is ErrorCode.FENCED_INSTANCE_ID
    # The stored form keeps a member away for a while, so a new coordinator does too.
    beat(c, "m3", -2, now=400, instance_id="i2")
    restored = restore_consumer_group("g", consumer_group_state(group))
    assert restored.members["m3"].epoch == -2 and restored.members["m3"].owned == frozenset({"s2", "s3"})
    # Not back within its session (from its last heartbeat): removed, and its streams go to m1.
    beat(c, "m1", 2, now=500, owned={"s0", "s1"}, instance_id="i1")
    assert c.expire(300 + SESSION_MS - 1, STREAMS) == []
    assert c.expire(300 + SESSION_MS, STREAMS) == [("g", "m3")]
    assert beat(c, "m1", 2, now=300 + SESSION_MS, owned={"s0", "s1"}, instance_id="i1").assignment == \
        frozenset(STREAMS)


def test_a_member_without_an_instance_id_leaving_with_minus_two_leaves() -> None:
    c, _ = make()
    beat(c, "m1", 0)
    assert beat(c, "m1", -2).error is ErrorCode.NONE
    assert c.group("g") is None
