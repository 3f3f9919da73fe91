"""canal-json messages that carry no row: DDL and TIDB_WATERMARK, and claim-check object names."""

from __future__ import annotations

import uuid

from sparkcdc.codec.canal_json.reference import json_str
from sparkcdc.model.events import DDLEvent, DDLType
from sparkcdc.model.ts import physical_ms

TIDB_WATERMARK = "TIDB_WATERMARK"
"""The ``type`` of a watermark (resolved ts) message."""

_DDL_TYPE: dict[DDLType, str] = {
    DDLType.CREATE_TABLE: "CREATE",
    DDLType.RENAME_TABLE: "RENAME",
    DDLType.ADD_INDEX: "CINDEX",
    DDLType.DROP_INDEX: "DINDEX",
    DDLType.ALTER_TABLE: "ALTER",
    DDLType.DROP_TABLE: "ERASE",
    DDLType.TRUNCATE_TABLE: "TRUNCATE",
}


def canal_ddl_type(ddl_type: DDLType) -> str:
    """The canal ``type`` of a DDL (schema, view and anything unlisted → ``QUERY``)."""
    return _DDL_TYPE.get(ddl_type, "QUERY")


def ddl_message(ddl: DDLEvent, now_ms: int, enable_tidb_extension: bool) -> bytes:
    """One canal-json DDL message (``now_ms`` is its ``ts``)."""
    parts = [
        '{"id":0,"database":',
        json_str(ddl.schema),
        ',"table":',
        json_str(ddl.table),
        ',"pkNames":null,"isDdl":true,"type":"',
        canal_ddl_type(ddl.ddl_type),
        '","es":',
        str(physical_ms(ddl.commit_ts)),
        ',"ts":',
        str(now_ms),
        ',"sql":',
        json_str(ddl.query),
        ',"sqlType":null,"mysqlType":null,"data":null,"old":null',
    ]
    if enable_tidb_extension:
        # commitTs is `omitempty` in TiCDC's tidbExtension struct
        parts.append(',"_tidb":{' + (f'"commitTs":{ddl.commit_ts}' if ddl.commit_ts else "") + "}")
    parts.append("}")
    return "".join(parts).encode("utf-8")


def watermark_message(ts: int, now_ms: int) -> bytes:
    """A TIDB_WATERMARK message for resolved ts ``ts`` (sent only with the TiDB extension)."""
    return (
        '{"id":0,"database":"","table":"","pkNames":null,"isDdl":false,"type":"TIDB_WATERMARK","es":'
        f'{physical_ms(ts)},"ts":{now_ms},'
        '"sql":"","sqlType":null,"mysqlType":null,"data":null,"old":null,"_tidb":{'
        + (f'"watermarkTs":{ts}' if ts else "")
        + "}}"
    ).encode("utf-8")


def new_claim_check_file_name() -> str:
    """A fresh claim-check object name (``<uuid4>.json``), as TiCDC names them."""
    return f"{uuid.uuid4()}.json"
