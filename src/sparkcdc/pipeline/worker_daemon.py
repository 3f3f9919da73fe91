"""The Python daemon of a server's Spark executors: PySpark's, with sparkcdc's task modules loaded.

Spark starts one daemon per executor and forks a Python worker from it for each task that needs
one. It stops a worker that has been idle for a minute. The next task then forks a fresh
worker, which imports PyArrow and sparkcdc's decoders, sinks and codecs before it decodes a row.
On a server, every changefeed that writes after a minute of quiet met that cost at once: the
first writes to twenty changefeeds on two cores were delivered together, 6–8 s late
(bench/density). This daemon imports those modules before it forks (``spark.python.daemon.module``,
set by ``server.runner.server_spark_conf``), so each worker starts with them loaded, and shares
their pages with the daemon.
"""

from __future__ import annotations

import pyarrow  # noqa: F401
import pyspark.sql.pandas.serializers
import pyspark.worker  # noqa: F401
from pyspark.daemon import manager

import sparkcdc.capture.reader
import sparkcdc.pipeline.arrow_columns
import sparkcdc.pipeline.source
import sparkcdc.pipeline.writer
import sparkcdc.sink.storage.sink
import sparkcdc.sink.storage.writer  # noqa: F401

if __name__ == "__main__":
    manager()
