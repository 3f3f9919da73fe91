"""A stand-in MySQL 8 server for the login only: caching_sha2_password full authentication.

It speaks the connection phase as MySQL 8 does for a user whose password is not in the server's
cache: a v10 handshake naming caching_sha2_password, then "perform full authentication" (0x01 0x04);
over plain TCP the client asks for the RSA public key (0x02), gets it (0x01 + PEM) and sends the
password XOR the scramble, RSA-OAEP(SHA-1) encrypted; over TLS (after an SSLRequest) it sends the
password in clear. Then every command gets an OK packet. It records what it saw.
"""

from __future__ import annotations

import os
import socket
import ssl
import struct
import threading
from dataclasses import dataclass, field

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

CLIENT_LONG_PASSWORD = 0x1
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_SSL = 0x800
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000
CLIENT_CONNECT_ATTRS = 0x100000
CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA = 0x200000

OK = b"\x00\x00\x00\x02\x00\x00\x00"


@dataclass
class Seen:
    """What the server observed of one login."""

    user: str = ""
    tls: bool = False
    asked_public_key: bool = False
    password: bytes | None = None
    commands: list[bytes] = field(default_factory=list)


class FakeMySQL8:
    """A listening socket on 127.0.0.1 answering logins until ``close``."""

    def __init__(self, password: bytes, *, tls: ssl.SSLContext | None = None, version: str = "8.4.3") -> None:
        self.password = password
        self.tls = tls
        self.version = version
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.seen: list[Seen] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> FakeMySQL8:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn: socket.socket) -> None:
        seen = Seen()
        self.seen.append(seen)
        try:
            self._login(conn, seen)
        except (OSError, ssl.SSLError, ConnectionError):
            pass
        finally:
            conn.close()

    def _login(self, conn: socket.socket, seen: Seen) -> None:
        s: socket.socket = conn
        scramble = bytes(b % 94 + 33 for b in os.urandom(20))  # printable, no NUL, as MySQL's
        caps = (
            CLIENT_LONG_PASSWORD
            | CLIENT_CONNECT_WITH_DB
            | CLIENT_PROTOCOL_41
            | CLIENT_TRANSACTIONS
            | CLIENT_SECURE_CONNECTION
            | CLIENT_MULTI_RESULTS
            | CLIENT_PLUGIN_AUTH
            | CLIENT_CONNECT_ATTRS
            | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
            | (CLIENT_SSL if self.tls else 0)
        )
        hello = (
            b"\x0a"
            + self.version.encode()
            + b"\x00"
            + struct.pack("<I", 11)
            + scramble[:8]
            + b"\x00"
            + struct.pack("<H", caps & 0xFFFF)
            + bytes([255])
            + struct.pack("<H", 2)
            + struct.pack("<H", caps >> 16)
            + bytes([21])
            + b"\x00" * 10
            + scramble[8:]
            + b"\x00"
            + b"caching_sha2_password\x00"
        )
        seq = _send(s, 0, hello)
        seq, pkt = _recv(s)
        client_caps = struct.unpack_from("<I", pkt, 0)[0]
        if client_caps & CLIENT_SSL and self.tls is not None and len(pkt) == 32:
            s = self.tls.wrap_socket(s, server_side=True)
            seen.tls = True
            seq, pkt = _recv(s)
        p = 32
        end = pkt.index(b"\x00", p)
        seen.user = pkt[p:end].decode()
        # the fast-path scramble the client sent is not checked: the "cache" is empty, full auth follows
        seq = _send(s, seq + 1, b"\x01\x04")
        seq, pkt = _recv(s)
        if seen.tls:
            seen.password = pkt[:-1] if pkt.endswith(b"\x00") else pkt
        else:
            if pkt == b"\x02":
                seen.asked_public_key = True
                pem = self.key.public_key().public_bytes(
                    serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
                )
                seq = _send(s, seq + 1, b"\x01" + pem)
                seq, pkt = _recv(s)
            plain = self.key.decrypt(
                pkt,
                padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None),
            )
            clear = bytes(b ^ scramble[i % len(scramble)] for i, b in enumerate(plain))
            seen.password = clear[:-1] if clear.endswith(b"\x00") else clear
        if seen.password != self.password:
            err = (
                b"\xff"
                + struct.pack("<H", 1045)
                + b"#28000"
                + f"Access denied for user '{seen.user}'@'localhost'".encode()
            )
            _send(s, seq + 1, err)
            return
        _send(s, seq + 1, OK)
        while True:
            _, pkt = _recv(s)
            seen.commands.append(pkt)
            if pkt[:1] == b"\x01":  # COM_QUIT
                return
            _send(s, 1, OK)


def _send(s: socket.socket, seq: int, payload: bytes) -> int:
    s.sendall(struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload)
    return seq


def _recv(s: socket.socket) -> tuple[int, bytes]:
    head = _read(s, 4)
    n = head[0] | head[1] << 8 | head[2] << 16
    return head[3], _read(s, n)


def _read(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("client closed")
        out += chunk
    return out


def self_signed(tmp: str) -> tuple[ssl.SSLContext, str]:
    """A server TLS context with a fresh self-signed certificate for 127.0.0.1, and its PEM file."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake-mysql8")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path = os.path.join(tmp, "server.pem")
    key_path = os.path.join(tmp, "server.key")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert_path, key_path)
    return ctx, cert_path
