"""The C CSV record renderer against the Python reference, byte for byte.

Outside ``test_csv_oracle`` because that module runs every test once with each renderer; this one
compares the two itself.
"""

from __future__ import annotations

import itertools
import random

import pytest

from sparkcdc.codec import csv as csv_module
from sparkcdc.codec.csv import CSVEncoder
from sparkcdc.config.replica import CSVConfig
from tests.unit.codec.test_csv_oracle import (
    DELIMITER_QUOTE,
    FLAGS,
    NULLS,
    TABLES,
    TERMINATORS,
    _fixed_rows,
    _pool,
)


def test_the_c_renderer_is_used_and_equals_the_reference() -> None:
    """Randomized rows of every table under every option combination: C bytes == reference bytes."""
    assert csv_module.NATIVE is not None, "the C extension sparkcdc.codec._canaljson is not built"
    rng = random.Random(77)
    for k, ((ts, old, hk, _header), binary) in enumerate(itertools.product(FLAGS, ("base64", "hex"))):
        delimiter, quote = DELIMITER_QUOTE[k % len(DELIMITER_QUOTE)]
        csv = CSVConfig(
            delimiter=delimiter,
            quote=quote,
            null=NULLS[k % len(NULLS)],
            include_commit_ts=ts,
            binary_encoding_method=binary,
            output_old_value=old,
            output_handle_key=hk,
        )
        term = TERMINATORS[k % len(TERMINATORS)]
        fast = CSVEncoder(csv, term)
        for table in TABLES:
            rows = [*_fixed_rows(table), *rng.sample(_pool(table), 40)]
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(csv_module, "NATIVE", None)
                ref = CSVEncoder(csv, term)
                want = []
                for row in rows:
                    try:
                        want.append(ref.encode_row(row, table))
                    except Exception as exc:
                        want.append(exc)
            for row, w in zip(rows, want, strict=True):
                if isinstance(w, Exception):
                    with pytest.raises(type(w)):
                        fast.encode_row(row, table)
                else:
                    assert fast.encode_row(row, table) == w, (row, csv, term)
