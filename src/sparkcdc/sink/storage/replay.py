"""What an earlier attempt of a batch already published in a data directory.

Data files are named by number, not by batch. A batch that failed after some of its files were
published (a full disk, a killed driver, a failed task that Spark runs again) is written again
from the same binlog range, and without a check its published rows would be published twice:
a consumer drops whole transactions it has applied, but not the repeated part of the transaction
it applied last, and a table without a key downstream would get those rows twice.

A writer of a batch that may be a replay (``WriterContext.replay``) therefore reads, for each data
directory it writes, the tail of what is published there (``published_tail``): the commit_ts T
of the last record and the bytes of the records at T at the end of the directory (over several
files when a transaction was cut by ``file-size``). Its rows below T are skipped, then its
first rows at T until their encoded bytes add up to that size (encoding is deterministic: the
same rows give records of the same sizes), and the rest are written. An earlier attempt
published a prefix of the directory's rows in commit order (files are written and published in
order, staged segments in segment order), so this skips exactly what it published. A tail from
a committed batch has T below every row of the batch after it, so nothing is skipped.

Records without a commit_ts (CSV without ``include-commit-ts``, canal-json without
``enable-tidb-extension``) cannot be placed: such a replay publishes its rows again, at least
once as with TiCDC, and ``published_tail`` returns None.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sparkcdc.codec.csv import HEADER_OPERATION, CSVDecoder
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import DecodeError
from sparkcdc.sink.objectstore import StorageBackend
from sparkcdc.sink.storage.layout import DataDir, parse_index_file


@dataclass
class PublishedTail:
    """The end of a data directory: its last commit_ts and the bytes of its records at that commit_ts."""

    commit_ts: int
    size: int
    path: str
    """The directory, for errors."""


def tail_has_commit_ts(protocol: str, config: ReplicaConfig, enable_tidb_extension: bool) -> bool:
    """Whether the records of this format carry their commit_ts (so a replay can be placed)."""
    if protocol == "csv":
        return bool(config.sink.csv.include_commit_ts)
    return enable_tidb_extension


def record_times(data: bytes, protocol: str, config: ReplicaConfig) -> Iterator[tuple[int, int]]:
    """(commit_ts, size in bytes) of each record of a data file, in order (a CSV header is skipped)."""
    if protocol == "csv":
        decoder = CSVDecoder(config.sink.csv, config.sink.terminator, include_commit_ts=True)
        first = True
        for fields, size in decoder.record_sizes(data):
            if first:
                first = False
                if fields and fields[0] == (HEADER_OPERATION, False):
                    continue
            raw = fields[3][0] if len(fields) > 3 else None
            if raw is None or not raw.isdigit():
                raise DecodeError(f"the 4th column ({raw}) of a csv record should be its commit-ts")
            yield int(raw), size
        return
    from sparkcdc.codec.canal_json.decoder import decode_canal_json

    term = (config.sink.terminator or "\n").encode()
    for line in data.split(term):
        if not line.strip(b"\r\n"):
            continue
        ts = decode_canal_json(line).commit_ts
        if ts is None:
            raise DecodeError("a canal-json record has no _tidb.commitTs")
        yield int(ts), len(line) + len(term)


def published_tail(
    backend: StorageBackend,
    directory: DataDir,
    protocol: str,
    config: ReplicaConfig,
    extension: str,
    width: int,
) -> PublishedTail | None:
    """The tail of ``directory`` (see the module docstring); None when nothing is published there."""
    index = backend.read(directory.index_path)
    if index is None:
        return None
    number = parse_index_file(index, extension)
    last_ts: int | None = None
    size = 0
    while number >= 1:
        where = directory.file_path(number, extension, width)
        data = backend.read(where)
        if not data:
            if last_ts is None:
                # The index names a file that was never written (index first, then the file):
                # the tail is in the file before it.
                number -= 1
                continue
            break
        try:
            times = list(record_times(data, protocol, config))
        except DecodeError as exc:
            raise DecodeError(
                f"cannot read back {where} to tell what an earlier attempt of this batch published: {exc}"
            ) from exc
        if not times:
            number -= 1
            continue
        if last_ts is None:
            last_ts = times[-1][0]
        whole = True
        for ts, n in reversed(times):
            if ts != last_ts:
                whole = False
                break
            size += n
        if not whole:
            break
        number -= 1
    if last_ts is None:
        return None
    return PublishedTail(last_ts, size, directory.path)
