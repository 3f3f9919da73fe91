"""How many streaming queries start at once (``pipeline.changefeed._StartSlots``)."""

from __future__ import annotations

import threading
import time

import pytest

from sparkcdc.pipeline import changefeed
from sparkcdc.pipeline.changefeed import _StartSlots


def test_a_start_waits_for_a_slot_and_a_first_batch_gives_it_back() -> None:
    slots = _StartSlots(2)
    first, second = slots.take(), slots.take()
    got: list[float] = []

    def third() -> None:
        t0 = time.monotonic()
        slots.take()()
        got.append(time.monotonic() - t0)

    waiter = threading.Thread(target=third)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive(), "a third start ran while two held their slots"
    first()
    first()  # a second call (the stop after the first batch) gives nothing back twice
    waiter.join(5)
    assert not waiter.is_alive() and got and got[0] >= 0.3
    second()
    # both slots are free again, and not more than two: a give-back counted twice would raise here
    a, b = slots.take(), slots.take()
    a()
    b()
    with pytest.raises(ValueError):
        slots.slots.release()


def test_a_query_without_a_first_batch_gives_its_slot_back_after_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(changefeed, "QUERY_START_CAP_S", 0.2)
    slots = _StartSlots(1)
    slots.take()  # never given back by its caller
    t0 = time.monotonic()
    slots.take()()
    assert 0.1 < time.monotonic() - t0 < 5
