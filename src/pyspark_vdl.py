"""Spark finds `format("vdl")` here: it imports top-level `pyspark_*` modules defining DefaultSource.

Beside the JVM provider (vdl_connector.PYTHON_SOURCE_NAME_VARIABLE set) the source takes the
name that provider delegates to; the class stays importable by this module's name, so workers
unpickle the same one.
"""

import os

from vdl_connector import PYTHON_SOURCE_NAME_VARIABLE
from vdl_connector.source import VdlDataSource

if os.environ.get(PYTHON_SOURCE_NAME_VARIABLE):

    class DefaultSource(VdlDataSource):
        @classmethod
        def name(cls) -> str:
            return os.environ.get(PYTHON_SOURCE_NAME_VARIABLE) or VdlDataSource.name()

else:
    DefaultSource = VdlDataSource  # type: ignore[assignment,misc]

__all__ = ["DefaultSource"]
