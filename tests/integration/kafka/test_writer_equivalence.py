"""The Kafka writer's fast path sends exactly what the plain per-row rules say, to the right partitions.

For each dispatcher kind, randomized transactions (inserts, updates, key-changing
updates, deletes, two tables) go through ``route()`` + ``open_writer().write/close``
(or ``write_rows`` with a transaction's consecutive rows of one table) on a real broker. The expected partitions' contents are computed row by row with
the public per-row helpers (``expand``, ``destination``) and the reference
canal-json encoder, applying spec §7's split-and-reorder rule per transaction.
"""

from __future__ import annotations

import random
import re
from decimal import Decimal
from typing import Any

import pytest

from sparkcdc.codec.canal_json import ReferenceCanalJsonEncoder
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import ColumnInfo, IndexInfo, RowChange, TableInfo, compose_ts
from sparkcdc.services.tansu import LocalTansu
from sparkcdc.sink import create_sink
from sparkcdc.sink.kafka import KafkaSink
from sparkcdc.sink.kafka.writer import writer_group

from .conftest import consume_all, run_batch

pytestmark = pytest.mark.integration


ITEMS = TableInfo(
    schema="shop",
    table="items",
    columns=(
        ColumnInfo("id", "int", nullable=False),
        ColumnInfo("sku", "varchar", length=16, charset="utf8mb4", nullable=False),
        ColumnInfo("qty", "int", unsigned=True),
        ColumnInfo("price", "decimal", precision=10, scale=2),
        ColumnInfo("note", "text", charset="utf8mb4"),
        ColumnInfo("raw", "varbinary", length=8),
    ),
    indexes=(
        IndexInfo("PRIMARY", ("id",), unique=True, primary=True),
        IndexInfo("uk_sku", ("sku",), unique=True),
    ),
    version=1,
)
LOGS = TableInfo(
    schema="shop",
    table="logs",
    columns=(ColumnInfo("id", "bigint", nullable=False), ColumnInfo("msg", "varchar", length=32)),
    indexes=(IndexInfo("PRIMARY", ("id",), unique=True, primary=True),),
    version=1,
)
_TS = re.compile(rb',"ts":\d+,')


def _item(rnd: random.Random, i: int) -> tuple[Any, ...]:
    return (
        i,
        f"sku-{i}",
        rnd.choice((None, 0, 4294967295, rnd.randrange(1000))),
        Decimal(rnd.randrange(100000)).scaleb(-2),
        rnd.choice((None, "plain", 'with "quotes" <tag>', "ünï\n")),
        bytes(rnd.randrange(256) for _ in range(rnd.randrange(9))),
    )


def workload(seed: int, txns: int = 120) -> list[tuple[RowChange, TableInfo]]:
    """Transactions mixing both tables; some UPDATEs change the primary or unique key.

    A key changes at most once per transaction here: that is the domain of the per-row rules
    (DELETE < UPDATE < INSERT). Several changes of one key in a transaction are collapsed per key
    first, which ``tests/unit/kafka/test_key_chains.py`` checks by replaying the topic.
    """
    rnd = random.Random(seed)
    live: dict[int, tuple[Any, ...]] = {}
    next_id = 1
    out: list[tuple[RowChange, TableInfo]] = []
    for t in range(txns):
        ts = compose_ts(1_700_000_000_000 + t, 0)
        touched: set[int] = set()
        for seq in range(rnd.randrange(1, 12)):
            r = rnd.random()
            free = sorted(k for k in live if k not in touched)
            if r < 0.15:
                out.append(
                    (RowChange("I", "shop", "logs", 1, ts, None, (t * 100 + seq, f"m{seq}"), seq), LOGS)
                )
            elif r < 0.5 or len(live) < 3 or not free:
                live[next_id] = row = _item(rnd, next_id)
                touched.add(next_id)
                out.append((RowChange("I", "shop", "items", 1, ts, None, row, seq), ITEMS))
                next_id += 1
            elif r < 0.85:
                key = rnd.choice(free)
                touched.add(key)
                old = live[key]
                new = list(old)
                new[2] = rnd.randrange(5000)
                if rnd.random() < 0.25:  # key change: split into DELETE + INSERT
                    live.pop(key)
                    new[0] = next_id
                    touched.add(next_id)
                    next_id += 1
                elif rnd.random() < 0.2:  # unique-key change only
                    new[1] = f"sku-x{next_id}"
                    next_id += 1
                live[new[0]] = tuple(new)
                out.append((RowChange("U", "shop", "items", 1, ts, old, tuple(new), seq), ITEMS))
            else:
                key = rnd.choice(free)
                touched.add(key)
                out.append((RowChange("D", "shop", "items", 1, ts, live.pop(key), None, seq), ITEMS))
    return out


def expected_partitions(
    sink: KafkaSink, rows: list[tuple[RowChange, TableInfo]], extension: bool
) -> dict[int, list[bytes]]:
    """Per partition, the values the per-row rules produce (ts masked)."""
    ref = ReferenceCanalJsonEncoder(sink.config, extension)
    order = {"D": 0, "U": 1, "I": 2}
    out: dict[int, list[bytes]] = {}
    by_txn: dict[int, list[tuple[RowChange, TableInfo]]] = {}
    for row, table in rows:
        by_txn.setdefault(row.commit_ts, []).append((row, table))
    for ts in sorted(by_txn):
        parts = [(p, t) for row, t in by_txn[ts] for p in sink.expand(row, t)]
        if len(parts) > len(by_txn[ts]):
            parts.sort(key=lambda pt: order[pt[0].op])
        for part, table in parts:
            topic, partition = sink.destination(part, table)
            assert topic == sink.options.topic
            out.setdefault(partition, []).append(_TS.sub(b',"ts":0,', ref.encode_row(part, table)))
    return out


@pytest.mark.parametrize(
    ("dispatch", "extension"),
    [
        ("table", False),
        ("ts", True),
        ("index-value", True),
        ("columns", False),
    ],
)
@pytest.mark.parametrize("by_event", [False, True], ids=["write", "write_rows"])
def test_writer_sends_what_the_per_row_rules_say(
    tansu: LocalTansu, topic: str, dispatch: str, extension: bool, by_event: bool
) -> None:
    rule = f'partition = "{dispatch}"' + (', columns = ["sku"]' if dispatch == "columns" else "")
    toml = f'[sink]\ndispatchers = [{{matcher = ["shop.items"], {rule}}}]\n'
    query = f"protocol=canal-json&partition-num=3&enable-tidb-extension={str(extension).lower()}"
    sink = create_sink(tansu.sink_uri(topic, query), ReplicaConfig.from_toml(toml), "cf")
    assert isinstance(sink, KafkaSink)
    sink.check()
    rows = workload(seed=len(dispatch))
    # route() agrees with the per-row rules: the writer group of the (first part of the) row's partition
    for row, table in rows:
        t, p = sink.destination(sink.expand(row, table)[0], table)
        assert sink.route(row, table) == writer_group(t, p, sink.num_writers)
    messages = run_batch(sink, rows, 1, rows[-1][0].commit_ts, by_event=by_event)
    sent = sum(m["messages"] for m in messages)
    want = expected_partitions(sink, rows, extension)
    assert sent == sum(len(v) for v in want.values()) > len(rows)  # some UPDATEs were split
    got = consume_all(tansu.bootstrap, topic, 3)
    # watermarks (extension on) are broadcast at commit: compare the row messages only
    got_rows = {
        p: [_TS.sub(b',"ts":0,', m.value()) for m in msgs if b'"TIDB_WATERMARK"' not in m.value()]
        for p, msgs in got.items()
    }
    assert {p: v for p, v in got_rows.items() if v} == want
