import pytest

from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = pytest.mark.integration


def test_local_mariadb_has_a_row_binlog(mariadb: LocalMariaDB) -> None:
    rows = mariadb.query(
        "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata, @@server_id"
    )
    assert rows == [(1, "ROW", "FULL", "FULL", 1)]
