"""The FULL row-image check: every ROWS event must carry every column in its images.

A server (or one session) logging ``binlog_row_image=MINIMAL`` or ``NOBLOB`` writes rows events
whose columns-present bitmaps leave columns out: a delete or an update's before image with the
primary key only, an update's after image with the changed columns only. Such a row cannot be
delivered whole, so the changefeed stops at the first one instead of delivering partial rows.

The body is laid out as ``rowcodec.rows_event_images`` reads it: table id (6 bytes), flags (2),
for version 2 the extra-data length (2, counting itself) and data, the packed column count, then
one columns-present bitmap (insert, delete) or two (update: before, after).
"""

from __future__ import annotations

from functools import lru_cache

from sparkcdc.capture.tablemap import read_packed
from sparkcdc.errors import DecodeError, UpstreamSetupError

__all__ = ["check_full_image"]


@lru_cache(maxsize=1024)
def _all_present(ncol: int) -> bytes:
    """The bitmap naming all ``ncol`` columns as MariaDB writes it: the unused high bits clear."""
    return ((1 << ncol) - 1).to_bytes((ncol + 7) // 8, "little")


def check_full_image(
    body: bytes, version: int, op: str, column_count: int, *, table: str, where: str
) -> None:
    """Raise UpstreamSetupError unless the rows event's bitmaps name all ``column_count`` columns.

    ``op``: I, U or D; ``version``: 1 or 2 (the rows event version); ``table``: ``db.table`` for the
    message; ``where``: the event's binlog position, for the message.
    """
    try:
        pos = 8
        if version == 2:
            pos += int.from_bytes(body[8:10], "little")
        ncol, pos = read_packed(body, pos)
    except IndexError as exc:
        raise DecodeError(f"rows event of {table} at {where} is truncated before its column bitmaps") from exc
    nb = (ncol + 7) // 8
    full = _all_present(ncol)
    images = 2 if op == "U" else 1
    end = pos + nb * images
    if len(body) < end:
        raise DecodeError(f"rows event of {table} at {where} is truncated inside its column bitmaps")
    if ncol == column_count:
        if body[pos:end] == full * images:
            return
        # a server that sets the unused high bits of the last byte: compare the columns' bits alone
        if all(_covers(body[p : p + nb], ncol) for p in range(pos, end, nb)):
            return
    _raise_partial(body, pos, nb, ncol, images, column_count, op, table, where)


def _covers(bitmap: bytes, ncol: int) -> bool:
    """Whether ``bitmap`` names columns 0 .. ncol-1."""
    mask = (1 << ncol) - 1
    return int.from_bytes(bitmap, "little") & mask == mask


def _raise_partial(
    body: bytes, pos: int, nb: int, ncol: int, images: int, column_count: int, op: str, table: str, where: str
) -> None:
    names = ("before image", "after image") if op == "U" else ("before image",) if op == "D" else ("row",)
    details = []
    for k in range(images):
        bits = int.from_bytes(body[pos + k * nb : pos + (k + 1) * nb], "little")
        have = sum(1 for i in range(min(ncol, column_count)) if bits >> i & 1)
        if have < column_count:
            details.append(f"{names[k]} has {have} of {column_count} columns")
    detail = ", ".join(details) or f"the event has {ncol} columns, the table map {column_count}"
    # UpstreamSetupError: the server's logging setup is the cause, and it is permanent: the
    # partial rows are in the binlog for good, retrying reads the same event again.
    raise UpstreamSetupError(
        f"rows event of {table} at {where} is not a FULL row image ({detail}): the upstream logged "
        "it with binlog_row_image=MINIMAL or NOBLOB (globally or in that session); run SET GLOBAL "
        "binlog_row_image=FULL (and binlog_row_image=FULL under [mysqld] in my.cnf), make sure no "
        "session sets it, then start a new changefeed from a point after the change, or take a "
        'snapshot ([snapshot] mode = "initial")'
    )
