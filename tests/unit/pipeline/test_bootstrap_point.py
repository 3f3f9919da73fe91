"""Which DDLs the planner treats as already reflected in a bootstrapped schema history."""

from __future__ import annotations

from sparkcdc.capture.offset import Offset
from sparkcdc.capture.reader import TxnInfo
from sparkcdc.pipeline.plan import Planner, SourceSpec


def _planner(**kw: object) -> Planner:
    p = Planner.__new__(Planner)  # only the spec is needed to compare positions
    p.spec = SourceSpec("cf", "mysql://root@127.0.0.1:1/", {}, "/nonexistent", **kw)  # type: ignore[arg-type]
    return p


def _txn(file: str, end: int, ts: int) -> TxnInfo:
    return TxnInfo(Offset(file, end - 100, ts - 1), Offset(file, end, ts), ts, 100)


def test_position_decides_when_recorded() -> None:
    p = _planner(bootstrap_ts=0, bootstrap_pos=["mysql-bin.000007", 5000])
    assert not p._after_bootstrap(_txn("mysql-bin.000007", 5000, 10**18))  # ends at the position
    assert not p._after_bootstrap(_txn("mysql-bin.000006", 900000, 10**18))  # an older file
    assert p._after_bootstrap(_txn("mysql-bin.000007", 5001, 1))  # later, whatever its ts
    assert p._after_bootstrap(_txn("mysql-bin.000008", 200, 1))  # a newer file


def test_ts_decides_for_a_history_without_a_position() -> None:
    p = _planner(bootstrap_ts=1000, bootstrap_pos=None)
    assert not p._after_bootstrap(_txn("mysql-bin.000009", 99999, 1000))
    assert p._after_bootstrap(_txn("mysql-bin.000001", 10, 1001))
