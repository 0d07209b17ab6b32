import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TableJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;

/**
 * Kafka Streams beyond a word count, as a Kafka user writes it: one application, three
 * independent sub-topologies, all exactly_once_v2 (strings throughout):
 *
 * - windowed final counts: `clicks` (user -> page) regrouped by page (repartition topic
 *   `APP-pages-repartition`), counted in 10 s tumbling windows without grace (windowed store
 *   `page-views`, changelog cleanup.policy=compact,delete with a retention) and suppressed until
 *   each window closes (buffer `final`): `page-views` gets one record per page and window,
 *   "WINDOW_START:COUNT", once stream time passes the window's end.
 * - foreign-key join: the table `orders` (order -> "CUSTOMER,AMOUNT") joined with the table
 *   `customers` (customer -> name) on the customer (subscription topics
 *   `APP-order-customer-subscription-registration-topic` and `...-response-topic`):
 *   `order-details` gets order -> "NAME:AMOUNT" at each change of either side.
 * - stream-table join and aggregation: `payments` (payment -> "CUSTOMER,AMOUNT") rekeyed by
 *   customer into a repartition topic of an explicit partition count (1; a VDL stream has one
 *   partition), joined with `customers` into `enriched-payments` (customer -> "NAME:AMOUNT"),
 *   and summed per customer in the store `payment-totals` (queryable) into `payment-totals`.
 *
 * Usage: StreamsTopologiesApp BOOTSTRAP APPLICATION_ID STATE_DIR INSTANCE STANDBY_REPLICAS
 * Prints "STATE <state>" at each state change and "FAILED <exception>" if a stream thread dies.
 * Interactive queries on stdin, one per line, answered on stdout:
 *   GET STORE KEY    -> "GET STORE KEY VALUE" from an active store of this instance ("null" if
 *                       absent; "UNAVAILABLE ..." if this instance has no such active task)
 *   STALE STORE KEY  -> "STALE STORE KEY VALUE", standby stores included
 *   ACTIVE STORE KEY -> "ACTIVE STORE KEY HOST:PORT STANDBY_HOSTS" (application.server of the
 *                       instances holding the key's active and standby tasks; INSTANCE:1 here)
 * Closes cleanly (leaving the group) at the end of its stdin, printing "CLOSED".
 */
public final class StreamsTopologiesApp {
    private StreamsTopologiesApp() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: StreamsTopologiesApp BOOTSTRAP APPLICATION_ID STATE_DIR INSTANCE STANDBY_REPLICAS");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[2]);
        props.put(StreamsConfig.APPLICATION_SERVER_CONFIG, args[3] + ":1");
        props.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, Integer.parseInt(args[4]));
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 100);
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        props.put(StreamsConfig.producerPrefix("transaction.timeout.ms"), 5000);
        // A killed instance is dropped from the group this soon (45 s by default).
        props.put(StreamsConfig.mainConsumerPrefix("session.timeout.ms"), 6000);
        props.put(StreamsConfig.mainConsumerPrefix("heartbeat.interval.ms"), 1000);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream("clicks", Consumed.with(Serdes.String(), Serdes.String()))
            .groupBy((user, page) -> page, Grouped.with("pages", Serdes.String(), Serdes.String()))
            .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofSeconds(10)))
            .count(Materialized.as("page-views"))
            .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()).withName("final"))
            .toStream()
            .map((window, count) -> new org.apache.kafka.streams.KeyValue<>(window.key(), window.window().start() + ":" + count))
            .to("page-views", Produced.with(Serdes.String(), Serdes.String()));

        KTable<String, String> customers = builder.table("customers", Consumed.with(Serdes.String(), Serdes.String()),
            Materialized.as("customers-store"));
        KTable<String, String> orders = builder.table("orders", Consumed.with(Serdes.String(), Serdes.String()));
        orders.join(customers, order -> order.split(",")[0], (order, name) -> name + ":" + order.split(",")[1],
                TableJoined.as("order-customer"))
            .toStream()
            .to("order-details", Produced.with(Serdes.String(), Serdes.String()));

        var payments = builder.stream("payments", Consumed.with(Serdes.String(), Serdes.String()))
            .selectKey((payment, value) -> value.split(",")[0])
            .mapValues(value -> value.split(",")[1])
            .repartition(Repartitioned.<String, String>as("payments-by-customer").withNumberOfPartitions(1)
                .withKeySerde(Serdes.String()).withValueSerde(Serdes.String()));
        payments.join(customers, (amount, name) -> name + ":" + amount,
                Joined.with(Serdes.String(), Serdes.String(), Serdes.String(), "enrich"))
            .to("enriched-payments", Produced.with(Serdes.String(), Serdes.String()));
        payments.groupByKey()
            .reduce((total, amount) -> Long.toString(Long.parseLong(total) + Long.parseLong(amount)),
                Materialized.as("payment-totals"))
            .toStream()
            .to("payment-totals", Produced.with(Serdes.String(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            say("STATE " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(error -> {
            say("FAILED " + error);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = stdin.readLine()) != null && stopped.getCount() > 0) {
            String[] query = line.trim().split(" ");
            if (query.length == 3) {
                say(query[0] + " " + query[1] + " " + query[2] + " " + answer(streams, query[0], query[1], query[2]));
            }
        }
        streams.close(org.apache.kafka.streams.CloseOptions.groupMembershipOperation(
            org.apache.kafka.streams.CloseOptions.GroupMembershipOperation.LEAVE_GROUP));
        say("CLOSED");
    }

    private static String answer(KafkaStreams streams, String kind, String store, String key) {
        try {
            if (kind.equals("ACTIVE")) {
                KeyQueryMetadata metadata = streams.queryMetadataForKey(store, key, Serdes.String().serializer());
                return metadata.activeHost().host() + ":" + metadata.activeHost().port() + " " + metadata.standbyHosts();
            }
            StoreQueryParameters<ReadOnlyKeyValueStore<String, String>> parameters =
                StoreQueryParameters.fromNameAndType(store, QueryableStoreTypes.keyValueStore());
            if (kind.equals("STALE")) {
                parameters = parameters.enableStaleStores();
            }
            return String.valueOf(streams.store(parameters).get(key));
        } catch (RuntimeException error) {
            return "UNAVAILABLE " + error.getClass().getSimpleName() + ": " + error.getMessage();
        }
    }

    private static void say(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }
}
