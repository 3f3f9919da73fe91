"""The start check finds the sequences and system-versioned tables a changefeed's filter captures."""

from __future__ import annotations

import pytest

from sparkcdc.capture.upstream import UpstreamConfig, check_upstream, unsupported_tables
from sparkcdc.errors import ConfigError
from sparkcdc.filter import TableFilter
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture()
def shop(mariadb: LocalMariaDB, fresh_db: str) -> str:
    mariadb.execute(
        "CREATE SEQUENCE seq",
        # a sequence made as a table with the sequence columns and SEQUENCE=1
        "CREATE TABLE seq_too (next_not_cached_value BIGINT(21) NOT NULL, minimum_value BIGINT(21) NOT NULL, "
        "maximum_value BIGINT(21) NOT NULL, start_value BIGINT(21) NOT NULL, increment BIGINT(21) NOT NULL, "
        "cache_size BIGINT(21) UNSIGNED NOT NULL, cycle_option TINYINT(1) UNSIGNED NOT NULL, "
        "cycle_count BIGINT(21) NOT NULL) SEQUENCE=1",
        "CREATE TABLE hist (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING",
        "CREATE TABLE hist_col (id INT, v INT WITH SYSTEM VERSIONING)",
        "CREATE TABLE hist_like LIKE hist",
        "CREATE TABLE orders (id INT PRIMARY KEY)",
        database=fresh_db,
    )
    return fresh_db


def test_the_server_lists_them(mariadb: LocalMariaDB, shop: str) -> None:
    conn = UpstreamConfig.from_uri(mariadb.uri).connect()
    try:
        found = [t for t in unsupported_tables(conn) if t[0] == shop]
    finally:
        conn.close()
    assert found == [
        (shop, "hist", "system-versioned table"),
        (shop, "hist_col", "system-versioned table"),
        (shop, "hist_like", "system-versioned table"),
        (shop, "seq", "sequence"),
        (shop, "seq_too", "sequence"),
    ]


def test_a_filter_capturing_them_is_refused_by_name(mariadb: LocalMariaDB, shop: str) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    with pytest.raises(ConfigError) as info:
        check_upstream(up, captures=TableFilter.changefeed_filter([f"{shop}.*"]).match)
    msg = str(info.value)
    for kind, name in [
        ("sequence", "seq"),
        ("sequence", "seq_too"),
        ("system-versioned table", "hist"),
        ("system-versioned table", "hist_col"),
        ("system-versioned table", "hist_like"),
    ]:
        assert f"{kind} `{shop}`.`{name}`" in msg
        assert f"'!{shop}.{name}'" in msg
    assert "orders" not in msg
    assert f"on upstream 127.0.0.1:{mariadb.port}" in msg and "[filter] rules" in msg


def test_a_filter_leaving_them_out_passes(mariadb: LocalMariaDB, shop: str) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    rules = [f"{shop}.*", *(f"!{shop}.{t}" for t in ("seq", "seq_too", "hist", "hist_col", "hist_like"))]
    facts = check_upstream(up, captures=TableFilter.changefeed_filter(rules).match)
    assert facts["mariadb"] is True
    check_upstream(up, captures=TableFilter.changefeed_filter([f"{shop}.orders"]).match)
    check_upstream(up)  # no filter given: the table check is not asked for
