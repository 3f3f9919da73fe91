"""CSV records rendered by the upstream (``codec.csv_sql``) equal ``CSVEncoder``'s bytes for the same rows.

Every column type the upstream renders, the capture tests' limit and edge values plus hostile
strings and doubles, under every ``[sink.csv]`` option the rendering supports: the records of a
chunk read by ``read_rendered_chunk`` must be byte for byte what the encoder writes for the rows
the ordinary snapshot read converts, and the rows it cannot render exactly (doubles whose Go form
has an exponent) must come back as raw rows instead.
"""

from __future__ import annotations

import itertools

import pytest

from sparkcdc.capture import snapshot as cs
from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.codec.csv import CSVEncoder
from sparkcdc.codec.csv_sql import ServerCSV, record_keys, split_records
from sparkcdc.config.replica import CSVConfig
from sparkcdc.model import RowChange, TableInfo
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.capture.test_types import COLUMNS, ROWS
from tests.integration.snapshot.test_ranges import _info

pytestmark = pytest.mark.integration

RENDERED = [(n, t) for n, t in COLUMNS if t != "FLOAT"]
"""Every column type of the capture tests the upstream renders (FLOAT is refused: see the test below)."""

HOSTILE_TEXT = [
    "'a,b|c''d\"e\"\"f'",
    "'line1\\r\\nline2\\nline3\\r'",
    "'\\\\N'",
    "''",
    "'tab\\there;semi'",
    "'ünï\"cödé\"'",
]
DOUBLES = [
    "0",
    "-0e0",
    "1e-4",
    "-1e-4",
    "9.999999999999999e-5",
    "999999.9999999999",
    "-999999.5",
    "1e6",
    "123456.789",
    "1e-300",
    "1.7976931348623157e308",
    "0.30000000000000004",
    "NULL",
]

OPTIONS = [
    dict(),
    dict(delimiter="|", quote="'", null="NULL"),
    dict(delimiter="|*|", include_commit_ts=True, output_old_value=True),
    dict(binary_encoding_method="hex", null=""),
    dict(delimiter=";", terminator="\n", include_commit_ts=True),
]


def _fill(db: LocalMariaDB, schema: str) -> TableInfo:
    cols = ", ".join(f"`{n}` {t}" for n, t in RENDERED)
    db.execute(f"CREATE TABLE `{schema}`.r (id BIGINT PRIMARY KEY, {cols})")
    rows = [[v for (n, t), v in zip(COLUMNS, row, strict=True) if t != "FLOAT"] for row in ROWS]
    names = [n for n, _ in RENDERED]
    extra = []
    for i, (text, dbl) in enumerate(itertools.zip_longest(HOSTILE_TEXT, DOUBLES, fillvalue="NULL")):
        r = list(rows[i % len(rows)])
        r[names.index("vc")] = text
        r[names.index("c")] = "NULL" if text == "NULL" else f"LEFT({text}, 10)"
        r[names.index("d")] = dbl
        extra.append(r)
    conn = db.connect(schema)
    try:
        with conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00', sql_mode = ''")
            for i, r in enumerate(rows + extra, start=1):
                cur.execute(f"INSERT INTO r VALUES ({i * 10 - 5}, {', '.join(r)})")
        conn.commit()
    finally:
        conn.close()
    return _info(db, schema, "r")


@pytest.mark.parametrize(
    "opts", OPTIONS, ids=lambda o: ",".join(f"{k}={v!r}" for k, v in o.items()) or "defaults"
)
def test_rendered_records_equal_the_encoders(
    mariadb: LocalMariaDB, fresh_db: str, opts: dict[str, object]
) -> None:
    info = _fill(mariadb, fresh_db)
    terminator = str(opts.pop("terminator", "\r\n"))
    enc = CSVEncoder(CSVConfig(**opts), terminator)  # type: ignore[arg-type]
    server, why = ServerCSV.from_encoder(enc)
    assert server is not None, why
    ts = 470656871563264000
    rec, why = server.table(info, ts, "UTC")
    assert rec is not None, why
    conn = UpstreamConfig.from_uri(mariadb.uri).connect(conv=cs.reader_conv())
    try:
        conv = cs.RowConverter(info)
        rows = {str(row[0]): row for row in map(conv.convert, cs.read_chunk(conn, info, None, None, 1000))}
        expected = {
            k: enc.encode_row(RowChange("I", info.schema, info.table, info.version, ts, None, row, 0), info)
            for k, row in rows.items()
        }
        limit = cs.records_session(conn)
        got: dict[str, bytes] = {}
        others: list[tuple[object, ...]] = []
        after = None
        # Chunks of 3 rows: bounds, the keyset step and the last short chunk are all exercised.
        while True:
            chunk = cs.read_rendered_chunk(conn, info, rec, after, None, 3, limit)
            records = split_records(chunk.records, server.quote.encode(), terminator.encode())
            keys = record_keys(records, server.decoder(), rec.key_field, rec.key_head)
            assert keys == record_keys(records, server.decoder(), rec.key_field)
            assert len(records) == chunk.rows
            assert b"".join(records) == chunk.records
            for k, r in zip(keys, records, strict=True):
                assert k not in got
                got[k] = r
            others += chunk.others
            after = chunk.upto
            if chunk.last:
                break
    finally:
        conn.close()
    # The doubles Go writes with an exponent, and only those, come back as rows.
    d = [c.name for c in info.columns].index("d")
    exponent = {k for k, row in rows.items() if row[d] and not 1e-4 <= abs(row[d]) < 1e6}
    assert len(exponent) >= 4
    assert {str(r[0]) for r in others} == exponent
    assert set(got) == set(expected) - exponent
    for k, data in got.items():
        assert data == expected[k], (k, data, expected[k])
    assert len(got) + len(others) == len(expected) == len(ROWS) + len(DOUBLES)


def test_a_float_column_or_a_composite_key_is_read_row_by_row(mariadb: LocalMariaDB, fresh_db: str) -> None:
    mariadb.execute(
        f"CREATE TABLE `{fresh_db}`.f (id INT PRIMARY KEY, f FLOAT)",
        f"CREATE TABLE `{fresh_db}`.ck (a INT, b INT, PRIMARY KEY (a, b))",
        f"CREATE TABLE `{fresh_db}`.vk (a VARCHAR(10) PRIMARY KEY)",
        f"CREATE TABLE `{fresh_db}`.ts (id INT PRIMARY KEY, t TIMESTAMP NULL)",
    )
    server, _ = ServerCSV.from_encoder(CSVEncoder())
    assert server is not None
    rec, why = server.table(_info(mariadb, fresh_db, "f"), 1, "UTC")
    assert rec is None and "'f' (float)" in why
    for t in ("ck", "vk"):
        rec, why = server.table(_info(mariadb, fresh_db, t), 1, "UTC")
        assert rec is None and "handle key" in why
    # the reading session runs in UTC: a TIMESTAMP's text is its rendering only there
    assert server.table(_info(mariadb, fresh_db, "ts"), 1, "+00:00")[0] is not None
    rec, why = server.table(_info(mariadb, fresh_db, "ts"), 1, "Asia/Shanghai")
    assert rec is None and "'t' (timestamp)" in why


def test_options_the_upstream_cannot_render_are_refused() -> None:
    for cfg, word in [
        (CSVConfig(quote=""), "quote"),
        (CSVConfig(output_handle_key=True), "output-handle-key"),
        (CSVConfig(output_field_header=True), "output-field-header"),
    ]:
        server, why = ServerCSV.from_encoder(CSVEncoder(cfg))
        assert server is None and word in why


def test_split_records_keeps_terminators_inside_quotes() -> None:
    blob = b'"I","t","s",1,"a\r\nb"\r\n"I","t","s",2,"""x""\r\n"\r\n"I","t","s",3,\\N\r\n'
    assert split_records(blob, b'"', b"\r\n") == [
        b'"I","t","s",1,"a\r\nb"\r\n',
        b'"I","t","s",2,"""x""\r\n"\r\n',
        b'"I","t","s",3,\\N\r\n',
    ]
    with pytest.raises(ValueError, match="no terminator"):
        split_records(b'"I","t","s",1,"open\r\n', b'"', b"\r\n")
