"""Keys changed several times in one transaction reach an HTTP receiver in binlog order.

The HTTP sink sends one canal-json message per row change, in the (commit_ts, seq) order it is
given, never splitting or sorting a transaction; requests end wherever they end (here every three
messages, so transactions straddle requests). The receiver's messages, replayed in the order they
were accepted into a strict replica, must give the upstream's rows.
"""

from __future__ import annotations

import json
import random

import pytest

from sparkcdc.codec.canal_json import canal_message_to_row_change, decode_canal_json
from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.model import RowChange, compose_ts
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.http import HTTPSink
from tests.unit.key_chains import PK_TABLE, SCENARIOS, random_txn, start_replica

from .conftest import Receiver

pytestmark = pytest.mark.integration

TS = compose_ts(1_700_000_000_000, 0)


def test_chains_arrive_in_binlog_order(receiver: Receiver) -> None:
    sink = create_sink(
        f"{receiver.url}/cdc/events?batch-size=3&enable-tidb-extension=true", ReplicaConfig(), "cf-chains"
    )
    assert isinstance(sink, HTTPSink)
    start = start_replica()
    upstream = start.copy()
    txns: list[list[RowChange]] = []
    for name in sorted(SCENARIOS):
        txns.append(SCENARIOS[name](upstream, TS + len(txns)))
        upstream.apply_all(txns[-1])
    rng = random.Random(11)
    for _ in range(20):
        txns.append(random_txn(upstream, TS + len(txns), rng, rng.randint(1, 8)))
        upstream.apply_all(txns[-1])
    sent = [row for txn in txns for row in txn]
    w = sink.open_writer(WriterContext("cf-chains", 1, 0))
    for row in sent:
        w.write(row, PK_TABLE)
    assert w.close()["messages"] == len(sent)

    got = [
        canal_message_to_row_change(decode_canal_json(json.dumps(m).encode()), PK_TABLE)
        for req in receiver.accepted
        for m in req.body
        if m.get("type") in ("INSERT", "UPDATE", "DELETE")
    ]
    assert [(r.op, r.commit_ts, r.before, r.after) for r in got] == [
        (r.op, r.commit_ts, r.before, r.after) for r in sent
    ]
    assert start.copy().apply_all(got).rows == upstream.rows
