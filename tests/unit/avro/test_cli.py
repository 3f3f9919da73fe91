"""``sparkcdc schema-registry`` argument handling."""

from __future__ import annotations

import pytest

from sparkcdc.cli.cmd_schema_registry import parse_listen
from sparkcdc.cli.main import build_parser
from sparkcdc.errors import ConfigError


def test_parse_listen() -> None:
    assert parse_listen("127.0.0.1:8081") == ("127.0.0.1", 8081)
    assert parse_listen("[::1]:9000") == ("::1", 9000)


@pytest.mark.parametrize("bad", ["8081", "host:", ":80", "h:99999", "h:port"])
def test_parse_listen_refuses_bad_values(bad: str) -> None:
    with pytest.raises(ConfigError, match="expected host:port"):
        parse_listen(bad)


def test_command_is_discovered_with_defaults() -> None:
    args = build_parser().parse_args(["schema-registry", "--listen", "127.0.0.1:1234"])
    assert args.listen == "127.0.0.1:1234"
    assert args.meta_uri == "sqlite:///schema-registry.db"
    assert callable(args.func)
