package io.vdl.spark;

import java.util.EnumSet;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.streaming.ContinuousStream;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.PartitionOffset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsRealTimeMode;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** A read served by Spark's Kafka table (options translated); writes stay the Python table's. */
final class FastReadTable implements Table, SupportsRead, SupportsWrite {
    private final Table python;
    private final Table kafka;
    private final Map<String, String> planned;  // the options getTable saw, lower-cased
    private final Map<String, String> kafkaOptions;  // ... and what they became

    FastReadTable(Table python, Table kafka, Map<String, String> planned, Map<String, String> kafkaOptions) {
        this.python = python;
        this.kafka = kafka;
        this.planned = planned;
        this.kafkaOptions = kafkaOptions;
    }

    @Override
    public String name() {
        return "vdl";
    }

    @Override
    @SuppressWarnings("deprecation")  // Table.schema(): what PythonTable implements
    public StructType schema() {
        return python.schema();
    }

    @Override
    public Set<TableCapability> capabilities() {
        Set<TableCapability> capabilities = EnumSet.noneOf(TableCapability.class);
        for (TableCapability c : kafka.capabilities()) {
            if (c == TableCapability.BATCH_READ || c == TableCapability.MICRO_BATCH_READ
                    || c == TableCapability.CONTINUOUS_READ) {
                capabilities.add(c);
            }
        }
        for (TableCapability c : python.capabilities()) {
            if (c != TableCapability.BATCH_READ && c != TableCapability.MICRO_BATCH_READ) {
                capabilities.add(c);
            }
        }
        return capabilities;
    }

    @Override
    public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
        Map<String, String> translated = FastRead.lowerCased(options).equals(planned)
            ? kafkaOptions : FastRead.kafkaOptions(options);
        if (translated == null) {  // other options than getTable saw, not for the Kafka source
            return ((SupportsRead) python).newScanBuilder(options);
        }
        ScanBuilder builder = ((SupportsRead) kafka).newScanBuilder(new CaseInsensitiveStringMap(translated));
        return () -> new FastScan(builder.build(), translated);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
        return ((SupportsWrite) python).newWriteBuilder(info);
    }

    /** Spark's Kafka scan, its micro-batch stream wrapped to read the Python source's offsets. */
    private static final class FastScan implements Scan {
        private final Scan scan;
        private final Map<String, String> options;

        FastScan(Scan scan, Map<String, String> options) {
            this.scan = scan;
            this.options = options;
        }

        @Override public StructType readSchema() { return scan.readSchema(); }
        @Override public String description() { return scan.description(); }
        @Override public Batch toBatch() { return scan.toBatch(); }
        @Override public ContinuousStream toContinuousStream(String checkpoint) { return scan.toContinuousStream(checkpoint); }
        @Override public CustomMetric[] supportedCustomMetrics() { return scan.supportedCustomMetrics(); }
        @Override public CustomTaskMetric[] reportDriverMetrics() { return scan.reportDriverMetrics(); }
        @Override public ColumnarSupportMode columnarSupportMode() { return scan.columnarSupportMode(); }

        @Override
        public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
            boolean failOnDataLoss = !"false".equalsIgnoreCase(options.getOrDefault("failondataloss", "true").trim());
            return new FastStream(scan.toMicroBatchStream(checkpointLocation),
                failOnDataLoss ? new DataLossCheck(options.get("kafka.bootstrap.servers")) : null);
        }
    }

    /**
     * Spark's KafkaMicroBatchStream with format("vdl")'s offsets: {"s": n} in the checkpoint and
     * the progress (a VDL stream is one partition), Kafka's {"s":{"0":n}} read too.
     */
    private static final class FastStream
            implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics, SupportsRealTimeMode {
        private final MicroBatchStream stream;
        private final DataLossCheck dataLoss;  // null: failOnDataLoss=false

        FastStream(MicroBatchStream stream, DataLossCheck dataLoss) {
            this.stream = stream;
            this.dataLoss = dataLoss;
        }

        private static Offset ours(Offset kafka) {
            return kafka == null ? null : new VdlOffset(kafka);
        }

        private Offset kafka(Offset offset) {
            if (offset == null || !(offset instanceof VdlOffset)) {
                return offset == null ? null : stream.deserializeOffset(FastRead.kafkaOffsetJson(offset.json()));
            }
            return ((VdlOffset) offset).kafka;
        }

        @Override public Offset deserializeOffset(String json) { return ours(stream.deserializeOffset(FastRead.kafkaOffsetJson(json))); }
        @Override public Offset initialOffset() { return ours(stream.initialOffset()); }
        @Override public Offset latestOffset() { return ours(stream.latestOffset()); }
        @Override public PartitionReaderFactory createReaderFactory() { return stream.createReaderFactory(); }
        @Override public void commit(Offset end) { stream.commit(kafka(end)); }
        @Override public String toString() { return stream.toString(); }

        @Override
        public InputPartition[] planInputPartitions(Offset start, Offset end) {
            Offset from = kafka(start);
            if (dataLoss != null) {
                dataLoss.check(from.json());
            }
            return stream.planInputPartitions(from, kafka(end));
        }

        @Override
        public void stop() {
            if (dataLoss != null) {
                dataLoss.close();
            }
            stream.stop();
        }

        private SupportsTriggerAvailableNow admission() { return (SupportsTriggerAvailableNow) stream; }
        @Override public ReadLimit getDefaultReadLimit() { return admission().getDefaultReadLimit(); }
        @Override public Offset latestOffset(Offset start, ReadLimit limit) { return ours(admission().latestOffset(kafka(start), limit)); }
        @Override public Offset reportLatestOffset() { return ours(admission().reportLatestOffset()); }
        @Override public void prepareForTriggerAvailableNow() { admission().prepareForTriggerAvailableNow(); }

        @Override public Map<String, String> metrics(Optional<Offset> latestConsumedOffset) {
            return ((ReportsSourceMetrics) stream).metrics(latestConsumedOffset.map(this::kafka));
        }

        private SupportsRealTimeMode realTime() { return (SupportsRealTimeMode) stream; }
        @Override public InputPartition[] planInputPartitions(Offset start) { return realTime().planInputPartitions(kafka(start)); }
        @Override public Offset mergeOffsets(PartitionOffset[] offsets) { return ours(realTime().mergeOffsets(offsets)); }
        @Override public void prepareForRealTimeMode() { realTime().prepareForRealTimeMode(); }
    }

    /** A Kafka source offset shown as format("vdl")'s {"s": n} when every stream is one partition. */
    private static final class VdlOffset extends Offset {
        final Offset kafka;
        private final String json;

        VdlOffset(Offset kafka) {
            this.kafka = kafka;
            this.json = FastRead.vdlOffsetJson(kafka.json());
        }

        @Override
        public String json() {
            return json;
        }
    }
}
