"""A catalogue of bad input to ``sparkcdc run``: every one is refused in one line, before Spark starts.

Each case is the real command (a subprocess) with one bad value and everything else valid (a real
upstream). It must exit non-zero within 30 s, print exactly one line (``Error: [CDC:Err...] ...``,
no traceback), name the bad value or key, and never print a secret (the passwords and secret
parameters below all contain ``Sekr3t``). ``JAVA_HOME`` points nowhere: had Spark been started,
the command would fail with a Java gateway error instead. The cases run in parallel.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

FAST = 30.0
SECRET = "Sekr3t"


@dataclass(frozen=True)
class Env:
    """What a case builds its arguments from."""

    tmp: Path
    up: str
    """A valid upstream URI."""
    port: int
    """The upstream's port."""
    silent_port: int
    """A port that accepts connections and never answers."""
    inside: str
    """``FILE:POS`` of a position inside a transaction of the upstream's binlog."""

    @property
    def sink(self) -> str:
        return f"file://{self.tmp / 'sink'}?protocol=csv"


@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[Env], list[str]]
    """Everything after ``run`` but ``--data-dir`` (added unless given)."""
    expect: list[str]
    secrets: list[str] = field(default_factory=lambda: [SECRET])
    prepare: Callable[[Path], None] | None = None


def _upstream(uri: Callable[[Env], str]) -> Callable[[Env], list[str]]:
    return lambda e: ["--upstream-uri", uri(e), "--sink-uri", e.sink]


def _sink(uri: str) -> Callable[[Env], list[str]]:
    return lambda e: ["--upstream-uri", e.up, "--sink-uri", uri.replace("{tmp}", str(e.tmp))]


def _flags(*flags: str) -> Callable[[Env], list[str]]:
    return lambda e: ["--upstream-uri", e.up, "--sink-uri", e.sink, *flags]


def _toml(case_id: str, body: bytes | str, expect: list[str]) -> Case:
    def prepare(tmp: Path) -> None:
        (tmp / "cf.toml").write_bytes(body if isinstance(body, bytes) else body.encode())

    return Case(
        case_id, lambda e: [*_flags()(e), "--config", str(e.tmp / "cf.toml")], expect, prepare=prepare
    )


def _checkpoint(tmp: Path) -> None:
    d = tmp / "data" / "cf-done"
    d.mkdir(parents=True)
    (d / "checkpoint.json").write_text(
        '{"checkpoint_ts": 5000, "end": {"file": "x.000001", "pos": 4, "ts": 5000}}'
    )


def _a_file(tmp: Path) -> None:
    (tmp / "afile").write_text("not a folder")


CASES: list[Case] = [
    # --- upstream URI: shape, parameters, secrets of URIs that do not parse ---
    Case(
        "up-scheme",
        _upstream(lambda e: f"postgres://u:{SECRET}@127.0.0.1:{e.port}/"),
        ["'postgres'", "mysql://"],
    ),
    Case(
        "up-password-hash",
        _upstream(lambda e: f"mysql://root:p#{SECRET}@127.0.0.1:{e.port}/"),
        ["invalid upstream URI", "percent-encode"],
    ),
    Case(
        "up-password-slash",
        _upstream(lambda e: f"mysql://root:p/{SECRET}@127.0.0.1:{e.port}/"),
        ["invalid upstream URI", "percent-encode"],
    ),
    Case(
        "up-password-at-and-bad-port",
        _upstream(lambda e: f"mysql://root:a@{SECRET}@127.0.0.1:99999/"),
        ["invalid upstream URI", "99999"],
    ),
    Case(
        "up-port-not-a-number",
        _upstream(lambda e: f"mysql://root:{SECRET}@127.0.0.1:abc/"),
        ["the port is not a number"],
    ),
    Case(
        "up-port-zero",
        _upstream(lambda e: f"mysql://root:{SECRET}@127.0.0.1:0/"),
        ["port 0 is out of range 1-65535"],
    ),
    Case(
        "up-bad-ipv6",
        _upstream(lambda e: f"mysql://root:{SECRET}@[::1:3306/"),
        ["bad IPv6 host", "[::1:3306"],
    ),
    Case("up-no-host", _upstream(lambda e: f"mysql://root:{SECRET}@:3306/"), ["has no host"]),
    Case(
        "up-connect-timeout",
        _upstream(lambda e: f"{e.up}?connect-timeout=abc"),
        ["'abc'", "'connect-timeout'"],
    ),
    Case("up-read-timeout", _upstream(lambda e: f"{e.up}?read-timeout=-5"), ["'-5'", "'read-timeout'"]),
    Case(
        "up-unknown-param",
        _upstream(lambda e: f"{e.up}?time_zone=UTC&password={SECRET}"),
        ["'time_zone'", "supported: time-zone"],
    ),
    Case(
        "up-time-zone",
        _upstream(lambda e: f"{e.up}?time-zone=Mars/Olympus"),
        ["'Mars/Olympus'", "Asia/Shanghai"],
    ),
    Case(
        "up-silent-port",
        _upstream(lambda e: f"mysql://root:{SECRET}@127.0.0.1:{e.silent_port}/"),
        ["cannot connect to upstream", "timed out"],
    ),
    Case(
        "up-wrong-password",
        _upstream(lambda e: f"mysql://root:{SECRET}@127.0.0.1:{e.port}/"),
        ["refused user 'root'", "check the user and password"],
    ),
    # --- sink URI ---
    Case("sink-scheme-with-password", _sink(f"ftp://u:{SECRET}@h/x?protocol=csv"), ["'ftp'", "kafka"]),
    Case(
        "sink-kafka-unknown-param",
        _sink(f"kafka://127.0.0.1:9/t?protocol=canal-json&sasl-user=u&sasl-password={SECRET}&bogus=1"),
        ["'bogus'"],
    ),
    Case(
        "sink-s3-unknown-param",
        _sink(f"s3://b/p?protocol=csv&access-key=A&secret-access-key={SECRET}&regoin=x"),
        ["'regoin'"],
    ),
    Case("sink-mysql-bad-ipv6", _sink(f"mysql://u:{SECRET}@[::1:3306/"), ["[::1:3306"]),
    Case("sink-mysql-password-hash", _sink(f"mysql://u:p#{SECRET}@127.0.0.1:3306/"), ["percent-encoded"]),
    Case("sink-no-scheme", _sink("{tmp}/sink"), ["scheme"]),
    # Reached before Spark starts: a broker or downstream that is not there, a wrong password.
    Case(
        "sink-kafka-unreachable",
        _sink("kafka://127.0.0.1:9/t?protocol=canal-json&dial-timeout=2s"),
        ["cannot reach the Kafka brokers 127.0.0.1:9"],
    ),
    Case(
        "sink-mysql-unreachable",
        _sink(f"mysql://u:{SECRET}@127.0.0.1:9/"),
        ["cannot reach the MySQL sink", "127.0.0.1:9"],
    ),
    Case(
        "sink-mysql-wrong-password",
        lambda e: ["--upstream-uri", e.up, "--sink-uri", f"mysql://root:{SECRET}@127.0.0.1:{e.port}/"],
        ["access denied"],
    ),
    Case(
        "sink-mysql-time-zone",
        lambda e: [
            "--upstream-uri",
            e.up,
            "--sink-uri",
            f"mysql://root:{SECRET}@127.0.0.1:{e.port}/?time-zone=Mars/Olympus",
        ],
        ["Mars/Olympus"],
    ),
    Case(
        "sink-mysql-read-timeout",
        lambda e: [
            "--upstream-uri",
            e.up,
            "--sink-uri",
            f"mysql://root:{SECRET}@127.0.0.1:{e.port}/?read-timeout=abc",
        ],
        ["'abc'", "read-timeout"],
    ),
    Case(
        "sink-kafka-dial-timeout",
        _sink("kafka://127.0.0.1:9/t?protocol=canal-json&dial-timeout=abc"),
        ["'abc'", "dial-timeout"],
    ),
    Case(
        "sink-storage-file-size",
        _sink("file://{tmp}/sink?protocol=csv&file-size=big"),
        ["'big'", "file-size"],
    ),
    # --- flags ---
    Case("id-empty", _flags("-c", ""), ["invalid changefeed id ''", "at most 128 characters"]),
    Case("id-too-long", _flags("-c", "a" * 129), ["invalid changefeed id 'aaaa", "at most 128 characters"]),
    Case("id-underscore", _flags("-c", "my_feed"), ["'my_feed'", "single dashes"]),
    Case(
        "master-garbage",
        _flags("--master", "lcoal[2]"),
        ["--master 'lcoal[2]'", "local[N]", "spark://HOST:PORT"],
    ),
    Case("master-spark-no-port", _flags("--master", "spark://host"), ["'spark://host'", "spark://HOST:PORT"]),
    Case("master-local-zero", _flags("--master", "local[0]"), ["'local[0]'"]),
    Case(
        "master-down",
        _flags("--master", "spark://127.0.0.1:9"),
        ["ErrSparkMasterUnreachable", "spark://127.0.0.1:9", "Connection refused"],
    ),
    Case(
        "metrics-port-range",
        _flags("--metrics-listen", "127.0.0.1:70000"),
        ["'127.0.0.1:70000'", "1 to 65535"],
    ),
    Case(
        "metrics-no-port",
        _flags("--metrics-listen", "localhost"),
        ["--metrics-listen 'localhost'", "HOST:PORT"],
    ),
    Case("start-ts-not-a-number", _flags("--start-ts", "abc"), ["--start-ts", "'abc'"]),
    Case("start-ts-negative", _flags("--start-ts", "-1"), ["--start-ts -1"]),
    Case("start-ts-2-64", _flags("--start-ts", str(1 << 64)), [f"--start-ts {1 << 64}", "from 0 to"]),
    Case(
        "start-ts-future",
        _flags("--start-ts", str((1 << 63) - 1)),
        [f"start-ts {(1 << 63) - 1} is after the upstream's current ts"],
    ),
    Case(
        "start-ts-and-position",
        _flags("--start-ts", "5", "--start-position", "x.000001:4"),
        ["--start-ts and --start-position"],
    ),
    Case("start-position-garbage", _flags("--start-position", "foo"), ["'foo'", "FILE:POS"]),
    Case("start-position-no-such-file", _flags("--start-position", "nope-bin.999999:4"), ["nope-bin.999999"]),
    Case(
        "start-position-not-a-boundary",
        lambda e: _flags("--start-position", e.inside)(e),
        ["is not a transaction boundary", "SHOW MASTER STATUS"],
    ),
    Case(
        "start-position-inside-the-file-header",
        lambda e: _flags("--start-position", e.inside.rpartition(":")[0] + ":5")(e),
        [":5 is not a transaction boundary"],
    ),
    Case(
        "start-gtid-unknown",
        _flags("--start-gtid", "0-1-999999999"),
        ["GTID 0-1-999999999", "not in the master's binlog"],
    ),
    Case("start-gtid-garbage", _flags("--start-gtid", "abc"), ["'abc'", "0-1-1234"]),
    Case("start-gtid-bad-uuid", _flags("--start-gtid", "zz:1"), ["'zz' is not a server UUID"]),
    Case(
        "start-gtid-mysql-set-on-mariadb",
        _flags("--start-gtid", "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"),
        ["has no MySQL GTIDs", "--start-position"],
    ),
    Case("up-empty", lambda e: ["--upstream-uri", "", "--sink-uri", e.sink], ["upstream URI"]),
    Case("sink-empty", lambda e: ["--upstream-uri", e.up, "--sink-uri", ""], ["sink URI"]),
    Case("data-dir-empty", lambda e: [*_flags()(e), "--data-dir", ""], ["data dir"]),
    Case(
        "config-is-a-directory", lambda e: [*_flags()(e), "--config", str(e.tmp)], ["cannot read config file"]
    ),
    Case(
        "target-before-start",
        _flags("--start-ts", "100", "--target-ts", "50"),
        ["ErrTargetTsBeforeStartTs", "start-ts 100", "target-ts 50"],
    ),
    Case(
        "target-reached",
        _flags("-c", "cf-done", "--target-ts", "100"),
        ["--target-ts 100", "checkpoint-ts 5000"],
        prepare=_checkpoint,
    ),
    Case("trigger-interval", _flags("--trigger-interval", "soon"), ["'soon'", "200 milliseconds"]),
    Case(
        "spark-conf",
        _flags("--spark-conf", "spark.executor.memory"),
        ["'spark.executor.memory'", "KEY=VALUE"],
    ),
    Case(
        "data-dir-file",
        lambda e: [*_flags()(e), "--data-dir", str(e.tmp / "afile")],
        ["is a file"],
        prepare=_a_file,
    ),
    Case(
        "data-dir-secret",
        lambda e: [*_flags()(e), "--data-dir", f"s3://b/x?access-key=A&secret-access-key={SECRET}&bogus=1"],
        ["'bogus'"],
    ),
    Case("unknown-command-flag", _flags("--start-tss", "5"), ["--start-tss"]),
    # --- changefeed TOML ---
    _toml("toml-time-zone", "time-zone = 'Mars/Olympus'\n", ["Mars/Olympus"]),
    _toml("toml-binary", b"\xff\xfe\x00\x01binary", ["not UTF-8", "0xff"]),
    Case(
        "toml-missing",
        lambda e: [*_flags()(e), "--config", str(e.tmp / "missing.toml")],
        ["cannot read config file", "missing.toml"],
    ),
    _toml("toml-syntax", "[sink\nprotocol = 'csv'\n", ["invalid TOML"]),
    _toml("toml-empty-filter-rule", "[filter]\nrules = ['']\n", ["filter.rules[0]", "empty rule"]),
    _toml("toml-filter-rules-type", "[filter]\nrules = 'db.*'\n", ["filter.rules"]),
    _toml("toml-unknown-key", "enable-old-valu = true\n", ["'enable-old-valu'"]),
    _toml(
        "toml-secret-in-registry",
        (f"[sink]\nschema-registry = 'http://u:{SECRET}@h:8081'\nprotocl = 1\n"),
        ["'sink.protocl'"],
    ),
]


def _silent_listener() -> tuple[socket.socket, int]:
    """A socket that accepts TCP connections (the kernel completes them) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s, s.getsockname()[1]


def _inside_a_transaction(mariadb: LocalMariaDB) -> str:
    """``FILE:POS`` a few bytes into a transaction just committed upstream."""
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
            file, pos = cur.fetchone()[:2]
            cur.execute("CREATE DATABASE IF NOT EXISTS bad_input_run")
            cur.execute("CREATE TABLE IF NOT EXISTS bad_input_run.t (id INT PRIMARY KEY)")
            cur.execute("REPLACE INTO bad_input_run.t VALUES (1)")
            cur.execute("SHOW MASTER STATUS")
            end_file, end = cur.fetchone()[:2]
    finally:
        conn.close()
    assert end_file == file and end > pos + 10
    return f"{file}:{int(end) - 10}"


def _run(
    case: Case, mariadb: LocalMariaDB, root: Path, silent_port: int, inside: str
) -> tuple[int, str, float, Path]:
    tmp = root / case.id
    tmp.mkdir()
    if case.prepare is not None:
        case.prepare(tmp)
    env = Env(tmp, mariadb.uri, mariadb.port, silent_port, inside)
    args = case.args(env)
    if "--data-dir" not in args:
        args += ["--data-dir", str(tmp / "data")]
    environ = dict(os.environ, JAVA_HOME=str(tmp / "no-java"), SPARKCDC_SPARK_MASTER="local[1]")
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "run", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=tmp,
    )
    return res.returncode, res.stdout + res.stderr, time.monotonic() - t0, tmp


@pytest.fixture(scope="module")
def outcomes(
    mariadb: LocalMariaDB, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[int, str, float, Path]]]:
    """Every case run once, four at a time."""
    root = tmp_path_factory.mktemp("bad-run")
    listener, silent_port = _silent_listener()
    inside = _inside_a_transaction(mariadb)
    try:
        with ThreadPoolExecutor(max_workers=4) as pool:
            futures = {c.id: pool.submit(_run, c, mariadb, root, silent_port, inside) for c in CASES}
            yield {cid: f.result() for cid, f in futures.items()}
    finally:
        listener.close()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_run_input_is_refused_in_one_line(
    case: Case, outcomes: dict[str, tuple[int, str, float, Path]]
) -> None:
    rc, out, seconds, tmp = outcomes[case.id]
    lines = out.strip().splitlines()
    assert rc != 0, out
    assert len(lines) == 1 and lines[0].startswith("Error: [CDC:Err"), out
    assert "Traceback" not in out and "JAVA_GATEWAY" not in out, out
    for fragment in case.expect:
        assert fragment in out, f"{fragment!r} missing from:\n{out}"
    for secret in case.secrets:
        assert secret not in out, f"secret {secret!r} printed:\n{out}"
    assert seconds < FAST, f"refusal took {seconds:.1f}s"
    assert not (tmp / "sink").exists(), "nothing may be written before the refusal"
