"""The checks behind the server's and the CLI's one-line refusals: what they accept and refuse."""

from __future__ import annotations

import socket

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.server.client import server_url
from sparkcdc.server.main import bind_listen, parse_listen
from sparkcdc.server.runner import check_spark_master, probe_spark_master, standalone_masters
from sparkcdc.server.service import short_repr


@pytest.mark.parametrize(
    "master",
    [
        "local",
        "local[1]",
        "local[*]",
        "local[4,2]",
        "local[*, 3]",
        "local-cluster[2,1,1024]",
        "spark://m:7077",
        "spark://m1:7077,m2:7077",
        "spark://[::1]:7077",
        "yarn",
        "k8s://https://api.example:6443",
    ],
)
def test_spark_master_forms_are_accepted(master: str) -> None:
    assert check_spark_master(master) == master


@pytest.mark.parametrize(
    ("master", "named"),
    [
        ("garbage", "'garbage'"),
        ("local[0]", "positive number"),
        ("local[two]", "positive number"),
        ("spark://m", "'m' is not HOST:PORT"),
        ("spark://m:0", "'m:0'"),
        ("spark://m:7077,", "'' is not HOST:PORT"),
        ("k8s://", "'k8s://'"),
        ("", "not a Spark master URL"),
    ],
)
def test_bad_spark_masters_are_refused_with_the_forms(master: str, named: str) -> None:
    with pytest.raises(ConfigError) as info:
        check_spark_master(master)
    msg = info.value.message
    assert named in msg and "spark://HOST:PORT" in msg and "local[N]" in msg and "\n" not in msg


def test_unreachable_standalone_master_is_reported() -> None:
    with socket.socket() as s:  # a port that was free a moment ago takes no connections
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert standalone_masters(f"spark://127.0.0.1:{port},[::1]:7") == [("127.0.0.1", port), ("::1", 7)]
    why = probe_spark_master(f"spark://127.0.0.1:{port}", timeout=2)
    assert why is not None and f"127.0.0.1:{port}" in why
    assert probe_spark_master("local[2]") is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert probe_spark_master(f"spark://127.0.0.1:{s.getsockname()[1]}") is None


@pytest.mark.parametrize(
    ("listen", "named"),
    [
        ("127.0.0.1:0", "port 0 is out of range"),
        ("h:65536", "1 to 65535"),
        ("8300", "HOST:PORT"),
        (":1", "HOST:PORT"),
    ],
)
def test_bad_listen_is_refused(listen: str, named: str) -> None:
    with pytest.raises(ConfigError, match="--listen") as info:
        parse_listen(listen)
    assert named in info.value.message


def test_listen_in_use_is_refused() -> None:
    assert parse_listen("[::1]:8300") == ("::1", 8300)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match="another process listens there"):
            bind_listen("127.0.0.1", port, f"127.0.0.1:{port}")


@pytest.mark.parametrize(
    ("given", "url"),
    [
        ("http://127.0.0.1:8300", "http://127.0.0.1:8300"),
        ("127.0.0.1:8300", "http://127.0.0.1:8300"),
        ("https://cdc.example/", "https://cdc.example"),
        (" http://h:1 ", "http://h:1"),
    ],
)
def test_server_urls(given: str, url: str) -> None:
    assert server_url(given) == url


@pytest.mark.parametrize(
    "bad", ["", "http://", "ftp://h", "not a host", "http://h:99999", "http://h:8300/?x=1"]
)
def test_bad_server_urls_are_refused(bad: str) -> None:
    with pytest.raises(ConfigError, match="invalid --server"):
        server_url(bad)


def test_server_url_refusal_masks_the_password() -> None:
    with pytest.raises(ConfigError) as info:
        server_url("ftp://u:Pw-Unit-Secret@h")
    assert "Pw-Unit-Secret" not in info.value.message


def test_short_repr_names_a_long_value_without_echoing_it() -> None:
    assert short_repr("a_b") == "'a_b'"
    text = short_repr("x" * 500)
    assert len(text) < 70 and "(500 characters)" in text
