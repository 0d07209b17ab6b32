"""Spark finds `format("vdl")` here: it imports top-level `pyspark_*` modules defining DefaultSource."""

from vdl_connector.source import VdlDataSource as DefaultSource

__all__ = ["DefaultSource"]
