"""Read schema (Spark's Kafka source schema) and writer input-schema validation, in Spark's
types only: Spark's planner processes import this module (data source creation asks the
schema), and neither numpy nor pyarrow, ~70 ms of each such process, is needed there. The read
schema's Arrow form, what read tasks hand Spark, is vdl_connector.arrow.arrow_read_schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from vdl_connector.options import VdlOptionError

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

VALUE_JSON_COLUMN = "valueJson"  # valueJsonSchema's parsed value (vdl_connector/json_values.py)


def read_schema(include_headers: bool, value_type: StructType | None = None) -> StructType:
    """Spark's Kafka source schema (KafkaRecordToRowConverter), every field nullable; with
    value_type (valueJsonSchema) a last column valueJson of that struct, parsed from the value."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    if value_type is not None:
        fields.append(StructField(VALUE_JSON_COLUMN, value_type))
    return StructType(fields)


@dataclass(frozen=True)
class WriteColumns:
    """Positions of the writer's input columns (None when absent) and whether they are strings."""

    value: int
    value_is_string: bool
    key: int | None = None
    key_is_string: bool = False
    topic: int | None = None
    headers: int | None = None
    partition: int | None = None


def _is_headers_type(data_type: DataType) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    inner = data_type.elementType.fields
    return (len(inner) == 2 and inner[0].name.lower() == "key" and isinstance(inner[0].dataType, StringType)
            and inner[1].name.lower() == "value"
            and isinstance(inner[1].dataType, (BinaryType, StringType)))


def validate_write_schema(schema: StructType, topic_option: str | None) -> WriteColumns:
    """Check the writer's input like Spark's Kafka sink (KafkaWriter.validateQuery); extra
    columns are ignored, as there. Raises VdlOptionError naming the column and what it accepts."""
    positions = {f.name.lower(): (i, f.dataType) for i, f in enumerate(schema.fields)}

    def column(name: str, accepted: tuple[type, ...], accepts: str) -> tuple[int | None, bool]:
        if name not in positions:
            return None, False
        index, data_type = positions[name]
        if not isinstance(data_type, accepted):
            raise VdlOptionError(f"column '{name}' must be {accepts}, got {data_type.simpleString()}")
        return index, isinstance(data_type, StringType)

    if "value" not in positions:
        raise VdlOptionError("the input must have a column 'value' (binary or string); "
                             f"columns are {schema.fieldNames()}")
    value, value_is_string = column("value", (BinaryType, StringType), "binary or string")
    key, key_is_string = column("key", (BinaryType, StringType, NullType), "binary or string")
    topic, _ = column("topic", (StringType, NullType), "string")
    partition, _ = column("partition", (IntegerType, LongType, ShortType, NullType), "an integer (null or 0)")
    headers = None
    if "headers" in positions:
        index, data_type = positions["headers"]
        if not (_is_headers_type(data_type) or isinstance(data_type, NullType)):
            raise VdlOptionError("column 'headers' must be array<struct<key: string, value: binary>>, "
                                 f"got {data_type.simpleString()}")
        headers = index
    if topic is None and topic_option is None:
        raise VdlOptionError("the input has no 'topic' column: set the option 'topic' to the stream to write to")
    assert value is not None
    return WriteColumns(value, value_is_string, key, key_is_string, topic, headers, partition)
