"""MySQLSink against a real downstream: check(), base64 passwords, writers, DDL on the driver."""

from __future__ import annotations

import base64
import pickle
from urllib.parse import quote

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import SinkError, SinkUnavailable
from sparkcdc.model import ColumnInfo, DDLEvent, DDLType, IndexInfo, RowChange, TableInfo
from sparkcdc.services.common import free_port
from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.sink import create_sink
from sparkcdc.sink.base import WriterContext
from sparkcdc.sink.mysql import MySQLSink

pytestmark = pytest.mark.integration


def _uri(db: LocalMariaDB, user: str = "root", password: str = "", query: str = "") -> str:
    return f"mysql://{user}:{quote(password, safe='')}@127.0.0.1:{db.port}/{query}"


def test_check_reports_wrong_password_and_unreachable_host(downstream: LocalMariaDB) -> None:
    create_sink(_uri(downstream), ReplicaConfig()).check()
    with pytest.raises(SinkError, match="access denied") as ei:
        create_sink(_uri(downstream, password="nope-secret"), ReplicaConfig()).check()
    assert "nope-secret" not in str(ei.value)
    port = free_port()
    with pytest.raises(SinkUnavailable, match=f"127.0.0.1:{port}.*host and port"):
        create_sink(f"mysql://root@127.0.0.1:{port}/?timeout=2s", ReplicaConfig()).check()


def test_base64_password_is_decoded_like_ticdc(downstream: LocalMariaDB) -> None:
    secret = "p@ss:w/rd+1"
    downstream.execute(
        "DROP USER IF EXISTS 'b64user'@'%'",
        f"CREATE USER 'b64user'@'%' IDENTIFIED BY '{secret}'",
        "GRANT ALL ON *.* TO 'b64user'@'%'",
    )
    encoded = base64.b64encode(secret.encode()).decode()
    sink = create_sink(_uri(downstream, "b64user", encoded), ReplicaConfig())
    assert isinstance(sink, MySQLSink)
    sink.check()
    assert sink.settings.conn.password == secret
    # Plain passwords keep working too.
    create_sink(_uri(downstream, "b64user", secret), ReplicaConfig()).check()


def test_writers_apply_rows_and_driver_applies_ddl(downstream: LocalMariaDB, down_db: str) -> None:
    sink = create_sink(_uri(downstream, query="?worker-count=2&max-txn-row=16"), ReplicaConfig(), "cf")
    assert isinstance(sink, MySQLSink) and sink.num_writers == 2
    sink.check()
    ddl_ts = 10 << 18
    sink.apply_ddl(
        DDLEvent(
            f"CREATE TABLE `{down_db}`.orders (id INT PRIMARY KEY, note VARCHAR(20))",
            down_db,
            "orders",
            DDLType.CREATE_TABLE,
            ddl_ts,
            ddl_ts,
        )
    )
    sink.apply_ddl(
        DDLEvent(
            "CREATE TABLE items (id INT PRIMARY KEY, qty INT)",
            down_db,
            "items",
            DDLType.CREATE_TABLE,
            ddl_ts,
            ddl_ts,
        )
    )
    orders = TableInfo(
        down_db,
        "orders",
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("note", "varchar")),
        (IndexInfo("PRIMARY", ("id",), True, True),),
        version=ddl_ts,
    )
    items = TableInfo(
        down_db,
        "items",
        (ColumnInfo("id", "int", nullable=False), ColumnInfo("qty", "int")),
        (IndexInfo("PRIMARY", ("id",), True, True),),
        version=ddl_ts,
    )
    sink.replicating_ts = 0  # a fresh changefeed: nothing to replay
    # The sink travels to executors pickled.
    exec_sink = pickle.loads(pickle.dumps(sink))
    rows: list[tuple[RowChange, TableInfo]] = []
    ts = ddl_ts
    for i in range(3000):
        ts += 1
        t = orders if i % 2 else items
        after = (i, f"n{i}") if t is orders else (i, i)
        rows.append((RowChange("I", down_db, t.table, ddl_ts, ts, None, after), t))
    ts += 1
    rows.append((RowChange("U", down_db, "orders", ddl_ts, ts, (1, "n1"), (1, "changed")), orders))
    rows.append((RowChange("D", down_db, "items", ddl_ts, ts, (0, 0), None), items))
    groups: dict[int, list[tuple[RowChange, TableInfo]]] = {}
    for r, t in rows:
        groups.setdefault(exec_sink.route(r, t), []).append((r, t))
    messages = []
    for wid, grp in groups.items():
        w = exec_sink.open_writer(WriterContext("cf", batch_id=1, writer_id=wid))
        for r, t in grp:
            w.write(r, t)
        messages.append(w.close())
    sink.commit(1, messages, ts)
    assert sum(m["rows"] for m in messages) == len(rows)
    assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.orders") == [(1500,)]
    assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.items") == [(1499,)]
    assert downstream.query(f"SELECT note FROM `{down_db}`.orders WHERE id = 1") == [("changed",)]
    # A retried batch (at-least-once delivery) is skipped row for row thanks to the progress table...
    for wid, grp in groups.items():
        w = exec_sink.open_writer(WriterContext("cf", batch_id=1, writer_id=wid, task_attempt=1))
        for r, t in grp:
            w.write(r, t)
        m = w.close()
        assert (m["rows"], m["rows_skipped"]) == (0, len(grp))
    # ...and without it, replayed in safe mode after the duplicate key.
    no_progress = create_sink(
        _uri(downstream, query="?worker-count=2&progress-table=false"), ReplicaConfig(), "cf"
    )
    no_progress.replicating_ts = 0  # type: ignore[attr-defined]
    for wid, grp in groups.items():
        w = no_progress.open_writer(WriterContext("cf", batch_id=1, writer_id=wid, task_attempt=2))
        for r, t in grp:
            w.write(r, t)
        assert w.close()["safe_retries"] >= 1
    assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.orders") == [(1500,)]
    assert downstream.query(f"SELECT COUNT(*) FROM `{down_db}`.items") == [(1499,)]
    # The same DDL again after a restart is tolerated.
    sink.apply_ddl(
        DDLEvent(
            "CREATE TABLE items (id INT PRIMARY KEY, qty INT)",
            down_db,
            "items",
            DDLType.CREATE_TABLE,
            ddl_ts,
            ddl_ts,
        )
    )
    sink.close()
