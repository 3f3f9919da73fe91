"""Keys changed several times in one transaction: the applier's statements keep each key's binlog order.

``StatementPlanner`` batches consecutive INSERT/REPLACE rows and DELETE keys of a table and may run
a DELETE before pending writes of *other* keys; it must never move a change of a key across
another change of the same key. The statements are run here by a small interpreter of the
planner's statement forms over ``Replica`` (which refuses duplicate keys and missing rows as the
database would), in plain mode, in safe mode and in safe mode twice (a replay must be idempotent).
The same transactions against a real MariaDB are in ``tests/e2e/test_key_chains.py``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

import pytest

from sparkcdc.model import RowChange, TableInfo, compose_ts
from sparkcdc.sink.mysql.applier import MySQLApplier
from sparkcdc.sink.mysql.connection import ConnParams
from sparkcdc.sink.mysql.statements import Statement
from tests.unit.key_chains import (
    PK_TABLE,
    SCENARIOS,
    UK_TABLE,
    Replica,
    ReplicaError,
    final_state,
    random_txn,
    start_replica,
    unique_key_swap,
)

TS = compose_ts(1_700_000_000_000, 0)
_KEY_IN = re.compile(r"^DELETE FROM \S+ WHERE `id` IN \(")


def run(replica: Replica, statements: Sequence[Statement]) -> None:
    """Execute the planner's statements (INSERT/REPLACE … VALUES, DELETE … IN/LIMIT 1, UPDATE … LIMIT 1)."""
    width = len(replica.table.columns)
    for st in statements:
        sql, args = st.sql, st.args
        if sql.startswith(("INSERT", "REPLACE")):
            for i in range(0, len(args), width):
                row = tuple(args[i : i + width])
                if sql.startswith("REPLACE"):
                    _replace(replica, row)
                else:
                    replica.apply(RowChange("I", "s", "t", 1, 0, None, row))
        elif _KEY_IN.match(sql):
            for key in args:
                replica.rows.pop(key, None)
        elif sql.startswith("DELETE") and sql.endswith("LIMIT 1"):
            replica.rows.pop(args[0], None)
        elif sql.startswith("UPDATE"):
            after, key = tuple(args[:width]), args[width]
            if key in replica.rows:
                replica.apply(RowChange("U", "s", "t", 1, 0, replica.rows[key], after))
        else:
            raise AssertionError(f"statement form the interpreter does not know: {sql}")


def _replace(replica: Replica, row: tuple[Any, ...]) -> None:
    """MySQL's REPLACE: delete every row the new one collides with (primary or unique key), then insert."""
    replica.rows.pop(row[0], None)
    if len(row) == 3 and row[1] is not None:
        for k in [k for k, r in replica.rows.items() if r[1] == row[1]]:
            del replica.rows[k]
    replica.rows[row[0]] = row


def statements(table: TableInfo, txn: Sequence[RowChange], safe: bool, batch: bool = True) -> list[Statement]:
    applier = MySQLApplier(ConnParams(host="127.0.0.1", port=1), safe_mode=safe, batch_dml=batch)
    return applier.statements([(r, table) for r in txn], replicating_ts=None)


@pytest.mark.parametrize("batch", [True, False], ids=["batched", "row-by-row"])
@pytest.mark.parametrize("safe", [False, True], ids=["plain", "safe"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("table", [PK_TABLE, UK_TABLE], ids=["pk", "pk+uk"])
def test_scenario_statements_replay_to_the_upstream_rows(
    name: str, table: TableInfo, safe: bool, batch: bool
) -> None:
    start = start_replica(table)
    txn = SCENARIOS[name](start, TS)
    want = final_state(start, [txn])
    stmts = statements(table, txn, safe, batch)
    replica = start.copy()
    run(replica, stmts)
    assert replica.rows == want
    if safe:
        run(replica, stmts)  # a replay after a restart
        assert replica.rows == want


def test_key_changed_twice_keeps_the_delete_of_the_middle_key_after_its_insert() -> None:
    start = start_replica()
    stmts = statements(PK_TABLE, SCENARIOS["key_changed_twice"](start, TS), safe=True)
    # DELETE 1, REPLACE 3, then DELETE 3 (not before the REPLACE of 3), REPLACE 4
    assert [(st.sql.split()[0], st.args) for st in stmts] == [
        ("DELETE", [1]),
        ("REPLACE", [3, "one"]),
        ("DELETE", [3]),
        ("REPLACE", [4, "one"]),
    ]


@pytest.mark.parametrize("safe", [False, True], ids=["plain", "safe"])
def test_unique_key_swap_replays(safe: bool) -> None:
    start = start_replica(UK_TABLE)
    txn = unique_key_swap(start, TS)
    replica = start.copy()
    run(replica, statements(UK_TABLE, txn, safe))
    assert replica.rows == final_state(start, [txn])


@pytest.mark.parametrize("safe", [False, True], ids=["plain", "safe"])
@pytest.mark.parametrize("table", [PK_TABLE, UK_TABLE], ids=["pk", "pk+uk"])
def test_random_transactions_replay(table: TableInfo, safe: bool) -> None:
    rng = random.Random(99)
    replica = start_replica(table)
    for i in range(300):
        txn = random_txn(replica, TS + i, rng, rng.randint(1, 15))
        want = final_state(replica, [txn])
        try:
            run(replica, statements(table, txn, safe))
        except ReplicaError as exc:  # pragma: no cover - the failure message names the transaction
            raise AssertionError(f"transaction {i} {txn}: {exc}") from exc
        assert replica.rows == want, f"transaction {i}: {txn}"
