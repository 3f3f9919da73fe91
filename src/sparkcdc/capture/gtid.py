"""GTID start points: MariaDB positions (``0-1-1234``) and MySQL GTID sets (``uuid:1-100:200``).

A MariaDB position names the last transaction per replication domain; the server streams what
follows. A MySQL GTID set names every transaction already applied (``@@gtid_executed`` of a
replica); the server streams every transaction outside it (``COM_BINLOG_DUMP_GTID``, with the set
encoded as below). Either way the changefeed starts right before the first transaction streamed.

Encoded MySQL GTID set (``Gtid_set::encode``): the number of server UUIDs (8 bytes), then per
UUID its 16 bytes, the number of intervals (8 bytes) and each interval as start and end + 1
(8 bytes each), all little-endian. MySQL 8.3 added tagged GTIDs (``uuid:tag:1-5``), which need a
newer encoding: they are refused here with that reason.
"""

from __future__ import annotations

import re
import struct
import uuid
from dataclasses import dataclass

from sparkcdc.errors import ConfigError

_MARIA = re.compile(r"^\d+-\d+-\d+(?:,\s*\d+-\d+-\d+)*$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAG = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]{0,31}$")

MAX_GNO = (1 << 63) - 1

_EXAMPLES = (
    "a MariaDB GTID position DOMAIN-SERVER-SEQ such as 0-1-1234 (several domains separated by commas), "
    "or a MySQL GTID set UUID:FIRST-LAST such as 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-100 "
    "(SELECT @@GLOBAL.gtid_executed prints one)"
)


@dataclass(frozen=True)
class MysqlGtidSet:
    """A MySQL GTID set: per server UUID, sorted and merged closed intervals of transaction numbers."""

    sids: tuple[tuple[uuid.UUID, tuple[tuple[int, int], ...]], ...]

    def __str__(self) -> str:
        return ",".join(
            f"{sid}:" + ":".join(str(a) if a == b else f"{a}-{b}" for a, b in ivs) for sid, ivs in self.sids
        )

    def encode(self) -> bytes:
        """The set as ``COM_BINLOG_DUMP_GTID`` carries it (intervals end-exclusive)."""
        out = bytearray(struct.pack("<Q", len(self.sids)))
        for sid, ivs in self.sids:
            out += sid.bytes + struct.pack("<Q", len(ivs))
            for a, b in ivs:
                out += struct.pack("<QQ", a, b + 1)
        return bytes(out)

    def contains(self, sid: uuid.UUID, gno: int) -> bool:
        """Whether transaction ``sid:gno`` is in the set."""
        return any(a <= gno <= b for s, ivs in self.sids if s == sid for a, b in ivs)


def is_maria_gtid(text: str) -> bool:
    """Whether ``text`` is a MariaDB GTID position (``0-1-1234[,1-2-5]``)."""
    return bool(_MARIA.match(text.strip()))


def parse_mysql_gtid_set(text: str) -> MysqlGtidSet:
    """A MySQL GTID set from its text (``uuid:1-5:7,uuid2:3``; newlines as ``gtid_executed`` prints are fine).

    Raises ConfigError naming the bad part and the expected shape.
    """
    merged: dict[uuid.UUID, list[tuple[int, int]]] = {}
    compact = re.sub(r"\s+", "", text)
    if not compact:
        raise ConfigError(f"invalid --start-gtid {text!r}: it is empty; use {_EXAMPLES}")
    for part in compact.split(","):
        if not part:
            continue
        fields = part.split(":")
        if not _UUID.match(fields[0]):
            raise ConfigError(
                f"invalid --start-gtid {text!r}: {fields[0]!r} is not a server UUID; use {_EXAMPLES}"
            )
        sid = uuid.UUID(fields[0])
        if len(fields) < 2:
            raise ConfigError(
                f"invalid --start-gtid {text!r}: {part!r} has no transaction numbers (UUID:FIRST-LAST); "
                f"use {_EXAMPLES}"
            )
        ivs = merged.setdefault(sid, [])
        for f in fields[1:]:
            m = _INTERVAL.match(f)
            if m is None:
                if _TAG.match(f):
                    raise ConfigError(
                        f"invalid --start-gtid {text!r}: tagged GTIDs ({fields[0]}:{f}:...) are not supported; "
                        "start from a position (--start-position FILE:POS) or a --start-ts instead"
                    )
                raise ConfigError(
                    f"invalid --start-gtid {text!r}: {f!r} is not an interval FIRST-LAST or a number; use {_EXAMPLES}"
                )
            a = int(m.group(1))
            b = int(m.group(2)) if m.group(2) else a
            if not 1 <= a <= b <= MAX_GNO:
                raise ConfigError(
                    f"invalid --start-gtid {text!r}: interval {f!r} must have 1 <= FIRST <= LAST <= {MAX_GNO}"
                )
            ivs.append((a, b))
    sids = []
    for sid in sorted(merged, key=lambda s: s.bytes):
        out: list[tuple[int, int]] = []
        for a, b in sorted(merged[sid]):
            if out and a <= out[-1][1] + 1:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        sids.append((sid, tuple(out)))
    return MysqlGtidSet(tuple(sids))


def parse_start_gtid(text: str) -> str | MysqlGtidSet:
    """A ``--start-gtid`` value: the MariaDB position as text, or the parsed MySQL GTID set.

    Raises ConfigError with both accepted shapes when it is neither.
    """
    stripped = text.strip()
    if is_maria_gtid(stripped):
        return stripped
    if ":" in stripped:
        return parse_mysql_gtid_set(stripped)
    raise ConfigError(f"invalid --start-gtid {text!r}: use {_EXAMPLES}")


def parse_mysql_gtid_event(body: bytes) -> str:
    """``uuid:gno`` of a MySQL GTID_LOG_EVENT body (flags, 16-byte server UUID, 8-byte number)."""
    sid = uuid.UUID(bytes=bytes(body[1:17]))
    gno = struct.unpack_from("<q", body, 17)[0]
    return f"{sid}:{gno}"
