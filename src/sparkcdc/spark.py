"""The change stream as a Spark DataFrame: ``import sparkcdc.spark; sparkcdc.spark.register(spark)``.

Then ``spark.readStream.format("sparkcdc").option("upstream-uri", …).option("data-dir", …).load()``
(``sparkcdc.pipeline.dataframe`` has the options and the columns). This module only re-exports.
"""

from sparkcdc.pipeline.dataframe import (
    CHANGE_SCHEMA,
    OPTIONS,
    SOURCE_NAME,
    ChangeStreamDataSource,
    register,
)

__all__ = ["CHANGE_SCHEMA", "OPTIONS", "SOURCE_NAME", "ChangeStreamDataSource", "register"]
