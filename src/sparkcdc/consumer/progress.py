"""A consumer's progress table in the downstream MySQL, created on first use."""

from __future__ import annotations

from typing import Any

from sparkcdc.sink.mysql.applier import MySQLApplier
from sparkcdc.sink.mysql.statements import quote_ident_raw


class ProgressTable:
    """``<schema>.<table>`` with the given column definitions; ``connect`` creates it once."""

    def __init__(self, schema: str, table: str, columns: str) -> None:
        self.schema = schema
        self.name = f"{quote_ident_raw(schema)}.{quote_ident_raw(table)}"
        """The quoted, schema-qualified name to use in statements."""
        self.columns = columns
        self._ready = False

    def connect(self, applier: MySQLApplier) -> Any:
        """The applier's connection, with the schema and the table created if this is the first use."""
        conn = applier.connection()
        if not self._ready:
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE IF NOT EXISTS " + quote_ident_raw(self.schema))
                # InnoDB whatever the server's default engine: progress commits with the rows it covers.
                cur.execute(f"CREATE TABLE IF NOT EXISTS {self.name} ({self.columns}) ENGINE=InnoDB")
            conn.commit()
            self._ready = True
        return conn
