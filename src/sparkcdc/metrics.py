"""Prometheus metrics of changefeeds, in one registry per process (the server's or ``sparkcdc run``'s).

``ChangefeedMetrics.observe`` turns a progress report (``pipeline.changefeed.Progress``) into metric
updates. Rows and bytes come from the report's running tally of its run (every batch the run
committed, by table and op), not from the one batch a report may follow: each report adds what the
counters have not seen yet, so a row is counted once even when the report of its batch never reaches
the metrics (or reaches them twice); ``record_error`` counts the errors that stopped a run and the retries after them. Where
TiCDC has the same metric, its name and labels are used (``ticdc_owner_*``: ``namespace`` and
``changefeed``); the others are ``sparkcdc_*`` with the same two labels first.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Protocol

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from sparkcdc.model.ts import physical_ms

# No ``*_created`` series beside every counter and histogram (TiCDC has none either).
disable_created_metrics()

LABELS = ("namespace", "changefeed")

STATE_VALUES = {
    "normal": 0,
    "pending": 1,
    "failed": 2,
    "stopped": 3,
    "finished": 4,
    "removed": 5,
    "warning": 6,
}
"""``ticdc_owner_status`` values: TiCDC's ``FeedState.ToInt()``."""

OP_NAMES = {"I": "insert", "U": "update", "D": "delete"}

DURATION_BUCKETS = tuple(0.01 * 2**i for i in range(16))
"""10 ms to 5.5 min, doubling (TiCDC's tick-duration buckets, two fewer)."""

CONTENT_TYPE = CONTENT_TYPE_LATEST

KEPT_RUNS = 4
"""Runs of one changefeed whose tallies are remembered (a stopping run's last report may come late)."""

METRIC_NAMES = (
    "ticdc_owner_checkpoint_ts",
    "ticdc_owner_checkpoint_ts_lag",
    "ticdc_owner_resolved_ts",
    "ticdc_owner_resolved_ts_lag",
    "ticdc_owner_status",
    "sparkcdc_changefeed_rows_total",
    "sparkcdc_changefeed_bytes_total",
    "sparkcdc_batch_duration_seconds",
    "sparkcdc_sink_write_duration_seconds",
    "sparkcdc_snapshot_rows_copied",
    "sparkcdc_snapshot_ranges_done",
    "sparkcdc_snapshot_ranges",
    "sparkcdc_changefeed_errors_total",
    "sparkcdc_changefeed_retries_total",
)
"""Every metric this module exports (histograms add ``_bucket``, ``_sum`` and ``_count``)."""


class BatchLike(Protocol):
    """What a committed batch reports (``pipeline.writer.BatchResult``)."""

    seconds: float
    sink_seconds: float
    tables: dict[tuple[str, str, str], list[int]]


class ProgressLike(Protocol):
    """What a progress report carries (``pipeline.changefeed.Progress``)."""

    checkpoint_ts: int
    resolved_ts: int
    lag_s: float
    snapshot_phase: str
    snapshot_rows: int
    snapshot_ranges_done: int
    snapshot_ranges_total: int
    batch: BatchLike | None
    run_id: str
    row_tally: dict[tuple[str, str, str], tuple[int, int]]


class ChangefeedMetrics:
    """The metrics of the changefeeds one process runs, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        per_table = (*LABELS, "schema", "table", "op")
        self.checkpoint_ts = Gauge(
            "ticdc_owner_checkpoint_ts",
            "checkpoint ts of changefeeds (physical part, ms)",
            LABELS,
            registry=r,
        )
        self.checkpoint_lag = Gauge(
            "ticdc_owner_checkpoint_ts_lag", "checkpoint ts lag of changefeeds in seconds", LABELS, registry=r
        )
        self.resolved_ts = Gauge(
            "ticdc_owner_resolved_ts", "resolved ts of changefeeds (physical part, ms)", LABELS, registry=r
        )
        self.resolved_lag = Gauge(
            "ticdc_owner_resolved_ts_lag", "resolved ts lag of changefeeds in seconds", LABELS, registry=r
        )
        self.status = Gauge(
            "ticdc_owner_status",
            "state of changefeeds: 0 normal, 2 failed, 3 stopped, 4 finished, 5 removed",
            LABELS,
            registry=r,
        )
        self.rows = Counter(
            "sparkcdc_changefeed_rows", "row changes written to the sink", per_table, registry=r
        )
        self.bytes = Counter(
            "sparkcdc_changefeed_bytes",
            "bytes of the row changes written to the sink (their binlog row events)",
            per_table,
            registry=r,
        )
        self.batch_duration = Histogram(
            "sparkcdc_batch_duration_seconds",
            "time of a micro-batch, from its start to the sink's commit",
            LABELS,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.sink_write_duration = Histogram(
            "sparkcdc_sink_write_duration_seconds",
            "time a micro-batch spent in the sink: its slowest writer task plus the commit",
            LABELS,
            buckets=DURATION_BUCKETS,
            registry=r,
        )
        self.snapshot_rows = Gauge(
            "sparkcdc_snapshot_rows_copied", "rows the initial snapshot copied", LABELS, registry=r
        )
        self.snapshot_ranges_done = Gauge(
            "sparkcdc_snapshot_ranges_done", "key ranges the initial snapshot finished", LABELS, registry=r
        )
        self.snapshot_ranges_total = Gauge(
            "sparkcdc_snapshot_ranges", "key ranges the initial snapshot planned", LABELS, registry=r
        )
        self.errors = Counter(
            "sparkcdc_changefeed_errors",
            "errors that stopped a run of a changefeed, by error code",
            (*LABELS, "code"),
            registry=r,
        )
        self.retries = Counter(
            "sparkcdc_changefeed_retries",
            "restarts of a changefeed after a retryable error, by error code",
            (*LABELS, "code"),
            registry=r,
        )
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str], set[tuple[Any, tuple[str, ...]]]] = {}
        self._counted: dict[tuple[str, str], dict[str, dict[tuple[str, str, str], tuple[int, int]]]] = {}
        """Per changefeed and run: the part of the run's tally the counters already hold."""

    def _child(self, metric: Any, namespace: str, changefeed: str, *extra: str) -> Any:
        values = (namespace, changefeed, *extra)
        with self._lock:
            self._series.setdefault((namespace, changefeed), set()).add((metric, values))
        return metric.labels(*values)

    def observe(self, namespace: str, changefeed: str, p: ProgressLike) -> None:
        """Take a progress report of a changefeed: positions, lags, snapshot figures, the batch it follows."""
        now = time.time()
        ckpt_ms = physical_ms(p.checkpoint_ts)
        resolved_ms = physical_ms(p.resolved_ts)
        self._child(self.checkpoint_ts, namespace, changefeed).set(ckpt_ms)
        self._child(self.checkpoint_lag, namespace, changefeed).set(p.lag_s)
        self._child(self.resolved_ts, namespace, changefeed).set(resolved_ms)
        # The resolved ts is never behind the checkpoint: its lag is at most the checkpoint's
        # (which is 0 while the changefeed is caught up).
        resolved_lag = min(p.lag_s, max(0.0, now - resolved_ms / 1000.0))
        self._child(self.resolved_lag, namespace, changefeed).set(resolved_lag)
        if p.snapshot_phase:
            self._child(self.snapshot_rows, namespace, changefeed).set(p.snapshot_rows)
            self._child(self.snapshot_ranges_done, namespace, changefeed).set(p.snapshot_ranges_done)
            self._child(self.snapshot_ranges_total, namespace, changefeed).set(p.snapshot_ranges_total)
        self._count_rows(namespace, changefeed, p.run_id, p.row_tally)
        b = p.batch
        if b is None:
            return
        self._child(self.batch_duration, namespace, changefeed).observe(b.seconds)
        self._child(self.sink_write_duration, namespace, changefeed).observe(b.sink_seconds)

    def _count_rows(
        self, namespace: str, changefeed: str, run_id: str, tally: dict[tuple[str, str, str], tuple[int, int]]
    ) -> None:
        """Add what a run's tally has beyond what the counters already took from that run."""
        fresh: dict[tuple[str, str, str], tuple[int, int]] = {}
        with self._lock:
            runs = self._counted.setdefault((namespace, changefeed), {})
            seen = runs.get(run_id)
            if seen is None:  # a new run: its tally starts from nothing
                seen = runs[run_id] = {}
                while len(runs) > KEPT_RUNS:  # a late report of an older run than these is not expected
                    del runs[next(iter(runs))]
            for k, (rows, size) in tally.items():
                rows0, size0 = seen.get(k, (0, 0))
                if rows > rows0 or size > size0:
                    fresh[k] = (max(0, rows - rows0), max(0, size - size0))
                    seen[k] = (max(rows, rows0), max(size, size0))
        for (schema, table, op), (rows, size) in fresh.items():
            name = OP_NAMES.get(op, op)
            self._child(self.rows, namespace, changefeed, schema, table, name).inc(rows)
            self._child(self.bytes, namespace, changefeed, schema, table, name).inc(size)

    def record_error(self, namespace: str, changefeed: str, code: str, *, retried: bool) -> None:
        """An error stopped a run of the changefeed; ``retried``: it restarts after a backoff."""
        self._child(self.errors, namespace, changefeed, code).inc()
        if retried:
            self._child(self.retries, namespace, changefeed, code).inc()

    def set_state(self, namespace: str, changefeed: str, state: str) -> None:
        """The changefeed's state (``ticdc_owner_status``)."""
        self._child(self.status, namespace, changefeed).set(STATE_VALUES.get(state, -1))

    def forget(self, namespace: str, changefeed: str) -> None:
        """Drop every series of a changefeed this process no longer runs (or that was removed)."""
        with self._lock:
            series = self._series.pop((namespace, changefeed), set())
            self._counted.pop((namespace, changefeed), None)
        for metric, values in series:
            try:
                metric.remove(*values)
            except KeyError:
                pass

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return bytes(generate_latest(self.registry))


class RelayCollector:
    """The server's binlog relays on ``/metrics`` (``capture.relay.RelayHub.status``)."""

    def __init__(self, status: Any) -> None:
        self._status = status

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        up = GaugeMetricFamily(
            "sparkcdc_binlog_relay_up",
            "1 while the server's binlog relay follows the upstream; 0 after it stopped "
            "(its changefeeds then read the upstream themselves; the server log says why)",
            labels=["upstream"],
        )
        held = GaugeMetricFamily(
            "sparkcdc_binlog_relay_bytes", "binlog bytes the relay holds on local disk", labels=["upstream"]
        )
        users = GaugeMetricFamily(
            "sparkcdc_binlog_relay_changefeeds",
            "running changefeeds that read the relay",
            labels=["upstream"],
        )
        for r in self._status():
            up.add_metric([r["upstream"]], 1.0 if r["following"] else 0.0)
            held.add_metric([r["upstream"]], float(r["bytes"]))
            users.add_metric([r["upstream"]], float(r["changefeeds"]))
        yield up
        yield held
        yield users
