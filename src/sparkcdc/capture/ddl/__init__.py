"""A MySQL/MariaDB DDL parser for the schema tracker.

It reads the statements a binlog QUERY event carries and the text ``SHOW CREATE
TABLE`` prints, and turns them into small statement objects (``CreateTable``,
``AlterTable`` ...). Column definitions become ``ColumnInfo`` with every type fact
normalised the way MariaDB 10.11 stores it (default display widths, charset
inheritance, binary charsets, ``DEFAULT`` values as the server prints them), so a
tracked table equals the table the server reports.

The project has its own parser rather than a general SQL parser (sqlglot keeps
display widths, ``BINARY`` attributes, the JSON check and charset introducers
too) because its output is checked against the binlog: it must produce exactly
the normalised column types the binlog's table maps are checked against, and it
must fail loudly on anything it does not understand that changes a table, never
guess. So this is a small hand-written tokenizer and recursive-descent parser for
exactly the DDL subset a schema tracker needs:

* ``lexer``: the tokenizer and the token cursor the parsers move with;
* ``statements``: the statement objects;
* ``definitions``: column and index definitions, DEFAULT expressions;
* ``parser``: whole statements, ``parse_statement``;
* ``columns``: column-type normalisation (a column definition → ``ColumnInfo``);
* ``charsets``: the charset and collation tables;
* ``literals``: a statement's string literals whose bytes depend on the session's connection
  charset, rewritten as hex literals before anything reads the statement.
"""

from sparkcdc.capture.ddl.charsets import (
    CHARSETS,
    SERVER_CHARSET,
    SERVER_COLLATION,
    charset_of_collation,
    default_collation,
    mbmaxlen,
    normalize_charset,
    normalize_collation,
    resolve_charset,
)
from sparkcdc.capture.ddl.columns import (
    CHARSET_TYPES,
    TEXT_MAX_BYTES,
    build_column,
    format_real,
    normalize_default,
    text_type_for_bytes,
    with_default,
)
from sparkcdc.capture.ddl.lexer import Token, TokKind, clip_sql, quote_ident, tokenize
from sparkcdc.capture.ddl.parser import first_word, parse_statement
from sparkcdc.capture.ddl.statements import (
    AlterDatabase,
    AlterSpec,
    AlterTable,
    ColumnDef,
    CreateDatabase,
    CreateIndex,
    CreateTable,
    DefaultValue,
    DropDatabase,
    DropIndex,
    DropTable,
    Ignored,
    IndexDef,
    PeriodDef,
    RenameTable,
    Statement,
    TableName,
    TableOptions,
    TruncateTable,
    UnsupportedTable,
    ViewStmt,
)

__all__ = [
    "CHARSETS",
    "CHARSET_TYPES",
    "SERVER_CHARSET",
    "SERVER_COLLATION",
    "TEXT_MAX_BYTES",
    "AlterDatabase",
    "AlterSpec",
    "AlterTable",
    "ColumnDef",
    "CreateDatabase",
    "CreateIndex",
    "CreateTable",
    "DefaultValue",
    "DropDatabase",
    "DropIndex",
    "DropTable",
    "Ignored",
    "IndexDef",
    "PeriodDef",
    "RenameTable",
    "Statement",
    "TableName",
    "TableOptions",
    "TokKind",
    "Token",
    "TruncateTable",
    "UnsupportedTable",
    "ViewStmt",
    "build_column",
    "charset_of_collation",
    "clip_sql",
    "default_collation",
    "first_word",
    "format_real",
    "mbmaxlen",
    "normalize_charset",
    "normalize_collation",
    "normalize_default",
    "parse_statement",
    "quote_ident",
    "resolve_charset",
    "text_type_for_bytes",
    "tokenize",
    "with_default",
]
