"""The TiDB table filter: ``schema.table`` rules with wildcards, quotes, regexes and ``!``.

Syntax (TiDB ``pkg/util/table-filter``): a rule is ``schemaPattern.tablePattern``,
trimmed of spaces and tabs; empty lines and lines starting with ``#`` are
ignored; ``!`` in front excludes; ``@path`` imports one rule per line from a
file (imports do not nest). A pattern is

* a wildcard: ``*`` any run, ``?`` one character, ``[a-z]`` a class and
  ``[!a-z]`` its negation (``[^...]`` is *not* negation), anchored at both
  ends; plain characters are ``A-Za-z0-9$_`` and non-ASCII, anything else is
  escaped with ``\\`` (escaping a letter or digit is reserved, so an error);
* a literal ``"double quoted"`` (``""`` for a quote) or ```back quoted```
  (two backquotes for one) name;
* a ``/regex/`` (RE2 syntax, unanchored, ``\\/`` for ``/``, ``\\d \\w \\s`` ASCII-only;
  lookaround, backreferences, atomic groups and possessive repeats are refused).

Rules are tried from last to first: the **last matching rule decides**, and a
table no rule matches is excluded. Matching is case-insensitive unless
``case_sensitive`` (literals and input are lower-cased, regexes get ``(?i)``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sparkcdc.errors import FilterRuleError

SYSTEM_SCHEMAS: frozenset[str] = frozenset(
    {
        "mysql",
        "information_schema",
        "performance_schema",
        "metrics_schema",
        "sys",
        "inspection_schema",
        "tidb_cdc",
        "lightning_task_info",
        "workload_schema",
    }
)
"""Schemas a changefeed never replicates (compared case-insensitively)."""

_SYNTAX_HELP = (
    "write rules as schema.table with * ? [a-z] [!a-z] wildcards, "
    '"quoted" or `quoted` names, or /regex/ (see the TiDB table filter syntax)'
)

_QUOTED_DOUBLE = re.compile(r'"(?:""|[^"])+"')
_QUOTED_BACK = re.compile(r"`(?:``|[^`])+`")
_REGEX_PART = re.compile(r"/(?:\\.|[^/])+/")
_WILDCARD_CLASS = re.compile(r"\[!?(?:\\[^0-9a-zA-Z]|[^\\\]])+\]")
# Characters that change meaning inside a Python character class (nested-set and
# set-operation syntax reserved by ``re``); escaping them keeps RE2's meaning.
_CLASS_ESCAPE = frozenset("[&~|")
_CACHE_LIMIT = 65536


def is_system_schema(schema: str) -> bool:
    """Whether a schema is one the changefeed always drops (case-insensitive)."""
    return schema.lower() in SYSTEM_SCHEMAS


class _RuleError(Exception):
    """A parse problem inside one rule; wrapped into FilterRuleError with the rule."""


# --- matchers ---------------------------------------------------------------


class _Matcher:
    __slots__ = ()

    def match(self, name: str) -> bool:
        raise NotImplementedError

    @property
    def matches_all(self) -> bool:
        return False

    def lowered(self) -> _Matcher:
        return self


class _TrueMatcher(_Matcher):
    """The bare ``*`` pattern."""

    __slots__ = ()

    def match(self, name: str) -> bool:
        return True

    @property
    def matches_all(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "*"


class _StringMatcher(_Matcher):
    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def match(self, name: str) -> bool:
        return name == self.value

    def lowered(self) -> _Matcher:
        return _StringMatcher(self.value.lower())

    def __getstate__(self) -> str:
        return self.value

    def __setstate__(self, state: str) -> None:
        self.value = state

    def __repr__(self) -> str:
        return f"{self.value!r}"


class _RegexMatcher(_Matcher):
    """A compiled pattern; ``full`` for anchored wildcards, search for ``/regex/``."""

    __slots__ = ("_fn", "flags", "full", "source")

    def __init__(self, source: str, flags: int, full: bool) -> None:
        self.source = source
        self.flags = flags
        self.full = full
        pattern = _compile(source, flags)
        self._fn = pattern.fullmatch if full else pattern.search

    def match(self, name: str) -> bool:
        return self._fn(name) is not None

    def lowered(self) -> _Matcher:
        return _RegexMatcher(self.source, self.flags | re.IGNORECASE, self.full)

    def __getstate__(self) -> tuple[str, int, bool]:
        return (self.source, self.flags, self.full)

    def __setstate__(self, state: tuple[str, int, bool]) -> None:
        self.__init__(*state)  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"/{self.source}/"


def _compile(source: str, flags: int) -> re.Pattern[str]:
    with warnings.catch_warnings():
        # ``re`` warns about set syntax it may reserve later; RE2 gives those
        # characters their literal meaning, which is what ``re`` still does.
        warnings.simplefilter("ignore", FutureWarning)
        return re.compile(source, flags)


# --- RE2 compatibility ------------------------------------------------------


def _check_re2(source: str) -> str:
    """Refuse what RE2 cannot do and translate RE2-only escapes; returns the Python source."""
    translated = _translate_re2(source)
    try:
        from re import _parser  # type: ignore[attr-defined]

        parsed = _parser.parse(translated, 0)
    except re.error as exc:
        raise _RuleError(f"invalid pattern: error parsing regexp: {exc}") from None
    bad = _unsupported(parsed)
    if bad:
        raise _RuleError(f"invalid pattern: error parsing regexp: {bad} is not supported (RE2 syntax)")
    return translated


def _translate_re2(source: str) -> str:
    """Map ``\\z`` (RE2 end of text) to Python's ``\\Z`` outside character classes."""
    if "\\z" not in source:
        return source
    out: list[str] = []
    i, in_class = 0, False
    while i < len(source):
        c = source[i]
        if c == "\\" and i + 1 < len(source):
            nxt = source[i + 1]
            out.append("\\Z" if nxt == "z" and not in_class else c + nxt)
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            i += 1
            # a ']' right after '[' or '[^' is literal
            if i < len(source) and source[i] == "^":
                out.append("^")
                i += 1
            if i < len(source) and source[i] == "]":
                out.append("]")
                i += 1
            continue
        if c == "]" and in_class:
            in_class = False
        out.append(c)
        i += 1
    return "".join(out)


_UNSUPPORTED_OPS = {
    "ASSERT": "lookaround",
    "ASSERT_NOT": "lookaround",
    "GROUPREF": "a backreference",
    "GROUPREF_EXISTS": "a conditional group",
    "ATOMIC_GROUP": "an atomic group",
    "POSSESSIVE_REPEAT": "a possessive repeat",
}


def _unsupported(parsed: Any) -> str | None:
    for op, av in parsed:
        name = str(op)
        if name in _UNSUPPORTED_OPS:
            return _UNSUPPORTED_OPS[name]
        for sub in _subpatterns(av):
            bad = _unsupported(sub)
            if bad:
                return bad
    return None


def _subpatterns(av: Any) -> Iterable[Any]:
    from re import _parser  # type: ignore[attr-defined]

    if isinstance(av, _parser.SubPattern):
        yield av
    elif isinstance(av, (tuple, list)):
        for x in av:
            if isinstance(x, _parser.SubPattern):
                yield x
            elif isinstance(x, (tuple, list)):
                yield from _subpatterns(x)


def compile_re2(source: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """A Go RE2 pattern as a Python pattern with RE2's meaning; ValueError names what RE2 refuses.

    ``\\d \\w \\s \\b`` stay ASCII-only as in RE2 (Unicode matching is kept for a pattern with
    non-ASCII letters, so ``(?i)`` still folds them); ``\\z`` is the end of text.
    """
    try:
        checked = _check_re2(source)
        flags = (re.ASCII if source.isascii() else 0) | (re.IGNORECASE if ignore_case else 0)
        return _compile(checked, flags)
    except _RuleError as exc:
        raise ValueError(str(exc)) from None
    except re.error as exc:
        raise ValueError(f"invalid pattern: error parsing regexp: {exc}") from None


# --- parser -----------------------------------------------------------------


class _Rule:
    __slots__ = ("positive", "schema", "table")

    def __init__(self, schema: _Matcher, table: _Matcher, positive: bool) -> None:
        self.schema = schema
        self.table = table
        self.positive = positive

    def lowered(self) -> _Rule:
        return _Rule(self.schema.lowered(), self.table.lowered(), self.positive)

    def __getstate__(self) -> tuple[_Matcher, _Matcher, bool]:
        return (self.schema, self.table, self.positive)

    def __setstate__(self, state: tuple[_Matcher, _Matcher, bool]) -> None:
        self.schema, self.table, self.positive = state


def _regex_matcher(source: str, full: bool) -> _Matcher:
    if full and source == ".*":
        return _TrueMatcher()
    flags: int
    if full:
        checked, flags = source, re.S
    else:
        # RE2's \d \w \s \b are ASCII-only; re.ASCII gives Python's the same meaning. A pattern
        # with non-ASCII letters keeps Unicode matching so (?i) still folds those letters.
        checked = _check_re2(source)
        flags = re.ASCII if source.isascii() else 0
    try:
        return _RegexMatcher(checked, flags, full)
    except re.error as exc:
        raise _RuleError(f"invalid pattern: error parsing regexp: {exc}") from None


def _parse_pattern(line: str) -> tuple[_Matcher, str]:
    if not line:
        raise _RuleError("syntax error: missing pattern")
    first = line[0]
    if first == "/":
        m = _REGEX_PART.match(line)
        if not m:
            raise _RuleError("syntax error: incomplete regexp")
        body = m.group(0)[1:-1]
        return _regex_matcher(body, full=False), line[m.end() :]
    if first == '"':
        m = _QUOTED_DOUBLE.match(line)
        if not m:
            raise _RuleError("syntax error: incomplete quoted identifier")
        return _StringMatcher(m.group(0)[1:-1].replace('""', '"')), line[m.end() :]
    if first == "`":
        m = _QUOTED_BACK.match(line)
        if not m:
            raise _RuleError("syntax error: incomplete quoted identifier")
        return _StringMatcher(m.group(0)[1:-1].replace("``", "`")), line[m.end() :]
    return _parse_wildcard(line)


def _parse_wildcard(line: str) -> tuple[_Matcher, str]:
    literal: list[str] = []
    pattern: list[str] = []
    is_literal = True
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            if i == n - 1:
                raise _RuleError("syntax error: cannot place \\ at end of line")
            esc = line[i + 1]
            if esc.isascii() and esc.isalnum():
                raise _RuleError(
                    f"cannot escape a letter or number (\\{esc}), it is reserved for future extension"
                )
            literal.append(esc)
            pattern.append(re.escape(esc))
            i += 2
        elif c == ".":
            break  # the schema/table separator
        elif c == "*":
            is_literal = False
            pattern.append(".*")
            i += 1
        elif c == "?":
            is_literal = False
            pattern.append(".")
            i += 1
        elif c == "[":
            is_literal = False
            m = _WILDCARD_CLASS.match(line, i)
            if not m:
                raise _RuleError("syntax error: failed to parse character class")
            pattern.append(_translate_class(m.group(0)))
            i = m.end()
        else:
            if not (c in "$_" or (c.isascii() and c.isalnum()) or not c.isascii()):
                raise _RuleError(f"unexpected special character '{c}'")
            literal.append(c)
            pattern.append(re.escape(c))
            i += 1
    rest = line[i:]
    if is_literal:
        return _StringMatcher("".join(literal)), rest
    return _regex_matcher("".join(pattern), full=True), rest


def _translate_class(cls: str) -> str:
    """A wildcard class ``[...]``/``[!...]`` as a Python class with RE2's meaning."""
    body = cls[1:-1]
    out = ["["]
    if body.startswith("!"):
        out.append("^")
        body = body[1:]
    elif body.startswith("^"):
        out.append("\\^")  # `[^` is not special in a glob
        body = body[1:]
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\":
            out.append(body[i : i + 2])
            i += 2
            continue
        out.append("\\" + c if c in _CLASS_ESCAPE else c)
        i += 1
    out.append("]")
    return "".join(out)


def _parse_rule(line: str) -> _Rule:
    positive = True
    if line.startswith("!"):
        positive = False
        line = line[1:]
    schema, line = _parse_pattern(line)
    if not line:
        raise _RuleError("wrong table pattern")
    if line[0] != ".":
        raise _RuleError("syntax error: missing '.' between schema and table patterns")
    table, line = _parse_pattern(line[1:])
    if line:
        raise _RuleError("syntax error: stray characters after table pattern")
    return _Rule(schema, table, positive)


def _parse_rules(rules: Iterable[str]) -> list[_Rule]:
    parsed: list[_Rule] = []
    for raw in rules:
        if not isinstance(raw, str):
            raise FilterRuleError(
                f"invalid table filter rule {raw!r}: a rule must be a string; {_SYNTAX_HELP}"
            )
        line = raw.strip(" \t")
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            parsed.extend(_import_file(line[1:], raw))
            continue
        try:
            parsed.append(_parse_rule(line))
        except _RuleError as exc:
            raise FilterRuleError(f"invalid table filter rule {raw!r}: {exc}; {_SYNTAX_HELP}") from None
    return parsed


def _import_file(path: str, raw: str) -> list[_Rule]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise FilterRuleError(
            f"invalid table filter rule {raw!r}: cannot open filter file {path!r}: {exc.strerror}; "
            "check the path after '@' (relative paths are resolved from the working directory)"
        ) from None
    parsed: list[_Rule] = []
    for lineno, file_line in enumerate(text.split("\n"), start=1):
        file_line = file_line.removesuffix("\r")
        line = file_line.strip(" \t")
        if not line or line.startswith("#"):
            continue
        where = f"at {path}:{lineno}"
        if line.startswith("@"):
            raise FilterRuleError(
                f"invalid table filter rule {file_line!r} {where}: importing filter files recursively is not "
                "allowed; list the rules of the nested file directly"
            )
        try:
            parsed.append(_parse_rule(line))
        except _RuleError as exc:
            raise FilterRuleError(
                f"invalid table filter rule {file_line!r} {where}: {exc}; {_SYNTAX_HELP}"
            ) from None
    return parsed


# --- the filter -------------------------------------------------------------


class TableFilter:
    """A parsed list of table-filter rules; ``match`` decides whether a table is selected.

    Picklable (the parsed rules travel, ``@file`` imports are not re-read) and
    cached: repeated lookups of the same name cost one dict lookup.
    """

    def __init__(
        self,
        rules: Sequence[str],
        case_sensitive: bool = False,
        *,
        exclude_system_schemas: bool = False,
    ) -> None:
        if isinstance(rules, str):
            raise FilterRuleError(f"table filter rules must be a list of strings, got the string {rules!r}")
        self.rules: tuple[str, ...] = tuple(rules)
        self.case_sensitive = case_sensitive
        self.exclude_system_schemas = exclude_system_schemas
        parsed = _parse_rules(self.rules)
        if not case_sensitive:
            parsed = [r.lowered() for r in parsed]
        parsed.reverse()  # the last rule written is tried first
        self._rules: tuple[_Rule, ...] = tuple(parsed)
        self._table_cache: dict[tuple[str, str], bool] = {}
        self._schema_cache: dict[str, bool] = {}

    @classmethod
    def changefeed_filter(cls, rules: Sequence[str] | None, case_sensitive: bool = False) -> TableFilter:
        """A changefeed's filter: empty rules mean ``*.*``; system schemas are always dropped."""
        return cls(list(rules) if rules else ["*.*"], case_sensitive, exclude_system_schemas=True)

    def match(self, schema: str, table: str) -> bool:
        """Whether ``schema.table`` is selected."""
        key = (schema, table)
        hit = self._table_cache.get(key)
        if hit is not None:
            return hit
        result = self._match_table(schema, table)
        if len(self._table_cache) >= _CACHE_LIMIT:
            self._table_cache.clear()
        self._table_cache[key] = result
        return result

    def match_schema(self, schema: str) -> bool:
        """Whether some table of ``schema`` can be selected (schema-level DDL goes by this)."""
        hit = self._schema_cache.get(schema)
        if hit is not None:
            return hit
        result = self._match_schema(schema)
        if len(self._schema_cache) >= _CACHE_LIMIT:
            self._schema_cache.clear()
        self._schema_cache[schema] = result
        return result

    def _match_table(self, schema: str, table: str) -> bool:
        if self.exclude_system_schemas and is_system_schema(schema):
            return False
        if not self.case_sensitive:
            schema, table = schema.lower(), table.lower()
        for rule in self._rules:
            if rule.schema.match(schema) and rule.table.match(table):
                return rule.positive
        return False

    def _match_schema(self, schema: str) -> bool:
        if self.exclude_system_schemas and is_system_schema(schema):
            return False
        if not self.case_sensitive:
            schema = schema.lower()
        for rule in self._rules:
            # a negative rule only rules out the schema when it covers all of its tables
            if rule.schema.match(schema) and (rule.positive or rule.table.matches_all):
                return rule.positive
        return False

    def __getstate__(self) -> dict[str, Any]:
        return {
            "rules": self.rules,
            "case_sensitive": self.case_sensitive,
            "exclude_system_schemas": self.exclude_system_schemas,
            "_rules": self._rules,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.rules = state["rules"]
        self.case_sensitive = state["case_sensitive"]
        self.exclude_system_schemas = state["exclude_system_schemas"]
        self._rules = state["_rules"]
        self._table_cache = {}
        self._schema_cache = {}

    def __repr__(self) -> str:
        return (
            f"TableFilter({list(self.rules)!r}, case_sensitive={self.case_sensitive}"
            f"{', exclude_system_schemas=True' if self.exclude_system_schemas else ''})"
        )


def changefeed_filter(rules: Sequence[str] | None, case_sensitive: bool = False) -> TableFilter:
    """A changefeed's table filter (``TableFilter.changefeed_filter``)."""
    return TableFilter.changefeed_filter(rules, case_sensitive)


__all__ = ["SYSTEM_SCHEMAS", "TableFilter", "changefeed_filter", "compile_re2", "is_system_schema"]
