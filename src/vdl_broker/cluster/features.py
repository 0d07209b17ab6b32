"""The cluster's feature level: which metadata commands the cluster may use (as Kafka's
`metadata.version`, KIP-584 and KIP-778).

A release supports levels up to SUPPORTED_LEVEL. A new cluster starts at the level of the
release that formed it (its init_cluster carries it); a cluster formed before levels existed is
at BASELINE_LEVEL. Once every node runs a release that supports a higher level, an operator
raises it (`vdl cluster upgrade`, which sends Kafka's UpdateFeatures for FEATURE_NAME): the
`finalize_features` command. A command introduced at level N is refused, alike on every node,
while the cluster is below N, so a node still on the older release never meets it. Levels only
go up: a node whose release is older than the cluster's level refuses to start.

A node that meets a command or a level its release does not know (a newer release wrote it)
raises NewerMetadata instead of skipping it, which would leave it with a state different from
the other nodes': vdl_broker.cluster.service stops the node, naming both versions.

    {"op": "finalize_features", "level": N}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vdl_broker.cluster.group_configs import GROUP_CONFIG_OPS, GROUP_CONFIGS_OP
from vdl_broker.cluster.transactions import TXN_OPS
from vdl_broker.raft.wire import CHECKSUMMED, ENTRY_CHECKSUMS, VERSION
from vdl_wire.messages.update_features import METADATA_FEATURE as FEATURE_NAME

BASELINE_LEVEL = 1  # everything a cluster formed before feature levels may hold
SUPPORTED_LEVEL = 6  # the highest level this release understands
# Level 2: DeleteRecords writes LOG_START entries into stream logs, which a release before it
# cannot read; it is refused below this level.
DELETE_RECORDS_LEVEL = 2
# Commands added after the baseline, and the level that introduced each (a command not named
# here is part of the baseline). Level 2: KIP-848 consumer groups' replicated state and the
# transaction coordinator's commands.
# Level 3: the expiry of idle transactional ids (`txn_expire`; below it, they are kept), and a
# KIP-848 group whose last member left staying one while it has offsets (`consumer_group_empty`;
# below it, such a group is forgotten and its offsets stay as a classic group's, as before).
# Level 6: a group's own configs (`group_configs`; below it, every group has the nodes' settings).
COMMAND_LEVELS: dict[str, int] = ({"consumer_group": 2, "consumer_group_empty": 3} | dict.fromkeys(TXN_OPS, 2)
                                  | {"txn_expire": 3} | dict.fromkeys(GROUP_CONFIG_OPS, 6))
CONSUMER_GROUPS_LEVEL = COMMAND_LEVELS["consumer_group"]
EMPTY_CONSUMER_GROUPS_LEVEL = COMMAND_LEVELS["consumer_group_empty"]
TXN_EXPIRY_LEVEL = COMMAND_LEVELS["txn_expire"]
GROUP_CONFIGS_LEVEL = COMMAND_LEVELS[GROUP_CONFIGS_OP]
# Level 3: stream configs a release before it does not know -- a cleanup.policy other than
# `delete` (a `compact` stream keeps every record), Kafka's compaction settings, a compression.type
# other than `producer` and message.timestamp.type=LogAppendTime. Such a release reads an unknown
# value as unset, so its replicas would delete by retention what the others keep, and its leader
# would store batches as produced: proposals setting them are refused below this level
# (stream_configs.sets_unreleased_config).
KEEP_ALL_POLICY_LEVEL = 3
# Level 4: nodes send each other checksummed Raft frames (vdl_broker.raft.wire.CHECKSUMMED),
# which a release before it refuses (it reads wire version 1 only); below it, frames as before.
FRAME_CHECKSUM_LEVEL = 4
# Level 5: Raft frames carry each entry's checksum (vdl_broker.raft.wire.ENTRY_CHECKSUMS), which a
# release before it refuses; below it, checksummed frames as at level 4.
ENTRY_CHECKSUM_LEVEL = 5
# Level 2: nodes describe themselves -- register_node and join_node carry "own" (a node's own
# registration, which other nodes' peers entries no longer override: cluster/metadata.py).
# Below it, a node's description comes from the metadata leader's config, as before.
OWN_REGISTRATION_LEVEL = 2
FEATURE_OPS = frozenset({"finalize_features"})
# Kafka's `transaction.version` (KIP-890 part 2): at 2, clients bump the epoch with every EndTxn
# (v5) and add partitions and groups implicitly (Produce v12, TxnOffsetCommit v5). It follows the
# cluster's level -- level 2 brings the coordinator, which serves both protocols -- so it needs
# no command of its own: 0 (no transactions) below it.
TRANSACTION_VERSION_FEATURE = "transaction.version"
TRANSACTION_VERSION_MAX = 2


def raft_frame_version(level: int) -> int:
    """The newest Raft frame version every node of a cluster at `level` reads."""
    if level >= ENTRY_CHECKSUM_LEVEL:
        return ENTRY_CHECKSUMS
    return CHECKSUMMED if level >= FRAME_CHECKSUM_LEVEL else VERSION


def transaction_version(level: int) -> int:
    return TRANSACTION_VERSION_MAX if level >= COMMAND_LEVELS["txn_end"] else 0


class NewerMetadata(Exception):
    """The metadata log holds what a newer release wrote; applying past it would diverge."""


def finalize_features_command(level: int) -> dict[str, Any]:
    return {"op": "finalize_features", "level": level}


def newer_than_supported(what: str, level: int | None = None) -> NewerMetadata:
    needs = f"feature level {level}" if level is not None else "a newer release"
    return NewerMetadata(f"the cluster metadata holds {what}, which needs {needs}; this release supports "
                         f"{FEATURE_NAME} up to level {SUPPORTED_LEVEL}: run this node on the release the "
                         f"other nodes run (a downgrade below a finalized level is not possible)")


@dataclass
class FeaturesState:
    level: int = BASELINE_LEVEL
    finalized_index: int = -1  # Raft index of the last finalize (ApiVersions' finalized_features_epoch)

    def refuses(self, op: str) -> str | None:
        """Why `op` may not be applied at the cluster's level (None: it may)."""
        needed = COMMAND_LEVELS.get(op, BASELINE_LEVEL)
        if needed > self.level:
            return (f"{op} needs {FEATURE_NAME} level {needed}, the cluster is at level {self.level}: "
                    f"finalize it with `vdl cluster upgrade` once every node runs this release")
        return None

    def apply(self, index: int, command: dict[str, Any]) -> str | None:
        """Apply a finalize; an error message for a command every node refuses alike."""
        level = command.get("level")
        if isinstance(level, bool) or not isinstance(level, int) or level < BASELINE_LEVEL:
            return f"bad finalize_features level {level!r}"
        if level > SUPPORTED_LEVEL:
            raise newer_than_supported(f"{FEATURE_NAME} finalized at level {level}", level)
        if level < self.level:
            return f"{FEATURE_NAME} is at level {self.level}: it cannot go down to {level}"
        self.level, self.finalized_index = level, index
        return None
