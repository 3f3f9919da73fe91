"""The resolved-ts rule and its pacing, without an upstream."""

from __future__ import annotations

import pytest

from sparkcdc.capture.offset import base_ts, next_ts
from sparkcdc.capture.resolved import (
    AFTER_TICK_S,
    TICK_MARGIN_US,
    UpstreamClock,
    resolved_bound,
    until_next_bound,
)
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.model.ts import logical, physical_ms

S = 1_800_000_000  # a whole second


def test_the_bound_is_the_last_ts_of_the_second_before_the_clock_minus_the_margin() -> None:
    at = (S + 1) * 1_000_000 + TICK_MARGIN_US + 300_000  # 0.3 s after the margin past second S+1
    bound = resolved_bound(at, None)
    assert bound == base_ts(S + 1) - 1
    assert physical_ms(bound) == (S + 1) * 1000 - 1 and logical(bound) == (1 << 18) - 1
    # Within the margin after a tick the previous second is not over yet.
    assert resolved_bound((S + 1) * 1_000_000 + TICK_MARGIN_US - 1, None) == base_ts(S) - 1


@pytest.mark.parametrize("header_s", [S, S + 1, S + 5])
def test_a_later_transaction_gets_the_same_commit_ts_from_the_raised_chain_as_from_the_binlog(
    header_s: int,
) -> None:
    """Every transaction whose header second is at least the bound's next second: equal values."""
    bound = resolved_bound(S * 1_000_000 + TICK_MARGIN_US + 10, None)
    for chain in (base_ts(S - 3), base_ts(S - 1) + 17, bound):
        assert next_ts(bound, header_s) == next_ts(chain, header_s) > bound


def test_an_older_header_is_ordered_by_the_chain() -> None:
    bound = resolved_bound(S * 1_000_000 + TICK_MARGIN_US + 10, None)
    assert next_ts(bound, S - 60) == bound + 1


def test_an_open_transaction_holds_the_bound_before_the_second_it_started() -> None:
    now = (S + 10) * 1_000_000 + 500_000
    assert resolved_bound(now, S + 4) == base_ts(S + 3) - 1
    assert resolved_bound(now, S + 30) == resolved_bound(now, None), "a later start changes nothing"


def test_the_next_reading_comes_right_after_the_bound_can_move() -> None:
    now = S * 1_000_000 + TICK_MARGIN_US + 250_000
    wait = until_next_bound(now)
    assert wait == pytest.approx(0.75 + AFTER_TICK_S)
    later = now + int(wait * 1_000_000)
    assert resolved_bound(later, None) == resolved_bound(now, None) + base_ts(1)
    assert resolved_bound(later - int(2 * AFTER_TICK_S * 1_000_000), None) == resolved_bound(now, None)


class _FakeClock(UpstreamClock):
    def __init__(self, readings: list[tuple[int, int | None]]) -> None:
        self.mono = 100.0
        super().__init__(UpstreamConfig("127.0.0.1", 1, "u", "p"), monotonic=lambda: self.mono)
        self.readings = readings

    def _read(self) -> tuple[int, int | None]:
        return self.readings.pop(0)


def test_the_clock_is_read_once_per_upstream_second() -> None:
    first = S * 1_000_000 + TICK_MARGIN_US + 900_000
    clock = _FakeClock([(first, None), (first + 150_000, None)])
    assert clock.due()
    assert clock.resolved_bound() == base_ts(S) - 1
    clock.mono += 0.05
    assert not clock.due()
    clock.mono += 0.1 + AFTER_TICK_S
    assert clock.due()
    assert clock.resolved_bound() == base_ts(S + 1) - 1
