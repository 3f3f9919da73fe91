"""The MySQL 8 work on the paths it shares with MariaDB, against the local MariaDB.

The setup checks now read SHOW GLOBAL VARIABLES (MySQL-only variables are simply absent on
MariaDB), the binlog status statement is chosen by version, and a MySQL GTID set given to a
MariaDB upstream is refused with the MariaDB shape.
"""

from __future__ import annotations

import pytest

from sparkcdc.capture.start import offset_for_gtid
from sparkcdc.capture.upstream import UpstreamConfig, check_upstream, master_status, server_version
from sparkcdc.errors import UpstreamSetupError
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = pytest.mark.integration


def test_mariadb_passes_the_checks_and_reports_its_version(mariadb: LocalMariaDB) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    facts = check_upstream(up)
    assert facts["mariadb"] is True and facts["row_metadata"] == "FULL"
    assert facts["gtid_mode"] is None and facts["transaction_compression"] is None
    conn = up.connect()
    try:
        ver = server_version(conn)
        assert ver.mariadb and ver.version >= (10, 5, 0) and ver.binlog_status_sql == "SHOW MASTER STATUS"
        file, pos = master_status(conn)
        assert file and pos >= 4
    finally:
        conn.close()


def test_a_mysql_gtid_set_on_mariadb_is_refused(mariadb: LocalMariaDB) -> None:
    up = UpstreamConfig.from_uri(mariadb.uri)
    with pytest.raises(UpstreamSetupError, match=r"\(MariaDB .*\) has no MySQL GTIDs.*DOMAIN-SERVER-SEQ"):
        offset_for_gtid(up, "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5")
