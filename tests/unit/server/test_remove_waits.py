"""A remove is answered once no server runs the changefeed: after it, its sink receives nothing.

The scheduler is the real one, with the runner double of ``test_scheduler``; the meta store is
a real SQLite one. The whole server's side (a row written right after the remove reaches no
removed changefeed's sink) is ``tests/e2e/test_many_changefeeds.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest

from sparkcdc.errors import ChangefeedNotFound, ChangefeedStateError
from sparkcdc.meta import ChangefeedState, MetaStore
from sparkcdc.server.service import ChangefeedService
from tests.unit.server.test_scheduler import FakeRunner, create, make, settle


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[MetaStore]:
    s = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    yield s
    s.close()


def _service(store: MetaStore) -> ChangefeedService:
    return ChangefeedService(store)


def test_remove_returns_after_the_owner_stopped_the_changefeed(store: MetaStore, tmp_path: Path) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)
    handle = runner.handles[0]
    assert store.get_changefeed("cf-1").lease_valid(store.now())

    stop_ticking = threading.Event()

    def tick_until_told() -> None:
        while not stop_ticking.wait(0.05):
            settle(s, rounds=1)

    with ThreadPoolExecutor(2) as pool:
        removing = pool.submit(_service(store).remove, "cf-1", "default", 20.0)
        with pytest.raises(FutureTimeout):
            removing.result(timeout=0.5)  # no tick yet: the owner still runs it
        ticking = pool.submit(tick_until_told)
        row = removing.result(timeout=20)
        stopped_at_answer = handle.stopped
        stop_ticking.set()
        ticking.result(timeout=10)
    assert stopped_at_answer, "the remove answered while the changefeed still ran"
    assert row.state == ChangefeedState.REMOVED and row.owner is None
    with pytest.raises(ChangefeedNotFound):
        _service(store).remove("cf-1", "default")  # released: gone


def test_an_owner_that_does_not_stop_it_in_time_is_named_and_a_second_remove_waits_again(
    store: MetaStore, tmp_path: Path
) -> None:
    runner = FakeRunner()
    create(store)
    s = make(store, runner, tmp_path)
    settle(s)  # claimed by srv-a, which then ticks no more (a server busy elsewhere)
    with pytest.raises(ChangefeedStateError) as err:
        _service(store).remove("cf-1", "default", 0.3)
    assert err.value.code == "CDC:ErrChangeFeedDeletionUnfinished"
    assert "server srv-a has not stopped it within 0 s" in str(err.value), str(err.value)
    row = store.get_changefeed("cf-1", include_removed=True)
    assert row.state == ChangefeedState.REMOVED and row.owner == "srv-a"

    settle(s)  # the owner stops and releases it
    assert runner.handles[0].stopped
    with pytest.raises(ChangefeedNotFound):
        _service(store).remove("cf-1", "default", 0.3)


def test_a_changefeed_no_server_holds_is_removed_at_once(store: MetaStore) -> None:
    create(store)
    row = _service(store).remove("cf-1", "default", 0.0)
    assert row.state == ChangefeedState.REMOVED and row.owner is None
