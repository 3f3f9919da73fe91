"""TiCDC's storage layout: data, index, schema and metadata paths (spec §3).

All paths are relative to the sink root (``{prefix}``) and use ``/``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from functools import lru_cache

from sparkcdc.errors import ConfigError, DecodeError
from sparkcdc.model.ts import physical_ms

DEFAULT_FILE_INDEX_WIDTH = 20
MIN_FILE_INDEX_WIDTH = 6
MAX_FILE_INDEX_WIDTH = 20
INDEX_FILE = "meta/CDC.index"
METADATA_FILE = "metadata"
DATE_SEPARATORS = ("none", "year", "month", "day")
_DATE_FORMATS = {"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d"}
_DATE_PATTERNS = {
    "none": None,
    "year": re.compile(r"^\d{4}$"),
    "month": re.compile(r"^\d{4}-\d{2}$"),
    "day": re.compile(r"^\d{4}-\d{2}-\d{2}$"),
}
_SCHEMA_FILE_RE = re.compile(r"^schema_(\d+)_(\d{10})\.json$")
_DATA_FILE_RE = re.compile(r"^CDC(\d+)\.(\w+)$")

EXTENSIONS = {"csv": ".csv", "canal-json": ".json"}


def effective_index_width(width: int) -> int:
    """``file-index-digit`` as TiCDC applies it: out of [6, 20] means the default 20."""
    if width < MIN_FILE_INDEX_WIDTH or width > MAX_FILE_INDEX_WIDTH:
        return DEFAULT_FILE_INDEX_WIDTH
    return width


def check_date_separator(value: str) -> str:
    """Validate ``date-separator`` (none|year|month|day)."""
    if value not in DATE_SEPARATORS:
        raise ConfigError(
            f"invalid date-separator {value!r} (CDC:ErrStorageSinkInvalidDateSeparator); "
            f"allowed: {', '.join(DATE_SEPARATORS)}"
        )
    return value


def commit_date(separator: str, commit_ts: int, time_zone: str = "UTC") -> str:
    """The date directory of a commit_ts (its physical time in ``time_zone``); '' for none.

    Data files are dated by the commit_ts of their batch's rows, never by a writer's clock: a
    replayed batch lands where it landed the first time, and since batches follow commit order
    a table's dates never go backwards.
    """
    fmt = _DATE_FORMATS.get(separator)
    if fmt is None:
        return ""
    return dt.datetime.fromtimestamp(physical_ms(commit_ts) / 1000, _zone(time_zone)).strftime(fmt)


_OFFSET_RE = re.compile(r"^([+-])(\d{1,2}):(\d{2})$")


@lru_cache(maxsize=64)
def _zone(name: str) -> dt.tzinfo:
    """``UTC``, an IANA name or an offset like ``+08:00`` (the changefeed's ``time-zone``)."""
    if name.upper() == "UTC":
        return dt.UTC
    m = _OFFSET_RE.match(name)
    if m:
        delta = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return dt.timezone(-delta if m.group(1) == "-" else delta)
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"unknown time zone {name!r} for 'time-zone'; use an IANA name such as UTC or "
            "Asia/Shanghai, or an offset such as +08:00"
        ) from exc


def data_file_name(index: int, extension: str, width: int) -> str:
    """``CDC{index:0{width}d}{extension}``, e.g. ``CDC00000000000000000001.csv``."""
    return f"CDC{index:0{width}d}{extension}"


def parse_data_file_name(name: str) -> tuple[int, str] | None:
    """(index, extension with dot) of a data file name, or None for any other name."""
    m = _DATA_FILE_RE.match(name)
    if not m:
        return None
    return int(m.group(1)), "." + m.group(2)


@dataclass(frozen=True, order=True)
class DataDir:
    """One directory of data files: a table version, optional partition and date."""

    schema: str
    table: str
    version: int
    partition: int | None = None
    date: str = ""

    @property
    def path(self) -> str:
        """``{schema}/{table}/{version}[/{partition}][/{date}]``."""
        parts = [self.schema, self.table, str(self.version)]
        if self.partition is not None:
            parts.append(str(self.partition))
        if self.date:
            parts.append(self.date)
        return "/".join(parts)

    @property
    def index_path(self) -> str:
        """The ``meta/CDC.index`` file of this directory."""
        return f"{self.path}/{INDEX_FILE}"

    def file_path(self, index: int, extension: str, width: int) -> str:
        """The path of data file number ``index``."""
        return f"{self.path}/{data_file_name(index, extension, width)}"


def parse_data_path(path: str, date_separator: str) -> tuple[DataDir, int, str] | None:
    """Split ``{schema}/{table}/{version}[/{partition}][/{date}]/CDC{n}.{ext}``; None if it is not one."""
    parts = path.split("/")
    if len(parts) < 4:
        return None
    parsed = parse_data_file_name(parts[-1])
    if parsed is None:
        return None
    index, ext = parsed
    schema, table, version = parts[0], parts[1], parts[2]
    if not version.isdigit():
        return None
    middle = parts[3:-1]
    date = ""
    date_re = _DATE_PATTERNS.get(date_separator)
    if date_re is not None:
        if not middle or not date_re.match(middle[-1]):
            return None
        date = middle.pop()
    partition: int | None = None
    if middle:
        if len(middle) != 1 or not middle[0].isdigit():
            return None
        partition = int(middle[0])
    return DataDir(schema, table, int(version), partition, date), index, ext


def schema_file_path(schema: str, table: str, table_version: int, checksum: int) -> str:
    """``{schema}[/{table}]/meta/schema_{version}_{checksum:010d}.json``."""
    if not schema or table_version <= 0:
        raise ValueError(f"invalid schema file key: schema={schema!r} table_version={table_version}")
    name = f"schema_{table_version}_{checksum:010d}.json"
    return f"{schema}/{table}/meta/{name}" if table else f"{schema}/meta/{name}"


def schema_meta_dir(schema: str, table: str) -> str:
    """The ``meta`` directory holding a table's (or a database's) schema files."""
    return f"{schema}/{table}/meta" if table else f"{schema}/meta"


def parse_schema_file_path(path: str) -> tuple[str, str, int, int] | None:
    """(schema, table, table_version, checksum) of a schema file path ('' table for a database)."""
    parts = path.split("/")
    if len(parts) == 3:
        schema, table = parts[0], ""
    elif len(parts) == 4:
        schema, table = parts[0], parts[1]
    else:
        return None
    if parts[-2] != "meta":
        return None
    m = _SCHEMA_FILE_RE.match(parts[-1])
    if not m:
        return None
    return schema, table, int(m.group(1)), int(m.group(2))


def parse_index_file(data: bytes, extension: str) -> int:
    """The file number recorded in a ``CDC.index`` body (``CDC000005.csv\\n``)."""
    name = data.decode("utf-8", errors="replace").rstrip("\n")
    parsed = parse_data_file_name(name)
    if parsed is None or parsed[1] != extension or len(name) < 3 + MIN_FILE_INDEX_WIDTH + len(extension):
        raise DecodeError(
            f"invalid index file content {name!r} (CDC:ErrStorageSinkInvalidFileName): expected a "
            f"data file name like CDC000001{extension}; remove the broken meta/CDC.index to start over"
        )
    return parsed[0]


def metadata_body(checkpoint_ts: int) -> bytes:
    """The root ``metadata`` file: ``{"checkpoint-ts":N}`` (compact, no newline)."""
    return b'{"checkpoint-ts":%d}' % checkpoint_ts


def parse_metadata(data: bytes) -> int:
    """The checkpoint-ts of a ``metadata`` file body."""
    try:
        obj = json.loads(data)
        return int(obj["checkpoint-ts"])
    except (ValueError, KeyError, TypeError) as exc:
        raise DecodeError(f"invalid storage metadata file {data[:200]!r}: {exc}") from exc
