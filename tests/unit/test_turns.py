"""The turns of a batch's segments: each sends only after every earlier one finished; a segment
that ends without finishing gives the whole batch up (``sparkcdc.pipeline.turns``), over a real
loopback desk."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from sparkcdc.errors import SinkUnavailable
from sparkcdc.pipeline import turns
from sparkcdc.pipeline.turns import SegmentTurn, TurnDesk, TurnTicket


@pytest.fixture()
def desk() -> Iterator[TurnDesk]:
    d = TurnDesk("127.0.0.1", "127.0.0.1")
    yield d
    d.stop()


def _eventually(check: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_each_segment_goes_after_every_earlier_one_finished(desk: TurnDesk) -> None:
    ticket = desk.open("changefeed cf batch 7")
    # the later segments join first, as a busy scheduler may start them
    second, third = SegmentTurn(ticket, 2), SegmentTurn(ticket, 1)
    first = SegmentTurn(ticket, 0)
    _eventually(first.ready, "segment 0 never waits")
    assert not second.ready() and not third.ready()
    first.done()
    _eventually(third.ready, "segment 1 goes once segment 0 is done")
    assert not second.ready(), "segment 2 must still wait for segment 1"
    third.done()
    _eventually(second.ready, "segment 2 goes once segments 0 and 1 are done")
    second.done()
    desk.close(ticket)


def test_a_segment_that_ends_without_finishing_gives_the_batch_up(desk: TurnDesk) -> None:
    ticket = desk.open("changefeed cf batch 8")
    first, second, third = SegmentTurn(ticket, 0), SegmentTurn(ticket, 1), SegmentTurn(ticket, 2)
    first.wait()
    second.abandon()  # its task failed before its turn
    first.done()  # segment 0 finished before it heard: its own output stands
    with pytest.raises(
        SinkUnavailable, match=r"segment 2 of changefeed cf batch 8 .*segment 1 ended without"
    ):
        third.wait()
    # Spark's retry of the failed segment is turned away too: the batch runs again from its start
    with pytest.raises(SinkUnavailable, match="given up"):
        SegmentTurn(ticket, 1).wait()
    desk.close(ticket)


def test_the_first_segment_failing_turns_away_the_others(desk: TurnDesk) -> None:
    ticket = desk.open("changefeed cf batch 9")
    first, second = SegmentTurn(ticket, 0), SegmentTurn(ticket, 1)
    first.wait()
    first.abandon()
    with pytest.raises(SinkUnavailable, match="segment 0 ended without finishing"):
        second.wait()


def test_a_segment_run_again_after_it_finished_gives_the_batch_up(desk: TurnDesk) -> None:
    ticket = desk.open("changefeed cf batch 10")
    first, second, third = SegmentTurn(ticket, 0), SegmentTurn(ticket, 1), SegmentTurn(ticket, 2)
    first.done()
    _eventually(second.ready, "segment 1's turn")
    # segment 0 runs again (its task failed on its way out): sending again would follow segment 1
    with pytest.raises(SinkUnavailable, match="segment 0 ran again after it finished"):
        SegmentTurn(ticket, 0).wait()
    with pytest.raises(SinkUnavailable, match="given up"):
        second.done()
    with pytest.raises(SinkUnavailable, match="given up"):
        third.wait()


def test_the_end_of_the_batchs_job_turns_away_whatever_still_waits(desk: TurnDesk) -> None:
    ticket = desk.open("changefeed cf batch 11")
    second = SegmentTurn(ticket, 1)
    desk.close(ticket)
    with pytest.raises(SinkUnavailable, match="batch 11 did not get its turn"):
        second.wait()
    with pytest.raises(SinkUnavailable, match="the batch is over"):
        SegmentTurn(ticket, 0).wait()


def test_a_segment_waits_at_most_its_deadline(desk: TurnDesk) -> None:
    ticket = desk.open("changefeed cf batch 12")
    first = SegmentTurn(ticket, 0)
    second = SegmentTurn(ticket, 1, wait_s=0.3)
    with pytest.raises(SinkUnavailable, match=r"segment\(s\) \[0\] not done after 0s"):
        second.wait()
    with pytest.raises(SinkUnavailable, match="given up"):
        first.done()


def test_batches_keep_their_own_turns(desk: TurnDesk) -> None:
    a, b = desk.open("changefeed a batch 1"), desk.open("changefeed b batch 1")
    a1, b0, b1 = SegmentTurn(a, 1), SegmentTurn(b, 0), SegmentTurn(b, 1)
    b0.done()
    _eventually(b1.ready, "batch b's segment 1")
    assert not a1.ready()
    SegmentTurn(a, 0).abandon()  # batch a is given up; batch b is not
    with pytest.raises(SinkUnavailable):
        a1.wait()
    b1.done()


def test_a_desk_the_executor_cannot_reach_names_the_way_out() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connections are refused
        ticket = TurnTicket("127.0.0.1", port, "t" * 32, "changefeed cf batch 13")
        with pytest.raises(SinkUnavailable, match=r"cannot be reached.*spark\.sparkcdc\.changefeedTasks=1"):
            SegmentTurn(ticket, 1)


def test_a_request_the_desk_does_not_understand_is_answered_and_changes_nothing(desk: TurnDesk) -> None:
    import socket

    ticket = desk.open("changefeed cf batch 14")
    for line in (b"HELLO\n", b"JOIN x y z\n", f"JOIN {ticket.token} one 5\n".encode()):
        with socket.create_connection(("127.0.0.1", desk.port), timeout=5) as s:
            s.sendall(line)
            assert s.makefile("rb").readline().strip() == b"bad request"
    first, second = SegmentTurn(ticket, 0), SegmentTurn(ticket, 1)
    first.done()
    second.wait()
    second.done()


def test_a_segment_whose_task_never_joins_gives_the_batch_up_after_a_while(
    desk: TurnDesk, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark runs a segment's task again when its executor was lost before the task joined; if the
    later segments hold every slot while they wait, that task never starts: the batch is given up."""
    monkeypatch.setattr(turns, "ABSENT_S", 0.5)
    ticket = desk.open("changefeed cf batch 15")
    with pytest.raises(SinkUnavailable, match=r"segment\(s\) \[0\] had no running task for 0.5s"):
        SegmentTurn(ticket, 1).wait()
    # one that joins in time is waited for as long as it runs
    ticket = desk.open("changefeed cf batch 16")
    second = SegmentTurn(ticket, 1)
    first = SegmentTurn(ticket, 0)
    time.sleep(1.0)  # longer than ABSENT_S: segment 0 is connected, so segment 1 keeps waiting
    assert not second.ready()
    first.done()
    second.wait()
    second.done()
