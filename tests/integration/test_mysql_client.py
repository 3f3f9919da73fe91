"""``sparkcdc.mysql_client``: connections without TLS options share one preferred-mode TLS context."""

from __future__ import annotations

import ssl

import pymysql
import pytest

from sparkcdc import mysql_client
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = pytest.mark.integration


def test_connections_without_tls_options_share_pymysqls_own_preferred_context(mariadb: LocalMariaDB) -> None:
    first = mysql_client.connect(host="127.0.0.1", port=mariadb.port, user="root", password="")
    second = UpstreamConfig.from_uri(mariadb.uri).connect()
    try:
        shared = mysql_client.preferred_context()
        assert shared is not None and first.ctx is shared and second.ctx is shared
        # the context PyMySQL builds itself for this case: no CA, so no certificate or host name check
        own = pymysql.connect(host="127.0.0.1", port=mariadb.port, user="root", password="")
        try:
            assert own.ctx is not shared
            assert (own.ctx.verify_mode, own.ctx.check_hostname, own.ctx.options) == (
                shared.verify_mode,
                shared.check_hostname,
                shared.options,
            )
        finally:
            own.close()
        with first.cursor() as cur:
            cur.execute("SELECT 1")
            assert cur.fetchone() == (1,)
    finally:
        first.close()
        second.close()


def test_connections_with_tls_options_build_their_own(mariadb: LocalMariaDB) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    # The local MariaDB offers no TLS: a connection that requires it is refused, and never gets
    # the shared context.
    with pytest.raises(pymysql.err.OperationalError):
        mysql_client.connect(host="127.0.0.1", port=mariadb.port, user="root", password="", ssl=ctx)
    assert mysql_client.preferred_context() is not ctx
