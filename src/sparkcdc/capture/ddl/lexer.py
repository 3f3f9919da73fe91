"""The DDL tokenizer, and a cursor over its tokens that the parsers move with.

Comments are dropped, MariaDB executable comments ``/*!...*/`` are read as
code, strings and quoted names are unescaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sparkcdc.errors import SchemaError

TokKind = Literal["id", "qid", "str", "num", "hex", "bin", "op"]


@dataclass(frozen=True, slots=True)
class Token:
    """One lexical token; ``value`` is the unescaped text (strings, quoted names)."""

    kind: TokKind
    value: str
    pos: int

    @property
    def upper(self) -> str:
        """The keyword spelling of an unquoted identifier ("" for anything else)."""
        return self.value.upper() if self.kind == "id" else ""


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "Z": "\x1a"}
_OPS3 = ("<=>", "->>")
_OPS2 = ("<=", ">=", "<>", "!=", "||", "&&", ":=", "->", "<<", ">>")


def _is_ident_char(c: str) -> bool:
    return c.isalnum() or c in "_$" or ord(c) >= 0x80


def tokenize(sql: str) -> list[Token]:
    """Split SQL into tokens: comments dropped, MariaDB executable comments ``/*!...*/`` kept."""
    toks: list[Token] = []
    i, n = 0, len(sql)
    exec_depth = 0
    while i < n:
        c = sql[i]
        if c.isspace():
            i += 1
            continue
        if c == "#" or (sql.startswith("--", i) and (i + 2 >= n or sql[i + 2] in " \t\r\n")):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if sql.startswith("/*", i):
            if sql.startswith("/*!", i) or sql.startswith("/*M!", i):
                j = i + (3 if sql[i + 2] == "!" else 4)
                while j < n and sql[j].isdigit():
                    j += 1
                exec_depth += 1
                i = j
                continue
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if exec_depth and sql.startswith("*/", i):
            exec_depth -= 1
            i += 2
            continue
        if c in "'\"":
            val, i2 = _read_string(sql, i)
            toks.append(Token("str", val, i))
            i = i2
            continue
        if c == "`":
            val, i2 = _read_quoted_ident(sql, i)
            toks.append(Token("qid", val, i))
            i = i2
            continue
        if c in "xXbB" and i + 1 < n and sql[i + 1] == "'":
            j = sql.find("'", i + 2)
            if j < 0:
                raise SchemaError(f"unterminated literal at offset {i} in {clip_sql(sql)!r}")
            toks.append(Token("hex" if c in "xX" else "bin", sql[i + 2 : j], i))
            i = j + 1
            continue
        if c in "nN" and i + 1 < n and sql[i + 1] == "'":
            val, i2 = _read_string(sql, i + 1)
            toks.append(Token("str", val, i))
            i = i2
            continue
        if c == "0" and i + 2 < n and sql[i + 1] in "xb" and sql[i + 2] in "0123456789abcdefABCDEF":
            lit = _read_0x_literal(sql, i)
            if lit is not None:
                toks.append(lit[0])
                i = lit[1]
                continue
        prev_is_name = bool(toks) and (toks[-1].kind in ("id", "qid") or toks[-1].value == ")")
        if c.isdigit() or (c == "." and i + 1 < n and sql[i + 1].isdigit() and not prev_is_name):
            tok, i = _read_number(sql, i)
            toks.append(tok)
            continue
        if _is_ident_char(c):
            j = i
            while j < n and _is_ident_char(sql[j]):
                j += 1
            toks.append(Token("id", sql[i:j], i))
            i = j
            continue
        for op in _OPS3 + _OPS2:
            if sql.startswith(op, i):
                toks.append(Token("op", op, i))
                i += len(op)
                break
        else:
            toks.append(Token("op", c, i))
            i += 1
    return toks


def _read_quoted_ident(sql: str, i: int) -> tuple[str, int]:
    """A backquoted name starting at ``i`` (doubled backquotes unescaped), and the offset after it."""
    n = len(sql)
    j = i + 1
    buf: list[str] = []
    while True:
        if j >= n:
            raise SchemaError(f"unterminated quoted identifier at offset {i} in {clip_sql(sql)!r}")
        if sql[j] == "`":
            if j + 1 < n and sql[j + 1] == "`":
                buf.append("`")
                j += 2
                continue
            break
        buf.append(sql[j])
        j += 1
    return "".join(buf), j + 1


def _read_0x_literal(sql: str, i: int) -> tuple[Token, int] | None:
    """A ``0x...``/``0b...`` literal at ``i`` and the offset after it; None if its digits do not fit."""
    n = len(sql)
    j = i + 2
    while j < n and _is_ident_char(sql[j]):
        j += 1
    body = sql[i + 2 : j]
    ok = all(ch in "0123456789abcdefABCDEF" for ch in body) if sql[i + 1] == "x" else set(body) <= {"0", "1"}
    if not ok:
        return None
    return Token("hex" if sql[i + 1] == "x" else "bin", body, i), j


def _read_number(sql: str, i: int) -> tuple[Token, int]:
    """A number at ``i`` (or a name that starts with digits) and the offset after it."""
    n = len(sql)
    m = re.compile(r"\d*\.?\d*(?:[eE][+-]?\d+)?").match(sql, i)
    assert m is not None
    j = m.end()
    if j < n and _is_ident_char(sql[j]) and "." not in m.group(0):
        # MySQL allows names that start with digits (``1a``)
        while j < n and _is_ident_char(sql[j]):
            j += 1
        return Token("id", sql[i:j], i), j
    return Token("num", m.group(0), i), j


def _read_string(sql: str, i: int) -> tuple[str, int]:
    q = sql[i]
    j = i + 1
    n = len(sql)
    buf: list[str] = []
    while True:
        if j >= n:
            raise SchemaError(f"unterminated string at offset {i} in {clip_sql(sql)!r}")
        ch = sql[j]
        if ch == "\\" and j + 1 < n:
            e = sql[j + 1]
            buf.append(_ESCAPES.get(e, "\\" + e if e in "%_" else e))
            j += 2
            continue
        if ch == q:
            if j + 1 < n and sql[j + 1] == q:
                buf.append(q)
                j += 2
                continue
            return "".join(buf), j + 1
        buf.append(ch)
        j += 1


def literal_end(sql: str, tok: Token) -> int:
    """The offset just after a string token (``N'...'`` included)."""
    if tok.kind != "str":
        raise ValueError(f"{tok.kind} token at offset {tok.pos} is no string literal")
    return _read_string(sql, tok.pos + 1 if sql[tok.pos] in "nN" else tok.pos)[1]


def clip_sql(sql: str, n: int = 300) -> str:
    """SQL on one line, cut to ``n`` characters, for error messages."""
    s = " ".join(sql.split())
    return s if len(s) <= n else s[: n - 3] + "..."


def quote_ident(name: str) -> str:
    """A backquoted identifier."""
    return "`" + name.replace("`", "``") + "`"


class TokenCursor:
    """A position in the tokens of one statement, with the small moves a recursive-descent parser makes."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.toks = tokenize(sql)
        # a trailing ';' is common in captured statements
        while self.toks and self.toks[-1].kind == "op" and self.toks[-1].value == ";":
            self.toks.pop()
        self.i = 0

    def error(self, what: str) -> SchemaError:
        t = self.peek()
        near = "end of statement" if t is None else repr(self.sql[t.pos : t.pos + 40])
        return SchemaError(f"cannot parse DDL ({what}) near {near}: {clip_sql(self.sql)!r}")

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at_end(self) -> bool:
        return self.i >= len(self.toks)

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise self.error("unexpected end")
        self.i += 1
        return t

    def is_kw(self, *words: str, k: int = 0) -> bool:
        for off, w in enumerate(words):
            t = self.peek(k + off)
            if t is None or t.upper != w:
                return False
        return True

    def accept_kw(self, *words: str) -> bool:
        if self.is_kw(*words):
            self.i += len(words)
            return True
        return False

    def expect_kw(self, *words: str) -> None:
        if not self.accept_kw(*words):
            raise self.error(f"expected {' '.join(words)}")

    def is_op(self, op: str, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.kind == "op" and t.value == op

    def accept_op(self, op: str) -> bool:
        if self.is_op(op):
            self.i += 1
            return True
        return False

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.error(f"expected {op!r}")

    def ident(self, what: str = "a name") -> str:
        t = self.peek()
        if t is None or t.kind not in ("id", "qid", "str"):
            raise self.error(f"expected {what}")
        self.i += 1
        return t.value

    def skip_parens(self) -> list[Token]:
        """Consume a balanced ``( ... )`` and return the tokens inside."""
        self.expect_op("(")
        depth = 1
        start = self.i
        while True:
            t = self.next()
            if t.kind == "op" and t.value == "(":
                depth += 1
            elif t.kind == "op" and t.value == ")":
                depth -= 1
                if depth == 0:
                    return self.toks[start : self.i - 1]

    def value_word(self) -> str:
        """An option value: a name, string or number."""
        self.accept_op("=")
        t = self.next()
        return t.value

    def accept_if_exists(self) -> bool:
        return self.accept_kw("IF", "EXISTS")

    def accept_if_not_exists(self) -> bool:
        return self.accept_kw("IF", "NOT", "EXISTS")

    def skip_rest_of_spec(self) -> None:
        """Skip to the end of the current list item: a top-level ',' or the ')' that closes the list."""
        depth = 0
        while not self.at_end():
            t = self.peek()
            assert t is not None
            if t.kind == "op" and t.value == "(":
                depth += 1
            elif t.kind == "op" and t.value == ")":
                if depth == 0:
                    return  # the end of the enclosing list
                depth -= 1
            elif t.kind == "op" and t.value == "," and depth == 0:
                return
            self.i += 1
