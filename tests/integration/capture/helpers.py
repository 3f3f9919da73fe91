"""Helpers for capture tests: read everything the binlog holds after an offset."""

from __future__ import annotations

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import RowReader, TableShapes
from sparkcdc.capture.start import head_offset
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model import RowChange
from sparkcdc.services.mariadb import LocalMariaDB


def upstream(db: LocalMariaDB) -> UpstreamConfig:
    return UpstreamConfig.from_uri(db.uri)


def read_all(db: LocalMariaDB, start: Offset, schema: str | None = None, tz: str = "UTC") -> list[RowChange]:
    """Every row change after ``start`` up to the current end of the binlog."""
    up = upstream(db)
    end = head_offset(up)
    out = []
    for ev in RowReader(up, start, end, shapes=TableShapes(), time_zone=tz).events():
        if isinstance(ev, RowChange) and (schema is None or ev.schema == schema):
            out.append(ev)
    return out
