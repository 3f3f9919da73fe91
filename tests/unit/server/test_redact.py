"""Secrets never leave the server: config masking, URI redaction, message scrubbing."""

from __future__ import annotations

from sparkcdc.config.uri import uri_secrets
from sparkcdc.filter import TableFilter
from sparkcdc.model.ts import compose_ts
from sparkcdc.server.redact import redact_config, scrub
from sparkcdc.server.service import subscription_rule, ts_time


def test_redact_config_masks_secret_keys_and_uris() -> None:
    cfg = {
        "sink": {
            "kafka-config": {"sasl-password": "pw1", "sasl-user": "bob", "key": "/etc/key.pem"},
            "schema-registry": "http://reg:pw2@h:8081",
            "dispatchers": [{"topic": "t", "partition": "table"}],
        },
        "case-sensitive": False,
        "token": None,
    }
    out = redact_config(cfg)
    assert out["sink"]["kafka-config"] == {
        "sasl-password": "xxxxx",
        "sasl-user": "bob",
        "key": "/etc/key.pem",
    }
    assert out["sink"]["schema-registry"] == "http://reg:xxxxx@h:8081"
    assert out["sink"]["dispatchers"] == [{"topic": "t", "partition": "table"}]
    assert out["case-sensitive"] is False and out["token"] is None
    assert cfg["sink"]["kafka-config"]["sasl-password"] == "pw1"  # a copy


def test_scrub_removes_passwords_and_secret_parameters() -> None:
    uris = [
        "mysql://u:p%40ss-word@h:3306/",
        "kafka://h:9092/t?protocol=canal-json&sasl-password=kafkapw",
        None,
    ]
    assert set(uri_secrets(" ".join(u for u in uris if u))) >= {"p%40ss-word", "p@ss-word", "kafkapw"}
    text = "login failed for u with p@ss-word (kafka sasl kafkapw) via p%40ss-word"
    assert scrub(text, uris) == "login failed for u with xxxxx (kafka sasl xxxxx) via xxxxx"
    assert scrub(None, uris) is None
    # very short passwords are masked in URIs but not searched in free text
    assert scrub("a b", ["mysql://u:a@h/"]) == "a b"


def test_subscription_rule_selects_exactly_one_table_whatever_its_name() -> None:
    for db, table in [("app", "orders"), ("my.db", "t*"), ("we`ird", "na me"), ("APP", "Orders")]:
        rule = subscription_rule(db, table)
        f = TableFilter.changefeed_filter([rule])
        assert f.match(db, table), rule
        assert not f.match(db, table + "x") and not f.match(db + "x", table), rule
    assert not TableFilter.changefeed_filter([subscription_rule("my.db", "t*")]).match("my.db", "tt")


def test_checkpoint_time_format() -> None:
    assert ts_time(compose_ts(1_700_000_000_123, 5)) == "2023-11-14 22:13:20.123"
