import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.connect.connector.Task;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.source.SourceConnector;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.source.SourceTask;

/**
 * A Kafka Connect source connector for the tests (Kafka ships no connector in connect-runtime):
 * writes "line-0" .. "line-(count-1)" to `topic`, each with its number as the source offset, so a
 * restarted task resumes after the last offset Connect committed to its offsets topic.
 * Config: topic, count, and poll.delay.ms (a pause before each batch; 0 by default).
 */
public final class CountingSourceConnector extends SourceConnector {
    private Map<String, String> config;

    @Override
    public void start(Map<String, String> props) {
        config = props;
    }

    @Override
    public Class<? extends Task> taskClass() {
        return CountingTask.class;
    }

    @Override
    public List<Map<String, String>> taskConfigs(int maxTasks) {
        return Collections.singletonList(config);
    }

    @Override
    public void stop() {
    }

    @Override
    public ConfigDef config() {
        return new ConfigDef()
            .define("topic", ConfigDef.Type.STRING, ConfigDef.Importance.HIGH, "the topic written")
            .define("count", ConfigDef.Type.LONG, ConfigDef.Importance.HIGH, "how many records")
            .define("poll.delay.ms", ConfigDef.Type.LONG, 0L, ConfigDef.Importance.LOW, "a pause before each batch");
    }

    @Override
    public String version() {
        return "1";
    }

    /** The task: records from the committed source offset on, in batches of 10. */
    public static final class CountingTask extends SourceTask {
        private static final Map<String, String> PARTITION = Collections.singletonMap("source", "counting");
        private String topic;
        private long count;
        private long delayMs;
        private long next;

        @Override
        public String version() {
            return "1";
        }

        @Override
        public void start(Map<String, String> props) {
            topic = props.get("topic");
            count = Long.parseLong(props.get("count"));
            delayMs = Long.parseLong(props.getOrDefault("poll.delay.ms", "0"));
            Map<String, Object> committed = context.offsetStorageReader().offset(PARTITION);
            next = committed == null ? 0 : ((Number) committed.get("line")).longValue() + 1;
        }

        @Override
        public List<SourceRecord> poll() throws InterruptedException {
            if (next >= count) {
                Thread.sleep(100);
                return null;
            }
            Thread.sleep(delayMs);
            List<SourceRecord> records = new java.util.ArrayList<>();
            for (int i = 0; i < 10 && next < count; i++, next++) {
                records.add(new SourceRecord(PARTITION, Collections.singletonMap("line", next), topic, null,
                    Schema.STRING_SCHEMA, "line-" + next));
            }
            return records;
        }

        @Override
        public void stop() {
        }
    }
}
