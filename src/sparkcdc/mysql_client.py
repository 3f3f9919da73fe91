"""PyMySQL connections whose preferred-mode TLS context is built once per process.

Given no TLS option, PyMySQL tries TLS when the server offers it and falls back to plain text when
it does not ("preferred"). For that it builds a new ``ssl.create_default_context()`` for every
connection, loading the system's CA bundle: about 19 ms of CPU each on the 2-core machine, for a
context that verifies nothing (no CA: no certificate or host name check). ``connect`` builds that
same context the first time, through PyMySQL's own code, and hands it to every later connection
without TLS options; connections with TLS options build theirs as before.

Every MariaDB/MySQL connection of sparkcdc goes through here: the upstream's (capture, the
planner's clock, binlog dumps), the MySQL sink's and the test services'.
"""

from __future__ import annotations

import ssl
import threading
from typing import Any

from pymysql.connections import Connection

_LOCK = threading.Lock()
_PREFERRED: ssl.SSLContext | None = None


class _Connection(Connection):
    """PyMySQL's connection, with the preferred-mode context shared."""

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        global _PREFERRED
        if not (isinstance(sslp, dict) and not sslp):
            return super()._create_ssl_ctx(sslp)
        ctx = _PREFERRED
        if ctx is None:
            with _LOCK:
                if _PREFERRED is None:
                    _PREFERRED = super()._create_ssl_ctx(sslp)
                ctx = _PREFERRED
        return ctx


def connect(**kwargs: Any) -> Connection:
    """``pymysql.connect(**kwargs)``, with the preferred-mode TLS context built once."""
    return _Connection(**kwargs)


def preferred_context() -> ssl.SSLContext | None:
    """The shared preferred-mode context (None until a connection without TLS options needed it)."""
    return _PREFERRED
