"""MySQL/MariaDB/TiDB sink and the standalone applier the consumers share."""

from sparkcdc.sink.mysql.applier import ApplierStats, MySQLApplier
from sparkcdc.sink.mysql.config import MySQLSinkSettings, parse_mysql_sink
from sparkcdc.sink.mysql.connection import ConnParams, connect
from sparkcdc.sink.mysql.sink import MySQLSink, MySQLWriter, applier_from_uri, make_applier

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
