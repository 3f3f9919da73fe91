"""ReplicaConfig keys mean what they say: TiCDC keys sparkcdc does not implement are refused by
name, values outside their declared range are refused with the key, the value and the range, and a
dumped config loads again."""

from __future__ import annotations

import dataclasses
import json
import typing

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, FilterRuleError

UNSUPPORTED = "is accepted by TiCDC, not supported by sparkcdc; remove it"


@pytest.mark.parametrize(
    ("toml", "key"),
    [
        ("memory-quota = 1073741824", "memory-quota"),
        ("memory-quota = -1", "memory-quota"),
        ("enable-sync-point = true", "enable-sync-point"),
        ("enable-old-value = false", "enable-old-value"),
        ("check-gc-safe-point = false", "check-gc-safe-point"),
        ("[mounter]\nworker-num = 16", "mounter.worker-num"),
        ("[filter]\nignore-txn-start-ts = [4242]", "filter.ignore-txn-start-ts"),
        ("[sink]\nencoder-concurrency = 32", "sink.encoder-concurrency"),
        ("[sink]\nenable-partition-separator = true", "sink.enable-partition-separator"),
        ("[sink]\nenable-kafka-sink-v2 = true", "sink.enable-kafka-sink-v2"),
        ('[[sink.column-selectors]]\nmatcher = ["db.t"]\ncolumns = ["a"]', "sink.column-selectors"),
        *[
            (
                f'[[filter.event-filters]]\nmatcher = ["db.t"]\nignore-event = ["delete"]\n{k} = "id > 1"',
                f"filter.event-filters[0].{k}",
            )
            for k in (
                "ignore-insert-value-expr",
                "ignore-update-new-value-expr",
                "ignore-update-old-value-expr",
                "ignore-delete-value-expr",
            )
        ],
    ],
)
def test_unsupported_ticdc_keys_are_refused_by_name(toml: str, key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        ReplicaConfig.from_toml(toml)
    msg = exc.value.message
    assert msg.startswith(f"config key {key!r} {UNSUPPORTED}"), msg
    assert "\n" not in msg and "unknown" not in msg


@pytest.mark.parametrize(
    "toml",
    [
        "enable-sync-point = false",
        "enable-old-value = true",
        "check-gc-safe-point = true",
        "[filter]\nignore-txn-start-ts = []",
        "[sink]\nenable-partition-separator = false",
        "[sink]\nenable-kafka-sink-v2 = false",
        "[sink]\ncolumn-selectors = []",
        '[[filter.event-filters]]\nmatcher = ["db.t"]\nignore-event = ["delete"]\nignore-delete-value-expr = ""',
        "[mounter]",
    ],
)
def test_the_value_sparkcdc_always_behaves_as_is_accepted(toml: str) -> None:
    ReplicaConfig.from_toml(toml)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            "[sink]\nfile-index-digit = 5",
            "invalid value 5 for 'sink.file-index-digit'; allowed: an integer from 6 to 20",
        ),
        (
            "[sink]\nfile-index-digit = 21",
            "invalid value 21 for 'sink.file-index-digit'; allowed: an integer from 6 to 20",
        ),
        (
            "[snapshot]\nparallelism = -1",
            "invalid value -1 for 'snapshot.parallelism'; allowed: an integer >= 0",
        ),
        ("[snapshot]\nchunk-size = 0", "invalid value 0 for 'snapshot.chunk-size'; allowed: an integer >= 1"),
        ("[filter]\nrules = []", "invalid value [] for 'filter.rules'; allowed: a non-empty value"),
        (
            "[sink.csv]\ndelimiter = ''",
            "invalid value '' for 'sink.csv.delimiter'; allowed: a non-empty value",
        ),
        ("[sink]\nterminator = ''", "invalid value '' for 'sink.terminator'; allowed: a non-empty value"),
        ("[sink.csv]\nnull = ','", "invalid value ',' for 'sink.csv.null': it contains the delimiter ','"),
        (
            "[sink.csv]\ndelimiter = '|'\nnull = 'a|b'",
            "invalid value 'a|b' for 'sink.csv.null': it contains the delimiter",
        ),
        ("[sink.csv]\nnull = '\"'", "invalid value '\"' for 'sink.csv.null': it contains the quote"),
        (
            "[sink.csv]\nbinary-encoding-method = 'base32'",
            "invalid value 'base32' for 'sink.csv.binary-encoding-method'; allowed: base64, hex",
        ),
        (
            "[sink]\ndate-separator = 'week'",
            "invalid value 'week' for 'sink.date-separator'; allowed: none, year",
        ),
        (
            "[sink]\ntransaction-atomicity = 'global'",
            "invalid value 'global' for 'sink.transaction-atomicity'",
        ),
        (
            "[snapshot]\nmode = 'always'",
            "invalid value 'always' for 'snapshot.mode'; allowed: never, initial",
        ),
    ],
)
def test_out_of_range_values_are_refused(toml: str, message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        ReplicaConfig.from_toml(toml)
    assert exc.value.message.startswith(message), exc.value.message


@pytest.mark.parametrize(
    "toml",
    [
        "[sink]\nfile-index-digit = 6",
        "[sink]\nfile-index-digit = 20",
        "[snapshot]\nparallelism = 0\nchunk-size = 1",
        "[sink.csv]\nquote = ''\nnull = ''",
        "[sink.csv]\nnull = 'NULL'",
    ],
)
def test_range_limits_are_inclusive(toml: str) -> None:
    ReplicaConfig.from_toml(toml)


def test_event_filter_rules_are_checked_at_load() -> None:
    with pytest.raises(
        FilterRuleError, match=r"invalid value 'erase' for 'filter.event-filters\[1\].ignore-event\[0\]'"
    ):
        ReplicaConfig.from_toml(
            '[[filter.event-filters]]\nmatcher = ["a.*"]\nignore-event = ["delete"]\n'
            '[[filter.event-filters]]\nmatcher = ["b.*"]\nignore-event = ["erase"]\n'
        )
    with pytest.raises(
        FilterRuleError,
        match=r"invalid regular expression '\[' for 'filter.event-filters\[0\].ignore-sql\[0\]'",
    ):
        ReplicaConfig.from_toml('[[filter.event-filters]]\nmatcher = ["a.*"]\nignore-sql = ["["]\n')


FULL = """
case-sensitive = true
force-replicate = false
time-zone = "Asia/Shanghai"
enable-old-value = true
[filter]
rules = ["shop.*", "!shop.tmp_*"]
[[filter.event-filters]]
matcher = ["shop.orders"]
ignore-event = ["delete", "drop table"]
ignore-sql = ["^ALTER TABLE .* ADD COLUMN"]
[mounter]
[sink]
protocol = "csv"
file-index-digit = 6
date-separator = "none"
enable-partition-separator = false
[sink.csv]
delimiter = "|"
null = "NULL"
[snapshot]
mode = "initial"
parallelism = 4
"""


def test_a_dumped_config_loads_again() -> None:
    cfg = ReplicaConfig.from_toml(FULL)
    dumped = cfg.to_dict()
    assert ReplicaConfig.from_dict(json.loads(json.dumps(dumped))) == cfg
    assert ReplicaConfig.from_dict(ReplicaConfig().to_dict()) == ReplicaConfig()
    # unsupported keys are left out, so the dump never trips over its own refusal
    for key in ("memory-quota", "enable-sync-point", "enable-old-value", "check-gc-safe-point", "mounter"):
        assert key not in dumped
    assert "ignore-txn-start-ts" not in dumped["filter"]
    assert set(dumped["filter"]["event-filters"][0]) == {"matcher", "ignore-event", "ignore-sql"}
    for key in (
        "encoder-concurrency",
        "enable-partition-separator",
        "enable-kafka-sink-v2",
        "column-selectors",
    ):
        assert key not in dumped["sink"]


def test_the_unsupported_keys_are_declared() -> None:
    """The TiCDC keys sparkcdc declares and refuses (README: configuration)."""
    declared: set[str] = set()
    hints_cache: dict[type, dict[str, object]] = {}

    def walk_typed(cls: type, prefix: str) -> None:
        hints = hints_cache.setdefault(cls, typing.get_type_hints(cls))
        for f in dataclasses.fields(cls):
            key = prefix + f.name.replace("_", "-")
            tp = hints[f.name]
            if "unsupported" in f.metadata:
                declared.add(key)
            elif isinstance(tp, type) and dataclasses.is_dataclass(tp):
                walk_typed(tp, key + ".")
            elif typing.get_origin(tp) is list:
                (inner,) = typing.get_args(tp)
                if isinstance(inner, type) and dataclasses.is_dataclass(inner):
                    walk_typed(inner, key + "[].")

    walk_typed(ReplicaConfig, "")
    assert declared >= {
        "memory-quota",
        "enable-sync-point",
        "enable-old-value",
        "check-gc-safe-point",
        "mounter.worker-num",
        "filter.ignore-txn-start-ts",
        "filter.event-filters[].ignore-insert-value-expr",
        "filter.event-filters[].ignore-update-new-value-expr",
        "filter.event-filters[].ignore-update-old-value-expr",
        "filter.event-filters[].ignore-delete-value-expr",
        "sink.encoder-concurrency",
        "sink.enable-partition-separator",
        "sink.enable-kafka-sink-v2",
        "sink.column-selectors",
    }


def test_a_stored_config_of_an_older_version_loads_without_its_unsupported_keys() -> None:
    # Older versions stored every key, the unsupported ones included; they were ignored then.
    stored = {
        "memory-quota": 1073741824,
        "enable-sync-point": False,
        "mounter": {"worker-num": 16},
        "sink": {"encoder-concurrency": 32, "protocol": "csv", "enable-partition-separator": True},
        "filter": {"rules": ["app.*"], "ignore-txn-start-ts": []},
    }
    cfg = ReplicaConfig.from_stored(stored)
    assert cfg.filter.rules == ["app.*"] and cfg.sink.protocol == "csv"
    assert ReplicaConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="'memory-quota' is accepted by TiCDC, not supported by sparkcdc"):
        ReplicaConfig.from_dict(stored)
    with pytest.raises(ConfigError, match="must be a list"):  # a stored config is still typed
        ReplicaConfig.from_stored({"filter": {"rules": "app.*"}})
