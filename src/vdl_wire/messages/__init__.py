"""Declarations and generated value classes for every API we serve.

Naming: each API module declares `<NAME>_REQUEST` / `<NAME>_RESPONSE` (schema.MessageDecl) and
the generated classes `<Api>Request` / `<Api>Response`. Field names are Kafka's JSON message
definition names in snake_case. Nested struct classes keep Kafka's struct type names and are
attributes of the message class (all of them, at any depth), e.g.

    ProduceRequest.TopicProduceData, ProduceRequest.PartitionProduceData
    ProduceResponse.TopicProduceResponse, ProduceResponse.PartitionProduceResponse
    FetchRequest.FetchTopic, FetchRequest.FetchPartition, FetchRequest.ForgottenTopic
    FetchResponse.FetchableTopicResponse, FetchResponse.PartitionData, FetchResponse.AbortedTransaction
    MetadataResponse.MetadataResponseBroker / MetadataResponseTopic / MetadataResponsePartition
    ApiVersionsResponse.ApiVersion

Every field has a default (Kafka's default, else 0 / "" / b"" / [] / None for records), so a
handler sets only what it needs: ProduceResponse(responses=[...]).
"""

from __future__ import annotations

from .add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from .add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from .alter_configs import AlterConfigsRequest, AlterConfigsResponse
from .alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from .alter_replica_log_dirs import AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse
from .alter_user_scram_credentials import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from .api_versions import ApiVersionsRequest, ApiVersionsResponse
from .client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from .consumer_group_describe import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
from .consumer_group_heartbeat import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
from .create_acls import CreateAclsRequest, CreateAclsResponse
from .create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from .create_topics import CreateTopicsRequest, CreateTopicsResponse
from .delete_acls import DeleteAclsRequest, DeleteAclsResponse
from .delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from .delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from .delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from .describe_acls import DescribeAclsRequest, DescribeAclsResponse
from .describe_cluster import DescribeClusterRequest, DescribeClusterResponse
from .describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from .describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from .describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse
from .describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from .describe_topic_partitions import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse
from .describe_user_scram_credentials import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from .elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from .end_txn import EndTxnRequest, EndTxnResponse
from .fetch import FetchRequest, FetchResponse
from .find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from .heartbeat import HeartbeatRequest, HeartbeatResponse
from .incremental_alter_configs import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from .init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from .join_group import JoinGroupRequest, JoinGroupResponse
from .leave_group import LeaveGroupRequest, LeaveGroupResponse
from .list_config_resources import ListConfigResourcesRequest, ListConfigResourcesResponse
from .list_groups import ListGroupsRequest, ListGroupsResponse
from .list_offsets import ListOffsetsRequest, ListOffsetsResponse
from .list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from .metadata import MetadataRequest, MetadataResponse
from .offset_commit import OffsetCommitRequest, OffsetCommitResponse
from .offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from .offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from .offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from .produce import ProduceRequest, ProduceResponse
from .sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from .sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from .sync_group import SyncGroupRequest, SyncGroupResponse
from .transactions_admin import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from .txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from .update_features import UpdateFeaturesRequest, UpdateFeaturesResponse
from .vdl_nodes import VdlNodesRequest, VdlNodesResponse
from .vdl_writer_id import VdlWriterIdRequest, VdlWriterIdResponse
from .write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse

# (request class, response class) per API, in api-key order.
MESSAGE_PAIRS: tuple[tuple[type, type], ...] = (
    (ProduceRequest, ProduceResponse),
    (FetchRequest, FetchResponse),
    (ListOffsetsRequest, ListOffsetsResponse),
    (MetadataRequest, MetadataResponse),
    (OffsetCommitRequest, OffsetCommitResponse),
    (OffsetFetchRequest, OffsetFetchResponse),
    (FindCoordinatorRequest, FindCoordinatorResponse),
    (JoinGroupRequest, JoinGroupResponse),
    (HeartbeatRequest, HeartbeatResponse),
    (LeaveGroupRequest, LeaveGroupResponse),
    (SyncGroupRequest, SyncGroupResponse),
    (DescribeGroupsRequest, DescribeGroupsResponse),
    (ListGroupsRequest, ListGroupsResponse),
    (ApiVersionsRequest, ApiVersionsResponse),
    (CreateTopicsRequest, CreateTopicsResponse),
    (DeleteTopicsRequest, DeleteTopicsResponse),
    (InitProducerIdRequest, InitProducerIdResponse),
    (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    (EndTxnRequest, EndTxnResponse),
    (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    (DescribeConfigsRequest, DescribeConfigsResponse),
    (DescribeLogDirsRequest, DescribeLogDirsResponse),
    (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
    (DeleteGroupsRequest, DeleteGroupsResponse),
    (ElectLeadersRequest, ElectLeadersResponse),
    (IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse),
    (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse),
    (ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse),
    (OffsetDeleteRequest, OffsetDeleteResponse),
    (SaslHandshakeRequest, SaslHandshakeResponse),
    (SaslAuthenticateRequest, SaslAuthenticateResponse),
    (DescribeAclsRequest, DescribeAclsResponse),
    (CreateAclsRequest, CreateAclsResponse),
    (DeleteAclsRequest, DeleteAclsResponse),
    (DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse),
    (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse),
    (DescribeProducersRequest, DescribeProducersResponse),
    (DescribeTransactionsRequest, DescribeTransactionsResponse),
    (ListTransactionsRequest, ListTransactionsResponse),
    (AlterConfigsRequest, AlterConfigsResponse),
    (CreatePartitionsRequest, CreatePartitionsResponse),
    (DescribeClusterRequest, DescribeClusterResponse),
    (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    (AlterClientQuotasRequest, AlterClientQuotasResponse),
    (DeleteRecordsRequest, DeleteRecordsResponse),
    (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    (DescribeQuorumRequest, DescribeQuorumResponse),
    (UpdateFeaturesRequest, UpdateFeaturesResponse),
    (ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse),
    (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse),
    (ListConfigResourcesRequest, ListConfigResourcesResponse),
    (DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse),
    (VdlNodesRequest, VdlNodesResponse),
    (VdlWriterIdRequest, VdlWriterIdResponse),
)

__all__ = [
    "MESSAGE_PAIRS",
    "ListConfigResourcesRequest",
    "ListConfigResourcesResponse",
    "DescribeTopicPartitionsRequest",
    "DescribeTopicPartitionsResponse",
    "DescribeProducersRequest",
    "DescribeProducersResponse",
    "DescribeTransactionsRequest",
    "DescribeTransactionsResponse",
    "ListTransactionsRequest",
    "ListTransactionsResponse",
    "WriteTxnMarkersRequest",
    "WriteTxnMarkersResponse",
    "AddOffsetsToTxnRequest",
    "AddOffsetsToTxnResponse",
    "AddPartitionsToTxnRequest",
    "AddPartitionsToTxnResponse",
    "EndTxnRequest",
    "EndTxnResponse",
    "TxnOffsetCommitRequest",
    "TxnOffsetCommitResponse",
    "AlterPartitionReassignmentsRequest",
    "AlterReplicaLogDirsRequest",
    "AlterReplicaLogDirsResponse",
    "AlterPartitionReassignmentsResponse",
    "AlterUserScramCredentialsRequest",
    "AlterUserScramCredentialsResponse",
    "ApiVersionsRequest",
    "ApiVersionsResponse",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "CreateAclsRequest",
    "CreateAclsResponse",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "DeleteAclsRequest",
    "DeleteAclsResponse",
    "DeleteGroupsRequest",
    "DeleteGroupsResponse",
    "DeleteTopicsRequest",
    "DeleteTopicsResponse",
    "DescribeAclsRequest",
    "DescribeAclsResponse",
    "DescribeConfigsRequest",
    "DescribeConfigsResponse",
    "DescribeGroupsRequest",
    "DescribeGroupsResponse",
    "ElectLeadersRequest",
    "ElectLeadersResponse",
    "DescribeLogDirsRequest",
    "DescribeLogDirsResponse",
    "DescribeQuorumRequest",
    "DescribeQuorumResponse",
    "DescribeUserScramCredentialsRequest",
    "DescribeUserScramCredentialsResponse",
    "FetchRequest",
    "FetchResponse",
    "FindCoordinatorRequest",
    "FindCoordinatorResponse",
    "HeartbeatRequest",
    "HeartbeatResponse",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
    "InitProducerIdRequest",
    "InitProducerIdResponse",
    "JoinGroupRequest",
    "JoinGroupResponse",
    "LeaveGroupRequest",
    "LeaveGroupResponse",
    "ListGroupsRequest",
    "ListGroupsResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "MetadataRequest",
    "MetadataResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "ProduceRequest",
    "ProduceResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "SyncGroupRequest",
    "SyncGroupResponse",
    "AlterConfigsRequest",
    "AlterConfigsResponse",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "DeleteRecordsRequest",
    "DeleteRecordsResponse",
    "DescribeClusterRequest",
    "DescribeClusterResponse",
    "DescribeClientQuotasRequest",
    "DescribeClientQuotasResponse",
    "AlterClientQuotasRequest",
    "AlterClientQuotasResponse",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "UpdateFeaturesRequest",
    "UpdateFeaturesResponse",
    "VdlNodesRequest",
    "VdlNodesResponse",
    "VdlWriterIdRequest",
    "VdlWriterIdResponse",
]
