"""Topic ids (KIP-516): Kafka names a topic incarnation by a 128-bit id besides its name, so a
client can tell a deleted and re-created topic from the old one (Metadata v10+, CreateTopics
v7, DeleteTopics v6, the consumer group protocol's assignments).

A stream's id is derived from the cluster id, its name and the Raft index of the metadata
command that created it: every node computes the same id without storing it, and a stream
deleted and created again under the same name gets a new one.
"""

from __future__ import annotations

import hashlib
import uuid

ZERO = uuid.UUID(int=0)  # Kafka's "no id" (Uuid.ZERO_UUID); Uuid.ONE_UUID is reserved too
_RESERVED = (ZERO, uuid.UUID(int=1))


def topic_id(cluster_id: str | None, name: str, created_index: int) -> uuid.UUID:
    digest = hashlib.sha256(f"{cluster_id or ''}\0{name}\0{created_index}".encode()).digest()
    candidate = uuid.UUID(bytes=digest[:16])
    return candidate if candidate not in _RESERVED else uuid.UUID(bytes=digest[16:])


class TopicIds:
    """The ids of a cluster's streams, computed once per incarnation, and the way back."""

    def __init__(self) -> None:
        self._ids: dict[tuple[str, int], uuid.UUID] = {}
        self._names: dict[uuid.UUID, str] = {}
        self._cluster_id: str | None = None

    def id_of(self, cluster_id: str | None, name: str, created_index: int) -> uuid.UUID:
        if cluster_id != self._cluster_id:
            self._ids.clear()
            self._names.clear()
            self._cluster_id = cluster_id
        key = (name, created_index)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = topic_id(cluster_id, name, created_index)
            self._names[found] = name
        return found

    def name_of(self, cluster_id: str | None, streams: dict, wanted: uuid.UUID) -> str | None:
        """The stream `wanted` names now (None: no such stream, or an incarnation since deleted)."""
        name = self._names.get(wanted)
        if name is None or len(self._names) < len(streams):
            for info in streams.values():
                self.id_of(cluster_id, info.name, info.created_index)
            name = self._names.get(wanted)
        info = streams.get(name) if name is not None else None
        if info is None or self.id_of(cluster_id, info.name, info.created_index) != wanted:
            return None
        return name
