"""The differential oracle: sparkcdc's replicas must equal MariaDB's own native replica.

An upstream MariaDB (ROW binlog, FULL image and metadata, server_id 1) is replicated
natively by a second MariaDB (server_id 2, GTID ``slave_pos``): that replica is the
expected side. The same binlog range is delivered by sparkcdc through three paths, each
into a MariaDB of its own (binlog off)::

    mysql    sparkcdc run -> mysql:// sink                                   -> MariaDB
    storage  sparkcdc run -> file://...?protocol=canal-json -> sparkcdc consumer -> MariaDB
    kafka    sparkcdc run -> kafka:// canal-json (Tansu)     -> Kafka consumer   -> MariaDB

Use::

    with Oracle(root) as oracle:  # starts the six servers
        cap = oracle.capture("forms", [Segment("a", write_a, ("db_a",)), Segment("b", write_b, ("db_b",))])
        cap.assert_equal("kafka", "db_a", segment="a")  # names the table and first differing key

A workload is a list of ``Segment``: a name, a callable taking the upstream ``LocalMariaDB``
(it may open connections and change server settings) and the databases it writes, which the
changefeeds' filter replicates and the comparison covers. ``capture`` writes the segments in
order, noting where each ends (binlog file:pos and a ts), waits until the native replica
caught up, then runs each path's ``sparkcdc run --start-ts --target-ts`` over the range (the
three side by side; each ends by itself) and replays the storage files and the topic with
the consumers. Each capture of one ``Oracle`` has its own range, changefeeds and topics.

When a path's run fails, the failure is charged to the segment that holds the failing binlog
position (named in the error; else the segment whose database the error names; else the first
segment after the run's checkpoint), and that path runs again from the end of that segment:
one broken statement form fails its own segment's test, not every form written after it.
``cap.paths[path].skipped`` maps each such segment to the error text; ``assert_equal(...,
segment=...)`` fails on it even if the rows happen to match, and ``assert_ran(path)`` fails on
any failure of the path. A consumer that stops is charged the same way, but it cannot be
resumed past what stopped it: the segments after that point fail on its path as well, and
their messages list the path's failures.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pymysql

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu
from tests.e2e.workload import CliProcess, q, run_args, run_cli

PATHS = ("mysql", "storage", "kafka")
"""The three sparkcdc paths, in the order they are reported."""

RUN_TIMEOUT = float(os.environ.get("SPARKCDC_ORACLE_RUN_TIMEOUT", "600"))
"""Seconds one sparkcdc run may take to reach its target; long bench workloads raise it."""
CONSUMER_TIMEOUT = float(os.environ.get("SPARKCDC_ORACLE_CONSUMER_TIMEOUT", "300"))
KAFKA_PARTITIONS = 3
MAX_ROUNDS = 12
"""Runs of one path over one capture at most (the first and the restarts after failing segments)."""

Writer = Callable[[LocalMariaDB], None]


@dataclass(frozen=True)
class Segment:
    """A named part of a workload and the databases it writes (they help name a failing segment)."""

    name: str
    write: Writer
    databases: tuple[str, ...] = ()


BINARY_TYPES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")
_POSITION = re.compile(r"([A-Za-z0-9_.-]+\.\d{6}):(\d+)")


@dataclass(frozen=True)
class Boundary:
    """Where a segment of the workload ended: a transaction boundary and a ts after it."""

    segment: str
    file: str
    pos: int
    ts: int


@dataclass
class Round:
    """One ``sparkcdc run`` of one path: from ``start_ts`` to the capture's target ts."""

    index: int
    start_ts: int
    sink_uri: str
    changefeed: str
    returncode: int | None = None
    log: str = ""
    error: str = ""


@dataclass
class PathResult:
    """What one path did for one capture: its runs, the segments it failed on, consumer errors."""

    name: str
    rounds: list[Round] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Segment -> the error of the run that failed in it (the next run started after it), or of
    the consumer that stopped in it."""
    errors: list[str] = field(default_factory=list)
    """Failures not charged to a segment: a consumer's error, a run that could not be resumed."""

    def error_text(self) -> str:
        """Every failure of this path, or '' when it delivered the whole range."""
        lines = [f"failed in segment {seg}: {err}" for seg, err in self.skipped.items()]
        return "\n".join([*lines, *self.errors])


@dataclass
class Capture:
    """One workload's ts range, its databases and what each path delivered."""

    name: str
    start_ts: int
    target_ts: int
    databases: list[str]
    segments: list[Segment]
    begin: Boundary
    """Where the capture's range starts (the end of the binlog before the workload)."""
    boundaries: list[Boundary]
    """Where each segment ends, in order."""
    oracle: Oracle
    paths: dict[str, PathResult]
    seconds: dict[str, float]
    restarts: tuple[str, ...] = ()
    """Segments after which every run stops (at the segment's end) and starts again: the same
    changefeed, data dir and sink, resumed from its checkpoint as after a stop."""

    def stops(self, start_ts: int) -> list[int]:
        """Where a run from ``start_ts`` stops: the ends of the restart segments after it, then the target."""
        ends = [
            b.ts for b in self.boundaries if b.segment in self.restarts and start_ts < b.ts < self.target_ts
        ]
        return [*ends, self.target_ts]

    def problems(self, path: str, database: str) -> list[str]:
        """Differences of ``database`` between the native replica and ``path``'s replica ([] when equal)."""
        return diff_database(self.oracle.replica, self.oracle.downstreams[path], database, path)

    def assert_equal(self, path: str, database: str, segment: str | None = None) -> None:
        """``database`` on ``path``'s replica equals the native replica, table by table, row by row.

        With ``segment``: also fails when ``path``'s run failed inside that segment.
        """
        res = self.paths[path]
        problems = self.problems(path, database)
        if segment is not None and segment in res.skipped:
            problems.insert(0, f"the {path} path failed in segment {segment}: {res.skipped[segment]}")
        if problems:
            other = res.error_text()
            raise AssertionError(
                f"{path} replica differs from the native replica in {database}:\n"
                + "\n".join(problems)
                + (
                    f"\n-- every failure of the {path} path in workload {self.name!r}:\n{other}"
                    if other
                    else ""
                )
            )

    def assert_ran(self, path: str) -> None:
        """``path`` delivered the whole range in one run and its consumer ended without error."""
        res = self.paths[path]
        assert not res.skipped and not res.errors, (
            f"{path} path of workload {self.name!r} failed:\n{res.error_text()}"
        )


class Oracle:
    """The upstream, its native replica, one downstream MariaDB per path and a Kafka broker."""

    def __init__(
        self, root: Path, *, upstream_args: tuple[str, ...] = (), server_args: tuple[str, ...] = ()
    ) -> None:
        """``server_args``: options of every MariaDB (upstream, replica, downstreams): a workload that
        counts on server defaults (a default engine, a charset) finds them on every side."""
        self.root = root
        self.upstream = LocalMariaDB(server_id=1, extra_args=(*server_args, *upstream_args))
        self.replica = LocalMariaDB(server_id=2, extra_args=server_args)
        # A statement that waits on a lock fails after 10 s instead of InnoDB's 50 (the mysql sink
        # retries a lock wait five times per attempt): each downstream has one writer, so a wait
        # that long is a stuck sink, and the run reports it in a minute, not in ten.
        self.downstreams = {
            p: LocalMariaDB(binlog=False, extra_args=(*server_args, "--innodb-lock-wait-timeout=10"))
            for p in PATHS
        }
        self.kafka = LocalTansu()
        self._started: list[Any] = []

    def start(self) -> Oracle:
        """Start every server and the native replication."""
        try:
            for server in (self.upstream, self.replica, *self.downstreams.values(), self.kafka):
                server.start()
                self._started.append(server)
            self.replica.replicate_from(self.upstream)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server started."""
        from sparkcdc.sink.kafka.producer import close_all_producers

        close_all_producers(1)
        while self._started:
            self._started.pop().stop()

    def __enter__(self) -> Oracle:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def tso(self) -> int:
        """``sparkcdc cli tso query`` of the upstream: every later transaction has a larger commit_ts."""
        from sparkcdc.capture.start import query_tso
        from sparkcdc.capture.upstream import UpstreamConfig

        return query_tso(UpstreamConfig.from_uri(self.upstream.uri))

    def boundary(self, segment: str) -> Boundary:
        """The upstream's binlog end (a transaction boundary) and a ts every later transaction exceeds."""
        file, pos = self.upstream.query("SHOW MASTER STATUS")[0][:2]
        return Boundary(segment, str(file), int(pos), self.tso())

    def capture(
        self,
        name: str,
        workload: Sequence[Segment] | Writer,
        databases: Sequence[str] = (),
        restarts: Sequence[str] = (),
    ) -> Capture:
        """Write ``workload`` on the upstream, then deliver exactly its range through the three paths.

        ``name`` (lower-case letters, digits, '-') names the changefeeds, topics and state of this
        capture; each capture of one ``Oracle`` needs its own. A single callable is one segment.
        ``databases``: what the changefeeds replicate and the comparison covers (default: the
        segments' databases). ``restarts``: segments after which each path's run stops and its
        changefeed resumes (``Capture.restarts``).
        """
        if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", name):
            raise ValueError(f"capture name {name!r}: use lower-case letters, digits and '-'")
        segments = [Segment(name, workload)] if callable(workload) else list(workload)
        unknown = sorted(set(restarts) - {seg.name for seg in segments})
        if unknown:
            raise ValueError(f"restarts after segments {unknown} that the workload does not have")
        databases = list(databases) or list(dict.fromkeys(db for seg in segments for db in seg.databases))
        if not databases:
            raise ValueError("a capture needs the databases its workload writes")
        work = self.root / name
        work.mkdir(parents=True)
        seconds: dict[str, float] = {}
        t0 = time.monotonic()
        begin = self.boundary("")
        start_ts = begin.ts
        boundaries = []
        for seg in segments:
            seg.write(self.upstream)
            boundaries.append(self.boundary(seg.name))
        target_ts = boundaries[-1].ts
        if target_ts <= start_ts:
            raise AssertionError(
                f"workload {name!r} wrote nothing to the binlog (ts {start_ts} -> {target_ts})"
            )
        self.replica.wait_caught_up(self.upstream)
        seconds["workload"] = time.monotonic() - t0
        cap = Capture(
            name,
            start_ts,
            target_ts,
            databases,
            segments,
            begin,
            boundaries,
            self,
            {p: PathResult(p) for p in PATHS},
            seconds,
            tuple(restarts),
        )
        t0 = time.monotonic()
        self._deliver(cap, work)
        seconds["runs"] = time.monotonic() - t0
        t0 = time.monotonic()
        self._consume(cap, work)
        seconds["consumers"] = time.monotonic() - t0
        return cap

    # -- the three paths -------------------------------------------------------------------------

    def _sink_uri(self, cap: Capture, work: Path, path: str, index: int) -> str:
        if path == "mysql":
            return f"mysql://root:@127.0.0.1:{self.downstreams['mysql'].port}/"
        if path == "storage":
            return f"file://{work / f'storage-{index}'}?protocol=canal-json&enable-tidb-extension=true"
        return self.kafka.sink_uri(
            f"oracle-{cap.name}-{index}",
            f"protocol=canal-json&enable-tidb-extension=true&partition-num={KAFKA_PARTITIONS}",
        )

    def _config(self, work: Path, databases: list[str], path: str) -> Path:
        rules = ", ".join(f'"{db}.*"' for db in databases)
        body = f"[filter]\nrules = [{rules}]\n"
        if path == "kafka":
            # index-value: a table's rows spread over the partitions by key, so a key change
            # (a delete and an insert) may cross partitions, as on a real topic
            body += f'[sink]\ndispatchers = [{{matcher = [{rules}], partition = "index-value"}}]\n'
        cfg = work / f"{path}.toml"
        if not cfg.exists():
            cfg.write_text(body)
        return cfg

    def _deliver(self, cap: Capture, work: Path) -> None:
        """Run every path over the range; a path that fails runs again after the failing segment."""
        pending = {p: cap.start_ts for p in PATHS}
        for index in range(MAX_ROUNDS):
            if not pending:
                return
            rounds = {
                p: Round(index, start, self._sink_uri(cap, work, p, index), f"oracle-{cap.name}-{p}-{index}")
                for p, start in pending.items()
            }
            self.check_binlog(cap)
            self._run_round(cap, work, rounds)
            pending = {}
            for p, rnd in rounds.items():
                res = cap.paths[p]
                res.rounds.append(rnd)
                if not rnd.error:
                    continue
                saved = work / "state" / rnd.changefeed / "checkpoint.json"
                checkpoint = int(json.loads(saved.read_text())["checkpoint_ts"]) if saved.exists() else None
                k = failed_segment(
                    cap.begin, cap.boundaries, cap.segments, rnd.start_ts, rnd.error, checkpoint
                )
                if k is None:  # no position and no progress: no segment to blame, no point to resume after
                    res.errors.append(f"run {index} from ts {rnd.start_ts} failed: {rnd.error}")
                    continue
                res.skipped[cap.boundaries[k].segment] = rnd.error
                if k + 1 < len(cap.boundaries):
                    pending[p] = cap.boundaries[k].ts
        for p in pending:
            cap.paths[p].errors.append(
                f"gave up after {MAX_ROUNDS} runs; the rest of the range was not delivered"
            )

    def _run_round(self, cap: Capture, work: Path, rounds: dict[str, Round]) -> None:
        """Each path's run of the round, the paths side by side; a run stops and resumes at each of
        ``cap.stops`` (the first leg has ``--start-ts``, the later ones resume the changefeed)."""
        legs = {p: cap.stops(rnd.start_ts) for p, rnd in rounds.items()}
        for leg in range(max(len(v) for v in legs.values())):
            procs: dict[str, CliProcess] = {}
            try:
                for p, rnd in rounds.items():
                    if leg >= len(legs[p]) or rnd.error:
                        continue
                    start = ["--start-ts", str(rnd.start_ts)] if leg == 0 else []
                    procs[p] = CliProcess(
                        run_args(
                            self.upstream.uri,
                            rnd.sink_uri,
                            rnd.changefeed,
                            work / "state",
                            *start,
                            "--target-ts",
                            str(legs[p][leg]),
                            "--spark-conf",
                            "spark.driver.memory=1g",
                            "--error-stuck-seconds",
                            "60",
                            config=self._config(work, cap.databases, p),
                            master="local[1]",
                        ),
                        work / (f"run-{p}-{rnd.index}.log" if leg == 0 else f"run-{p}-{rnd.index}-{leg}.log"),
                    )
                for p, proc in procs.items():
                    self._wait_run(rounds[p], proc, legs[p][leg])
            finally:
                for proc in procs.values():
                    proc.stop()

    @staticmethod
    def _wait_run(rnd: Round, proc: CliProcess, target_ts: int) -> None:
        """Wait for one run to reach ``target_ts``; its failure goes to ``rnd.error``."""
        try:
            rnd.returncode = proc.wait(RUN_TIMEOUT)
        except AssertionError as exc:  # the wait timed out and killed the run
            rnd.error = f"sparkcdc run: {exc}"
        rnd.log += proc.output()
        if rnd.returncode not in (0, None):
            rnd.error = f"sparkcdc run exited with {rnd.returncode}: {_error_lines(rnd.log)}"
        elif rnd.returncode == 0 and f"reached target-ts {target_ts}" not in rnd.log:
            rnd.error = f"sparkcdc run exited 0 without reaching target-ts {target_ts}"

    def check_binlog(self, cap: Capture) -> None:
        """Fail when a binlog file of the capture's range is gone from the upstream."""
        files = {str(r[0]) for r in self.upstream.query("SHOW BINARY LOGS")}
        missing = sorted({b.file for b in cap.boundaries} - files)
        if missing:
            raise AssertionError(
                f"the upstream's binlog files {missing} of workload {cap.name!r} are gone (it has "
                f"{sorted(files)}): a RESET MASTER or PURGE BINARY LOGS on port {self.upstream.port}"
            )

    def _consume(self, cap: Capture, work: Path) -> None:
        """Replay each run's storage files and topic into their MariaDB, in the order of the runs.

        The two paths have MariaDBs of their own: the storage consumers (subprocesses) run on a
        thread beside the Kafka consumer.
        """
        progress = f"oracle_progress_{cap.name.replace('-', '_')}"
        failures: list[BaseException] = []

        def storage() -> None:
            try:
                self._consume_storage(cap, work, progress)
            except BaseException as exc:  # raised below, after the Kafka consumer
                failures.append(exc)

        thread = threading.Thread(target=storage, name=f"oracle-storage-consumer-{cap.name}")
        thread.start()
        try:
            self._consume_kafka(cap, progress)
        finally:
            thread.join()
        if failures:
            raise failures[0]

    def _consume_storage(self, cap: Capture, work: Path, progress: str) -> None:
        """Replay each storage run's files into the storage path's MariaDB, in the order of the runs."""
        for rnd in cap.paths["storage"].rounds:
            if not (work / f"storage-{rnd.index}" / "metadata").exists():
                if not rnd.error:
                    cap.paths["storage"].errors.append(f"run {rnd.index} wrote no storage metadata file")
                continue  # a run that failed before its first checkpoint: nothing to replay
            res = run_cli(
                [
                    "consumer",
                    "--upstream-uri",
                    rnd.sink_uri,
                    "--downstream-uri",
                    f"mysql://root:@127.0.0.1:{self.downstreams['storage'].port}/",
                    "--config",
                    str(work / "storage.toml"),
                    "--progress-schema",
                    f"{progress}_{rnd.index}",
                    "--once",
                ],
                timeout=CONSUMER_TIMEOUT,
            )
            if res.returncode != 0:
                self._consumer_failed(
                    cap,
                    "storage",
                    rnd,
                    f"sparkcdc consumer of run {rnd.index} exited with {res.returncode}: "
                    f"{_error_lines(res.stdout + res.stderr)}",
                )

    def _consume_kafka(self, cap: Capture, progress: str) -> None:
        """Replay each Kafka run's topic into the Kafka path's MariaDB, in the order of the runs."""
        from sparkcdc.config.replica import ReplicaConfig
        from sparkcdc.consumer.kafka import run_kafka_consumer

        try:
            topics = self._topics()
        except Exception as exc:  # a broker that died is the Kafka path's failure, not the capture's
            cap.paths["kafka"].errors.append(
                f"the Kafka broker {self.kafka.bootstrap} lists no topics ({type(exc).__name__}: {exc}); "
                f"its log: {self.kafka.log_path}"
            )
            return
        for rnd in cap.paths["kafka"].rounds:
            topic = f"oracle-{cap.name}-{rnd.index}"
            if topic not in topics:
                if not rnd.error:
                    cap.paths["kafka"].errors.append(f"run {rnd.index} created no topic {topic}")
                continue  # a run that failed before its first message
            try:
                run_kafka_consumer(
                    self.kafka.sink_uri(topic, "protocol=canal-json"),
                    f"mysql://root:@127.0.0.1:{self.downstreams['kafka'].port}/",
                    ReplicaConfig(),
                    once=True,
                    timeout=CONSUMER_TIMEOUT,
                    progress_schema=f"{progress}_{rnd.index}",
                )
            except Exception as exc:  # kept with the path's failures, as the storage consumer's exit code is
                self._consumer_failed(
                    cap, "kafka", rnd, f"Kafka consumer of run {rnd.index}: {type(exc).__name__}: {exc}"
                )

    def _consumer_failed(self, cap: Capture, path: str, rnd: Round, error: str) -> None:
        """A consumer stopped: charged to the segment whose database it names, else to the path.

        A consumer cannot be resumed past what stopped it, so what the run delivered after that
        point never reaches the downstream: the later segments' comparisons fail too.
        """
        res = cap.paths[path]
        k = failed_segment(cap.begin, cap.boundaries, cap.segments, rnd.start_ts, error, None)
        if k is None or cap.boundaries[k].segment in res.skipped:
            res.errors.append(error)
        else:
            res.skipped[cap.boundaries[k].segment] = error

    def _topics(self) -> set[str]:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.kafka.bootstrap})
        return set(admin.list_topics(timeout=30).topics)


def failed_segment(
    begin: Boundary,
    boundaries: Sequence[Boundary],
    segments: Sequence[Segment],
    start_ts: int,
    error: str,
    checkpoint: int | None,
) -> int | None:
    """The index of the segment a run from ``start_ts`` failed in with ``error``, or None when nothing tells.

    The first binlog position the error names inside the run's range; else the first segment
    (after the run's start) whose database the error names; else the first segment after the
    run's checkpoint, when the checkpoint moved past the start (a guess: a checkpoint moves per
    batch, and a batch may hold several segments).
    """
    first = next((i for i, b in enumerate(boundaries) if b.ts > start_ts), None)
    if first is None:
        return None
    low = boundaries[first - 1] if first else begin
    for m in _POSITION.finditer(error):
        at = (m.group(1), int(m.group(2)))
        if at < (low.file, low.pos):
            continue
        for i in range(first, len(boundaries)):
            if at < (boundaries[i].file, boundaries[i].pos):
                return i
    for i in range(first, len(segments)):
        if any(_names(error, db) for db in segments[i].databases):
            return i
    if checkpoint is not None and checkpoint > start_ts:
        return next((i for i in range(first, len(boundaries)) if boundaries[i].ts > checkpoint), None)
    return None


def _names(text: str, database: str) -> bool:
    """Whether ``text`` names ``database`` as a whole identifier."""
    return re.search(rf"(?<![A-Za-z0-9_$]){re.escape(database)}(?![A-Za-z0-9_$])", text) is not None


def _error_lines(output: str) -> str:
    """The error lines of a sparkcdc command's output (its last lines when none says Error)."""
    lines = output.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("Error:")] or [ln for ln in lines if "Error" in ln]
    return "\n".join((errors or lines)[-4:])[-3000:]


# -- comparison ------------------------------------------------------------------------------------
#
# Values are read as the server's own text (PyMySQL without converters) and compared as
# text; both sides are the same MariaDB version, so equal content renders equally. What
# is normalised is only representation:
#   - binary strings (BINARY, VARBINARY, BLOB) are read as HEX(): their bytes, not a
#     decoding of them in the connection charset;
#   - BIT is read as the number (col + 0), not raw bytes;
#   - the session time zone is +00:00 on both sides, so TIMESTAMP renders the same instant
#     the same way;
#   - text in any charset (latin1, utf8mb3, ...) is converted by the server to the
#     connection's utf8mb4: the characters compare, not their encoding on disk.
# Rows are ordered by the primary key (all columns when a table has none), and a table
# without a primary key compares as a multiset of rows.


@dataclass
class TableData:
    """One table read for comparison."""

    columns: list[tuple[str, str]]
    key: list[str]
    """Primary-key columns; empty when the table has none (then the whole row is the key)."""
    rows: list[tuple[Any, ...]]

    def key_of(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        if not self.key:
            return row
        names = [c for c, _ in self.columns]
        return tuple(row[names.index(k)] for k in self.key)

    def describe_key(self, key: tuple[Any, ...]) -> str:
        names = self.key or [c for c, _ in self.columns]
        return "(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, key, strict=True)) + ")"


def list_tables(db: LocalMariaDB, schema: str) -> list[str]:
    """Base tables of ``schema``, sorted."""
    rows = db.query(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA=%s AND TABLE_TYPE='BASE TABLE'",
        (schema,),
    )
    return sorted(str(r[0]) for r in rows)


def read_table(db: LocalMariaDB, schema: str, table: str) -> TableData:
    """Every column (INVISIBLE ones too) and every row of one table, as server text."""
    conn = db.connect(conv={})
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(
                "SELECT COLUMN_NAME, COLUMN_TYPE, DATA_TYPE FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA=%s AND TABLE_NAME=%s ORDER BY ORDINAL_POSITION",
                (schema, table),
            )
            cols = [(_text(n), _text(ct).lower(), _text(dt).lower()) for n, ct, dt in cur.fetchall()]
            cur.execute(
                "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA=%s "
                "AND TABLE_NAME=%s AND INDEX_NAME='PRIMARY' ORDER BY SEQ_IN_INDEX",
                (schema, table),
            )
            key = [_text(r[0]) for r in cur.fetchall()]
            exprs = [_text_expr(n, dt) for n, _, dt in cols]
            order = ", ".join(q(k) for k in key) if key else ", ".join(str(i + 1) for i in range(len(exprs)))
            cur.execute(f"SELECT {', '.join(exprs)} FROM {q(schema)}.{q(table)} ORDER BY {order}")
            rows = [tuple(_text(v) if isinstance(v, bytes) else v for v in r) for r in cur.fetchall()]
    finally:
        conn.close()
    return TableData([(n, ct) for n, ct, _ in cols], key, rows)


def _text(v: Any) -> str:
    return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v)


def _text_expr(name: str, data_type: str) -> str:
    col = q(name)
    if data_type in BINARY_TYPES:
        return f"HEX({col})"
    if data_type == "bit":
        return f"CAST({col} + 0 AS CHAR)"
    return col


def diff_table(expected: TableData, actual: TableData, where: str, path: str) -> list[str]:
    """The differences of one table: columns, then the first differing key with both rows."""
    if expected.columns != actual.columns:
        return [f"{where}: columns differ: native {expected.columns}, {path} {actual.columns}"]
    if expected.key != actual.key:
        return [f"{where}: primary key differs: native {expected.key}, {path} {actual.key}"]
    if expected.rows == actual.rows:
        return []
    summary = f"{where}: {len(expected.rows)} rows on the native replica, {len(actual.rows)} on {path}"
    if expected.key:
        want = {expected.key_of(r): r for r in expected.rows}
        got = {actual.key_of(r): r for r in actual.rows}
        for k, row in want.items():
            if got.get(k) != row:
                return [
                    f"{summary}; first differing key {expected.describe_key(k)}: "
                    f"native {row}, {path} {got.get(k, 'missing')}"
                ]
        extra = next(k for k in got if k not in want)
        return [
            f"{summary}; first differing key {expected.describe_key(extra)}: native missing, {path} {got[extra]}"
        ]
    want_n, got_n = Counter(expected.rows), Counter(actual.rows)
    for row in sorted(set(want_n) | set(got_n), key=repr):
        if want_n[row] != got_n[row]:
            return [
                f"{summary}; first differing row {expected.describe_key(row)}: "
                f"{want_n[row]} on the native replica, {got_n[row]} on {path}"
            ]
    return [summary]


def diff_database(expected_db: LocalMariaDB, actual_db: LocalMariaDB, schema: str, path: str) -> list[str]:
    """Differences of every table of ``schema`` ([] when the same tables hold the same rows)."""
    want, got = list_tables(expected_db, schema), list_tables(actual_db, schema)
    problems: list[str] = []
    if want != got:
        problems.append(f"{schema}: tables differ: native {want}, {path} {got}")
    for table in want:
        if table not in got:
            continue
        try:
            expected, actual = read_table(expected_db, schema, table), read_table(actual_db, schema, table)
        except pymysql.MySQLError as exc:
            problems.append(f"{schema}.{table}: cannot read: {exc}")
            continue
        problems.extend(diff_table(expected, actual, f"{schema}.{table}", path))
    return problems
