"""A Kafka writer of a later segment holds its messages until its turn, then produces them in
order, on a real broker and a real turn desk (``pipeline.turns``)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import RowChange, compose_ts
from sparkcdc.pipeline.turns import SegmentTurn, TurnDesk
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka import writer as kafka_writer

from .conftest import consume_all, person_table

pytestmark = pytest.mark.integration


@pytest.fixture()
def desk() -> Iterator[TurnDesk]:
    d = TurnDesk("127.0.0.1", "127.0.0.1")
    yield d
    d.stop()


def _rows(first: int, n: int, ts0: int) -> list[RowChange]:
    return [
        RowChange("I", "shop", "person", 1, compose_ts(ts0 + i, 0), None, (i, f"n{i}", "x" * 40, None), 0)
        for i in range(first, first + n)
    ]


def _ids(tansu: LocalTansu, topic: str) -> list[int]:
    msgs = consume_all(tansu.bootstrap, topic, 1)[0]
    return [
        int(json.loads(m.value())["data"][0]["id"]) for m in msgs if json.loads(m.value())["type"] == "INSERT"
    ]


TABLE = person_table("shop")


class _Batch:
    """A batch of two segments on one partition: segment 1's writer is open (it writes ids from 100
    on), segment 0 writes ids 0..99 when ``first`` is called."""

    def __init__(self, tansu: LocalTansu, topic: str, desk: TurnDesk, batch: int) -> None:
        self.sink = KafkaSink(
            tansu.sink_uri(topic, "protocol=canal-json&partition-num=1"), ReplicaConfig(), "cf"
        )
        self.sink.check()
        self.batch = batch
        ticket = desk.open(f"changefeed cf batch {batch}")
        self.first_turn, self.second_turn = SegmentTurn(ticket, 0), SegmentTurn(ticket, 1)
        self.second: Any = self.sink.open_writer(
            WriterContext("cf", batch, 0, segment=1, segments=2, turn=self.second_turn)
        )

    def first(self) -> None:
        w = self.sink.open_writer(
            WriterContext("cf", self.batch, 0, segment=0, segments=2, turn=self.first_turn)
        )
        for row in _rows(0, 100, 1_000):
            w.write(row, TABLE)
        w.close()
        self.first_turn.done()


def test_a_later_segment_sends_nothing_before_its_turn_and_everything_in_order_after(
    tansu: LocalTansu, topic: str, desk: TurnDesk
) -> None:
    b = _Batch(tansu, topic, desk, 1)
    for row in _rows(100, 50, 2_000):  # one transaction per row: each flush checks the turn
        b.second.write(row, TABLE)
    b.second.write(_rows(150, 1, 3_000)[0], TABLE)
    assert b.second.tracker.sent == 0, "segment 1 produced before its turn"
    assert _ids(tansu, topic) == []
    b.first()
    b.second.close()
    b.second_turn.done()
    assert _ids(tansu, topic) == list(range(151))


def test_past_its_hold_bound_a_writer_waits_for_its_turn(
    tansu: LocalTansu, topic: str, desk: TurnDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kafka_writer, "HOLD_BYTES", 2_000)
    b = _Batch(tansu, topic, desk, 2)
    written: list[int] = []
    failed: list[BaseException] = []

    def write_second() -> None:
        try:
            for row in _rows(100, 100, 2_000):
                b.second.write(row, TABLE)
                assert row.after is not None
                written.append(row.after[0])
            b.second.close()
            b.second_turn.done()
        except BaseException as e:  # reported by the test below
            failed.append(e)

    t = threading.Thread(target=write_second)
    t.start()
    t.join(1.0)
    assert t.is_alive() and 0 < len(written) < 100, f"{len(written)} rows written without a turn"
    b.first()
    t.join(30.0)
    assert not t.is_alive() and not failed, failed
    assert _ids(tansu, topic) == list(range(200))


def test_a_writer_whose_batch_is_given_up_raises(tansu: LocalTansu, topic: str, desk: TurnDesk) -> None:
    b = _Batch(tansu, topic, desk, 3)
    for row in _rows(100, 10, 2_000):
        b.second.write(row, TABLE)
    b.first_turn.abandon()  # segment 0's task failed
    with pytest.raises(Exception, match="segment 1 of changefeed cf batch 3 did not get its turn"):
        b.second.close()
    assert _ids(tansu, topic) == []
