package io.vdl.spark;

import java.util.Map;

import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.kafka010.KafkaSourceProvider;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * format("vdl") in the JVM: plain reads run on Spark's own Kafka source (no row crosses into
 * Python); everything else — writes, VDL-only options, streams that are Delta tables, and every
 * schema and option check — is the Python data source, registered under {@link #PYTHON_NAME}
 * when this jar is on the session's classpath (pyspark_vdl.py reads the variable the session
 * helpers set for the JVM).
 */
public final class VdlProvider implements TableProvider, DataSourceRegister {
    /** The Python data source's name beside this provider (a name both claim fails the lookup). */
    public static final String PYTHON_NAME = "vdl-python";

    private final PythonDataSourceV2 python = new PythonDataSourceV2();

    public VdlProvider() {
        python.setShortName(PYTHON_NAME);
    }

    @Override
    public String shortName() {
        return "vdl";
    }

    /** The Python source validates every option here, so a mistake keeps its message. */
    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return python.inferSchema(options);
    }

    @Override
    public Transform[] inferPartitioning(CaseInsensitiveStringMap options) {
        return python.inferPartitioning(options);
    }

    @Override
    public boolean supportsExternalMetadata() {
        return python.supportsExternalMetadata();
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        Table pythonTable = python.getTable(schema, partitioning, properties);
        Map<String, String> kafkaOptions = FastRead.kafkaOptions(properties);
        if (kafkaOptions == null) {
            return pythonTable;
        }
        Table kafkaTable = new KafkaSourceProvider().getTable(new CaseInsensitiveStringMap(kafkaOptions));
        return new FastReadTable(pythonTable, kafkaTable, FastRead.lowerCased(properties), kafkaOptions);
    }
}
