"""Sinks: an explicit registry from URI scheme to implementation, loaded lazily.

Owns one package per sink (``storage``, ``kafka``, ``mysql``, ``http``, ``lakehouse``), each laid out alike:
``config.py`` (its options), ``sink.py`` (the ``Sink``, driver side) and ``writer.py`` (the
``PartitionWriter``, executor side); the shared modules beside them: ``base.py``, the contract they
implement, and ``objectstore.py``, files on local disk, S3, GCS or Azure through fsspec (the storage
sink's files, the Kafka sink's claim-check store, the data dir). May import: ``errors``, ``model``,
``config``, ``codec``, ``dispatch``; a sink package does not import another
(``tests/unit/test_layering.py``); never pipeline, server or cli.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from sparkcdc.config.uri import redact_uri, split_scheme
from sparkcdc.errors import SinkURIError

if TYPE_CHECKING:
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.sink.base import Sink

# scheme -> "module:Class"; modules import lazily so a missing optional dependency
# only matters to the sink that needs it.
SINKS: dict[str, str] = {
    "file": "sparkcdc.sink.storage:StorageSink",
    "s3": "sparkcdc.sink.storage:StorageSink",
    "gcs": "sparkcdc.sink.storage:StorageSink",
    "gs": "sparkcdc.sink.storage:StorageSink",
    "azure": "sparkcdc.sink.storage:StorageSink",
    "azblob": "sparkcdc.sink.storage:StorageSink",
    "kafka": "sparkcdc.sink.kafka:KafkaSink",
    "kafka+ssl": "sparkcdc.sink.kafka:KafkaSink",
    "mysql": "sparkcdc.sink.mysql:MySQLSink",
    "mysql+ssl": "sparkcdc.sink.mysql:MySQLSink",
    "tidb": "sparkcdc.sink.mysql:MySQLSink",
    "tidb+ssl": "sparkcdc.sink.mysql:MySQLSink",
    "http": "sparkcdc.sink.http:HTTPSink",
    "https": "sparkcdc.sink.http:HTTPSink",
    "iceberg": "sparkcdc.sink.lakehouse:LakehouseSink",
    "delta": "sparkcdc.sink.lakehouse:LakehouseSink",
}


def create_sink(uri: str, config: ReplicaConfig, changefeed_id: str = "default") -> Sink:
    """Build the sink for a URI; an unknown scheme names the valid ones."""
    scheme = split_scheme(uri)
    target = SINKS.get(scheme)
    if target is None:
        raise SinkURIError(
            f"sink URI scheme {scheme!r} is not supported (in {redact_uri(uri)!r}); "
            f"use one of: {', '.join(sorted(SINKS))}"
        )
    module_name, cls_name = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise SinkURIError(f"the {scheme!r} sink needs a missing package: {exc.name}") from exc
    cls = getattr(module, cls_name)
    sink: Sink = cls(uri, config, changefeed_id)
    return sink
