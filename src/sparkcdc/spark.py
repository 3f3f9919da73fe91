"""The change stream as a Spark DataFrame: ``import sparkcdc.spark; sparkcdc.spark.register(spark)``.

Then ``spark.readStream.format("sparkcdc").option("upstream-uri", …).option("data-dir", …).load()``
(``sparkcdc.pipeline.dataframe`` has the options, ``dataframe_rows`` the columns). This module only re-exports.
"""

from sparkcdc.pipeline.dataframe import (
    OPTIONS,
    SOURCE_NAME,
    ChangeStreamDataSource,
    register,
)
from sparkcdc.pipeline.dataframe_rows import CHANGE_SCHEMA

__all__ = ["CHANGE_SCHEMA", "OPTIONS", "SOURCE_NAME", "ChangeStreamDataSource", "register"]
