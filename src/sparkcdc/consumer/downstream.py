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
from sparkcdc.sink.mysql.config import MySQLSinkSettings, parse_mysql_sink

CONNECT_TIMEOUT = 10.0
"""Seconds the consumer waits for the downstream to accept and answer its login."""


def downstream_settings(uri: str) -> MySQLSinkSettings:
    """The MySQL sink settings of ``--downstream-uri``, with the consumer's connect timeout."""
    settings = parse_mysql_sink(uri, ReplicaConfig())
    if "timeout" in ParsedURI.parse(uri).params:
        return settings
    return replace(settings, conn=replace(settings.conn, connect_timeout=CONNECT_TIMEOUT))
