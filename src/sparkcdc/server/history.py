"""The last hour of each changefeed's lag and throughput, sampled from the meta database in memory.

Any server answers any request, so each keeps its own samples of every changefeed, read from the
meta database where the owners renew their figures; the dashboard draws them. The same pass sets
``ticdc_owner_status`` of every changefeed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from sparkcdc.meta import ChangefeedInfo, ChangefeedState, MetaStore
from sparkcdc.metrics import ChangefeedMetrics
from sparkcdc.model.ts import physical_ms
from sparkcdc.server.redact import unexpected

log = logging.getLogger(__name__)

WINDOW_SECONDS = 3600.0
INTERVAL_SECONDS = 5.0


@dataclass(frozen=True)
class Sample:
    """One changefeed's figures at one time."""

    time: float
    state: str
    checkpoint_ts: int
    lag_s: float
    rows_per_sec: float
    rows_total: int


def sample_of(cf: ChangefeedInfo, now: float) -> Sample:
    """A changefeed's figures now: the owner's while it runs, else no throughput and the real lag."""
    stats = cf.stats or {}
    running = cf.state == ChangefeedState.NORMAL and bool(cf.owner) and "lag_s" in stats
    if running:
        lag = float(stats.get("lag_s", 0.0))
        rate = float(stats.get("rows_per_sec", 0.0))
    else:
        lag = max(0.0, now - physical_ms(cf.checkpoint_ts) / 1000.0) if cf.checkpoint_ts else 0.0
        rate = 0.0
    return Sample(
        time=now,
        state=cf.state.value,
        checkpoint_ts=cf.checkpoint_ts,
        lag_s=round(lag, 3),
        rows_per_sec=round(rate, 3),
        rows_total=int(stats.get("rows_total", 0)),
    )


class ChangefeedHistory:
    """Samples every changefeed every ``interval_s`` and keeps ``window_s`` of them."""

    def __init__(
        self,
        store: MetaStore,
        metrics: ChangefeedMetrics | None = None,
        *,
        window_s: float = WINDOW_SECONDS,
        interval_s: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
        debug: bool = False,
    ) -> None:
        self.debug = debug
        """Log the traceback of an unexpected error (``sparkcdc --debug server``)."""
        self.store = store
        self.metrics = metrics
        self.window_s = window_s
        self.interval_s = interval_s
        self.clock = clock
        self._samples: dict[tuple[str, str], deque[Sample]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """Read every changefeed once and add a sample of each; forget removed ones."""
        now = self.clock()
        changefeeds = self.store.list_changefeeds()
        with self._lock:
            for cf in changefeeds:
                points = self._samples.setdefault(cf.key, deque())
                points.append(sample_of(cf, now))
                while points and points[0].time < now - self.window_s:
                    points.popleft()
            gone = set(self._samples) - {cf.key for cf in changefeeds}
            for key in gone:
                del self._samples[key]
        if self.metrics is not None:
            for namespace, changefeed_id in gone:
                self.metrics.forget(namespace, changefeed_id)
            for cf in changefeeds:
                self.metrics.set_state(cf.namespace, cf.id, cf.state.value)

    def points(self, namespace: str, changefeed_id: str) -> list[dict[str, Any]]:
        """The samples of one changefeed, oldest first."""
        with self._lock:
            return [asdict(s) for s in self._samples.get((namespace, changefeed_id), ())]

    def start(self) -> None:
        """Sample now, then every ``interval_s`` in a daemon thread."""
        self._thread = threading.Thread(target=self._loop, name="sparkcdc-history", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except SQLAlchemyError as exc:  # the scheduler reports an unreachable meta database
                log.debug("history sample skipped: %s", type(exc).__name__)
            except Exception as exc:  # the sampler must outlive a fault; one line, the traceback with --debug
                log.error("history sample failed: %s", unexpected(exc), exc_info=exc if self.debug else None)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
