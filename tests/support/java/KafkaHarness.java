import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.LogDirDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.admin.ReplicaInfo;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicCollection;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.utils.internals.Exit;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.regex.Pattern;

/**
 * Apache Kafka's own Java client (producer, consumer, AdminClient), driven over stdin/stdout by
 * the tests (tests/support/java_client.py): one JVM runs many operations, since a JVM start costs
 * seconds here. Each stdin line is a JSON command {"id", "op", ...}; each answer one JSON line
 * {"id", "ok": true, "result"} or {"id", "ok": false, "error": exception class, "message",
 * "causes"}. Clients are named by the test ("name"); record keys and values travel as UTF-8
 * strings (null stays null). Background tasks (a producer or a consumer running on a thread of
 * its own while the test kills nodes) report what they did when asked.
 *
 * stdout carries only the answers: everything else the JVM prints (Kafka's logging) goes to
 * stderr.
 */
public final class KafkaHarness {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonNodeFactory NODES = JsonNodeFactory.instance;

    private final Map<String, KafkaProducer<byte[], byte[]>> producers = new HashMap<>();
    private final Map<String, KafkaConsumer<byte[], byte[]>> consumers = new HashMap<>();
    private final Map<String, Admin> admins = new HashMap<>();
    private final Map<String, Background> tasks = new ConcurrentHashMap<>();

    public static void main(String[] args) throws Exception {
        PrintStream answers = System.out;
        System.setOut(System.err);
        KafkaHarness harness = new KafkaHarness();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        answers.println("{\"ready\": true}");
        answers.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode command = JSON.readTree(line);
            ObjectNode answer = NODES.objectNode();
            answer.set("id", command.get("id"));
            try {
                answer.set("result", harness.run(command));
                answer.put("ok", true);
            } catch (Throwable error) {
                Throwable root = error instanceof ExecutionException && error.getCause() != null ? error.getCause() : error;
                answer.put("ok", false);
                answer.put("error", root.getClass().getSimpleName());
                answer.put("message", String.valueOf(root.getMessage()));
                ArrayNode causes = answer.putArray("causes");
                for (Throwable cause = root.getCause(); cause != null && causes.size() < 5; cause = cause.getCause()) {
                    causes.add(cause.getClass().getSimpleName() + ": " + cause.getMessage());
                }
            }
            answers.println(JSON.writeValueAsString(answer));
            answers.flush();
            if ("exit".equals(command.path("op").asText())) {
                break;
            }
        }
        harness.closeAll();
        System.exit(0);
    }

    private JsonNode run(JsonNode c) throws Exception {
        String op = c.path("op").asText();
        String name = c.path("name").asText("");
        switch (op) {
            case "exit": return NODES.nullNode();
            // the kafka-clients release on the classpath (the harness also runs on older ones)
            case "client_version": {
                Properties release = new Properties();
                try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
                    release.load(in);
                }
                return NODES.textNode(release.getProperty("version"));
            }
            case "producer": producers.put(name, new KafkaProducer<>(props(c), new ByteArraySerializer(), new ByteArraySerializer())); return NODES.nullNode();
            case "consumer": consumers.put(name, new KafkaConsumer<>(props(c), new ByteArrayDeserializer(), new ByteArrayDeserializer())); return NODES.nullNode();
            case "admin": admins.put(name, Admin.create(props(c))); return NODES.nullNode();
            case "close": return close(name);
            // producer
            case "send": return send(producer(name), c);
            case "init_transactions": producer(name).initTransactions(); return NODES.nullNode();
            case "begin_transaction": producer(name).beginTransaction(); return NODES.nullNode();
            case "commit_transaction": producer(name).commitTransaction(); return NODES.nullNode();
            case "abort_transaction": producer(name).abortTransaction(); return NODES.nullNode();
            // consumer
            case "subscribe": return subscribe(consumer(name), c);
            case "assign": consumer(name).assign(partitions(c.get("partitions"))); return NODES.nullNode();
            case "assignment": return partitionsJson(consumer(name).assignment());
            case "seek": consumer(name).seek(new TopicPartition(c.get("topic").asText(), c.path("partition").asInt(0)), c.get("offset").asLong()); return NODES.nullNode();
            case "seek_to_beginning": consumer(name).seekToBeginning(partitions(c.get("partitions"))); return NODES.nullNode();
            case "seek_to_end": consumer(name).seekToEnd(partitions(c.get("partitions"))); return NODES.nullNode();
            case "position": return NODES.numberNode(consumer(name).position(new TopicPartition(c.get("topic").asText(), c.path("partition").asInt(0)), Duration.ofSeconds(30)));
            case "poll": return poll(consumer(name), c);
            case "commit": return commit(consumer(name), c);
            case "committed": return committed(consumer(name), c);
            case "offsets_for_times": return offsetsForTimes(consumer(name), c);
            case "beginning_offsets": return offsetsJson(consumer(name).beginningOffsets(partitions(c.get("partitions")), Duration.ofSeconds(30)));
            case "end_offsets": return offsetsJson(consumer(name).endOffsets(partitions(c.get("partitions")), Duration.ofSeconds(30)));
            case "group_metadata": {
                var metadata = consumer(name).groupMetadata();
                ObjectNode out = NODES.objectNode();
                out.put("group_id", metadata.groupId());
                out.put("generation_id", metadata.generationId());
                out.put("member_id", metadata.memberId());
                return out;
            }
            case "unsubscribe": consumer(name).unsubscribe(); return NODES.nullNode();
            // background tasks
            case "produce_in_background": return startProducer(name, c);
            case "consume_in_background": return startConsumer(name, c);
            case "task_status": return task(c).status(false);
            case "task_stop": return task(c).stop();
            // Kafka's command-line tools, in this JVM
            case "tool": return runTool(c);
            default: return adminOp(op, admin(name), c);
        }
    }

    // -- admin ----------------------------------------------------------------------------------

    private JsonNode adminOp(String op, Admin admin, JsonNode c) throws Exception {
        switch (op) {
            case "create_topics": {
                List<NewTopic> topics = new ArrayList<>();
                for (JsonNode t : c.get("topics")) {
                    Optional<Integer> partitions = t.has("partitions") ? Optional.of(t.get("partitions").asInt()) : Optional.empty();
                    Optional<Short> replication = t.has("replication") ? Optional.of((short) t.get("replication").asInt()) : Optional.empty();
                    NewTopic topic = new NewTopic(t.get("name").asText(), partitions, replication);
                    if (t.has("configs")) {
                        topic.configs(strings(t.get("configs")));
                    }
                    topics.add(topic);
                }
                var result = admin.createTopics(topics);
                ObjectNode out = NODES.objectNode();
                for (var e : result.values().entrySet()) {
                    out.set(e.getKey(), outcome(e.getValue(), ignored -> {
                        ObjectNode created = NODES.objectNode();
                        created.put("topic_id", result.topicId(e.getKey()).get().toString());
                        created.put("partitions", result.numPartitions(e.getKey()).get());
                        created.put("replication", result.replicationFactor(e.getKey()).get());
                        return created;
                    }));
                }
                return out;
            }
            case "list_topics": {
                ArrayNode out = NODES.arrayNode();
                new TreeMap<>(admin.listTopics().namesToListings().get()).keySet().forEach(out::add);
                return out;
            }
            case "describe_topics": {
                ObjectNode out = NODES.objectNode();
                if (c.has("topic_ids")) {  // by id (KIP-516: Metadata v12 names topics by id alone)
                    List<Uuid> ids = new ArrayList<>();
                    c.get("topic_ids").forEach(id -> ids.add(Uuid.fromString(id.asText())));
                    var byId = admin.describeTopics(TopicCollection.ofTopicIds(ids)).topicIdValues();
                    for (var e : byId.entrySet()) {
                        out.set(e.getKey().toString(), outcome(e.getValue(), KafkaHarness::topicJson));
                    }
                    return out;
                }
                var described = admin.describeTopics(stringList(c.get("topics"))).topicNameValues();
                for (var e : described.entrySet()) {
                    out.set(e.getKey(), outcome(e.getValue(), KafkaHarness::topicJson));
                }
                return out;
            }
            case "delete_topics": {
                ObjectNode out = NODES.objectNode();
                for (var e : admin.deleteTopics(stringList(c.get("topics"))).topicNameValues().entrySet()) {
                    out.set(e.getKey(), outcome(e.getValue(), ignored -> NODES.nullNode()));
                }
                return out;
            }
            case "create_partitions": {
                Map<String, NewPartitions> wanted = new HashMap<>();
                c.get("counts").properties().forEach(e -> wanted.put(e.getKey(), NewPartitions.increaseTo(e.getValue().asInt())));
                ObjectNode out = NODES.objectNode();
                for (var e : admin.createPartitions(wanted).values().entrySet()) {
                    out.set(e.getKey(), outcome(e.getValue(), ignored -> NODES.nullNode()));
                }
                return out;
            }
            case "describe_cluster": {
                DescribeClusterResult cluster = admin.describeCluster(
                    new DescribeClusterOptions().includeAuthorizedOperations(c.path("authorized_operations").asBoolean(false)));
                ObjectNode out = NODES.objectNode();
                out.put("cluster_id", cluster.clusterId().get());
                Set<AclOperation> operations = cluster.authorizedOperations().get();
                if (operations == null) {
                    out.putNull("authorized_operations");
                } else {
                    ArrayNode ops = out.putArray("authorized_operations");
                    new TreeSet<>(operations.stream().map(Object::toString).toList()).forEach(ops::add);
                }
                out.put("controller", cluster.controller().get() == null ? -1 : cluster.controller().get().id());
                ArrayNode nodes = out.putArray("nodes");
                List<Node> sorted = new ArrayList<>(cluster.nodes().get());
                sorted.sort((a, b) -> Integer.compare(a.id(), b.id()));
                for (Node node : sorted) {
                    nodes.add(nodeJson(node));
                }
                return out;
            }
            case "list_groups": {
                ListGroupsOptions options = new ListGroupsOptions();
                ArrayNode out = NODES.arrayNode();
                List<GroupListing> listed = new ArrayList<>(admin.listGroups(options).all().get());
                listed.sort((a, b) -> a.groupId().compareTo(b.groupId()));
                for (GroupListing g : listed) {
                    ObjectNode group = out.addObject();
                    group.put("group_id", g.groupId());
                    group.put("type", g.type().map(Object::toString).orElse(null));
                    group.put("protocol", g.protocol());
                    group.put("state", g.groupState().map(Object::toString).orElse(null));
                }
                return out;
            }
            case "describe_consumer_groups": {
                ObjectNode out = NODES.objectNode();
                for (var e : admin.describeConsumerGroups(stringList(c.get("groups"))).describedGroups().entrySet()) {
                    out.set(e.getKey(), outcome(e.getValue(), KafkaHarness::groupJson));
                }
                return out;
            }
            case "list_consumer_group_offsets": {
                String group = c.get("group").asText();
                return committedJson(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get());
            }
            case "alter_consumer_group_offsets": {
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                c.get("offsets").properties().forEach(e -> offsets.put(new TopicPartition(e.getKey(), 0), new OffsetAndMetadata(e.getValue().asLong())));
                admin.alterConsumerGroupOffsets(c.get("group").asText(), offsets).all().get();
                return NODES.nullNode();
            }
            case "delete_consumer_groups": {
                ObjectNode out = NODES.objectNode();
                for (var e : admin.deleteConsumerGroups(stringList(c.get("groups"))).deletedGroups().entrySet()) {
                    out.set(e.getKey(), outcome(e.getValue(), ignored -> NODES.nullNode()));
                }
                return out;
            }
            case "remove_members": {  // instance_ids: those static members; absent: every member
                var options = c.has("instance_ids")
                    ? new RemoveMembersFromConsumerGroupOptions(stringList(c.get("instance_ids")).stream().map(MemberToRemove::new).toList())
                    : new RemoveMembersFromConsumerGroupOptions();
                admin.removeMembersFromConsumerGroup(c.get("group").asText(), options).all().get();
                return NODES.nullNode();
            }
            case "delete_records": {
                Map<TopicPartition, RecordsToDelete> wanted = new HashMap<>();
                c.get("before").properties().forEach(e -> wanted.put(new TopicPartition(e.getKey(), 0), RecordsToDelete.beforeOffset(e.getValue().asLong())));
                ObjectNode out = NODES.objectNode();
                for (var e : admin.deleteRecords(wanted).lowWatermarks().entrySet()) {
                    out.set(e.getKey().topic(), outcome(e.getValue(), low -> NODES.numberNode(low.lowWatermark())));
                }
                return out;
            }
            case "list_offsets": {
                Map<TopicPartition, OffsetSpec> wanted = new HashMap<>();
                c.get("specs").properties().forEach(e -> wanted.put(new TopicPartition(e.getKey(), 0), offsetSpec(e.getValue().asText())));
                ObjectNode out = NODES.objectNode();
                ListOffsetsResult result = admin.listOffsets(wanted);
                for (var e : wanted.keySet()) {
                    out.set(e.topic(), outcome(result.partitionResult(e), info -> {
                        ObjectNode found = NODES.objectNode();
                        found.put("offset", info.offset());
                        found.put("timestamp", info.timestamp());
                        found.put("leader_epoch", info.leaderEpoch().orElse(-1));
                        return found;
                    }));
                }
                return out;
            }
            case "describe_configs": {
                List<ConfigResource> resources = new ArrayList<>();
                for (JsonNode r : c.get("resources")) {
                    resources.add(new ConfigResource(ConfigResource.Type.valueOf(r.get(0).asText()), r.get(1).asText()));
                }
                ObjectNode out = NODES.objectNode();
                for (var e : admin.describeConfigs(resources).values().entrySet()) {
                    out.set(e.getKey().name(), outcome(e.getValue(), KafkaHarness::configJson));
                }
                return out;
            }
            case "incremental_alter_configs": {
                Map<ConfigResource, Collection<AlterConfigOp>> changes = new HashMap<>();
                ConfigResource resource = new ConfigResource(ConfigResource.Type.valueOf(c.get("type").asText()), c.get("resource").asText());
                List<AlterConfigOp> ops = new ArrayList<>();
                c.path("set").properties().forEach(e -> ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.SET)));
                for (JsonNode key : c.path("delete")) {
                    ops.add(new AlterConfigOp(new ConfigEntry(key.asText(), ""), AlterConfigOp.OpType.DELETE));
                }
                c.path("append").properties().forEach(e -> ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.APPEND)));
                c.path("subtract").properties().forEach(e -> ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue().asText()), AlterConfigOp.OpType.SUBTRACT)));
                changes.put(resource, ops);
                admin.incrementalAlterConfigs(changes).all().get();
                return NODES.nullNode();
            }
            case "create_acls": {
                List<AclBinding> bindings = new ArrayList<>();
                for (JsonNode a : c.get("acls")) {
                    bindings.add(aclBinding(a));
                }
                admin.createAcls(bindings).all().get();
                return NODES.nullNode();
            }
            case "describe_acls": {
                ArrayNode out = NODES.arrayNode();
                for (AclBinding b : admin.describeAcls(aclFilter(c.path("principal").asText(null))).values().get()) {
                    out.add(aclJson(b));
                }
                return out;
            }
            case "delete_acls": {
                ArrayNode out = NODES.arrayNode();
                for (AclBinding b : admin.deleteAcls(List.of(aclFilter(c.path("principal").asText(null)))).all().get()) {
                    out.add(aclJson(b));
                }
                return out;
            }
            case "describe_user_scram_credentials": {
                ObjectNode out = NODES.objectNode();
                var users = c.has("users") ? stringList(c.get("users")) : null;
                var described = users == null ? admin.describeUserScramCredentials().all().get()
                                              : admin.describeUserScramCredentials(users).all().get();
                for (var e : new TreeMap<>(described).entrySet()) {
                    ArrayNode infos = out.putArray(e.getKey());
                    UserScramCredentialsDescription d = e.getValue();
                    for (ScramCredentialInfo info : d.credentialInfos()) {
                        ObjectNode i = infos.addObject();
                        i.put("mechanism", info.mechanism().mechanismName());
                        i.put("iterations", info.iterations());
                    }
                }
                return out;
            }
            case "alter_user_scram_credentials": {
                List<UserScramCredentialAlteration> alterations = new ArrayList<>();
                for (JsonNode u : c.path("upsert")) {
                    ScramMechanism mechanism = ScramMechanism.fromMechanismName(u.get("mechanism").asText());
                    alterations.add(new UserScramCredentialUpsertion(u.get("user").asText(), new ScramCredentialInfo(mechanism, u.path("iterations").asInt(4096)), u.get("password").asText()));
                }
                for (JsonNode u : c.path("delete")) {
                    alterations.add(new UserScramCredentialDeletion(u.get("user").asText(), ScramMechanism.fromMechanismName(u.get("mechanism").asText())));
                }
                admin.alterUserScramCredentials(alterations).all().get();
                return NODES.nullNode();
            }
            case "alter_partition_reassignments": {
                Map<TopicPartition, Optional<NewPartitionReassignment>> moves = new HashMap<>();
                c.get("moves").properties().forEach(e -> {
                    Optional<NewPartitionReassignment> move = e.getValue().isNull() ? Optional.empty()
                        : Optional.of(new NewPartitionReassignment(intList(e.getValue())));
                    moves.put(new TopicPartition(e.getKey(), 0), move);
                });
                ObjectNode out = NODES.objectNode();
                for (var e : admin.alterPartitionReassignments(moves).values().entrySet()) {
                    out.set(e.getKey().topic(), outcome(e.getValue(), ignored -> NODES.nullNode()));
                }
                return out;
            }
            case "list_partition_reassignments": {
                ObjectNode out = NODES.objectNode();
                for (Map.Entry<TopicPartition, PartitionReassignment> e : admin.listPartitionReassignments().reassignments().get().entrySet()) {
                    ObjectNode move = out.putObject(e.getKey().topic());
                    move.set("replicas", ints(e.getValue().replicas()));
                    move.set("adding", ints(e.getValue().addingReplicas()));
                    move.set("removing", ints(e.getValue().removingReplicas()));
                }
                return out;
            }
            case "elect_leaders": {
                Set<TopicPartition> wanted = new java.util.HashSet<>();
                for (JsonNode t : c.get("topics")) {
                    wanted.add(new TopicPartition(t.asText(), 0));
                }
                ElectionType type = ElectionType.valueOf(c.path("type").asText("PREFERRED"));
                ObjectNode out = NODES.objectNode();
                for (var e : admin.electLeaders(type, wanted).partitions().get().entrySet()) {
                    out.put(e.getKey().topic(), e.getValue().map(t -> t.getClass().getSimpleName()).orElse(null));
                }
                return out;
            }
            case "describe_log_dirs": {
                ObjectNode out = NODES.objectNode();
                for (var e : admin.describeLogDirs(intList(c.get("brokers"))).allDescriptions().get().entrySet()) {
                    ObjectNode broker = out.putObject(String.valueOf(e.getKey()));
                    for (Map.Entry<String, LogDirDescription> dir : e.getValue().entrySet()) {
                        ObjectNode d = broker.putObject(dir.getKey());
                        d.put("error", dir.getValue().error() == null ? null : dir.getValue().error().getClass().getSimpleName());
                        d.put("total_bytes", dir.getValue().totalBytes().orElse(-1));
                        d.put("usable_bytes", dir.getValue().usableBytes().orElse(-1));
                        ObjectNode replicas = d.putObject("replicas");
                        for (Map.Entry<TopicPartition, ReplicaInfo> r : dir.getValue().replicaInfos().entrySet()) {
                            replicas.put(r.getKey().topic(), r.getValue().size());
                        }
                    }
                }
                return out;
            }
            default:
                throw new IllegalArgumentException("unknown operation " + op);
        }
    }

    private static OffsetSpec offsetSpec(String spec) {
        switch (spec) {
            case "earliest": return OffsetSpec.earliest();
            case "latest": return OffsetSpec.latest();
            case "max_timestamp": return OffsetSpec.maxTimestamp();
            case "earliest_local": return OffsetSpec.earliestLocal();
            case "latest_tiered": return OffsetSpec.latestTiered();
            default: return OffsetSpec.forTimestamp(Long.parseLong(spec));
        }
    }

    private static AclBinding aclBinding(JsonNode a) {
        ResourcePattern pattern = new ResourcePattern(ResourceType.valueOf(a.get("resource_type").asText()),
            a.get("resource").asText(), PatternType.valueOf(a.path("pattern").asText("LITERAL")));
        AccessControlEntry entry = new AccessControlEntry(a.get("principal").asText(), a.path("host").asText("*"),
            AclOperation.valueOf(a.get("operation").asText()), AclPermissionType.valueOf(a.path("permission").asText("ALLOW")));
        return new AclBinding(pattern, entry);
    }

    private static AclBindingFilter aclFilter(String principal) {
        return new AclBindingFilter(ResourcePatternFilter.ANY,
            new AccessControlEntryFilter(principal, null, AclOperation.ANY, AclPermissionType.ANY));
    }

    private static JsonNode aclJson(AclBinding b) {
        ObjectNode out = NODES.objectNode();
        out.put("resource_type", b.pattern().resourceType().toString());
        out.put("resource", b.pattern().name());
        out.put("pattern", b.pattern().patternType().toString());
        out.put("principal", b.entry().principal());
        out.put("host", b.entry().host());
        out.put("operation", b.entry().operation().toString());
        out.put("permission", b.entry().permissionType().toString());
        return out;
    }

    private static JsonNode topicJson(TopicDescription t) {
        ObjectNode out = NODES.objectNode();
        out.put("name", t.name());
        out.put("topic_id", t.topicId().toString());
        out.put("internal", t.isInternal());
        ArrayNode partitions = out.putArray("partitions");
        for (TopicPartitionInfo p : t.partitions()) {
            ObjectNode partition = partitions.addObject();
            partition.put("partition", p.partition());
            partition.put("leader", p.leader() == null ? -1 : p.leader().id());
            ArrayNode replicas = partition.putArray("replicas");
            p.replicas().forEach(n -> replicas.add(n.id()));
            ArrayNode isr = partition.putArray("isr");
            p.isr().forEach(n -> isr.add(n.id()));
        }
        return out;
    }

    private static JsonNode groupJson(ConsumerGroupDescription g) {
        ObjectNode out = NODES.objectNode();
        out.put("group_id", g.groupId());
        out.put("state", g.groupState().toString());
        out.put("type", g.type().toString());
        out.put("assignor", g.partitionAssignor());
        out.put("coordinator", g.coordinator() == null ? -1 : g.coordinator().id());
        out.put("group_epoch", g.groupEpoch().orElse(-1));
        out.put("target_assignment_epoch", g.targetAssignmentEpoch().orElse(-1));
        ArrayNode members = out.putArray("members");
        List<MemberDescription> sorted = new ArrayList<>(g.members());
        sorted.sort((a, b) -> a.consumerId().compareTo(b.consumerId()));
        for (MemberDescription m : sorted) {
            ObjectNode member = members.addObject();
            member.put("member_id", m.consumerId());
            member.put("client_id", m.clientId());
            member.put("host", m.host());
            member.put("member_epoch", m.memberEpoch().orElse(-1));
            member.set("assignment", partitionsJson(m.assignment().topicPartitions()));
            member.set("target_assignment", m.targetAssignment().map(a -> partitionsJson(a.topicPartitions())).orElse(NODES.nullNode()));
        }
        return out;
    }

    private static JsonNode configJson(Config config) {
        ObjectNode out = NODES.objectNode();
        List<ConfigEntry> entries = new ArrayList<>(config.entries());
        entries.sort((a, b) -> a.name().compareTo(b.name()));
        for (ConfigEntry e : entries) {
            ObjectNode entry = out.putObject(e.name());
            entry.put("value", e.value());
            entry.put("source", e.source().toString());
            entry.put("read_only", e.isReadOnly());
        }
        return out;
    }

    private static JsonNode nodeJson(Node node) {
        ObjectNode out = NODES.objectNode();
        out.put("id", node.id());
        out.put("host", node.host());
        out.put("port", node.port());
        out.put("rack", node.rack());
        return out;
    }

    private interface Render<T> {
        JsonNode apply(T value) throws Exception;
    }

    /** {"ok": rendered} or {"error": exception class, "message"} for one entity of an admin call. */
    private static <T> JsonNode outcome(KafkaFuture<T> future, Render<T> render) {
        ObjectNode out = NODES.objectNode();
        try {
            out.set("ok", render.apply(future.get()));
        } catch (Throwable error) {
            Throwable root = error instanceof ExecutionException && error.getCause() != null ? error.getCause() : error;
            out.put("error", root.getClass().getSimpleName());
            out.put("message", String.valueOf(root.getMessage()));
        }
        return out;
    }

    // -- producer -------------------------------------------------------------------------------

    private JsonNode send(KafkaProducer<byte[], byte[]> producer, JsonNode c) throws Exception {
        List<Future<RecordMetadata>> futures = new ArrayList<>();
        for (JsonNode r : c.get("records")) {
            futures.add(producer.send(record(c.path("topic").asText(null), r)));
        }
        producer.flush();
        ArrayNode out = NODES.arrayNode();
        for (Future<RecordMetadata> future : futures) {
            ObjectNode sent = out.addObject();
            try {
                RecordMetadata metadata = future.get();
                sent.put("partition", metadata.partition());
                sent.put("offset", metadata.offset());
                sent.put("timestamp", metadata.timestamp());
            } catch (ExecutionException error) {
                sent.put("error", error.getCause().getClass().getSimpleName());
                sent.put("message", error.getCause().getMessage());
            }
        }
        return out;
    }

    private static ProducerRecord<byte[], byte[]> record(String topic, JsonNode r) {
        List<Header> headers = new ArrayList<>();
        for (JsonNode h : r.path("headers")) {
            headers.add(new RecordHeader(h.get(0).asText(), bytes(h.get(1))));
        }
        Long timestamp = r.has("timestamp") ? r.get("timestamp").asLong() : null;
        Integer partition = r.has("partition") ? r.get("partition").asInt() : null;
        return new ProducerRecord<>(r.has("topic") ? r.get("topic").asText() : topic, partition, timestamp,
                                    bytes(r.get("key")), bytes(r.get("value")), headers);
    }

    // -- consumer -------------------------------------------------------------------------------

    private JsonNode subscribe(KafkaConsumer<byte[], byte[]> consumer, JsonNode c) {
        if (c.has("pattern")) {
            consumer.subscribe(Pattern.compile(c.get("pattern").asText()));
        } else {
            consumer.subscribe(stringList(c.get("topics")));
        }
        return NODES.nullNode();
    }

    private JsonNode poll(KafkaConsumer<byte[], byte[]> consumer, JsonNode c) {
        int wanted = c.path("min_records").asInt(1);
        long deadline = System.currentTimeMillis() + c.path("timeout_ms").asLong(30_000);
        ArrayNode out = NODES.arrayNode();
        do {
            ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(Math.min(500, Math.max(1, deadline - System.currentTimeMillis()))));
            for (ConsumerRecord<byte[], byte[]> r : records) {
                out.add(recordJson(r));
            }
        } while (out.size() < wanted && System.currentTimeMillis() < deadline);
        return out;
    }

    private static ObjectNode recordJson(ConsumerRecord<byte[], byte[]> r) {
        ObjectNode out = NODES.objectNode();
        out.put("topic", r.topic());
        out.put("partition", r.partition());
        out.put("offset", r.offset());
        out.put("timestamp", r.timestamp());
        out.put("timestamp_type", r.timestampType().toString());
        out.put("leader_epoch", r.leaderEpoch().orElse(-1));
        out.put("key", r.key() == null ? null : new String(r.key(), StandardCharsets.UTF_8));
        out.put("value", r.value() == null ? null : new String(r.value(), StandardCharsets.UTF_8));
        ArrayNode headers = out.putArray("headers");
        for (Header h : r.headers()) {
            ArrayNode header = headers.addArray();
            header.add(h.key());
            header.add(h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8));
        }
        return out;
    }

    private JsonNode commit(KafkaConsumer<byte[], byte[]> consumer, JsonNode c) {
        if (!c.has("offsets")) {
            consumer.commitSync(Duration.ofSeconds(30));
            return NODES.nullNode();
        }
        Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
        c.get("offsets").properties().forEach(e -> offsets.put(new TopicPartition(e.getKey(), 0),
            new OffsetAndMetadata(e.getValue().get("offset").asLong(), e.getValue().path("metadata").asText(""))));
        consumer.commitSync(offsets, Duration.ofSeconds(30));
        return NODES.nullNode();
    }

    private JsonNode committed(KafkaConsumer<byte[], byte[]> consumer, JsonNode c) {
        return committedJson(consumer.committed(Set.copyOf(partitions(c.get("partitions"))), Duration.ofSeconds(30)));
    }

    private static JsonNode committedJson(Map<TopicPartition, OffsetAndMetadata> committed) {
        ObjectNode out = NODES.objectNode();
        for (var e : new TreeMap<String, OffsetAndMetadata>(byTopic(committed)).entrySet()) {
            if (e.getValue() == null) {
                out.putNull(e.getKey());
                continue;
            }
            ObjectNode offset = out.putObject(e.getKey());
            offset.put("offset", e.getValue().offset());
            offset.put("metadata", e.getValue().metadata());
            offset.put("leader_epoch", e.getValue().leaderEpoch().orElse(-1));
        }
        return out;
    }

    private JsonNode offsetsForTimes(KafkaConsumer<byte[], byte[]> consumer, JsonNode c) {
        Map<TopicPartition, Long> wanted = new HashMap<>();
        c.get("timestamps").properties().forEach(e -> wanted.put(new TopicPartition(e.getKey(), 0), e.getValue().asLong()));
        ObjectNode out = NODES.objectNode();
        for (var e : consumer.offsetsForTimes(wanted, Duration.ofSeconds(30)).entrySet()) {
            OffsetAndTimestamp found = e.getValue();
            if (found == null) {
                out.putNull(e.getKey().topic());
            } else {
                ObjectNode f = out.putObject(e.getKey().topic());
                f.put("offset", found.offset());
                f.put("timestamp", found.timestamp());
                f.put("leader_epoch", found.leaderEpoch().orElse(-1));
            }
        }
        return out;
    }

    // -- background tasks -----------------------------------------------------------------------

    /** A producer or consumer working on a thread of its own until stopped (or done). */
    private abstract static class Background implements Runnable {
        final ArrayNode events = NODES.arrayNode();  // what happened, in order (guarded by this)
        final ArrayNode errors = NODES.arrayNode();
        volatile boolean stopping;
        volatile boolean done;
        Thread thread;

        synchronized void event(ObjectNode e) { events.add(e); }

        synchronized void error(Throwable t) {
            ObjectNode e = errors.addObject();
            e.put("error", t.getClass().getSimpleName());
            e.put("message", String.valueOf(t.getMessage()));
        }

        synchronized JsonNode status(boolean withEvents) {
            ObjectNode out = NODES.objectNode();
            out.put("done", done);
            out.put("count", events.size());
            out.set("errors", errors.deepCopy());
            if (withEvents) {
                out.set("events", events.deepCopy());
            }
            return out;
        }

        JsonNode stop() throws InterruptedException {
            stopping = true;
            thread.join(120_000);
            return status(true);
        }
    }

    private JsonNode startProducer(String name, JsonNode c) {
        KafkaProducer<byte[], byte[]> producer = producer(name);
        String topic = c.get("topic").asText();
        String prefix = c.path("prefix").asText("r");
        int count = c.path("count").asInt(Integer.MAX_VALUE);
        long intervalMs = c.path("interval_ms").asLong(0);
        Background task = new Background() {
            public void run() {
                try {
                    for (int i = 0; i < count && !stopping; i++) {
                        String value = prefix + "-" + i;
                        producer.send(new ProducerRecord<>(topic, value.getBytes(StandardCharsets.UTF_8)), (metadata, error) -> {
                            if (error != null) {
                                error(error);
                            } else {
                                ObjectNode e = NODES.objectNode();
                                e.put("value", value);
                                e.put("offset", metadata.offset());
                                event(e);
                            }
                        });
                        if (intervalMs > 0) {
                            Thread.sleep(intervalMs);
                        }
                    }
                    producer.flush();
                } catch (Throwable t) {
                    error(t);
                } finally {
                    done = true;
                }
            }
        };
        return start(c, task);
    }

    private JsonNode startConsumer(String name, JsonNode c) {
        KafkaConsumer<byte[], byte[]> consumer = consumer(name);
        boolean commit = c.path("commit").asBoolean(true);
        Background task = new Background() {
            public void run() {
                try {
                    while (!stopping) {
                        ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(200));
                        for (ConsumerRecord<byte[], byte[]> r : records) {
                            event(recordJson(r));
                        }
                        if (commit && !records.isEmpty()) {
                            try {
                                consumer.commitSync(Duration.ofSeconds(30));
                            } catch (Exception error) {
                                error(error);  // retried with the next batch's commit
                            }
                        }
                    }
                } catch (Throwable t) {
                    error(t);
                } finally {
                    done = true;
                }
            }
        };
        return start(c, task);
    }

    private JsonNode start(JsonNode c, Background task) {
        String id = c.get("task").asText();
        task.thread = new Thread(task, "harness-" + id);
        task.thread.setDaemon(true);
        tasks.put(id, task);
        task.thread.start();
        return NODES.nullNode();
    }

    private Background task(JsonNode c) {
        Background task = tasks.get(c.get("task").asText());
        if (task == null) {
            throw new IllegalArgumentException("no task " + c.get("task").asText());
        }
        return task;
    }

    // -- command-line tools ---------------------------------------------------------------------

    /** Thrown in place of the JVM's exit while a tool runs here: its main method ends with it. */
    private static final class ToolExit extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final int status;

        ToolExit(int status) {
            super("exit " + status, null, false, false);
            this.status = status;
        }
    }

    /**
     * A tool's stdout or stderr, as a JVM of its own would print them: nothing from the thread
     * that called Exit.exit while it unwinds (a JVM's exit does not return), nothing once the tool
     * ended.
     */
    private static final class Captured extends java.io.ByteArrayOutputStream {
        private volatile Thread exiting;
        private volatile boolean ended;

        private boolean dropped() {
            return ended || Thread.currentThread() == exiting;
        }

        @Override
        public synchronized void write(int b) {
            if (!dropped()) {
                super.write(b);
            }
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) {
            if (!dropped()) {
                super.write(b, off, len);
            }
        }
    }

    /**
     * One of Kafka's tools ({"main": its main class, "args", "input": its stdin}) run to its end
     * in this JVM as its bin/ script runs it in a JVM of its own, without the JVM start (seconds
     * here). Its stdout and stderr are captured (Kafka's logging too: the log4j appender follows
     * System.err). A tool ends itself with Exit.exit: here the first call gives the exit status
     * and throws to unwind the tool (what it prints meanwhile is dropped: a JVM's exit does not
     * return); then the shutdown hooks it registered run, as a JVM runs them when it exits (the
     * console producer closes its producer there, sending what it read). Answers {"returncode",
     * "stdout", "stderr"}; an exception thrown out of main is printed to stderr with status 1,
     * as the JVM does.
     */
    private JsonNode runTool(JsonNode c) throws Exception {
        Class<?> main = Class.forName(c.get("main").asText());
        String[] args = stringList(c.get("args")).toArray(new String[0]);
        if (main.getName().equals("org.apache.kafka.tools.consumer.ConsoleConsumer")) {
            // the one static counter among the tools: a new JVM starts it at 0
            var count = main.getDeclaredField("messageCount");
            count.setAccessible(true);
            count.setInt(null, 0);
        }
        Captured stdout = new Captured();
        Captured stderr = new Captured();
        Integer[] status = {null};
        List<Runnable> hooks = new ArrayList<>();
        Exit.Procedure end = (code, message) -> {
            synchronized (status) {
                if (status[0] == null) {
                    status[0] = code;
                    stdout.exiting = Thread.currentThread();
                    stderr.exiting = Thread.currentThread();
                }
            }
            throw new ToolExit(code);
        };
        PrintStream savedOut = System.out;
        PrintStream savedErr = System.err;
        java.io.InputStream savedIn = System.in;
        Exit.setExitProcedure(end);
        Exit.setHaltProcedure(end);
        Exit.setShutdownHookAdder((hookName, hook) -> {
            synchronized (hooks) {
                hooks.add(hook);
            }
        });
        try (PrintStream out = new PrintStream(stdout, true, StandardCharsets.UTF_8);
             PrintStream err = new PrintStream(stderr, true, StandardCharsets.UTF_8)) {
            System.setOut(out);
            System.setErr(err);
            System.setIn(new java.io.ByteArrayInputStream(c.path("input").asText("").getBytes(StandardCharsets.UTF_8)));
            try {
                main.getMethod("main", String[].class).invoke(null, (Object) args);
            } catch (java.lang.reflect.InvocationTargetException thrown) {
                if (!(thrown.getCause() instanceof ToolExit) && status[0] == null) {
                    err.print("Exception in thread \"main\" ");
                    thrown.getCause().printStackTrace(err);
                    status[0] = 1;
                }
            }
            stdout.exiting = null;
            stderr.exiting = null;
            List<Runnable> registered;
            synchronized (hooks) {
                registered = new ArrayList<>(hooks);
            }
            for (Runnable hook : registered) {
                Thread running = new Thread(hook, "tool-shutdown-hook");
                running.start();
                running.join(60_000);
            }
            stdout.ended = true;
            stderr.ended = true;
        } finally {
            System.setOut(savedOut);
            System.setErr(savedErr);
            System.setIn(savedIn);
            Exit.resetExitProcedure();
            Exit.resetHaltProcedure();
            Exit.resetShutdownHookAdder();
        }
        ObjectNode result = NODES.objectNode();
        synchronized (status) {
            result.put("returncode", status[0] == null ? 0 : status[0]);
        }
        result.put("stdout", stdout.toString(StandardCharsets.UTF_8));
        result.put("stderr", stderr.toString(StandardCharsets.UTF_8));
        return result;
    }

    // -- plumbing -------------------------------------------------------------------------------

    private KafkaProducer<byte[], byte[]> producer(String name) { return named(producers, name, "producer"); }
    private KafkaConsumer<byte[], byte[]> consumer(String name) { return named(consumers, name, "consumer"); }
    private Admin admin(String name) { return named(admins, name, "admin client"); }

    private static <T> T named(Map<String, T> clients, String name, String kind) {
        T client = clients.get(name);
        if (client == null) {
            throw new IllegalArgumentException("no " + kind + " named " + name);
        }
        return client;
    }

    private JsonNode close(String name) {
        if (producers.containsKey(name)) {
            producers.remove(name).close(Duration.ofSeconds(30));
        } else if (consumers.containsKey(name)) {
            closeConsumer(consumers.remove(name), Duration.ofSeconds(30));
        } else if (admins.containsKey(name)) {
            admins.remove(name).close(Duration.ofSeconds(30));
        } else {
            throw new IllegalArgumentException("no client named " + name);
        }
        return NODES.nullNode();
    }

    /** close(CloseOptions) from kafka-clients 4.1 on, close(Duration) in the older releases the
     *  harness also runs on (test_java_client_3.py). */
    @SuppressWarnings("deprecation")
    private static void closeConsumer(KafkaConsumer<byte[], byte[]> consumer, Duration timeout) {
        try {
            consumer.close(CloseOptions.timeout(timeout));
        } catch (NoClassDefFoundError older) {
            consumer.close(timeout);
        }
    }

    private void closeAll() {
        tasks.values().forEach(t -> t.stopping = true);
        producers.values().forEach(p -> p.close(Duration.ofSeconds(5)));
        consumers.values().forEach(p -> closeConsumer(p, Duration.ofSeconds(5)));
        admins.values().forEach(p -> p.close(Duration.ofSeconds(5)));
    }

    private static Properties props(JsonNode c) {
        Properties props = new Properties();
        c.path("props").properties().forEach(e -> props.put(e.getKey(), e.getValue().asText()));
        return props;
    }

    private static byte[] bytes(JsonNode value) {
        if (value == null || value.isNull()) {
            return null;
        }
        if (value.isObject() && value.has("base64")) {
            return Base64.getDecoder().decode(value.get("base64").asText());
        }
        return value.asText().getBytes(StandardCharsets.UTF_8);
    }

    private static List<TopicPartition> partitions(JsonNode list) {
        List<TopicPartition> out = new ArrayList<>();
        for (JsonNode p : list) {
            out.add(p.isArray() ? new TopicPartition(p.get(0).asText(), p.get(1).asInt()) : new TopicPartition(p.asText(), 0));
        }
        return out;
    }

    private static JsonNode partitionsJson(Collection<TopicPartition> partitions) {
        ArrayNode out = NODES.arrayNode();
        partitions.stream().map(tp -> tp.topic() + "-" + tp.partition()).sorted().forEach(out::add);
        return out;
    }

    private static JsonNode offsetsJson(Map<TopicPartition, Long> offsets) {
        ObjectNode out = NODES.objectNode();
        new TreeMap<>(byTopic(offsets)).forEach((topic, offset) -> out.put(topic, offset));
        return out;
    }

    private static <V> Map<String, V> byTopic(Map<TopicPartition, V> values) {
        Map<String, V> out = new LinkedHashMap<>();
        values.forEach((tp, v) -> out.put(tp.partition() == 0 ? tp.topic() : tp.topic() + "-" + tp.partition(), v));
        return out;
    }

    private static List<String> stringList(JsonNode list) {
        List<String> out = new ArrayList<>();
        list.forEach(n -> out.add(n.asText()));
        return out;
    }

    private static List<Integer> intList(JsonNode list) {
        List<Integer> out = new ArrayList<>();
        list.forEach(n -> out.add(n.asInt()));
        return out;
    }

    private static ArrayNode ints(List<Integer> values) {
        ArrayNode out = NODES.arrayNode();
        values.forEach(out::add);
        return out;
    }

    private static Map<String, String> strings(JsonNode object) {
        Map<String, String> out = new HashMap<>();
        object.properties().forEach(e -> out.put(e.getKey(), e.getValue().asText()));
        return out;
    }
}
