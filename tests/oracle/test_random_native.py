"""The seeded random workload, checked against MariaDB's own replication.

An upstream and a native replica; one seed (``SPARKCDC_ORACLE_SEED`` overrides it) for about 20 s
on four connections; the replica must catch up without a replication error and hold every table
with the same rows.
"""

from __future__ import annotations

import os

import pytest

from tests.oracle.native import check_native, native_pair
from tests.oracle.random_workload import FEATURES, run_random
from tests.oracle.tablediff import base_tables

pytestmark = pytest.mark.integration

SEED = int(os.environ.get("SPARKCDC_ORACLE_SEED", "20261127"))


def test_random_workload_replicates_natively() -> None:
    with native_pair() as (upstream, replica):
        stats = run_random(upstream, seed=SEED, seconds=20, connections=4, database="rw_native")

        # The workload did what it claims: every form ran, nothing failed that an application
        # would not expect, and transactions both committed and rolled back.
        assert not stats.unexpected, stats.unexpected[:5]
        step_forms = FEATURES - {"ddl", "nontransactional"}
        missing = sorted(f for f in step_forms if stats.forms[f] == 0)
        assert not missing, f"forms that never ran: {missing} ({stats.summary()})"
        assert stats.committed >= 200 and stats.rolled_back >= 10, stats.summary()
        assert stats.ddls >= 3, stats.summary()
        assert any(k.startswith("ddl_") for k in stats.forms), stats.forms

        tables, rows = check_native(upstream, replica, ["rw_native"])
        assert tables == len(base_tables(upstream, "rw_native")) >= 5
        assert rows > 100, f"only {rows} rows compared"
        print(f"seed={SEED}: {stats.summary()}; compared {tables} tables, {rows} rows")
