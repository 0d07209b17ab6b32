"""Raft consensus core: a pure, deterministic, sans-IO state machine (etcd-raft style).

One `RaftNode` per Raft group (every stream and the metadata group). No I/O, no clocks, no
threads: inputs are `tick()`, `step(message)`, `propose(data)`; output is a `Ready` bundle the
driver carries out. Randomness (election timeouts) comes from an injected `random.Random`.
It depends on nothing else of ours: storage is seen through the read-only `RaftStorage`
Protocol, and entries not yet persisted ("unstable") live in the core until acknowledged.

Construction
    node = RaftNode(node_id, voters, storage, RaftConfig(election_ticks=10, ...),
                    hard_state=..., rng=..., applied=0, damage=None, membership=(),
                    lease_after_start=False)
    config: RaftConfig (vdl_broker.raft.config), every Raft setting, shared by a node's groups.
    storage: RaftStorage -- first_index, last_index (properties), term_at(i) valid for
        first_index-1 ..= last_index (first_index-1 is the log start point: its term is the
        reset/snapshot term; an empty fresh log answers first 1, last 0, term_at(0) = 0),
        entries(start, end, max_bytes) -> list[Entry] (at least one entry).
    hard_state: the last persisted HardState(term, voted_for) (or None for a fresh node).
    applied: the driver's durable applied index, if it keeps one (entries up to it are not
        redelivered); otherwise committed entries are redelivered from the log start.
    damage: a Damage when the driver found that storage lost data this node had synced (or its
        hard state): the node starts *recovering* (vdl_broker.raft.recovery).
    membership: the driver's saved ConfigRecords (persistence.load_membership); `voters` is the
        configuration the group was created with (empty: a node joining an existing group),
        used while no record exists. See vdl_broker.raft.membership.
    lease_after_start: refuse votes for an election timeout first (a driver serving reads
        under the read lease, for a replica that may have acknowledged heartbeats before).
    Restart = build a new RaftNode from storage + hard state: unstable state is simply gone.
    Commit index is not persisted (it is relearned from the leader).

Inputs
    node.tick()                       one logical clock tick (e.g. every 100 ms)
    node.step(msg)                    a Message received from a peer (any order, duplicates ok)
    node.propose(data, type=EntryType.DATA) -> index   leader only; raises NotLeaderError
        (.leader_id = the known leader or 0) or ProposalDroppedError (a NotLeaderError) while
        a leadership transfer runs. Proposals are batched: all entries proposed before the next
        ready() travel in one APPEND per follower (split at max_append_bytes).
    node.transfer_leadership(target)  leader only; catches target up, then sends TIMEOUT_NOW;
        abandoned after one election timeout. Use it for a graceful shutdown.
    node.propose_conf_change(ConfState(voters, learners)) -> index   leader only; one voter at a
        time, after the previous change and the leader's own-term entry committed, the leader
        stays a voter; raises ConfigChangeError otherwise (vdl_broker.raft.membership).
    node.campaign()                   start an election now (bootstrap/tests)
    node.wake()                       leave quiescence (a read needs the leader's lease back; a
        lagging follower's node came back)
    node.forget_leader()              the leader's node is gone (node liveness): grant votes now
Quiescence (vdl_broker.raft.quiescence, RaftConfig.quiesce_after_heartbeats > 0): an idle group's leader
    tells its followers to quiesce; `node.quiescent` nodes ignore tick() (the driver stops
    delivering ticks) until a message, a proposal or wake()/forget_leader() wakes them. The
    driver's node liveness (vdl_broker.raft.liveness) replaces the heartbeats meanwhile.

Observables (read any time)
    role (Role.FOLLOWER/PRE_CANDIDATE/CANDIDATE/LEADER), is_leader, leader_id (0 = unknown),
    term, voted_for, hard_state, recovering (damaged, not yet given back: clear the driver's
    damage record once False), commit_index, applied_index, first_index, last_index,
    current_term_committed (a new leader publishes its high watermark only once True),
    match_index(peer), peer_status() -> {peer: PeerStatus(match, next, state, recent_active,
    learner)} (leader only; its own match = its durable index) for Kafka's ISR; conf (the
    configuration in force: the latest in the log), voters, learners, conf_pending.

Output: `ready = node.ready()` (only when `node.has_ready()`; one outstanding at a time)
    ready.soft_state        SoftState(role, leader_id) if changed since the last Ready, else None
    ready.hard_state        HardState(term, voted_for) if changed, else None
    ready.snapshot          SnapshotMeta(index, term, data) if the leader reset our log start
    ready.entries           entries to append; entries[0].index may be <= the stored last index
                            (a conflict): truncate the stored log from there first
    ready.committed_entries entries newly committed, to apply in order (<= max_committed_bytes)
    ready.messages          Messages to send after the sync (step 5 below)
    ready.early_messages    leader -> follower messages (APPEND, HEARTBEAT, SNAPSHOT,
                            TIMEOUT_NOW) of a term whose hard state is already durable: they may
                            be sent before the sync (step 0), so the leader's own disk write
                            overlaps replication (Raft thesis §10.2.1); sending them with
                            `messages` instead is also correct
    ready.membership        the configuration records when they changed (else None)
    ready.must_sync         whether anything above needs an fsync

THE DRIVER CONTRACT (what must be durable before what)
    0. Optionally send ready.early_messages right away (never any of ready.messages).
       If ready.membership: save it (with the records saved before: a superset) before 1-2,
       and exactly it after 4 (persistence.save_membership).
    1. If ready.snapshot: StreamLog.reset(snapshot.index + 1, snapshot.term, snapshot.data).
    2. If ready.entries: truncate_suffix(entries[0].index) when it is <= last_index, then
       append them (the log stores the core's Entry as it is: no conversion).
    3. If ready.hard_state: save it (persistence.save_hard_state: atomic and durable).
    4. Sync (fsync) 1-3. ONLY THEN
    5. Send ready.messages (plus early_messages if not sent in 0). They may carry votes,
       acknowledgements of the entries just written, or a term -- all of which promise
       durability. Messages may be dropped,
       delayed, duplicated or reordered by the transport: the core copes.
       SNAPSHOT messages: the sending driver fills `message.snapshot.data` with the opaque
       start point of index+1 (the Kafka log start offset); if its log no longer starts
       there, it may drop the message (the leader retries on the next heartbeat).
    6. Apply ready.committed_entries (they are durable locally by then).
    7. node.advance(ready). The leader counts its own entries toward the commit quorum only
       here ("the leader counts itself only after its own sync"); followers acknowledge only
       through messages sent in step 5, i.e. after their sync.
    This is safe with early_messages because the leader counts its own entries only in 7,
    and a follower's acknowledgement always waits for the follower's own sync.
    tick()/step()/propose() may be called between ready() and advance() (e.g. while the sync
    runs); their effects appear in the next Ready. Retention may drop only entries
    <= applied_index (never uncommitted ones).

Messages (Message(type, to, sender, term, log_term, index, entries, commit, reject,
reject_hint, snapshot, force, quiesce)); MessageType values are stable wire numbers:
    APPEND(1) / APPEND_RESPONSE(2)        replication with fast backtracking: a rejection
        carries reject_hint + log_term (the follower's last index whose term <= the leader's
        prev term), so the leader skips a whole term per round trip.
    HEARTBEAT(3) / HEARTBEAT_RESPONSE(4)  carry only term/commit: coalescible per node pair
        (quiesce = the leader quiesces / the follower did).
    VOTE(5) / VOTE_RESPONSE(6), PRE_VOTE(7) / PRE_VOTE_RESPONSE(8)   (force = transfer)
    SNAPSHOT(9)  the leader's log start point when a follower needs compacted entries.
    TIMEOUT_NOW(10)  leadership transfer: campaign immediately.

Implemented: randomized election timeouts [election_ticks, 2*election_ticks), PreVote,
CheckQuorum with leader lease (followers that heard from a leader within an election timeout
ignore vote requests), a no-op entry per new term, conflict truncation, fast backtracking,
commit by counting only current-term entries (Raft §5.4.2), per-follower probe / replicate /
snapshot states with pipelined appends bounded by max_inflight_messages and
max_inflight_bytes, lost-append recovery on heartbeat responses, leadership transfer.
EntryType.METADATA entries are the metadata group's commands: the core treats them like DATA
(proposed, replicated, committed), the log stores them like NOOP (no Kafka offsets).
Membership changes (vdl_broker.raft.membership): learners, single-server changes in CONFIG
entries, the configuration in force at the log start carried by SnapshotMeta.conf.
Not implemented: joint consensus, ReadIndex.
"""

from vdl_broker.raft.config import RaftConfig
from vdl_broker.raft.membership import ConfigChangeError
from vdl_broker.raft.node import RaftNode
from vdl_broker.raft.progress import PeerStatus, ProgressState
from vdl_broker.raft.storage import MemoryStorage, RaftStorage
from vdl_broker.raft.types import (
    EXTENT_UNKNOWN,
    NONE,
    CompactedError,
    ConfigRecord,
    ConfState,
    Damage,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    NotLeaderError,
    ProposalDroppedError,
    RaftError,
    Ready,
    Role,
    SnapshotMeta,
    SoftState,
)

__all__ = [
    "EXTENT_UNKNOWN",
    "NONE",
    "CompactedError",
    "ConfState",
    "ConfigChangeError",
    "ConfigRecord",
    "Damage",
    "Entry",
    "EntryType",
    "HardState",
    "MemoryStorage",
    "Message",
    "MessageType",
    "NotLeaderError",
    "PeerStatus",
    "ProgressState",
    "ProposalDroppedError",
    "RaftConfig",
    "RaftError",
    "RaftNode",
    "RaftStorage",
    "Ready",
    "Role",
    "SnapshotMeta",
    "SoftState",
]
