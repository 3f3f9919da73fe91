"""TableFilter: TiDB's table_filter_test.go cases, parse errors, imports, system schemas, pickling."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

from sparkcdc.errors import ConfigError, FilterRuleError
from sparkcdc.filter import SYSTEM_SCHEMAS, TableFilter, changefeed_filter, is_system_schema

# (rules, [(schema, table, accepted case-sensitive, accepted case-insensitive)]) — TestMatchTables
MATCH_TABLES = [
    ([], [("foo", "bar", False, False)]),
    (["*.*"], [("foo", "bar", True, True)]),
    (["foo.*"], [("foo", "bar", True, True), ("foo1", "bar", False, False), ("foo2", "bar", False, False)]),
    (
        ["*.*", "!foo1.*"],
        [("foo", "bar", True, True), ("foo1", "bar", False, False), ("foo2", "bar", True, True)],
    ),
    (
        ["foo.bar1"],
        [("foo", "bar", False, False), ("foo", "bar1", True, True), ("fff", "bar1", False, False)],
    ),
    (
        ["*.*", "!foo.bar"],
        [("foo", "bar", False, False), ("foo", "bar1", True, True), ("fff", "bar1", True, True)],
    ),
    (
        ["/^foo/.*", r"!/^foo/./^sbtest-\d/"],
        [("foo", "sbtest", True, True), ("foo1", "sbtest-1", False, False), ("fff", "bar", False, False)],
    ),
    (
        ["*.*", "!foo[bar].*", "!bar?.*", r"!special\\.*"],
        [
            ("foor", "a", False, False),
            ("foo[bar]", "b", True, True),
            ("ba", "c", True, True),
            ("bar?", "d", False, False),
            ("special\\", "e", False, False),
            ("special\\\\", "f", True, True),
            ("bazzz", "g", True, True),
            ("special\\$", "h", True, True),
            ("afooa", "i", True, True),
        ],
    ),
    (
        ["*.*", "!/^FOO/.*", "!*./FoO$/"],
        [
            ("FOO1", "a", False, False),
            ("foo2", "b", True, False),
            ("BoO3", "cFoO", False, False),
            ("Foo4", "dfoo", True, False),
            ("5", "5", True, True),
        ],
    ),
    (
        ["*.*", "!a?b?./f[0-9]/"],
        [
            ("abbd", "f1", False, False),
            ("aaaa", "f2", True, True),
            ("5", "5", True, True),
            ("abbc", "fa", True, True),
        ],
    ),
    (
        ["*.*", "!/t[0-8]/.a??"],
        [
            ("t1", "a01", False, False),
            ("t9", "a02", True, True),
            ("5", "5", True, True),
            ("t8", "a001", True, True),
        ],
    ),
    (
        ["*.*", "!a*.A*"],
        [("aB", "Ab", False, False), ("AaB", "aab", True, False), ("acB", "Afb", False, False)],
    ),
    (["BAR.*"], [("bar", "a", False, True), ("BAR", "a", True, True)]),
    (["# comment", "x.y", "   \t"], [("x", "y", True, True), ("y", "y", False, False)]),
    (
        ["p_123$.45", "中文.表名"],
        [
            ("p_123", "45", False, False),
            ("p_123$", "45", True, True),
            ("英文", "表名", False, False),
            ("中文", "表名", True, True),
        ],
    ),
    ([r"\\\..*"], [("\\.", "a", True, True), ("\\\\\\.", "b", False, False), ("\\a", "c", False, False)]),
    (
        ["[!a-z].[^a-z]"],
        [
            ("!", "z", True, True),
            ("!", "^", True, True),
            ("!", "9", False, False),
            ("a", "z", False, False),
            ("a", "^", False, False),
            ("a", "9", False, False),
            ("1", "z", True, True),
            ("1", "^", True, True),
            ("1", "9", False, False),
        ],
    ),
    (
        ['"some ""quoted""".`identifiers?`'],
        [
            ('some "quoted"', "identifiers?", True, True),
            ('some "quoted"', "identifiers!", False, False),
            ('some ""quoted""', "identifiers?", False, False),
            ('SOME "QUOTED"', "IDENTIFIERS?", False, True),
            ('some\t"quoted"', "identifiers?", False, False),
        ],
    ),
    (
        ["db*.*", "!*.cfg*", "*.cfgsample"],
        [
            ("irrelevant", "table", False, False),
            ("db1", "tbl1", True, True),
            ("db1", "cfg1", False, False),
            ("db1", "cfgsample", True, True),
            ("else", "cfgsample", True, True),
        ],
    ),
    (
        ["*.*", "!S.D[!a-d]"],
        [
            ("S", "D1", False, False),
            ("S", "Da", True, True),
            ("S", "Db", True, True),
            ("S", "Daa", True, True),
        ],
    ),
    (
        ["*.*", "!S.D[a-d]"],
        [
            ("S", "D1", True, True),
            ("S", "Da", False, False),
            ("S", "Db", False, False),
            ("S", "Daa", True, True),
        ],
    ),
]


@pytest.mark.parametrize(("rules", "cases"), MATCH_TABLES, ids=[repr(r) for r, _ in MATCH_TABLES])
def test_match_tables(rules: list[str], cases: list[tuple[str, str, bool, bool]]) -> None:
    cs = TableFilter(rules, case_sensitive=True)
    ci = TableFilter(rules, case_sensitive=False)
    for schema, table, want_cs, want_ci in cases:
        assert cs.match(schema, table) is want_cs, ("cs", schema, table)
        assert ci.match(schema, table) is want_ci, ("ci", schema, table)
        # a second lookup hits the cache and must agree
        assert cs.match(schema, table) is want_cs


MATCH_SCHEMAS = [
    ([], [("foo", False, False)]),
    (["*.*"], [("foo", True, True)]),
    (["foo.*"], [("foo", True, True), ("foo1", False, False)]),
    (["*.*", "!foo1.*"], [("foo", True, True), ("foo1", False, False)]),
    (["foo.bar1"], [("foo", True, True), ("foo1", False, False)]),
    (["*.*", "!foo.bar"], [("foo", True, True), ("foo1", True, True)]),
    (["/^foo/.*", r"!/^foo/./^sbtest-\d/"], [("foo", True, True), ("foo2", True, True)]),
    (
        ["*.*", "!FOO*.*", "!*.*FoO"],
        [
            ("foo", True, False),
            ("FOO", False, False),
            ("foobar", True, False),
            ("FOOBAR", False, False),
            ("bar", True, True),
            ("BAR", True, True),
        ],
    ),
]


@pytest.mark.parametrize(("rules", "cases"), MATCH_SCHEMAS, ids=[repr(r) for r, _ in MATCH_SCHEMAS])
def test_match_schemas(rules: list[str], cases: list[tuple[str, bool, bool]]) -> None:
    cs = TableFilter(rules, case_sensitive=True)
    ci = TableFilter(rules, case_sensitive=False)
    for schema, want_cs, want_ci in cases:
        assert cs.match_schema(schema) is want_cs, ("cs", schema)
        assert ci.match_schema(schema) is want_ci, ("ci", schema)


PARSE_FAILURES = [
    ("/^t[0-9]+((?!_copy).)*$/.*", r"invalid pattern: error parsing regexp:"),
    ("/^t[0-9]+sp(?=copy).*/.*", r"invalid pattern: error parsing regexp:"),
    ("/(?<=a)b/.*", r"invalid pattern: error parsing regexp: lookaround"),
    ("/(?<!a)b/.*", r"invalid pattern: error parsing regexp: lookaround"),
    (r"/(a)\1/.*", r"invalid pattern: error parsing regexp: a backreference"),
    ("/(?>ab)/.*", r"invalid pattern: error parsing regexp: an atomic group"),
    ("/a++/.*", r"invalid pattern: error parsing regexp: a possessive repeat"),
    ("/a(/.*", r"invalid pattern: error parsing regexp:"),
    ("a.b.c", r"syntax error: stray characters after table pattern"),
    ("a%b.c", r"unexpected special character '%'"),
    (r"a\tb.c", r"cannot escape a letter or number \(\\t\), it is reserved for future extension"),
    ("[].*", r"syntax error: failed to parse character class"),
    ("[!].*", r"invalid pattern: error parsing regexp:"),
    ("[.*", r"syntax error: failed to parse character class"),
    (r"[\d\D].*", r"syntax error: failed to parse character class"),
    ("db", r"wrong table pattern"),
    ("db.", r"syntax error: missing pattern"),
    ("`db`*.*", r"syntax error: missing '\.' between schema and table patterns"),
    ("/db.*", r"syntax error: incomplete regexp"),
    ("`db.*", r"syntax error: incomplete quoted identifier"),
    ('"db.*', r"syntax error: incomplete quoted identifier"),
    ("db\\", r"syntax error: cannot place \\ at end of line"),
    ("db.tbl#not comment", r"unexpected special character '#'"),
    ("!@other.txt", r"unexpected special character '@'"),
    (" ! db.t", r"unexpected special character ' '"),
]


@pytest.mark.parametrize(("rule", "message"), PARSE_FAILURES, ids=[r for r, _ in PARSE_FAILURES])
def test_parse_failures(rule: str, message: str) -> None:
    with pytest.raises(FilterRuleError) as info:
        TableFilter([rule])
    text = str(info.value)
    assert re.search(message, text), text
    # the error names the rule, and it is a ConfigError refused at creation
    assert repr(rule) in text
    assert isinstance(info.value, ConfigError)
    assert info.value.code == "CDC:ErrFilterRuleInvalid"


def test_rules_must_be_a_list() -> None:
    with pytest.raises(FilterRuleError, match="list of strings"):
        TableFilter("db.*")  # type: ignore[arg-type]
    with pytest.raises(FilterRuleError, match="must be a string"):
        TableFilter([1])  # type: ignore[list-item]


def test_regex_is_unanchored_and_wildcard_anchored() -> None:
    f = TableFilter(["/oo/.t?"], case_sensitive=True)
    assert f.match("foo", "t1")
    assert f.match("oops", "tx")
    assert not f.match("foo", "t12")  # wildcard is anchored at both ends
    assert not f.match("foo", "xt1")
    assert not f.match("f-o-o", "t1")


def test_re2_end_of_text_escape() -> None:
    f = TableFilter([r"/^db\z/.*"], case_sensitive=True)
    assert f.match("db", "t")
    assert not f.match("db1", "t")
    # inside a class \z stays a literal-ish escape and is still an error in Python's re
    with pytest.raises(FilterRuleError, match="invalid pattern"):
        TableFilter([r"/[\z]/.*"])


def test_regex_classes_are_ascii_like_re2() -> None:
    f = TableFilter([r"/^t\d+$/.*", r"/^\w+$/.x"], case_sensitive=True)
    assert f.match("t12", "a")
    assert not f.match("t١٢", "a")  # Arabic-Indic digits are not \d in RE2
    assert f.match("abc_1", "x")
    assert not f.match("abcé", "x")
    # a pattern with non-ASCII letters still folds case in case-insensitive mode
    g = TableFilter(["/^ÄB/.*"])
    assert g.match("äbc", "t")


def test_escaped_slash_in_regex_and_special_chars_in_class() -> None:
    f = TableFilter([r"/a\/b/.*", "x[&|~[].y"], case_sensitive=True)
    assert f.match("a/b", "t")
    assert not f.match("ab", "t")
    for ch in "&|~[":
        assert f.match("x" + ch, "y")
    assert not f.match("xa", "y")


def test_wildcard_question_mark_matches_one_character_not_byte() -> None:
    f = TableFilter(["?.t"], case_sensitive=True)
    assert f.match("中", "t")
    assert not f.match("中文", "t")


def test_dot_in_names_does_not_match_newline_tricks() -> None:
    f = TableFilter(["db*.*"], case_sensitive=True)
    assert f.match("db\nx", "t")  # (?s): * spans newlines, as in TiDB
    g = TableFilter(["db.t"], case_sensitive=True)
    assert not g.match("db\n", "t")


def test_later_rule_wins() -> None:
    f = TableFilter(["!db.secret", "db.*"])
    assert f.match("db", "secret")  # the later positive rule overrides
    g = TableFilter(["db.*", "!db.secret"])
    assert not g.match("db", "secret")
    assert g.match("db", "public")


def test_negative_only_selects_nothing() -> None:
    f = TableFilter(["!db.*"])
    assert not f.match("other", "t")
    assert not f.match_schema("other")


def test_import_files(tmp_path: Path) -> None:
    p1 = tmp_path / "1.txt"
    p2 = tmp_path / "2.txt"
    p1.write_text("\n\t\tdb?.tbl?\n\t\tdb02.tbl02\n\t")
    p2.write_text("\n\t\tdb03.tbl03\n\t\t!db4.tbl4\r\n\t")
    f = TableFilter([f"@{p1}", f"@{p2}", "db04.tbl04"], case_sensitive=True)
    assert f.match("db1", "tbl1")
    assert f.match("db2", "tbl2")
    assert f.match("db3", "tbl3")
    assert not f.match("db4", "tbl4")
    assert not f.match("db01", "tbl01")
    assert f.match("db02", "tbl02")
    assert f.match("db03", "tbl03")
    assert f.match("db04", "tbl04")


def test_recursive_import_and_missing_file(tmp_path: Path) -> None:
    p3 = tmp_path / "3.txt"
    p4 = tmp_path / "4.txt"
    p3.write_text("db1.tbl1")
    p4.write_text(f"# comment\n\n@{p3}")
    with pytest.raises(FilterRuleError, match=r"4\.txt:3: importing filter files recursively is not allowed"):
        TableFilter([f"@{p4}"])
    with pytest.raises(FilterRuleError, match=r"cannot open filter file .*5\.txt"):
        TableFilter([f"@{tmp_path / '5.txt'}"])
    bad = tmp_path / "bad.txt"
    bad.write_text("ok.t\n\nbad%.t\n")
    with pytest.raises(FilterRuleError, match=r"bad\.txt:3: unexpected special character '%'"):
        TableFilter([f"@{bad}"])


def test_changefeed_filter_drops_system_schemas() -> None:
    f = changefeed_filter(["*.*"], case_sensitive=True)
    for schema in SYSTEM_SCHEMAS:
        assert not f.match(schema, "t"), schema
        assert not f.match(schema.upper(), "t"), schema
        assert not f.match_schema(schema), schema
    assert f.match("app", "t")
    assert f.match_schema("app")
    # even an explicit rule cannot select a system schema
    g = TableFilter.changefeed_filter(["mysql.*", "sys.*", "app.*"])
    assert not g.match("mysql", "user")
    assert not g.match("SYS", "x")
    assert g.match("app", "t")
    # a plain TableFilter does select them when asked
    assert TableFilter(["mysql.*"]).match("mysql", "user")
    assert is_system_schema("Information_Schema")
    assert not is_system_schema("app")


def test_changefeed_filter_empty_rules_mean_all() -> None:
    assert changefeed_filter([]).match("a", "b")
    assert changefeed_filter(None).match("a", "b")


def test_changefeed_filter_is_case_insensitive_by_default() -> None:
    f = changefeed_filter(["App.Orders"])
    assert f.match("app", "ORDERS")
    assert not changefeed_filter(["App.Orders"], case_sensitive=True).match("app", "ORDERS")


def test_pickle_round_trip(tmp_path: Path) -> None:
    rules_file = tmp_path / "rules.txt"
    rules_file.write_text("imported.*\n")
    f = TableFilter.changefeed_filter(["db*.*", "!db1.secret", r"/^re\d+$/.t?", f"@{rules_file}"])
    assert f.match("db2", "x")  # fill the cache
    rules_file.unlink()  # the parsed rules travel; the file is not read again
    g = pickle.loads(pickle.dumps(f))
    for schema, table in [
        ("db2", "x"),
        ("db1", "secret"),
        ("re12", "t1"),
        ("re12", "t12"),
        ("imported", "z"),
        ("mysql", "t"),
        ("DB1", "Secret"),
    ]:
        assert g.match(schema, table) == f.match(schema, table), (schema, table)
    assert g.match("imported", "z")
    assert not g.match("db1", "secret")
    assert g.exclude_system_schemas and not g.case_sensitive
    assert g.rules == f.rules


def test_match_is_fast() -> None:
    import time

    f = changefeed_filter(["db*.*", "!*.tmp_*", "/^log_\\d+$/.*"])
    names = [(f"db{i % 50}", f"t{i % 200}") for i in range(100_000)]
    start = time.perf_counter()
    for schema, table in names:
        f.match(schema, table)
    # cached lookups: 100k matches must take well under a second
    assert time.perf_counter() - start < 1.0
