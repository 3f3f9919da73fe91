"""The crash-and-failover torture scenario, short in ``make test`` and long in ``bench/torture``.

Two ``sparkcdc server`` processes share a PostgreSQL meta database and keep their state in data
dirs of their own (two hosts). Five changefeeds read one MariaDB upstream:

- ``t-storage``: CSV files with commit_ts, with an initial snapshot of ``torture_snap.big``;
- ``t-kafka``: canal-json on Tansu;
- ``t-mysql``: a MariaDB replica;
- ``t-http``: an HTTP receiver that records every request;
- ``t-iceberg``: an Iceberg changelog table per upstream table.

The workload mixes small InnoDB transactions (a table without a key among them) with
transactions whose binlog header is older than their commit: Aria writes under
``SET timestamp`` a minute back, and an UPDATE that waits for another's row lock.

Faults, one after another once every changefeed runs again:

- ``owner``: kill -9 the server that owns a changefeed (the driver, with its JVM and workers);
- ``worker``: kill -9 a Spark Python worker of a server (its task fails, the query restarts);
- ``failpoint``: restart a server with ``SPARKCDC_FAILPOINTS=after-sink-commit=…``: it kills itself
  after a sink published a batch and before the checkpoint was saved.

Checks: the MySQL replica and the storage and Kafka replays (``sparkcdc consumer`` and the
Kafka consumer into MariaDB) equal the upstream; the HTTP receiver, after dropping repeated
request ids, and the changelog table each hold every change once, and both hold the same
changes; published checkpoints (the meta database's, storage ``metadata``, Kafka watermarks per
partition) never decrease; the snapshot's ranges finished before the first fault are never
read again.

Every difference is a problem. The last two found (changes reaching the HTTP receiver under two
request ids after a failover, a keyless row applied twice by the Kafka consumer) were fixed by
planning an interrupted batch again as it was (``planned.json``) and by numbering the Kafka
messages of keyless tables (``sink.kafka.config.ROW_SEQ_HEADER``).
"""

from __future__ import annotations

import itertools
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pymysql

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.consumer.kafka import run_kafka_consumer
from sparkcdc.meta import MetaStore
from sparkcdc.pipeline.snapshot.plan import range_states
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.postgres import LocalPostgres
from sparkcdc.services.tansu import LocalTansu
from tests.e2e.workload import diff_tables, replay_once, tso
from tests.integration.http_sink.conftest import Receiver
from tests.integration.server.conftest import ServerProc, status_of

SCHEMA = "torture"
SNAP_SCHEMA = "torture_snap"
SNAP_ROWS = 20_000
CHANGEFEEDS = ("t-storage", "t-kafka", "t-mysql", "t-http", "t-iceberg")
FAULTS = ("owner", "worker", "failpoint")
FAILPOINT_PROBABILITY = 0.05
RETRIED = (1205, 1213)
"""Lock wait timeout and deadlock: the transaction was rolled back; the workload goes on."""


@dataclass
class TortureReport:
    """What the run did and found (``problems`` empty: every check held)."""

    seed: int
    seconds: float
    transactions: int = 0
    old_headers: int = 0
    lock_waits: int = 0
    faults: list[str] = field(default_factory=list)
    """Each fault done: kind and target."""
    missed: list[str] = field(default_factory=list)
    """Faults that found nothing to hit (no Python worker at that moment)."""
    samples: int = 0
    http_changes: int = 0
    """Row changes the HTTP receiver got, once per request id."""
    changelog_rows: int = 0
    renumbered: list[str] = field(default_factory=list)
    """Transactions two changefeeds gave different commit_ts (see ``_compare_in_commit_order``)."""
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        kinds = Counter(f.split(":", 1)[0] for f in self.faults)
        return (
            f"seed {self.seed}: {self.seconds:.0f}s, {self.transactions} transactions "
            f"({self.old_headers} old-header, {self.lock_waits} lock waits), faults {dict(kinds)}"
            f"{f' (missed {len(self.missed)})' if self.missed else ''}, {self.samples} checkpoint samples, "
            f"{self.http_changes} HTTP changes, {self.changelog_rows} changelog rows, "
            f"{len(self.renumbered)} renumbered transactions, {len(self.problems)} problems"
        )


class _Load(threading.Thread):
    """One workload connection: ``step`` runs until stopped, counting what it did."""

    def __init__(
        self, db: LocalMariaDB, name: str, step: Callable[[Any, random.Random], str], seed: int
    ) -> None:
        super().__init__(name=f"torture-{name}", daemon=True)
        self.db, self.step, self.rnd = db, step, random.Random(seed)
        self.counts: Counter[str] = Counter()
        self.error: BaseException | None = None
        self.halt = threading.Event()

    def run(self) -> None:
        try:
            conn = self.db.connect(SCHEMA)
            try:
                with conn.cursor() as cur:
                    while not self.halt.is_set():
                        try:
                            self.counts[self.step(cur, self.rnd)] += 1
                        except pymysql.err.OperationalError as exc:
                            if exc.args[0] not in RETRIED:
                                raise
                            # InnoDB chose this transaction as a deadlock victim (or its lock wait
                            # timed out): rolled back, as an application retries it
                            cur.execute("ROLLBACK")
                            cur.execute("SET timestamp = DEFAULT")
                            self.counts["retried"] += 1
            finally:
                conn.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> Counter[str]:
        self.halt.set()
        self.join(60)
        if self.error is not None:
            raise AssertionError(f"workload {self.name} failed: {self.error!r}") from self.error
        return self.counts


def _mixed(cur: Any, rnd: random.Random) -> str:
    """A small InnoDB transaction: inserts, an update, a delete, a row of a table without a key."""
    k = rnd.randrange(1, 1 << 30)
    cur.execute("BEGIN")
    cur.execute(
        "INSERT INTO t_inno (id, v, n) VALUES (%s, %s, 0) ON DUPLICATE KEY UPDATE n = n + 1", (k, f"v{k}")
    )
    cur.execute("UPDATE t_inno SET n = n + 1, v = %s WHERE id = %s", (f"u{k}", rnd.randrange(1, 200)))
    if rnd.random() < 0.3:
        cur.execute("DELETE FROM t_inno WHERE id > %s ORDER BY id LIMIT 1", (rnd.randrange(1, 1 << 30),))
    cur.execute("INSERT INTO t_nokey (a, b) VALUES (%s, %s)", (k % 97, f"b{k}"))
    if rnd.random() < 0.2:
        cur.execute("DELETE FROM t_nokey WHERE a = %s LIMIT 1", (rnd.randrange(97),))
    cur.execute("COMMIT")
    time.sleep(rnd.uniform(0.005, 0.03))  # the pace of one application connection
    return "transactions"


def _old_header(cur: Any, rnd: random.Random) -> str:
    """An Aria write and an InnoDB transaction whose binlog headers are a minute old."""
    cur.execute("SET timestamp = UNIX_TIMESTAMP() - 60")
    k = rnd.randrange(1, 1 << 30)
    cur.execute("INSERT INTO t_aria (id, v) VALUES (%s, 'old') ON DUPLICATE KEY UPDATE v = 'old again'", (k,))
    cur.execute("BEGIN")
    cur.execute(
        "INSERT INTO t_inno (id, v, n) VALUES (%s, 'old header', 0) ON DUPLICATE KEY UPDATE n = n + 1", (k,)
    )
    cur.execute("COMMIT")
    cur.execute("SET timestamp = DEFAULT")
    time.sleep(rnd.uniform(0.2, 0.6))
    return "old_headers"


def _lock_wait(db: LocalMariaDB) -> Callable[[Any, random.Random], str]:
    """A transaction holds a hot row for a second while another UPDATE of it waits (an older header)."""

    def step(cur: Any, rnd: random.Random) -> str:
        hot = rnd.randrange(1, 5)
        cur.execute("BEGIN")
        cur.execute("UPDATE t_inno SET n = n + 1 WHERE id = %s", (hot,))
        waiter = threading.Thread(target=_update_hot, args=(db, hot), daemon=True)
        waiter.start()
        time.sleep(rnd.uniform(0.5, 1.2))  # the lock is held this long: the waiter's header ages
        cur.execute("COMMIT")
        waiter.join(30)
        time.sleep(rnd.uniform(0.5, 1.5))
        return "lock_waits"

    return step


def _update_hot(db: LocalMariaDB, hot: int) -> None:
    conn = db.connect(SCHEMA)
    try:
        with conn.cursor() as cur:
            cur.execute("UPDATE t_inno SET n = n + 10, v = 'waited' WHERE id = %s", (hot,))
    finally:
        conn.close()


def _prepare_upstream(up: LocalMariaDB) -> None:
    up.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"DROP DATABASE IF EXISTS {SNAP_SCHEMA}",
        f"CREATE DATABASE {SNAP_SCHEMA}",
        f"CREATE TABLE {SNAP_SCHEMA}.big (id INT PRIMARY KEY, v VARCHAR(40))",
        f"INSERT INTO {SNAP_SCHEMA}.big SELECT seq, CONCAT('row ', seq) FROM {SNAP_SCHEMA}.seq_1_to_{SNAP_ROWS}",
    )


def _create_tables(up: LocalMariaDB) -> None:
    """After the changefeeds exist: the DDL reaches every sink through the stream."""
    up.execute(
        f"CREATE DATABASE {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.t_inno (id INT PRIMARY KEY, v VARCHAR(40), n INT) ENGINE=InnoDB",
        f"CREATE TABLE {SCHEMA}.t_nokey (a INT, b VARCHAR(40)) ENGINE=InnoDB",
        f"CREATE TABLE {SCHEMA}.t_aria (id INT PRIMARY KEY, v VARCHAR(40)) ENGINE=Aria",
        f"INSERT INTO {SCHEMA}.t_inno SELECT seq, 'seed', 0 FROM {SCHEMA}.seq_1_to_200",
    )


class _Sampler(threading.Thread):
    """Reads the published checkpoints every half second and records any that went backwards."""

    def __init__(self, meta: str, storage: Path) -> None:
        super().__init__(name="torture-sampler", daemon=True)
        self.meta, self.storage = meta, storage
        self.last: dict[str, int] = {}
        self.backwards: list[str] = []
        self.samples = 0
        self.halt = threading.Event()

    def _see(self, what: str, value: int) -> None:
        was = self.last.get(what, 0)
        if value < was:
            self.backwards.append(f"{what} went back from {was} to {value}")
        self.last[what] = max(was, value)

    def run(self) -> None:
        store = MetaStore.open(self.meta, apply_migrations=False)
        try:
            while not self.halt.wait(0.5) and self._sample(store):
                self.samples += 1
        finally:
            store.close()

    def _sample(self, store: MetaStore) -> bool:
        """One round of readings; False once the meta database is gone (the scenario is over)."""
        try:
            for cf in store.list_changefeeds():
                self._see(f"meta checkpoint of {cf.id}", cf.checkpoint_ts)
        except Exception:  # the scenario tears the database down, or failed before it stopped us
            return False
        published = _storage_metadata(self.storage)
        if published:
            self._see("storage metadata", published)
        return True


def _storage_metadata(storage: Path) -> int:
    """The checkpoint in a storage sink's ``metadata`` (0 while there is none to read)."""
    try:
        return int(json.loads((storage / "metadata").read_bytes())["checkpoint-ts"])
    except (OSError, ValueError, KeyError):
        return 0  # not written yet, or being replaced


def _kafka_watermarks(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """Every TIDB_WATERMARK of the topic, per partition, in the partition's order."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    from sparkcdc.codec.canal_json.decoder import decode_canal_json

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"torture-{time.time_ns()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    try:
        meta = c.list_topics(topic, timeout=10).topics[topic]
        parts = sorted(meta.partitions)
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        marks: dict[int, list[int]] = {p: [] for p in parts}
        at_end: set[int] = set()
        deadline = time.monotonic() + 120
        while len(at_end) < len(parts) and time.monotonic() < deadline:
            msg = c.poll(1.0)
            if msg is None:
                continue
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            m = decode_canal_json(msg.value())
            if m.kind == "watermark" and m.watermark_ts is not None:
                marks[msg.partition()].append(m.watermark_ts)
        return marks
    finally:
        c.close()


def _http_changes(receiver: Receiver) -> tuple[list[tuple[Any, ...]], int]:
    """The row changes the receiver accepted, once per request id; and how many requests were repeats."""
    seen: set[str] = set()
    repeats = 0
    changes = []
    for req in receiver.accepted:
        rid = next((v for k, v in req.headers.items() if k.lower() == "x-sparkcdc-request-id"), "")
        if rid in seen:
            repeats += 1
            continue
        seen.add(rid)
        for m in req.body:
            if m.get("type") in ("INSERT", "UPDATE", "DELETE") and not m.get("isDdl"):
                ts = int((m.get("_tidb") or {}).get("commitTs") or 0)
                changes.append(
                    (
                        m["table"],
                        ts,
                        m["type"],
                        json.dumps(m.get("data"), sort_keys=True),
                        json.dumps(m.get("old"), sort_keys=True),
                    )
                )
    return changes, repeats


def _iceberg_changes(warehouse: Path) -> dict[str, list[tuple[int, int, str]]]:
    """(_commit_ts, _seq, ``_row_key`` of the row) of every row of each changelog table."""
    from pyiceberg.catalog.sql import SqlCatalog

    cat = SqlCatalog(
        "sparkcdc", uri=f"sqlite:///{warehouse}/sparkcdc-catalog.db", warehouse=f"file://{warehouse}"
    )
    out = {}
    for ns, name in cat.list_tables("default"):
        t = cat.load_table((ns, name)).scan().to_arrow()
        cols = [c for c in t.column_names if c in ("id", "v")]
        rows = t.select(cols).to_pylist() if cols else [{}] * t.num_rows
        keys = [_row_key(row) for row in rows]
        out[name] = list(zip(t["_commit_ts"].to_pylist(), t["_seq"].to_pylist(), keys, strict=True))
    return out


def _row_key(row: dict[str, Any]) -> str:
    """A row's ``id`` and ``v`` as one string ("id=7 v=old"), the same from a canal-json message
    (values as text) and from a changelog table (typed values)."""
    return f"id={row.get('id')} v={row.get('v')}"


Txn = dict[str, list[str]]
"""One transaction as a sink shows it: table -> its rows (``_row_key``), sorted."""


def _in_commit_order(changes: dict[tuple[str, int], list[str]]) -> list[tuple[int, Txn]]:
    """(commit_ts, transaction) in commit order. Within one changefeed commit_ts grows strictly in
    binlog order, so the row changes with one commit_ts are one transaction."""
    txns: dict[int, Txn] = {}
    for (table, ts), rows in changes.items():
        txns.setdefault(ts, {})[table] = sorted(rows)
    return sorted(txns.items())


def _compare_in_commit_order(
    http: dict[tuple[str, int], list[str]], ice: dict[tuple[str, int], list[str]]
) -> tuple[list[str], list[str]]:
    """Compare two changefeeds' outputs transaction by transaction in commit order: the same
    transactions, in the same order, with the same rows. Their commit_ts may differ: a transaction
    whose binlog header is older than a resolved ts R its changefeed raised the chain to while idle
    gets R + 1, and the ones after it in the same second follow from there (docs/ARCHITECTURE.md,
    "commit_ts from the binlog"); two changefeeds raise at different moments. Returns the
    transactions numbered differently (described) and the problems."""
    a, b = _in_commit_order(http), _in_commit_order(ice)
    renumbered: list[str] = []
    problems: list[str] = []
    for i, ((ts_a, txn_a), (ts_b, txn_b)) in enumerate(zip(a, b, strict=False)):
        if txn_a != txn_b:
            problems.append(
                f"HTTP and Iceberg differ at transaction {i + 1} in commit order: "
                f"HTTP {ts_a} {txn_a}, Iceberg {ts_b} {txn_b}"
            )
            return renumbered, problems  # one lost or extra transaction shifts the rest: the first says it
        if ts_a != ts_b:
            renumbered.append(f"{ts_a} (HTTP) / {ts_b} (Iceberg): {txn_a}")
    if len(a) != len(b):
        more, name = (a, "HTTP") if len(a) > len(b) else (b, "Iceberg")
        problems.append(
            f"{name} has {abs(len(a) - len(b))} more transactions, the first at commit_ts {more[min(len(a), len(b))][0]}"
        )
    return renumbered, problems


def _python_workers(server: ServerProc) -> list[psutil.Process]:
    if server.proc is None:
        return []
    procs = psutil.Process(server.proc.pid).children(recursive=True)
    return [p for p in procs if any(part in ("pyspark.daemon", "pyspark.worker") for part in _cmdline(p))]


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return []


def _wait(probe: Callable[[], Any], timeout: float, what: str, logs: Callable[[], str]) -> Any:
    """``probe`` until truthy, once a second; its exceptions end the wait (a changefeed that failed)."""
    deadline = time.monotonic() + timeout
    while not (got := probe()):
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what} not ready after {timeout:.0f}s\n{logs()}")
        time.sleep(1.0)  # the polling period; the deadline bounds the wait
    return got


def run_torture(
    upstream: LocalMariaDB,
    workdir: Path,
    *,
    seconds: float,
    faults: int,
    seed: int,
    lease: float = 4,
) -> TortureReport:
    """Run the scenario for about ``seconds`` of workload with ``faults`` faults spread over it."""
    rnd = random.Random(seed)
    report = TortureReport(seed, seconds)
    _prepare_upstream(upstream)
    with (
        LocalPostgres() as pg,
        LocalTansu() as tansu,
        LocalMariaDB(binlog=False) as down_mysql,
        LocalMariaDB(binlog=False) as down_storage,
        LocalMariaDB(binlog=False) as down_kafka,
    ):
        receiver = Receiver()
        receiver.start()
        servers: dict[str, ServerProc] = {}
        try:
            meta = pg.create_database("torture_meta")
            storage = workdir / "storage"
            warehouse = workdir / "warehouse"
            for n in ("a", "b"):
                servers[n] = ServerProc(meta, workdir, lease=lease, name=n).start()

            def logs() -> str:
                return "\n".join(f"--- {n}\n{s.log()[-4000:]}" for n, s in servers.items())

            sampler = _Sampler(meta, storage)
            loads: list[_Load] = []
            try:
                both = {"filter": {"rules": [f"{SCHEMA}.*"]}}
                bodies = {
                    "t-storage": (
                        f"file://{storage}?protocol=csv",
                        {
                            "filter": {"rules": [f"{SCHEMA}.*", f"{SNAP_SCHEMA}.*"]},
                            "snapshot": {"mode": "initial", "chunk-size": 2000},
                            # commit_ts in every record: a replay skips what was published before
                            # (without it, CSV is at least once, as in TiCDC: a table without a key
                            # downstream gets replayed rows twice)
                            "sink": {"csv": {"include-commit-ts": True}},
                        },
                    ),
                    "t-kafka": (
                        tansu.sink_uri(
                            "torture", "protocol=canal-json&enable-tidb-extension=true&partition-num=3"
                        ),
                        both,
                    ),
                    "t-mysql": (f"mysql://root:@127.0.0.1:{down_mysql.port}/?worker-count=4", both),
                    "t-http": (f"{receiver.url}/cdc?enable-tidb-extension=true", both),
                    "t-iceberg": (f"iceberg://{warehouse}?mode=changelog", both),
                }
                with servers["a"].client() as c:
                    for cf, (sink, cfg) in bodies.items():
                        c.create_changefeed(
                            {
                                "changefeed_id": cf,
                                "upstream_uri": upstream.uri,
                                "sink_uri": sink,
                                "replica_config": cfg,
                            }
                        )
                _create_tables(upstream)
                sampler.start()

                def running(since: dict[str, int] | None = None) -> dict[str, int] | None:
                    """Every changefeed normal and owned by a live server (and past ``since``)."""
                    alive = {n for n, s in servers.items() if s.proc is not None and s.proc.poll() is None}
                    live = next(iter(alive), None)
                    if live is None:
                        return None
                    out = {}
                    for cf in CHANGEFEEDS:
                        try:
                            st = status_of(servers[live], cf)
                        except Exception:  # the server is going down or coming up: ask again
                            return None
                        if st["state"] == "failed":  # nothing brings it back: say why at once
                            raise AssertionError(f"changefeed {cf} failed: {st.get('error')}\n{logs()}")
                        if st["state"] != "normal" or not st.get("owner"):
                            return None
                        if since is not None and st["checkpoint_ts"] <= since.get(cf, 0):
                            return None
                        out[cf] = st["checkpoint_ts"]
                    return out

                _wait(lambda: running(), 300, "every changefeed running", logs)
                store = MetaStore.open(meta, apply_migrations=False)
                try:
                    wait_until(
                        lambda: store.snapshot_report(
                            "t-storage", "default", store.get_changefeed("t-storage").uid
                        ),
                        timeout=300,
                        interval=1.0,
                        what="the initial snapshot",
                        on_timeout=logs,
                    )
                    snap_ranges = {r.range_id: r for r in range_states(store.get_range_progress("t-storage"))}
                finally:
                    store.close()

                loads = [
                    _Load(upstream, "mixed-1", _mixed, seed),
                    _Load(upstream, "mixed-2", _mixed, seed + 1),
                    _Load(upstream, "old-header", _old_header, seed + 2),
                    _Load(upstream, "lock-wait", _lock_wait(upstream), seed + 3),
                ]
                for load in loads:
                    load.start()
                started = time.monotonic()
                kinds = [FAULTS[i % len(FAULTS)] for i in range(faults)]
                rnd.shuffle(kinds)
                for i, kind in enumerate(kinds):
                    # Faults spread over the run; each waits until every changefeed runs and moved again.
                    at = started + seconds * (i + 1) / (faults + 1)
                    time.sleep(max(0.0, at - time.monotonic()))
                    before = running()
                    _wait(
                        lambda b=before: running(b) if b else running(),
                        300,
                        f"every changefeed running before fault {i + 1}",
                        logs,
                    )
                    _fault(kind, servers, rnd, report, meta, workdir, lease, logs)
                time.sleep(max(0.0, started + seconds - time.monotonic()))
            finally:
                counts: Counter[str] = Counter()
                for load in loads:
                    counts += load.stop()
            report.transactions = counts["transactions"]
            report.old_headers = counts["old_headers"]
            report.lock_waits = counts["lock_waits"]
            end = tso(upstream.uri)
            _wait(
                lambda: (cps := running()) is not None and min(cps.values()) >= end and cps,
                600,
                "every changefeed past the end of the workload",
                logs,
            )
            # A consumer of the storage sink reads what its ``metadata`` covers, written at most
            # every 2 s: it may trail the checkpoint the server shows by that much.
            _wait(
                lambda: _storage_metadata(storage) >= end,
                60,
                "the storage sink's metadata past the end of the workload",
                logs,
            )
            sampler.halt.set()
            sampler.join(30)
            report.samples = sampler.samples
            report.problems += sampler.backwards
            _check(
                report,
                upstream,
                down_mysql,
                down_storage,
                down_kafka,
                tansu,
                storage,
                receiver,
                warehouse,
                meta,
                snap_ranges,
            )
        finally:
            for s in servers.values():
                s.stop()
            receiver.stop()
    return report


def _fault(
    kind: str,
    servers: dict[str, ServerProc],
    rnd: random.Random,
    report: TortureReport,
    meta: str,
    workdir: Path,
    lease: float,
    logs: Callable[[], str],
) -> None:
    if kind == "owner":
        cf = rnd.choice(CHANGEFEEDS)
        live = next(s for s in servers.values() if s.proc is not None)
        owner_id = status_of(live, cf)["owner"]
        name = next(n for n, s in servers.items() if s.proc is not None and _server_id(s) == owner_id)
        servers[name].kill_tree()
        servers[name] = ServerProc(meta, workdir, lease=lease, name=name).start()
        report.faults.append(f"owner:{name} (owner of {cf})")
    elif kind == "worker":
        name = rnd.choice(sorted(servers))
        workers = _python_workers(servers[name])
        if not workers:
            report.missed.append(f"worker:{name}")
            return
        victim = rnd.choice(workers)
        try:
            victim.kill()
        except psutil.Error:
            report.missed.append(f"worker:{name} (gone)")
            return
        report.faults.append(f"worker:{name} (pid {victim.pid})")
    else:
        name = rnd.choice(sorted(servers))
        servers[name].kill_tree()
        armed = ServerProc(
            meta,
            workdir,
            lease=lease,
            name=name,
            env={"SPARKCDC_FAILPOINTS": f"after-sink-commit={FAILPOINT_PROBABILITY}"},
        ).start()
        servers[name] = armed
        # It claims the changefeeds whose lease expired and dies at a publish (if it got any).
        deadline = time.monotonic() + 120
        while armed.proc is not None and armed.proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)  # polling a process we started; the deadline bounds it
        if armed.proc is not None and armed.proc.poll() is None:
            armed.kill_tree()
            report.missed.append(f"failpoint:{name} (no publish killed it in 120s)")
        else:
            armed.proc = None  # gone, with what it started (the failpoint kills its tree)
            report.faults.append(f"failpoint:{name} after-sink-commit")
        servers[name] = ServerProc(meta, workdir, lease=lease, name=name).start()


def _server_id(server: ServerProc) -> str:
    with server.client() as c:
        return str(c.status()["id"])


def _check(
    report: TortureReport,
    upstream: LocalMariaDB,
    down_mysql: LocalMariaDB,
    down_storage: LocalMariaDB,
    down_kafka: LocalMariaDB,
    tansu: LocalTansu,
    storage: Path,
    receiver: Receiver,
    warehouse: Path,
    meta: str,
    snap_ranges: dict[int, Any],
) -> None:
    p = report.problems
    p += [f"MySQL replica: {d}" for d in diff_tables(upstream, down_mysql, SCHEMA)]
    down_storage.execute(
        f"CREATE DATABASE {SNAP_SCHEMA}",
        f"CREATE TABLE {SNAP_SCHEMA}.big (id INT PRIMARY KEY, v VARCHAR(40))",
    )
    csv_config = storage.parent / "storage-consumer.toml"
    csv_config.write_text("[sink.csv]\ninclude-commit-ts = true\n")
    replay_once(f"file://{storage}?protocol=csv", down_storage.port, "progress_torture", csv_config)
    for schema in (SCHEMA, SNAP_SCHEMA):
        p += [f"storage replay: {d}" for d in diff_tables(upstream, down_storage, schema)]
    stats = run_kafka_consumer(
        tansu.sink_uri("torture", "protocol=canal-json&enable-tidb-extension=true"),
        f"mysql://root:@127.0.0.1:{down_kafka.port}/",
        ReplicaConfig(),
        once=True,
        timeout=300,
        progress_schema="progress_torture",
    )
    if stats.rows_pending:
        p.append(f"Kafka consumer left {stats.rows_pending} rows pending")
    p += [f"Kafka replay: {d}" for d in diff_tables(upstream, down_kafka, SCHEMA)]
    for part, marks in _kafka_watermarks(tansu.bootstrap, "torture").items():
        back = [(a, b) for a, b in itertools.pairwise(marks) if b < a]
        if back:
            p.append(f"Kafka watermarks of partition {part} went back: {back[:3]}")
    http, repeats = _http_changes(receiver)
    report.http_changes = len(http)
    twice = [c for c, n in Counter(http).items() if n > 1]
    if twice:
        p.append(f"HTTP: {len(twice)} changes arrived under two request ids, e.g. {twice[:2]}")
    ice = _iceberg_changes(warehouse)
    report.changelog_rows = sum(len(v) for v in ice.values())
    missing = {f"{SCHEMA}_{t}" for t in ("t_inno", "t_nokey", "t_aria")} - set(ice)
    if missing or not http:
        p.append(f"nothing to compare: changelog tables missing {sorted(missing)}, {len(http)} HTTP changes")
    for name, rows in ice.items():
        dup = [k for k, n in Counter((ts, seq) for ts, seq, _v in rows).items() if n > 1]
        if dup:
            p.append(f"Iceberg changelog {name}: {len(dup)} changes twice, e.g. {dup[:3]}")
    http_txns: dict[tuple[str, int], list[str]] = {}
    for t, ts, _kind, data, _old in http:
        for row in json.loads(data) or [{}]:
            http_txns.setdefault((f"{SCHEMA}_{t}", ts), []).append(_row_key(row))
    ice_txns: dict[tuple[str, int], list[str]] = {}
    for name, rows in ice.items():
        for ts, _seq, v in rows:
            ice_txns.setdefault((name, ts), []).append(v)
    report.renumbered, differ = _compare_in_commit_order(http_txns, ice_txns)
    p += differ
    store = MetaStore.open(meta, apply_migrations=False)
    try:
        after = {r.range_id: r for r in range_states(store.get_range_progress("t-storage"))}
    finally:
        store.close()
    for rid, r in snap_ranges.items():
        a = after.get(rid)
        if a is None or (a.epoch, a.attempts, a.files) != (r.epoch, r.attempts, r.files):
            p.append(f"snapshot range {rid} was read again after it was done")
    if repeats:
        report.faults.append(f"(HTTP requests repeated and dropped by id: {repeats})")
