"""Canal-JSON (TiCDC flavour): encoder beside decoder.

Messages are byte-for-byte TiCDC's (``pkg/sink/codec/canal``): compact JSON in a
fixed key order, strings escaped like easyjson (``<`` ``>`` ``&`` → ``\\u003c``
``\\u003e`` ``\\u0026``, U+2028/2029, other control bytes ``\\u00xx`` in lower
case), every value a JSON string or ``null``. DML keys end ``…mysqlType, old,
data, _tidb``; DDL and WATERMARK keys end ``…data, old, _tidb``. ``mysqlType``
lists columns in table order (TiCDC's order is Go map order, i.e. random).

This package owns canal-json, in one module per reason to change:

- ``reference``: the definition of a row message in plain Python (string
  escaping, column values, a table's layout, the ``old``/``data`` objects);
- ``native``: the C extension ``codec._canaljson`` bound to a table's layout,
  the implementation production runs (None when it is not built);
- ``encoder``: ``CanalJsonEncoder`` (C rows, the reference only where the C
  code answers that it does not take a row, or when it is not built) and
  ``ReferenceCanalJsonEncoder`` (every row by the reference);
- ``messages``: DDL and TIDB_WATERMARK messages, claim-check object names;
- ``decoder``: messages back into fields, values and ``RowChange``.

Inside the package, ``reference`` imports no sibling; ``native`` and
``messages`` import ``reference``; ``encoder`` imports those three; ``decoder``
imports ``messages``. Outside it, the package imports what ``codec`` may
(``errors``, ``model``, ``config``, the other ``codec`` modules), never a sink,
the pipeline, the server or the cli. Every public name is importable from here.
"""

from sparkcdc.codec.canal_json.decoder import (
    CanalMessage,
    canal_message_to_row_change,
    canal_value_to_model,
    canal_value_to_python,
    decode_canal_json,
)
from sparkcdc.codec.canal_json.encoder import CanalJsonEncoder, ReferenceCanalJsonEncoder
from sparkcdc.codec.canal_json.messages import TIDB_WATERMARK, canal_ddl_type, new_claim_check_file_name
from sparkcdc.codec.canal_json.reference import Formatter, json_str

__all__ = [
    "TIDB_WATERMARK",
    "CanalJsonEncoder",
    "CanalMessage",
    "Formatter",
    "ReferenceCanalJsonEncoder",
    "canal_ddl_type",
    "canal_message_to_row_change",
    "canal_value_to_model",
    "canal_value_to_python",
    "decode_canal_json",
    "json_str",
    "new_claim_check_file_name",
]
