"""Every collation id the running MariaDB has maps to its charset in ``capture/charsets.py``.

``information_schema.COLLATIONS`` leaves out the UCA 14.0 collations (ids from 2048, MariaDB
10.10+), which ``COLLATION_CHARACTER_SET_APPLICABILITY`` lists; a column in one of them
(``utf8mb4_uca1400_ai_ci``, the default of newer MariaDB servers) failed capture as an unknown id
until the table held them (found by ``main/ctype_utf8_uca`` through the oracle paths).
"""

from __future__ import annotations

import pytest

from sparkcdc.capture.charsets import charset_of
from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = pytest.mark.integration


def test_every_collation_of_the_server_has_its_charset(mariadb: LocalMariaDB) -> None:
    rows = mariadb.query(
        "SELECT ID, FULL_COLLATION_NAME, CHARACTER_SET_NAME "
        "FROM information_schema.COLLATION_CHARACTER_SET_APPLICABILITY"
    )
    assert len(rows) > 1000  # the UCA 14.0 collations are in the list
    wrong = [(i, name, cs, charset_of(int(i))) for i, name, cs in rows if charset_of(int(i)) != cs]
    assert not wrong, wrong[:10]
