"""Transactions that change one key several times, and a strict in-memory replica to replay them.

MySQL and MariaDB run a transaction's statements one after the other, so its binlog may change a key
twice (``UPDATE id=2 WHERE id=1; UPDATE id=3 WHERE id=2``), insert, update and delete one key, or
swap two keys through a third. The sink tests feed these to a sink's ordering code and replay the
output into ``Replica``, which refuses what a database would refuse (a duplicate primary or unique
key, a missing row), then compare it with the upstream's state.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo

SCHEMA, TABLE = "s", "t"

PK_TABLE = TableInfo(
    schema=SCHEMA,
    table=TABLE,
    columns=(ColumnInfo("id", "int", nullable=False), ColumnInfo("v", "varchar", length=16)),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=1,
)
"""``t(id INT PRIMARY KEY, v VARCHAR(16))``: rows are ``(id, v)``."""

UK_TABLE = TableInfo(
    schema=SCHEMA,
    table=TABLE,
    columns=(
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("u", "int"),
        ColumnInfo("v", "varchar", length=16),
    ),
    indexes=(
        IndexInfo("PRIMARY", ("id",), unique=True, primary=True),
        IndexInfo("uk", ("u",), unique=True),
    ),
    version=1,
)
"""``t(id INT PRIMARY KEY, u INT UNIQUE, v VARCHAR(16))``: rows are ``(id, u, v)``."""

Row = tuple[Any, ...]


class ReplicaError(AssertionError):
    """A change the replica refuses, as a database would (duplicate key, missing row)."""


@dataclass
class Replica:
    """A table keyed by ``id`` that checks the primary key and, if the table has one, the unique key ``u``."""

    table: TableInfo
    rows: dict[Any, Row] = field(default_factory=dict)

    def _check_unique(self, row: Row, ignore: Any) -> None:
        if len(self.table.columns) < 3 or row[1] is None:
            return
        for k, other in self.rows.items():
            if k != ignore and other[1] == row[1]:
                raise ReplicaError(f"duplicate unique key u={row[1]!r}: rows {k!r} and {row[0]!r}")

    def apply(self, change: RowChange) -> None:
        """Apply one change strictly (plain INSERT / UPDATE / DELETE semantics)."""
        if change.op == "I":
            assert change.after is not None
            key = change.after[0]
            if key in self.rows:
                raise ReplicaError(f"duplicate primary key {key!r}")
            self._check_unique(change.after, None)
            self.rows[key] = change.after
        elif change.op == "D":
            assert change.before is not None
            key = change.before[0]
            if self.rows.get(key) != change.before:
                raise ReplicaError(f"DELETE of {change.before!r} finds {self.rows.get(key)!r}")
            del self.rows[key]
        else:
            assert change.before is not None and change.after is not None
            old, new = change.before[0], change.after[0]
            if self.rows.get(old) != change.before:
                raise ReplicaError(f"UPDATE of {change.before!r} finds {self.rows.get(old)!r}")
            if new != old and new in self.rows:
                raise ReplicaError(f"duplicate primary key {new!r}")
            self._check_unique(change.after, old)
            del self.rows[old]
            self.rows[new] = change.after

    def apply_all(self, changes: Iterable[RowChange]) -> Replica:
        """Apply changes in order; returns self."""
        for c in changes:
            self.apply(c)
        return self

    def copy(self) -> Replica:
        """An independent replica with the same rows."""
        return Replica(self.table, dict(self.rows))


def _rc(op: str, ts: int, before: Row | None, after: Row | None, seq: int) -> RowChange:
    return RowChange(op, SCHEMA, TABLE, 1, ts, before, after, seq)


class TxnBuilder:
    """Builds one upstream transaction statement by statement, tracking the table as MySQL would."""

    def __init__(self, replica: Replica, commit_ts: int) -> None:
        self.state = replica.copy()
        self.ts = commit_ts
        self.rows: list[RowChange] = []

    def _add(self, op: str, before: Row | None, after: Row | None) -> None:
        change = _rc(op, self.ts, before, after, len(self.rows))
        self.state.apply(change)
        self.rows.append(change)

    def insert(self, *row: Any) -> TxnBuilder:
        """``INSERT`` the row."""
        self._add("I", None, tuple(row))
        return self

    def delete(self, key: Any) -> TxnBuilder:
        """``DELETE … WHERE id = key``."""
        self._add("D", self.state.rows[key], None)
        return self

    def update(self, key: Any, **values: Any) -> TxnBuilder:
        """``UPDATE … SET col = value … WHERE id = key``."""
        before = self.state.rows[key]
        names = self.state.table.column_names
        after = tuple(values.get(n, before[i]) for i, n in enumerate(names))
        self._add("U", before, after)
        return self


def _absent(state: Replica, n: int) -> list[int]:
    """The ``n`` smallest positive ids not in ``state``."""
    out: list[int] = []
    k = 1
    while len(out) < n:
        if k not in state.rows:
            out.append(k)
        k += 1
    return out


def key_changed_twice(start: Replica, ts: int) -> list[RowChange]:
    """``UPDATE id=b WHERE id=a; UPDATE id=c WHERE id=b`` (a the smallest row, b and c free ids)."""
    a = min(start.rows)
    b, c = _absent(start, 2)
    return TxnBuilder(start, ts).update(a, id=b).update(b, id=c).rows


def insert_update_delete(start: Replica, ts: int) -> list[RowChange]:
    """``INSERT id=a; UPDATE id=a …; UPDATE id=b WHERE id=a; DELETE id=b``: no net change."""
    a, b = _absent(start, 2)
    t = TxnBuilder(start, ts).insert(a, *([None] * (len(start.table.columns) - 2)), "new")
    return t.update(a, v="changed").update(a, id=b).delete(b).rows


def swap(start: Replica, ts: int) -> list[RowChange]:
    """``UPDATE id=c WHERE id=a; UPDATE id=a WHERE id=b; UPDATE id=b WHERE id=c`` (a, b rows, c free)."""
    a, b = sorted(start.rows)[:2]
    (c,) = _absent(start, 1)
    return TxnBuilder(start, ts).update(a, id=c).update(b, id=a).update(c, id=b).rows


def interleaved(start: Replica, ts: int) -> list[RowChange]:
    """Many changes of one key (and the keys it moves through) between changes of other keys."""
    base = max(start.rows, default=0) + 10
    k10, k11, k12, k20 = base, base + 1, base + 2, base + 10
    t = TxnBuilder(start, ts)
    pad = [None] * (len(start.table.columns) - 2)
    t.insert(k10, *pad, "a").insert(k20, *pad, "x").update(k10, v="b").update(k10, id=k11)
    t.update(k20, v="y").insert(k10, *pad, "c").update(k11, id=k12).delete(k10).update(k20, id=k10)
    t.update(k12, id=k20).update(k20, v="d").delete(k10).insert(k10, *pad, "e").update(k10, v="f")
    return t.rows


def unique_key_swap(start: Replica, ts: int) -> list[RowChange]:
    """Rows 1 (u=100) and 2 (u=200) swap their unique key through NULL, then row 1 moves to a free id.

    Needs ``UK_TABLE`` with rows 1 and 2 as ``start_replica`` makes them.
    """
    (free,) = _absent(start, 1)
    return TxnBuilder(start, ts).update(1, u=None).update(2, u=100).update(1, u=200).update(1, id=free).rows


def random_txn(start: Replica, ts: int, rng: random.Random, n: int, keys: int = 8) -> list[RowChange]:
    """``n`` random valid statements over ids ``0..keys-1`` (and values of ``u`` in a small domain)."""
    t = TxnBuilder(start, ts)
    has_u = len(start.table.columns) == 3
    for i in range(n):
        present = sorted(t.state.rows)
        absent = [k for k in range(keys) if k not in t.state.rows]
        used = {r[1] for r in t.state.rows.values()} if has_u else set()
        free_u = [u for u in range(keys) if u not in used]
        choice = rng.random()
        if not present or (absent and choice < 0.25):
            u = [rng.choice([*free_u, None])] if has_u else []
            t.insert(rng.choice(absent), *u, f"i{i}")
        elif choice < 0.4:
            t.delete(rng.choice(present))
        elif choice < 0.7 and absent:
            t.update(rng.choice(present), id=rng.choice(absent))
        elif has_u and choice < 0.85:
            t.update(rng.choice(present), u=rng.choice([*free_u, None]))
        else:
            t.update(rng.choice(present), v=f"v{i}")
    return t.rows


SCENARIOS = {
    "key_changed_twice": key_changed_twice,
    "insert_update_delete": insert_update_delete,
    "swap": swap,
    "interleaved": interleaved,
}
"""Each takes the replica before the transaction (two rows at least) and a commit_ts, returns one transaction."""


def start_replica(table: TableInfo = PK_TABLE) -> Replica:
    """Rows 1 and 2 (for ``UK_TABLE`` with u = 100 and 200)."""
    if len(table.columns) == 3:
        return Replica(table, {1: (1, 100, "one"), 2: (2, 200, "two")})
    return Replica(table, {1: (1, "one"), 2: (2, "two")})


def final_state(start: Replica, txns: Sequence[Sequence[RowChange]]) -> dict[Any, Row]:
    """The upstream's rows after the transactions (binlog order)."""
    r = start.copy()
    for txn in txns:
        r.apply_all(txn)
    return r.rows


def grouped_by_kind(changes: Sequence[RowChange]) -> list[RowChange]:
    """A transaction applied DELETEs, then UPDATEs, then INSERTs (how TiCDC's MySQL sink batches one)."""
    rank = {"D": 0, "U": 1, "I": 2}
    return sorted(changes, key=lambda c: rank[c.op])
