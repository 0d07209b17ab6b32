package io.vdl.spark;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.common.TopicPartition;

/**
 * failOnDataLoss=true on the JVM path with format("vdl")'s message: before a micro-batch is
 * planned, a stream whose log start passed the batch's start fails the query naming the stream
 * and the offsets lost, as the Python source does (Spark's Kafka source fails a task instead,
 * naming neither).
 */
final class DataLossCheck implements AutoCloseable {
    private static final ObjectMapper JSON = new ObjectMapper();
    // as FastRead's defaults for Spark's Kafka source: a dead leader costs 5 s, a call 10 s at most
    private static final long TIMEOUT_MS = 10_000;
    private final String servers;
    private Admin admin;

    DataLossCheck(String servers) {
        this.servers = servers;
    }

    void check(String startJson) {
        Map<TopicPartition, Long> start = new HashMap<>();
        try {
            Iterator<Map.Entry<String, JsonNode>> streams = JSON.readTree(startJson).properties().iterator();
            while (streams.hasNext()) {
                Map.Entry<String, JsonNode> stream = streams.next();
                Iterator<Map.Entry<String, JsonNode>> partitions = stream.getValue().properties().iterator();
                while (partitions.hasNext()) {
                    Map.Entry<String, JsonNode> p = partitions.next();
                    start.put(new TopicPartition(stream.getKey(), Integer.parseInt(p.getKey())), p.getValue().asLong());
                }
            }
        } catch (Exception e) {
            return;  // not an offset this check reads: Spark's Kafka source decides
        }
        if (start.isEmpty()) {
            return;
        }
        Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
        for (TopicPartition tp : start.keySet()) {
            earliest.put(tp, OffsetSpec.earliest());
        }
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> found;
        try {
            found = admin().listOffsets(earliest).all().get(TIMEOUT_MS, TimeUnit.MILLISECONDS);
        } catch (Exception e) {
            return;  // a stream gone or brokers away: Spark's Kafka source reports it
        }
        for (Map.Entry<TopicPartition, Long> e : start.entrySet()) {
            ListOffsetsResult.ListOffsetsResultInfo info = found.get(e.getKey());
            long begin = e.getValue();
            if (info != null && begin >= 0 && begin < info.offset()) {
                // vdl_connector/source.py data_loss(): the same words
                throw new IllegalStateException("stream '" + e.getKey().topic() + "': offsets [" + begin + ", "
                    + info.offset() + ") were deleted before they were read (the stream now starts at "
                    + info.offset() + "). Some data may have been lost because it is no longer available "
                    + "(retention deleted it or the stream was deleted). If you want the query to continue "
                    + "instead, set the option 'failOnDataLoss' to 'false'.");
            }
        }
    }

    private synchronized Admin admin() {
        if (admin == null) {
            Properties settings = new Properties();
            settings.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, servers);
            settings.put(AdminClientConfig.CLIENT_ID_CONFIG, "vdl-spark-planner");
            settings.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 5_000);
            settings.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, (int) TIMEOUT_MS);
            admin = Admin.create(settings);
        }
        return admin;
    }

    @Override
    public synchronized void close() {
        if (admin != null) {
            admin.close(java.time.Duration.ofSeconds(2));
            admin = null;
        }
    }
}
