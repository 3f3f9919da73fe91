"""MySQL/MariaDB/TiDB sink and the standalone applier the consumers share.

- ``config.py``: the sink's options (``OPTIONS``, ``MySQLSinkSettings``: URI over ``[sink.mysql-config]``);
- ``sink.py``: ``MySQLSink``, the driver side (connection check, progress table, DDL);
- ``writer.py``: ``MySQLWriter``, the executor side, and ``make_applier``/``applier_from_uri``;
- ``applier.py``: ``MySQLApplier``, rows and DDLs applied downstream TiCDC style (also the consumers');
- ``statements.py``: SQL statement building (quoted identifiers, placeholders, batching);
- ``connection.py``: connection parameters, session setup and error mapping.
"""

from sparkcdc.sink.mysql.applier import ApplierStats, MySQLApplier
from sparkcdc.sink.mysql.config import MySQLSinkSettings, parse_mysql_sink
from sparkcdc.sink.mysql.connection import ConnParams, connect
from sparkcdc.sink.mysql.sink import MySQLSink
from sparkcdc.sink.mysql.writer import MySQLWriter, applier_from_uri, make_applier

__all__ = [
    "ApplierStats",
    "ConnParams",
    "MySQLApplier",
    "MySQLSink",
    "MySQLSinkSettings",
    "MySQLWriter",
    "applier_from_uri",
    "connect",
    "make_applier",
    "parse_mysql_sink",
]
