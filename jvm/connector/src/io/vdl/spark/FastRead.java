package io.vdl.spark;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Which reads Spark's Kafka source can serve with format("vdl")'s documented behaviour, and
 * their options in Kafka's spelling. A read goes to the Python data source (null) when it uses
 * a VDL-only option, a security option (the Python source's spellings differ), an endingOffsets
 * JSON (format("vdl") checks it against the latest offsets on the driver), names a stream that
 * does not exist (a batch read fails naming it; a streaming read waits for it), a pattern that
 * matches nothing, or a stream that is a Delta table (offsets below its log start are in the
 * table); and when the brokers cannot be asked (the Python source reports why).
 */
final class FastRead {
    private static final Logger LOG = LoggerFactory.getLogger(FastRead.class);
    private static final ObjectMapper JSON = new ObjectMapper();

    /** vdl_connector/tables.py: a stream with this config has a Delta table below its log. */
    static final String TABLE_PATH_CONFIG = "vdl.table.path";
    private static final List<String> PYTHON_ONLY = List.of("commitoffsetstogroup", "preferreplicas");
    /** format("vdl") takes these Kafka client settings without the "kafka." prefix too. */
    private static final List<String> UNPREFIXED = List.of("bootstrap.servers", "fetch.max.bytes",
        "max.partition.fetch.bytes", "fetch.max.wait.ms", "request.timeout.ms", "retry.backoff.ms",
        "client.id", "isolation.level");
    private static final long ADMIN_TIMEOUT_MS = 15_000;
    private static final long API_TIMEOUT_MS = 10_000;
    private static final long REQUEST_TIMEOUT_MS = 5_000;

    private FastRead() {}

    /** Spark's Kafka source options for this read, or null: the Python source serves it. */
    static Map<String, String> kafkaOptions(Map<String, String> properties) {
        Map<String, String> options = lowerCased(properties);
        String subscribe = options.get("subscribe");
        String pattern = options.get("subscribepattern");
        String assign = options.get("assign");
        if (subscribe == null && pattern == null && assign == null) {
            return null;  // a write
        }
        for (String key : options.keySet()) {
            if (PYTHON_ONLY.contains(key) || key.startsWith("kafka.security.") || key.startsWith("kafka.sasl.")
                    || key.startsWith("kafka.ssl.")) {
                return null;
            }
        }
        String ending = options.get("endingoffsets");
        if (ending != null && ending.trim().startsWith("{")) {
            return null;
        }
        Map<String, String> kafka = new HashMap<>();
        for (Map.Entry<String, String> e : options.entrySet()) {
            String key = e.getKey();
            kafka.put(UNPREFIXED.contains(key) ? "kafka." + key : key, e.getValue());
        }
        // Spark's Kafka source asks the latest offsets with the AdminClient, whose call can stay
        // bound to a killed leader until default.api.timeout.ms (60 s) passes; format("vdl")'s
        // queries go on within seconds of a leader kill: on the JVM path a request to a dead node
        // gives up after 5 s and is retried at the new leader within the call's 10 s.
        if (!kafka.containsKey("kafka.default.api.timeout.ms") && !kafka.containsKey("kafka.request.timeout.ms")) {
            kafka.put("kafka.default.api.timeout.ms", String.valueOf(API_TIMEOUT_MS));
            kafka.put("kafka.request.timeout.ms", String.valueOf(REQUEST_TIMEOUT_MS));
        }
        String servers = kafka.get("kafka.bootstrap.servers");
        if (servers == null) {
            return null;
        }
        try {
            List<String> named = subscribe != null ? splitNames(subscribe) : assign != null ? jsonKeys(assign) : null;
            // Spark's Kafka source wants every partition it reads in a JSON of offsets or
            // timestamps; format("vdl") takes the unnamed streams at their default position.
            List<Set<String>> jsonNamed = new ArrayList<>();
            for (String key : List.of("startingoffsets", "startingoffsetsbytimestamp", "endingoffsetsbytimestamp")) {
                String value = options.get(key);
                if (value != null && value.trim().startsWith("{")) {
                    jsonNamed.add(new java.util.HashSet<>(jsonKeys(value)));
                }
            }
            if (!readableOnLog(servers, named, pattern, jsonNamed)) {
                return null;
            }
        } catch (Exception e) {
            LOG.info("format(\"vdl\") reads through its Python source: {}", e.toString());
            return null;
        }
        return kafka;
    }

    static Map<String, String> lowerCased(Map<String, String> properties) {
        Map<String, String> options = new HashMap<>();
        for (Map.Entry<String, String> e : properties.entrySet()) {
            options.put(e.getKey().toLowerCase(Locale.ROOT), e.getValue());
        }
        return options;
    }

    private static List<String> splitNames(String list) {
        List<String> names = new ArrayList<>();
        for (String name : list.split(",")) {
            if (!name.trim().isEmpty()) {
                names.add(name.trim());
            }
        }
        return names;
    }

    private static List<String> jsonKeys(String json) throws Exception {
        List<String> names = new ArrayList<>();
        Iterator<String> fields = JSON.readTree(json).fieldNames();
        fields.forEachRemaining(names::add);
        return names;
    }

    /**
     * The streams exist (or the pattern matches some), every JSON option names them all, and
     * none is a Delta table.
     */
    private static boolean readableOnLog(String servers, List<String> named, String pattern,
                                         List<Set<String>> jsonNamed) throws Exception {
        Properties settings = new Properties();
        settings.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, servers);
        settings.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, (int) ADMIN_TIMEOUT_MS);
        settings.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) ADMIN_TIMEOUT_MS);
        settings.put(AdminClientConfig.CLIENT_ID_CONFIG, "vdl-spark-planner");
        try (Admin admin = Admin.create(settings)) {
            Set<String> existing = admin.listTopics().names().get(ADMIN_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            List<String> streams = new ArrayList<>();
            if (named != null) {
                if (named.isEmpty() || !existing.containsAll(named)) {
                    return false;
                }
                streams.addAll(named);
            } else {
                Pattern regex = Pattern.compile(pattern);
                for (String name : existing) {
                    if (regex.matcher(name).matches()) {
                        streams.add(name);
                    }
                }
                if (streams.isEmpty()) {
                    return false;
                }
            }
            for (Set<String> keys : jsonNamed) {
                if (!keys.equals(new java.util.HashSet<>(streams))) {
                    return false;
                }
            }
            List<ConfigResource> resources = new ArrayList<>();
            for (String stream : streams) {
                resources.add(new ConfigResource(ConfigResource.Type.TOPIC, stream));
            }
            Collection<Config> configs = admin.describeConfigs(resources).all()
                .get(ADMIN_TIMEOUT_MS, TimeUnit.MILLISECONDS).values();
            for (Config config : configs) {
                ConfigEntry table = config.get(TABLE_PATH_CONFIG);
                if (table != null && table.value() != null && !table.value().isEmpty()) {
                    return false;
                }
            }
            return true;
        }
    }

    /** {"s":{"0":n}} as {"s": n}; unchanged when a stream has another partition than 0. */
    static String vdlOffsetJson(String json) {
        try {
            JsonNode node = JSON.readTree(json);
            Map<String, Object> flat = new java.util.LinkedHashMap<>();
            Iterator<Map.Entry<String, JsonNode>> fields = node.properties().iterator();
            while (fields.hasNext()) {
                Map.Entry<String, JsonNode> field = fields.next();
                JsonNode partitions = field.getValue();
                if (!partitions.isObject() || partitions.size() != 1 || !partitions.has("0")) {
                    return json;
                }
                flat.put(field.getKey(), partitions.get("0").asLong());
            }
            return JSON.writeValueAsString(flat);
        } catch (Exception e) {
            return json;
        }
    }

    /**
     * A checkpointed offset in Spark's Kafka form ({"s":{"0":n}}): the Python source writes
     * {"s": n} (a VDL stream is one partition), so a query restarts on either path.
     */
    static String kafkaOffsetJson(String json) {
        try {
            JsonNode node = JSON.readTree(json);
            if (!node.isObject()) {
                return json;
            }
            Map<String, Object> converted = new java.util.LinkedHashMap<>();
            boolean changed = false;
            Iterator<Map.Entry<String, JsonNode>> fields = node.properties().iterator();
            while (fields.hasNext()) {
                Map.Entry<String, JsonNode> field = fields.next();
                if (field.getValue().isIntegralNumber()) {
                    converted.put(field.getKey(), Map.of("0", field.getValue().asLong()));
                    changed = true;
                } else {
                    converted.put(field.getKey(), field.getValue());
                }
            }
            return changed ? JSON.writeValueAsString(converted) : json;
        } catch (Exception e) {
            return json;  // not ours: Kafka's parser reports it
        }
    }
}
