"""Many changefeeds on one server: start time, idle cost, latency, memory and binlog connections.

Usage (from the repository root)::

    .venv/bin/python bench/density/run.py [--changefeeds 20] [--idle 60] [--writes 100] [--sink kafka]

One upstream MariaDB; for each size (a server with one changefeed first, the baseline, then one
with ``--changefeeds``), a fresh ``sparkcdc server`` on SQLite meta, one table per changefeed and
one sink per changefeed: a CSV storage sink (``--sink storage``, the default) or a canal-json
topic of one Tansu broker started by the bench (``--sink kafka``; the broker's CPU is printed
beside the tree's, not in it). Every changefeed is created at the same moment (one thread per
create), then the bench prints:

- **start**: seconds from the creates until every changefeed is ``normal``, owned and past its
  first checkpoint, and how many restarts the server counted (``sparkcdc_changefeed_retries``
  in ``/metrics``: a start race shows up there);
- **idle**: CPU of the whole process tree (server, Spark JVM, Python workers; sampled each second,
  so a process that lived less than a second is missed) over ``--idle`` seconds with the upstream
  quiet, in % of one core (and split by process: the server's Python, its Spark JVM, the source
  runners, Spark's Python workers), beside the whole machine's busy time and the upstream mariadbd's, and
  the tree's RSS at its end;
- **latency**: ``--writes`` single-row inserts spread over the changefeeds' tables, one every
  0.3 s; the time from each insert's commit until its row is in a CSV file of its sink, or
  until a consumer reading every topic from its start receives it (the p50 and p99);
- **binlog dump connections**: ``Binlog Dump`` threads in the upstream's processlist, sampled
  every second of the idle minute (the largest count and the mean), and the connections the
  upstream accepted per second meanwhile (``Connections``; a dump opened per scan shows here);
  during the writes, the process list is read every 50 ms and each dump connection seen is
  counted once (with the server's binlog relay, ``--binlog-relay-mb``, the relay's alone);
- the load average before and after each part.

The issue's targets (20 changefeeds on two cores: all running within 60 s, idle < 10 % of a
core, p99 ≤ 3 s, RSS < 2.5 GB, one dump connection per server, ≤ 100 MB per extra changefeed)
are printed with the measured figures beside them; the exit status is 0 whatever they are.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "bench"))

from common import MB, TreeSampler  # noqa: E402
from density.idle_cost import role  # noqa: E402
from tests.integration.server.conftest import ServerProc  # noqa: E402

from sparkcdc.services.common import wait_until  # noqa: E402
from sparkcdc.services.mariadb import LocalMariaDB  # noqa: E402
from sparkcdc.services.tansu import LocalTansu  # noqa: E402


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


class TreeCpu:
    """CPU seconds of a server's process tree (its Spark JVM and Python workers), sampled when asked."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.cpu: dict[int, float] = {}
        self.roles: dict[int, str] = {}

    def sample(self) -> float:
        """CPU seconds so far of every process of the tree seen in any sample."""
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                t = p.cpu_times()
                self.roles[p.pid] = role(p)  # each time: spark-submit's bash execs the JVM in its pid
            except psutil.Error:
                continue
            self.cpu[p.pid] = t.user + t.system
        return sum(self.cpu.values())

    def by_role(self) -> dict[str, float]:
        """CPU seconds so far by what each process is (``idle_cost.role``: the server is its driver)."""
        out: dict[str, float] = {}
        for pid, cpu in self.cpu.items():
            kind = self.roles.get(pid, "?")
            out[kind] = out.get(kind, 0.0) + cpu
        return out


def _metric_sum(url: str, name: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _machine_busy() -> float:
    """CPU seconds every core spent busy since boot."""
    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))


def _upstream_cpu(up: LocalMariaDB) -> float:
    """CPU seconds of the upstream's mariadbd so far."""
    for p in psutil.process_iter(["name", "cmdline"]):
        if any(f"--port={up.port}" == a for a in p.info.get("cmdline") or []):
            t = p.cpu_times()
            return float(t.user + t.system)
    return 0.0


def _broker_cpu(broker: LocalTansu | None) -> float:
    """CPU seconds of the bench's Tansu broker so far (0 without one)."""
    if broker is None or broker.proc is None:
        return 0.0
    try:
        t = psutil.Process(broker.proc.pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(t.user + t.system)


def _connections(up: LocalMariaDB) -> int:
    """Connections the upstream accepted so far (this query's own included)."""
    rows = up.query("SHOW GLOBAL STATUS LIKE 'Connections'")
    return int(rows[0][1])


def _dump_threads(up: LocalMariaDB) -> int:
    rows = up.query("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'")
    return int(rows[0][0])


class DumpIds:
    """The ids of the upstream's binlog dump connections, read every 50 ms until ``stop``."""

    def __init__(self, up: LocalMariaDB) -> None:
        self.up = up
        self.ids: set[int] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        conn = self.up.connect()
        try:
            with conn.cursor() as cur:
                while not self._done.wait(0.05):
                    cur.execute(
                        "SELECT id FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%'"
                    )
                    self.ids.update(int(r[0]) for r in cur.fetchall())
        finally:
            conn.close()

    def stop(self) -> set[int]:
        self._done.set()
        self._thread.join(10)
        return self.ids


NEEDLE = re.compile(rb"lat-[0-9]+-[0-9]+-x")


class FolderWatch:
    """Finds values in the CSV files of storage sink folders (reads only files that grew)."""

    def __init__(self, folders: list[Path]) -> None:
        self.folders = folders
        self.sizes: dict[Path, int] = {}
        self.text = [""] * len(folders)

    def arrived(self, k: int, needle: str) -> float | None:
        """When ``needle`` was found in sink ``k`` (now, on the call that finds it), or None."""
        if needle not in self.text[k]:
            for f in self.folders[k].rglob("*.csv"):
                try:
                    size = f.stat().st_size
                except OSError:
                    continue
                if self.sizes.get(f) != size:
                    self.sizes[f] = size
                    self.text[k] += f.read_text(errors="replace")
        return time.monotonic() if needle in self.text[k] else None

    def close(self) -> None:
        pass


class TopicWatch:
    """Reads every topic of the changefeeds from its start as messages arrive; when each value
    matching ``NEEDLE`` was received."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self.seen: dict[tuple[int, str], float] = {}
        self._done = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "density-bench",
                "enable.auto.commit": False,
                # a fetch answers at once: librdkafka's default lets the broker hold it 500 ms
                "fetch.wait.max.ms": 10,
            }
        )
        meta = self._consumer.list_topics(timeout=30).topics
        missing = [t for t in topics if t not in meta]
        if missing:
            raise RuntimeError(f"topics not on the broker once every changefeed ran: {missing[:3]}")
        self._index = {t: k for k, t in enumerate(topics)}
        self._consumer.assign([TopicPartition(t, p, 0) for t in topics for p in meta[t].partitions])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.is_set():
            for m in self._consumer.consume(num_messages=1000, timeout=0.05):
                if m.error() is not None:
                    continue  # end of partition and the like; a lost row shows as "not arrived"
                now = time.monotonic()
                k = self._index[str(m.topic())]
                for found in NEEDLE.findall(m.value() or b""):
                    self.seen.setdefault((k, found.decode()), now)

    def arrived(self, k: int, needle: str) -> float | None:
        return self.seen.get((k, needle))

    def close(self) -> None:
        self._done.set()
        self._thread.join(10)
        self._consumer.close()


def run_size(
    up: LocalMariaDB,
    work: Path,
    n: int,
    idle: float,
    writes: int,
    server_args: tuple[str, ...] = (),
    broker: LocalTansu | None = None,
    kafka_query: str = "protocol=canal-json",
) -> dict[str, Any]:
    schema = f"density_{n}"
    up.execute(
        f"DROP DATABASE IF EXISTS {schema}",
        f"CREATE DATABASE {schema}",
        *(f"CREATE TABLE {schema}.t{i} (id INT PRIMARY KEY, v VARCHAR(40))" for i in range(n)),
    )
    server = ServerProc(
        f"sqlite:///{work / 'meta.db'}", work, lease=10, name=f"density-{n}", extra=server_args
    ).start(timeout=120)
    out: dict[str, Any] = {"n": n, "kafka": broker is not None}
    try:
        pid = server.proc.pid if server.proc else 0
        meter = TreeCpu(pid)
        # RSS of the tree every second (bench/common's sampler; PSS, which costs CPU, not read)
        sizes = TreeSampler(pid, interval=1.0, pss_every=1 << 30)
        sizes.start()
        sinks = [work / f"sink-{i}" for i in range(n)]
        topics = [f"density-{n}-cf-{i}" for i in range(n)]
        sink_uris = [
            f"file://{sinks[i]}?protocol=csv" if broker is None else broker.sink_uri(topics[i], kafka_query)
            for i in range(n)
        ]
        errors: list[str] = []

        created: dict[str, int] = {}

        def create(i: int) -> None:
            try:
                with server.client() as c:
                    info = c.create_changefeed(
                        {
                            "changefeed_id": f"cf-{i}",
                            "upstream_uri": up.uri,
                            "sink_uri": sink_uris[i],
                            "replica_config": {"filter": {"rules": [f"{schema}.t{i}"]}},
                        }
                    )
                created[f"cf-{i}"] = int(info.get("checkpoint_ts") or 0)
            except Exception as exc:  # reported, the bench goes on
                errors.append(f"cf-{i}: {exc}")

        load0 = _load()
        t0 = time.monotonic()
        threads = [threading.Thread(target=create, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise RuntimeError(f"creates failed: {errors[:3]}")

        def all_running() -> bool:
            with server.client() as c:
                items = c.list_changefeeds()["items"]
            # running: a checkpoint its pipeline published, past the start the create recorded
            running = [
                cf
                for cf in items
                if cf["state"] == "normal"
                and cf.get("owner")
                and int(cf.get("checkpoint_tso") or 0) > created.get(cf["id"], 1 << 64)
            ]
            failed = [cf for cf in items if cf["state"] == "failed"]
            if failed:
                raise RuntimeError(f"failed: {failed[0]}")
            meter.sample()
            return len(running) == n

        wait_until(all_running, timeout=600, interval=0.5, what=f"{n} changefeeds running")
        out["start_s"] = time.monotonic() - t0
        out["start_load"] = f"{load0} -> {_load()}"
        out["retries"] = _metric_sum(server.url, "sparkcdc_changefeed_retries_total")
        if out["retries"]:
            # why: the server logs each retry with its error (Scheduler._on_error)
            lines = server.log_path.read_text(errors="replace").splitlines()
            print(*(ln[:600] for ln in lines if " WARNING " in ln or " ERROR " in ln), sep="\n", flush=True)

        # idle: let the starts settle, then measure
        time.sleep(10)
        load0 = _load()
        cpu0 = meter.sample()
        roles0 = meter.by_role()
        busy0, up0, broker0 = _machine_busy(), _upstream_cpu(up), _broker_cpu(broker)
        conns0 = _connections(up)
        dumps: list[int] = []
        end = time.monotonic() + idle
        while time.monotonic() < end:
            dumps.append(_dump_threads(up))
            meter.sample()
            time.sleep(1)
        cpu1 = meter.sample()
        sizes.sample()
        rss = sizes.samples[-1].rss
        out["conns_per_s"] = (_connections(up) - conns0 - len(dumps)) / idle  # less the bench's own
        out["idle_cpu_pct"] = 100 * (cpu1 - cpu0) / idle
        out["idle_by_role"] = {
            k: 100 * (v - roles0.get(k, 0.0)) / idle for k, v in sorted(meter.by_role().items())
        }
        # the whole machine (processes that lived less than a sample included) and the upstream alone
        out["machine_pct"] = 100 * (_machine_busy() - busy0) / idle
        out["upstream_pct"] = 100 * (_upstream_cpu(up) - up0) / idle
        out["broker_pct"] = 100 * (_broker_cpu(broker) - broker0) / idle
        out["idle_load"] = f"{load0} -> {_load()}"
        out["rss_mb"] = rss / MB
        out["dumps_max"] = max(dumps)
        out["dumps_mean"] = statistics.mean(dumps)

        # latency: one insert every 0.3 s, round robin over the tables
        watch: FolderWatch | TopicWatch = (
            FolderWatch(sinks) if broker is None else TopicWatch(broker.bootstrap, topics)
        )
        pending: list[tuple[int, str, float]] = []
        latencies: list[float] = []
        lock = threading.Lock()
        done = threading.Event()

        def poll() -> None:
            while not done.is_set() or pending:
                with lock:
                    items = list(pending)
                for item in items:
                    k, needle, at = item
                    got = watch.arrived(k, needle)
                    if got is not None:
                        latencies.append(got - at)
                        with lock:
                            pending.remove(item)
                if done.is_set() and time.monotonic() > deadline:
                    return
                time.sleep(0.05)

        deadline = float("inf")
        poller = threading.Thread(target=poll)
        poller.start()
        load0 = _load()
        dump_ids = DumpIds(up)
        for w in range(writes):
            k = w % n
            needle = f"lat-{n}-{w}-x"
            up.execute(f"INSERT INTO {schema}.t{k} VALUES ({w}, '{needle}')")
            with lock:
                pending.append((k, needle, time.monotonic()))
            time.sleep(0.3)
        deadline = time.monotonic() + 120
        done.set()
        poller.join()
        watch.close()
        out["dumps_writing"] = len(dump_ids.stop())
        out["latency_load"] = f"{load0} -> {_load()}"
        out["lost"] = len(pending)
        lat = sorted(latencies)
        out["p50"] = lat[len(lat) // 2] if lat else float("nan")
        out["p99"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))] if lat else float("nan")
        out["rss_peak_mb"] = sizes.stop().peak_rss / MB
    finally:
        server.stop()
    return out


def _line(r: dict[str, Any]) -> str:
    return (
        f"{r['n']:>3} changefeed(s): running after {r['start_s']:.1f}s ({r['start_load']}), "
        f"{r['retries']:.0f} restarts; idle {r['idle_cpu_pct']:.1f}% of a core (whole machine "
        f"{r['machine_pct']:.1f}%, upstream {r['upstream_pct']:.1f}%"
        + (f", broker {r['broker_pct']:.1f}%" if r["kafka"] else "")
        + f"; {r['idle_load']}), "
        f"RSS {r['rss_mb']:.0f} MB (peak {r['rss_peak_mb']:.0f}); latency p50 {r['p50']:.2f}s "
        f"p99 {r['p99']:.2f}s, {r['lost']} not arrived ({r['latency_load']}); binlog dump threads "
        f"max {r['dumps_max']} mean {r['dumps_mean']:.1f} idle, {r['dumps_writing']} while writing; "
        f"{r['conns_per_s']:.1f} upstream connections opened/s idle"
        + "\n      idle by process: "
        + ", ".join(f"{k} {v:.1f}%" for k, v in r["idle_by_role"].items())
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--changefeeds", type=int, default=20)
    p.add_argument("--idle", type=float, default=60, help="seconds of idle measured (default 60)")
    p.add_argument("--writes", type=int, default=100, help="inserts timed end to end (default 100)")
    p.add_argument(
        "--binlog-relay-mb",
        type=int,
        default=None,
        help="the servers' --binlog-relay-mb (default: theirs; 0: no relay, each changefeed reads the upstream)",
    )
    p.add_argument(
        "--sink",
        choices=("storage", "kafka"),
        default="storage",
        help="each changefeed's sink: a CSV folder (default) or a topic of one Tansu broker",
    )
    p.add_argument(
        "--kafka-query",
        default="protocol=canal-json",
        help="with --sink kafka, the sink URI's query (e.g. add &enable-tidb-extension=true for watermarks)",
    )
    args = p.parse_args(argv)
    server_args = () if args.binlog_relay_mb is None else ("--binlog-relay-mb", str(args.binlog_relay_mb))
    # SIGTERM unwinds like Ctrl-C: the servers and MariaDB started here are stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print(
        f"density bench ({args.sink} sinks{', ' + args.kafka_query if args.sink == 'kafka' else ''}): "
        f"baseline 1 changefeed, then {args.changefeeds}; {_load()}",
        flush=True,
    )
    results = []
    with LocalMariaDB() as up, contextlib.ExitStack() as stack:
        broker = stack.enter_context(LocalTansu()) if args.sink == "kafka" else None
        for n in (1, args.changefeeds):
            with tempfile.TemporaryDirectory(prefix=f"sparkcdc-density-{n}-") as work:
                r = run_size(up, Path(work), n, args.idle, args.writes, server_args, broker, args.kafka_query)
            results.append(r)
            print(_line(r), flush=True)
    base, big = results
    extra = (big["rss_mb"] - base["rss_mb"]) / max(1, big["n"] - 1)
    checks = [
        ("all running within 60 s", big["start_s"] <= 60, f"{big['start_s']:.1f}s"),
        ("no start retried", big["retries"] == 0, f"{big['retries']:.0f}"),
        ("idle < 10% of a core", big["idle_cpu_pct"] < 10, f"{big['idle_cpu_pct']:.1f}%"),
        ("p99 ≤ 3 s", big["p99"] <= 3, f"{big['p99']:.2f}s"),
        ("RSS < 2.5 GB", big["rss_mb"] < 2560, f"{big['rss_mb']:.0f} MB"),
        ("≤ 100 MB per extra changefeed", extra <= 100, f"{extra:.0f} MB"),
        (
            "one binlog dump connection",
            big["dumps_max"] <= 1 and big["dumps_writing"] <= 1,
            f"max {big['dumps_max']} idle, {big['dumps_writing']} seen while writing",
        ),
    ]
    ratio = big["idle_cpu_pct"] / base["idle_cpu_pct"] if base["idle_cpu_pct"] else float("nan")
    print(f"idle CPU of {big['n']} against 1: {ratio:.2f}x")
    for what, ok, got in checks:
        print(f"  {'met    ' if ok else 'NOT MET'} {what}: {got}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
