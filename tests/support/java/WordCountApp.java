import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams' word count, as a Kafka user writes it: lines from the input topic split into
 * words, regrouped by word (a repartition topic Streams creates, `APP-words-repartition`) and
 * counted in a RocksDB store backed by a compacted changelog topic Streams creates
 * (`APP-counts-changelog`), each new count written to the output topic as a string, all with
 * processing.guarantee=exactly_once_v2. The store's cache is off, so every count a word reaches is
 * written: a read_committed reader of the output sees each word's counts 1, 2, 3... exactly once.
 *
 * Usage: WordCountApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR INSTANCE_ID
 * Prints "STATE <state>" at each state change (RUNNING once its tasks are assigned and restored)
 * and "FAILED <exception>" if a stream thread dies; closes cleanly at the end of its stdin.
 */
public final class WordCountApp {
    private WordCountApp() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: WordCountApp BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR INSTANCE_ID");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        // Records of the repartition topic that every task has committed past are deleted
        // (DeleteRecords) this often; 30 s by default.
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        // A killed instance's open transaction is aborted this long after its last write (10 s by
        // default), before a successor with another transactional.id reads past it.
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 5000);
        // Static membership: a restarted instance takes its tasks back at once instead of
        // waiting for the group to drop the killed one.
        props.put(StreamsConfig.mainConsumerPrefix("group.instance.id"), args[5]);
        props.put(StreamsConfig.mainConsumerPrefix("session.timeout.ms"), 10_000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase().split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
            .count(Materialized.as("counts"))
            .toStream()
            .mapValues(count -> Long.toString(count))
            .to(args[3], Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("STATE " + now);
            System.out.flush();
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(error -> {
            System.out.println("FAILED " + error);
            System.out.flush();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        while (stdin.readLine() != null && stopped.getCount() > 0) {
            // until the end of stdin
        }
        streams.close();
        System.out.println("CLOSED");
    }
}
