"""Kafka wire protocol: a schema-driven, sans-IO codec.

errors (ErrorCode, DecodeError), primitives, schema (declaration types), codec (generic walker),
headers, framing (FrameReader), messages (one module per API), api (API_SPECS, request and
response framing), records (record formats). Nothing here does I/O.
"""
