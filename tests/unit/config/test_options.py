"""The declarative option model: URI over TOML over default, parsing per kind, one-line refusals."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from sparkcdc.config.options import (
    MIB,
    Kind,
    Option,
    OptionTable,
    Source,
    format_duration,
    format_size,
    parse_size,
    resolve,
)
from sparkcdc.config.uri import ParsedURI
from sparkcdc.errors import ConfigError, SinkURIError


@dataclass
class Inner:
    workers: int | None = None
    interval: str | None = None
    size: int | None = None
    mode: str | None = None
    flag: bool | None = None
    label: str | None = None


@dataclass
class Section:
    atomicity: str = ""
    inner: Inner = field(default_factory=Inner)


TABLE = OptionTable(
    Option("worker-count", Kind.INT, 16, toml="inner.workers", gt=0, le=512),
    Option("flush-interval", Kind.DURATION, 5.0, toml="inner.interval", ge=2.0, le=600.0),
    Option("file-size", Kind.SIZE, 64 * MIB, toml="inner.size", ge=MIB, le=512 * MIB),
    Option("compression", Kind.ENUM, "none", toml="inner.mode", choices=("none", "lz4"), fold_case=True),
    Option("flag", Kind.BOOL, False, toml="inner.flag"),
    Option("label", Kind.STR, toml="inner.label"),
    Option("version", Kind.STR, "2.4.0", pattern=r"\d+\.\d+\.\d+", expect="a version like 2.4.0"),
    Option("acks", Kind.INT, -1, choices=(-1, 0, 1)),
    Option("atomicity", Kind.ENUM, "none", toml="atomicity", choices=("none", "table")),
    Option("password", Kind.STR, secret=True),
)


def run(query: dict[str, str] | None = None, section: Section | None = None) -> dict[str, object]:
    return dict(resolve(TABLE, query or {}, section or Section(), where="sink"))


def test_defaults_when_nothing_is_given() -> None:
    got = resolve(TABLE, {}, Section(), where="sink")
    assert dict(got) == {
        "worker-count": 16,
        "flush-interval": 5.0,
        "file-size": 64 * MIB,
        "compression": "none",
        "flag": False,
        "label": None,
        "version": "2.4.0",
        "acks": -1,
        "atomicity": "none",  # the TOML's "" is unset
        "password": None,
    }
    assert {got.source(n) for n in got} == {Source.DEFAULT}


def test_uri_wins_over_toml_wins_over_default() -> None:
    section = Section(inner=Inner(workers=4, interval="30s", label="from-toml"))
    got = resolve(TABLE, {"worker-count": "2"}, section, where="sink")
    assert (got["worker-count"], got.source("worker-count")) == (2, Source.URI)
    assert (got["flush-interval"], got.source("flush-interval")) == (30.0, Source.TOML)
    assert (got["file-size"], got.source("file-size")) == (64 * MIB, Source.DEFAULT)
    assert got["label"] == "from-toml"
    # an empty URI string is a value for a string option (it still wins)
    assert resolve(TABLE, {"label": ""}, section)["label"] == ""


def test_each_kind_parses() -> None:
    got = run(
        {
            "worker-count": "+7",
            "flush-interval": "1m30s",
            "file-size": "3MiB",
            "compression": " LZ4 ",
            "flag": "TRUE",
            "label": "x y",
            "version": "3.6.1",
            "acks": "0",
            "atomicity": "table",
        }
    )
    assert got["worker-count"] == 7
    assert got["flush-interval"] == 90.0
    assert got["file-size"] == 3 * MIB
    assert got["compression"] == "lz4"  # folded to the declared spelling
    assert got["flag"] is True and run({"flag": "0"})["flag"] is False
    assert (got["label"], got["version"], got["acks"], got["atomicity"]) == ("x y", "3.6.1", 0, "table")
    assert run({"file-size": "2097152"})["file-size"] == 2 * MIB
    toml = Section(inner=Inner(size=2 * MIB, mode="LZ4", flag=True))
    assert (run(section=toml)["file-size"], run(section=toml)["compression"], run(section=toml)["flag"]) == (
        2 * MIB,
        "lz4",
        True,
    )


def test_a_parsed_uri_records_what_was_read() -> None:
    p = ParsedURI.parse("file:///x?worker-count=3&bogus=1")
    assert resolve(TABLE, p, None)["worker-count"] == 3
    with pytest.raises(
        SinkURIError, match=r"unknown sink URI parameter\(s\) 'bogus'.*supported:.*worker-count"
    ):
        p.reject_unknown()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        (
            {"worker-count": "0"},
            "invalid worker-count 0 in the sink URI: expected an integer greater than 0 and at most 512",
        ),
        ({"worker-count": "513"}, "invalid worker-count 513 in the sink URI"),
        ({"worker-count": "many"}, "invalid worker-count 'many' in the sink URI: expected an integer"),
        ({"worker-count": "1_000"}, "invalid worker-count '1_000'"),
        ({"worker-count": ""}, "invalid worker-count '' in the sink URI"),
        (
            {"flush-interval": "1ms"},
            "invalid flush-interval '1ms' in the sink URI: expected a duration like 5s, 200ms or 1m30s, "
            "at least 2s and at most 10m",
        ),
        ({"flush-interval": "11m"}, "invalid flush-interval '11m'"),
        ({"flush-interval": "soon"}, "invalid flush-interval 'soon' in the sink URI: expected a duration"),
        (
            {"file-size": "0"},
            "invalid file-size 0 in the sink URI: expected a size in bytes like 67108864 or 64MiB, "
            "at least 1 MiB and at most 512 MiB",
        ),
        ({"file-size": "1GiB"}, "invalid file-size '1GiB'"),
        ({"file-size": "64MB"}, "invalid file-size '64MB'"),
        (
            {"compression": "brotli"},
            "invalid compression 'brotli' in the sink URI: expected one of: none, lz4",
        ),
        ({"flag": "yes"}, "invalid flag 'yes' in the sink URI: expected true or false"),
        ({"version": "latest"}, "invalid version 'latest' in the sink URI: expected a version like 2.4.0"),
        ({"acks": "2"}, "invalid acks 2 in the sink URI: expected one of: -1, 0, 1"),
        ({"atomicity": "TABLE"}, "invalid atomicity 'TABLE' in the sink URI: expected one of: none, table"),
    ],
)
def test_uri_refusals_name_key_value_source_and_range(query: dict[str, str], message: str) -> None:
    with pytest.raises(SinkURIError) as exc:
        run(query)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            Section(inner=Inner(workers=1000)),
            "invalid sink.inner.workers 1000 in the changefeed config: expected an integer greater than 0 "
            "and at most 512",
        ),
        (Section(inner=Inner(interval="1s")), "invalid sink.inner.interval '1s' in the changefeed config"),
        (Section(inner=Inner(interval="5")), "invalid sink.inner.interval '5' in the changefeed config"),
        (Section(inner=Inner(size=1)), "invalid sink.inner.size 1 in the changefeed config: expected a size"),
        (Section(inner=Inner(mode="zstd")), "invalid sink.inner.mode 'zstd' in the changefeed config"),
        (Section(atomicity="global"), "invalid sink.atomicity 'global' in the changefeed config"),
    ],
)
def test_toml_refusals_name_the_key_path(section: Section, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        run(section=section)
    assert not isinstance(exc.value, SinkURIError)
    assert message in str(exc.value)


def test_a_bad_toml_value_is_not_read_when_the_uri_gives_one() -> None:
    assert run({"worker-count": "8"}, Section(inner=Inner(workers=0)))["worker-count"] == 8


def test_secret_values_are_not_shown() -> None:
    table = OptionTable(
        Option("token", Kind.STR, secret=True, pattern=r"[a-z]+", expect="lower-case letters")
    )
    with pytest.raises(SinkURIError) as exc:
        resolve(table, {"token": "S3CRET"}, None)
    assert "S3CRET" not in str(exc.value) and "invalid token 'xxxxx'" in str(exc.value)


def test_tables_and_options_are_checked_when_declared() -> None:
    with pytest.raises(ValueError, match="declared twice"):
        OptionTable(Option("a", Kind.INT), Option("a", Kind.BOOL))
    with pytest.raises(ValueError, match="default 0 is not allowed"):
        Option("a", Kind.INT, 0, gt=0)
    with pytest.raises(ValueError, match="needs choices"):
        Option("a", Kind.ENUM)
    with pytest.raises(ValueError, match="ge or gt"):
        Option("a", Kind.INT, ge=1, gt=0)
    with pytest.raises(ValueError, match="pattern"):
        Option("a", Kind.INT, pattern="x")


def test_requirement_texts() -> None:
    assert Option("a", Kind.INT, ge=0).requirement() == "an integer at least 0"
    assert Option("a", Kind.INT).requirement() == "an integer"
    assert Option("a", Kind.DURATION, gt=0).requirement().endswith(", greater than 0s")
    assert TABLE["file-size"].requirement().endswith("at least 1 MiB and at most 512 MiB")
    assert TABLE.names[:2] == ("worker-count", "flush-interval") and len(TABLE) == 10


def test_value_helpers() -> None:
    assert [format_duration(s) for s in (0, 0.5, 2, 90, 600, 3600 + 1.5)] == [
        "0s",
        "500ms",
        "2s",
        "1m30s",
        "10m",
        "1h1.5s",
    ]
    assert [format_size(n) for n in (MIB, 1536 * 1024, 1000, 0)] == [
        "1 MiB",
        "1536 KiB",
        "1000 bytes",
        "0 bytes",
    ]
    assert [parse_size(t) for t in ("1024", "2 KiB", "3mib", "1GiB", "1B")] == [
        1024,
        2048,
        3 * MIB,
        1 << 30,
        1,
    ]
    assert parse_size("1.5MiB") is None and parse_size("-1") is None and parse_size("10MB") is None
