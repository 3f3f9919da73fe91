"""ChangefeedMetrics: progress reports and errors become Prometheus series, per registry."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from sparkcdc.metrics import METRIC_NAMES, ChangefeedMetrics
from sparkcdc.model.ts import compose_ts


@dataclass
class Batch:
    seconds: float
    sink_seconds: float
    tables: dict[tuple[str, str, str], list[int]] = field(default_factory=dict)


@dataclass
class Report:
    checkpoint_ts: int
    resolved_ts: int
    lag_s: float
    snapshot_phase: str = ""
    snapshot_rows: int = 0
    snapshot_ranges_done: int = 0
    snapshot_ranges_total: int = 0
    batch: Batch | None = None
    run_id: str = "run-1"
    row_tally: dict[tuple[str, str, str], tuple[int, int]] = field(default_factory=dict)


def samples(m: ChangefeedMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for fam in text_string_to_metric_families(m.exposition().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


CF = (("changefeed", "orders"), ("namespace", "default"))


def test_progress_reports_become_gauges_counters_and_histograms() -> None:
    m = ChangefeedMetrics()
    now_ms = int(time.time() * 1000)
    ckpt = compose_ts(now_ms - 5000, 3)
    m.observe(
        "default",
        "orders",
        Report(
            ckpt,
            compose_ts(now_ms - 2000, 0),
            5.0,
            batch=Batch(0.8, 0.3, {("shop", "orders", "I"): [10, 900], ("shop", "orders", "D"): [2, 100]}),
            row_tally={("shop", "orders", "I"): (10, 900), ("shop", "orders", "D"): (2, 100)},
        ),
    )
    m.observe(
        "default",
        "orders",
        Report(
            ckpt,
            ckpt,
            5.0,
            batch=Batch(0.2, 0.1, {("shop", "orders", "I"): [5, 450]}),
            row_tally={("shop", "orders", "I"): (15, 1350), ("shop", "orders", "D"): (2, 100)},
        ),
    )
    got = samples(m)
    assert got[("ticdc_owner_checkpoint_ts", CF)] == now_ms - 5000
    assert got[("ticdc_owner_checkpoint_ts_lag", CF)] == 5.0
    # the resolved lag never exceeds the checkpoint lag
    assert 0 < got[("ticdc_owner_resolved_ts_lag", CF)] <= 5.0
    ins = (*CF, ("op", "insert"), ("schema", "shop"), ("table", "orders"))
    dels = (*CF, ("op", "delete"), ("schema", "shop"), ("table", "orders"))
    assert got[("sparkcdc_changefeed_rows_total", tuple(sorted(ins)))] == 15
    assert got[("sparkcdc_changefeed_bytes_total", tuple(sorted(ins)))] == 1350
    assert got[("sparkcdc_changefeed_rows_total", tuple(sorted(dels)))] == 2
    assert got[("sparkcdc_batch_duration_seconds_count", CF)] == 2
    assert abs(got[("sparkcdc_batch_duration_seconds_sum", CF)] - 1.0) < 1e-9
    assert got[("sparkcdc_sink_write_duration_seconds_count", CF)] == 2
    # a report without a batch (the periodic ones) moves gauges only
    m.observe("default", "orders", Report(ckpt, ckpt, 7.0))
    got = samples(m)
    assert got[("sparkcdc_batch_duration_seconds_count", CF)] == 2
    assert got[("ticdc_owner_checkpoint_ts_lag", CF)] == 7.0


INSERTS = tuple(sorted((*CF, ("op", "insert"), ("schema", "shop"), ("table", "orders"))))


def inserts(m: ChangefeedMetrics) -> float:
    return samples(m).get(("sparkcdc_changefeed_rows_total", INSERTS), 0.0)


def test_rows_are_counted_once_whichever_reports_arrive() -> None:
    m = ChangefeedMetrics()
    ts = compose_ts(int(time.time() * 1000), 0)
    # the report following the first batch (2 rows) never reaches the metrics; a periodic one does
    m.observe("default", "orders", Report(ts, ts, 0.0, row_tally={("shop", "orders", "I"): (2, 80)}))
    assert inserts(m) == 2
    second = Batch(0.1, 0.1, {("shop", "orders", "I"): [3, 120]})
    after = Report(ts, ts, 0.0, batch=second, row_tally={("shop", "orders", "I"): (5, 200)})
    m.observe("default", "orders", after)
    m.observe("default", "orders", after)  # the same report twice
    # an older periodic report arriving late (the monitor's thread) adds nothing
    m.observe("default", "orders", Report(ts, ts, 0.0, row_tally={("shop", "orders", "I"): (2, 80)}))
    assert inserts(m) == 5
    assert samples(m)[("sparkcdc_changefeed_bytes_total", INSERTS)] == 200
    # a restart of the run in the same process: its tally starts at 0, the counter goes on
    m.observe(
        "default", "orders", Report(ts, ts, 0.0, run_id="run-2", row_tally={("shop", "orders", "I"): (4, 1)})
    )
    assert inserts(m) == 9
    # a run this process gave up (pause, failover): its series go, the next run counts from 0
    m.forget("default", "orders")
    assert inserts(m) == 0
    m.observe(
        "default", "orders", Report(ts, ts, 0.0, run_id="run-2", row_tally={("shop", "orders", "I"): (6, 2)})
    )
    assert inserts(m) == 6


def test_snapshot_errors_state_and_forget() -> None:
    m = ChangefeedMetrics()
    ts = compose_ts(int(time.time() * 1000), 0)
    m.observe(
        "default",
        "orders",
        Report(ts, ts, 0.0, "reading", snapshot_rows=300, snapshot_ranges_done=2, snapshot_ranges_total=8),
    )
    m.record_error("default", "orders", "CDC:ErrSinkUnavailable", retried=True)
    m.record_error("default", "orders", "CDC:ErrSinkUnavailable", retried=True)
    m.record_error("default", "orders", "CDC:ErrSinkFailed", retried=False)
    m.set_state("default", "orders", "stopped")
    m.set_state("default", "other", "normal")
    got = samples(m)
    assert got[("sparkcdc_snapshot_rows_copied", CF)] == 300
    assert got[("sparkcdc_snapshot_ranges_done", CF)] == 2
    assert got[("sparkcdc_snapshot_ranges", CF)] == 8
    unavailable = tuple(sorted((*CF, ("code", "CDC:ErrSinkUnavailable"))))
    failed = tuple(sorted((*CF, ("code", "CDC:ErrSinkFailed"))))
    assert got[("sparkcdc_changefeed_errors_total", unavailable)] == 2
    assert got[("sparkcdc_changefeed_retries_total", unavailable)] == 2
    assert got[("sparkcdc_changefeed_errors_total", failed)] == 1
    assert ("sparkcdc_changefeed_retries_total", failed) not in got
    assert got[("ticdc_owner_status", CF)] == 3
    m.forget("default", "orders")
    left = {name for name, labels in samples(m) if dict(labels).get("changefeed") == "orders"}
    assert left == set()
    assert got[("ticdc_owner_status", (("changefeed", "other"), ("namespace", "default")))] == 0


def test_every_metric_is_named_and_registries_are_separate() -> None:
    a, b = ChangefeedMetrics(), ChangefeedMetrics()
    ts = compose_ts(int(time.time() * 1000), 0)
    a.observe(
        "default",
        "x",
        Report(
            ts,
            ts,
            1.0,
            "reading",
            batch=Batch(0.1, 0.1, {("s", "t", "U"): [1, 10]}),
            row_tally={("s", "t", "U"): (1, 10)},
        ),
    )
    a.record_error("default", "x", "CDC:ErrUnknown", retried=True)
    a.set_state("default", "x", "normal")
    families = {f.name for f in text_string_to_metric_families(a.exposition().decode())}
    # the parser names counters without _total
    exported = {n.removesuffix("_total") for n in METRIC_NAMES}
    assert families == exported
    assert not [f for f in text_string_to_metric_families(b.exposition().decode()) if f.samples]
