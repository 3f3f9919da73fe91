"""caching_sha2_password (MySQL 8's default) through ``UpstreamConfig.connect``, and the TLS options of the URI.

Against ``fake_server.FakeMySQL8``, which performs MySQL 8's full authentication: the RSA key
exchange over plain TCP, the clear password over TLS.
"""

from __future__ import annotations

from pathlib import Path

import pymysql
import pytest

from sparkcdc.capture.upstream import UpstreamConfig
from sparkcdc.errors import ConfigError, UpstreamSetupError, UpstreamUnavailable
from tests.unit.mysql8.fake_server import FakeMySQL8, self_signed

PASSWORD = "s3cret-ü"


def test_full_auth_over_plain_tcp_uses_the_rsa_key_exchange() -> None:
    with FakeMySQL8(PASSWORD.encode("latin1")) as srv:
        up = UpstreamConfig.from_uri(f"mysql://cdc:{PASSWORD}@127.0.0.1:{srv.port}/?ssl-mode=disabled")
        conn = up.connect()
        conn.ping(reconnect=False)
        conn.close()
        seen = srv.seen[0]
        assert (seen.user, seen.tls, seen.asked_public_key) == ("cdc", False, True)
        assert seen.password == PASSWORD.encode("latin1")


def test_preferred_mode_falls_back_to_plain_tcp() -> None:
    with FakeMySQL8(b"pw") as srv:
        conn = UpstreamConfig.from_uri(f"mysql://cdc:pw@127.0.0.1:{srv.port}/").connect()
        conn.close()
        assert not srv.seen[0].tls and srv.seen[0].asked_public_key


@pytest.mark.parametrize("mode", ["preferred", "required", "verify-ca", "verify-identity"])
def test_full_auth_over_tls_sends_the_password_inside_tls(mode: str, tmp_path: Path) -> None:
    ctx, ca = self_signed(str(tmp_path))
    with FakeMySQL8(b"pw", tls=ctx) as srv:
        ca_param = f"&ssl-ca={ca}" if mode.startswith("verify") else ""
        up = UpstreamConfig.from_uri(f"mysql://cdc:pw@127.0.0.1:{srv.port}/?ssl-mode={mode}{ca_param}")
        conn = up.connect()
        conn.ping(reconnect=False)
        conn.close()
        seen = srv.seen[0]
        assert seen.tls and not seen.asked_public_key and seen.password == b"pw"


def test_wrong_password_is_a_setup_error() -> None:
    with FakeMySQL8(b"right") as srv:
        up = UpstreamConfig.from_uri(f"mysql://cdc:wrong@127.0.0.1:{srv.port}/")
        with pytest.raises(UpstreamSetupError, match=r"refused user 'cdc'.*check the user and password"):
            up.connect()


def test_tls_required_but_not_offered(tmp_path: Path) -> None:
    with FakeMySQL8(b"pw") as srv:
        up = UpstreamConfig.from_uri(f"mysql://cdc:pw@127.0.0.1:{srv.port}/?ssl-mode=required")
        with pytest.raises(UpstreamSetupError, match=r"TLS to upstream 127.0.0.1:.*ssl-mode=required"):
            up.connect()


def test_tls_with_the_wrong_ca_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ctx, _ = self_signed(str(tmp_path / "a"))
    _, other_ca = self_signed(str(tmp_path / "b"))
    with FakeMySQL8(b"pw", tls=ctx) as srv:
        up = UpstreamConfig.from_uri(f"mysql://cdc:pw@127.0.0.1:{srv.port}/?ssl-ca={other_ca}")
        assert up.ssl_mode == "verify-ca"
        with pytest.raises(
            UpstreamSetupError, match=r"TLS to upstream .*ssl-mode=verify-ca.*CERTIFICATE_VERIFY_FAILED"
        ):
            up.connect()


def test_without_cryptography_the_fix_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pymysql._auth, "_have_cryptography", False)
    with FakeMySQL8(b"pw") as srv:
        up = UpstreamConfig.from_uri(f"mysql://cdc:pw@127.0.0.1:{srv.port}/?ssl-mode=disabled")
        with pytest.raises(
            UpstreamSetupError, match=r"install the 'cryptography' package .*ssl-mode=required"
        ):
            up.connect()


@pytest.mark.parametrize(
    ("query", "pattern"),
    [
        (
            "ssl-mode=sometimes",
            "invalid ssl-mode 'sometimes'.*disabled, preferred, required, verify-ca, verify-identity",
        ),
        ("ssl-mode=verify-ca", "ssl-mode=verify-ca .* needs ssl-ca="),
        ("ssl-mode=disabled&ssl-ca=ca.pem", "ssl-mode=disabled together with ssl-ca"),
        ("ssl-cert=client.pem", "ssl-cert and ssl-key together"),
        ("ssl-ca=/nonexistent/ca.pem", "ssl-ca file '/nonexistent/ca.pem' .* does not exist"),
        ("tls=1", r"unknown upstream URI parameter\(s\) \['tls'\].*ssl-mode, ssl-ca, ssl-cert, ssl-key"),
    ],
)
def test_bad_tls_parameters(query: str, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        UpstreamConfig.from_uri(f"mysql://cdc:pw@db:3306/?{query}")


def test_tls_parameters_default_and_pickle() -> None:
    import pickle

    up = UpstreamConfig.from_uri("mysql://cdc:pw@db:3306/")
    assert up.ssl_mode == "preferred" and up._tls() == {}
    assert UpstreamConfig.from_uri("mysql://cdc:pw@db:3306/?ssl-mode=DISABLED")._tls() == {
        "ssl_disabled": True
    }
    assert pickle.loads(pickle.dumps(up)) == up


def test_unreachable_stays_transient() -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(UpstreamUnavailable):
        UpstreamConfig.from_uri(f"mysql://cdc:pw@127.0.0.1:{port}/?connect-timeout=2s").connect()
