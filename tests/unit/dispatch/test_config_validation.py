"""ReplicaConfig load-time checks of [filter] rules and [[sink.dispatchers]] (config.replica.validate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sparkcdc.config.replica import ReplicaConfig
from sparkcdc.errors import ConfigError, FilterRuleError


def test_valid_config_loads() -> None:
    cfg = ReplicaConfig.from_toml(
        """
        [filter]
        rules = ["shop.*", "!shop.tmp_*", "/^log_\\\\d+$/.*"]
        [[filter.event-filters]]
        matcher = ["shop.orders"]
        ignore-event = ["delete"]
        [sink]
        protocol = "avro"
        dispatchers = [
          {matcher = ["shop.*"], topic = "cdc_{schema}_{table}", partition = "[id, region]"},
          {matcher = ["log_*.*"], topic = "logs_{schema}_{table}", partition = "2"},
          {matcher = ["*.*"], dispatcher = "rowid"},
        ]
        """
    )
    assert [d.partition for d in cfg.sink.dispatchers] == ["[id, region]", "2", ""]


def test_bad_filter_rule_is_refused_at_load() -> None:
    with pytest.raises(FilterRuleError, match=r"filter.rules: invalid table filter rule 'db%.t'.*'%'"):
        ReplicaConfig.from_toml('[filter]\nrules = ["db%.t"]\n')


def test_bad_event_filter_matcher_is_refused() -> None:
    with pytest.raises(FilterRuleError, match=r"filter.event-filters\[0\].matcher: .*wrong table pattern"):
        ReplicaConfig.from_toml('[[filter.event-filters]]\nmatcher = ["db"]\n')


def test_bad_column_selector_matcher_is_refused() -> None:
    # column selectors are not implemented: any rule is refused, a bad one too
    with pytest.raises(ConfigError, match=r"'sink.column-selectors' is accepted by TiCDC, not supported"):
        ReplicaConfig.from_toml('[[sink.column-selectors]]\nmatcher = ["/x/./(?=y)/"]\ncolumns = ["a"]\n')


@pytest.mark.parametrize(
    ("dispatcher", "error", "message"),
    [
        ('{matcher = ["a.b.c"]}', FilterRuleError, r"sink.dispatchers\[0\].matcher: .*stray characters"),
        (
            '{matcher = ["*.*"], partition = "hash"}',
            ConfigError,
            r"unknown partition rule 'hash'; valid rules",
        ),
        ('{matcher = ["*.*"], partition = "-1"}', ConfigError, r"fixed partition must be an integer"),
        ('{matcher = ["*.*"], topic = "{table}{schema}"}', ConfigError, r"invalid topic expression"),
        ('{matcher = ["*.*"], partition = "ts", index = "uk"}', ConfigError, r"only applies to partition"),
        (
            '{matcher = ["*.*"], partition = "ts", dispatcher = "table"}',
            ConfigError,
            r"cannot be configured both",
        ),
        ("{matcher = []}", ConfigError, r"matcher is empty"),
    ],
)
def test_bad_dispatcher_is_refused_at_load(dispatcher: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        ReplicaConfig.from_toml(f"[sink]\ndispatchers = [{dispatcher}]\n")


def test_avro_protocol_checks_topic_rules_at_load() -> None:
    with pytest.raises(ConfigError, match=r"topic rule for Avro must contain \{schema\} and \{table\}"):
        ReplicaConfig.from_toml(
            '[sink]\nprotocol = "avro"\ndispatchers = [{matcher = ["*.*"], topic = "{schema}"}]\n'
        )
    # the same rule is fine for canal-json
    ReplicaConfig.from_toml(
        '[sink]\nprotocol = "canal-json"\ndispatchers = [{matcher = ["*.*"], topic = "{schema}"}]\n'
    )


def test_filter_import_file_is_read_at_load(tmp_path: Path) -> None:
    rules = tmp_path / "rules.txt"
    rules.write_text("db.*\nbad rule\n")
    with pytest.raises(FilterRuleError, match=r"rules\.txt:2: unexpected special character ' '"):
        ReplicaConfig.from_toml(f'[filter]\nrules = ["@{rules}"]\n')
