"""Read schema (Spark's Kafka source schema) and writer input-schema validation.

The Arrow schema must equal what Spark derives from the Spark schema
(pyspark.sql.pandas.types.to_arrow_schema(schema, timezone="UTC")): Spark rejects any
difference (binary vs large_binary, timestamp unit/zone, list item name).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
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

ARROW_HEADER_STRUCT = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
ARROW_HEADERS_TYPE = pa.list_(pa.field("element", ARROW_HEADER_STRUCT))


# The rows a read task hands Spark at a time: an Arrow batch of the log is cut after the Kafka batch
# that takes it past either bound, a table's row groups are split to them. Spark's JVM reads each
# into buffers of its Arrow allocator, which pools those up to a chunk (Netty's, 4 MiB) and maps
# each larger one anew, page by page, and unmaps it after the batch: 262,144-row batches of
# ~200-byte JSON values cost the JVM ~46,000 page faults per 500,000 rows read (89 MB buffers),
# batches cut at 2 MiB of keys and values ~3,000. Bounded rows keep tiny records' batches small.
MAX_ROWS_PER_ARROW_BATCH = 65_536
MAX_BYTES_PER_ARROW_BATCH = 2 << 20

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


def arrow_read_schema(include_headers: bool, value_type: pa.DataType | None = None) -> pa.Schema:
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", ARROW_HEADERS_TYPE))
    if value_type is not None:
        fields.append(pa.field(VALUE_JSON_COLUMN, value_type))
    return pa.schema(fields)


def constant_string(text: str, count: int) -> pa.Array:
    """A string column holding `text` `count` times (the topic column), built from buffers."""
    data = text.encode("utf-8")
    offsets = np.arange(count + 1, dtype=np.int32) * len(data)
    return pa.Array.from_buffers(pa.string(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data * count)])


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
