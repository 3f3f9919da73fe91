"""The consumer's downstream: the MySQL sink's URI, with a short connect timeout unless the URI sets one.

A consumer is started by hand and should say at once that its downstream does not answer: the
connect (TCP and the MySQL handshake) gives up after ``CONNECT_TIMEOUT`` seconds, not the sink's
two minutes. ``timeout``, ``read-timeout`` and ``write-timeout`` in the URI still win; statements
keep the sink's read and write timeouts (a large transaction or a DDL may take a while).
"""

from __future__ import annotations

from dataclasses import replace

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.config.uri import ParsedURI
from sparkcdc.model import TableInfo
from sparkcdc.sink.mysql.applier import ER_NO_SUCH_TABLE, MySQLApplier
from sparkcdc.sink.mysql.config import MySQLSinkSettings, parse_mysql_sink

CONNECT_TIMEOUT = 10.0
"""Seconds the consumer waits for the downstream to accept and answer its login."""


def downstream_settings(uri: str) -> MySQLSinkSettings:
    """The MySQL sink settings of ``--downstream-uri``, with the consumer's connect timeout."""
    settings = parse_mysql_sink(uri, ReplicaConfig())
    if "timeout" in ParsedURI.parse(uri).params:
        return settings
    return replace(settings, conn=replace(settings.conn, connect_timeout=CONNECT_TIMEOUT))


def downstream_table(applier: MySQLApplier, schema: str, table: str) -> TableInfo | None:
    """The downstream table's shape from its ``SHOW CREATE TABLE`` (None when it does not exist)."""
    import pymysql

    from sparkcdc.capture.catalog import parse_create_table, show_create_table

    conn = applier.connection()
    try:
        with conn.cursor() as cur:
            text = show_create_table(cur, schema, table)
    except pymysql.err.ProgrammingError as exc:
        conn.rollback()
        if exc.args and exc.args[0] == ER_NO_SUCH_TABLE:
            return None
        raise
    conn.commit()
    return parse_create_table(text, schema)


def with_downstream_charsets(info: TableInfo, downstream: TableInfo | None) -> TableInfo:
    """``info`` with each text column's character set as the downstream table declares it.

    A storage sink's schema file names no character set (its columns read as utf8mb4); the MySQL
    applier needs the real one to write a non-UTF-8 column's text back as the bytes capture read
    (``sink.mysql.statements``).
    """
    if downstream is None:
        return info
    charsets = {c.name.lower(): c.charset for c in downstream.columns if c.is_text}
    columns = tuple(
        replace(c, charset=charsets[c.name.lower()]) if c.is_text and charsets.get(c.name.lower()) else c
        for c in info.columns
    )
    return info if columns == info.columns else replace(info, columns=columns, _pos={})
