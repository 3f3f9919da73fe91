"""A catalogue of bad input to ``sparkcdc consumer``: every one is refused in one line, none succeeds for nothing.

Each case is the real command (a subprocess) with one bad value and everything else valid: a real
downstream MariaDB, a real Kafka-protocol broker. It must exit non-zero within 30 s, print exactly
one line (``Error: [CDC:Err...] ...``, no traceback), name what is wrong or missing, and never print
a secret (they all contain ``Sekr3t``). A source that holds no sink output (a missing directory,
one without ``metadata``, an empty topic) is an error, not an exit 0 having applied nothing, and a
running consumer does not wait for one forever. The cases run in parallel.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sparkcdc.services.mariadb import LocalMariaDB
from sparkcdc.services.tansu import LocalTansu

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

FAST = 30.0
INFO_RECORD = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ INFO sparkcdc\.consumer\.storage: "
    r"(storage consumer round|no metadata file in .* yet: waiting)"
)
SECRET = "Sekr3t"


@dataclass(frozen=True)
class Env:
    """What a case builds its arguments from."""

    tmp: Path
    down: str
    """A valid downstream URI."""
    kafka: str
    """The broker's ``host:port``."""
    empty_topic: str
    """A topic that exists and holds no message."""
    junk_topic: str
    """A topic that holds a message of no protocol."""

    def store(self, name: str = "store", protocol: str = "csv") -> str:
        return f"file://{self.tmp / name}?protocol={protocol}"


@dataclass(frozen=True)
class Case:
    id: str
    args: Callable[[Env], list[str]]
    """Everything after ``consumer``."""
    expect: list[str]
    prepare: Callable[[Path], None] | None = None
    secrets: list[str] = field(default_factory=lambda: [SECRET])


def _up(uri: Callable[[Env], str], *flags: str) -> Callable[[Env], list[str]]:
    return lambda e: ["--upstream-uri", uri(e), "--downstream-uri", e.down, *flags]


def _down(uri: str, *flags: str) -> Callable[[Env], list[str]]:
    return lambda e: ["--upstream-uri", e.store(), "--downstream-uri", uri, "--once", *flags]


def _store(tmp: Path) -> None:
    """A storage sink's output: the checkpoint and one CSV data file (date separator day)."""
    root = tmp / "store"
    (root / "db" / "t" / "1" / "2026-01-01").mkdir(parents=True)
    (root / "db" / "t" / "1" / "2026-01-01" / "CDC00000000000000000001.csv").write_text('"I","t","db",5,1\n')
    (root / "metadata").write_text('{"checkpoint-ts": 5}')


def _empty(tmp: Path) -> None:
    (tmp / "store").mkdir()


def _not_output(tmp: Path) -> None:
    root = tmp / "store"
    (root / "photos").mkdir(parents=True)
    (root / "photos" / "cat.jpg").write_bytes(b"\xff\xd8\xff")
    (root / "notes.txt").write_text("not a sink's output")


def _bad_metadata(tmp: Path) -> None:
    _empty(tmp)
    (tmp / "store" / "metadata").write_text("{")


def _a_file(tmp: Path) -> None:
    (tmp / "store").write_text("a file")


def _toml(body: bytes) -> Callable[[Path], None]:
    def prepare(tmp: Path) -> None:
        _store(tmp)
        (tmp / "cf.toml").write_bytes(body)

    return prepare


def _with_config(e: Env) -> list[str]:
    return [
        "--upstream-uri",
        e.store(),
        "--downstream-uri",
        e.down,
        "--once",
        "--config",
        str(e.tmp / "cf.toml"),
    ]


CASES: list[Case] = [
    # --- a storage source that holds no sink output ---
    Case(
        "store-missing",
        _up(lambda e: e.store("nope"), "--once"),
        ["storage directory", "nope", "does not exist"],
    ),
    Case("store-missing-running", _up(lambda e: e.store("nope")), ["storage directory", "does not exist"]),
    Case("store-is-a-file", _up(lambda e: e.store(), "--once"), ["is a file, not a directory"], _a_file),
    Case("store-empty-once", _up(lambda e: e.store(), "--once"), ["no metadata file", "store"], _empty),
    Case(
        "store-empty-running",
        _up(lambda e: e.store(), "--source-wait", "1s", "--flush-interval", "200ms"),
        ["no metadata file", "after waiting 1s", "--source-wait"],
        _empty,
    ),
    Case("store-not-output", _up(lambda e: e.store(), "--once"), ["no metadata file"], _not_output),
    Case(
        "store-wrong-protocol",
        _up(lambda e: e.store(protocol="canal-json"), "--once"),
        [".csv data files", "protocol=canal-json"],
        _store,
    ),
    Case(
        "store-bad-metadata",
        _up(lambda e: e.store(), "--once"),
        ["invalid storage metadata file"],
        _bad_metadata,
    ),
    # --- upstream URI ---
    Case("up-protocol-avro", _up(lambda e: e.store(protocol="avro"), "--once"), ["'avro'"], _store),
    Case("up-no-protocol", _up(lambda e: f"file://{e.tmp / 'store'}", "--once"), ["protocol"], _store),
    Case("up-scheme", _up(lambda e: f"ftp://u:{SECRET}@h/x", "--once"), ["'ftp'", "file", "kafka"]),
    Case("up-no-scheme", _up(lambda e: str(e.tmp / "store"), "--once"), ["has no scheme", "file://"]),
    Case(
        "up-password-hash",
        _up(lambda e: f"s3://u:p#{SECRET}@bucket/x?protocol=csv", "--once"),
        ["percent-encoded"],
    ),
    Case(
        "up-s3-unknown-param",
        _up(lambda e: f"s3://b/x?protocol=csv&access-key=A&secret-access-key={SECRET}&regoin=x", "--once"),
        ["'regoin'"],
    ),
    # --- Kafka ---
    Case(
        "kafka-missing-topic",
        _up(lambda e: f"kafka://{e.kafka}/no-such-topic?protocol=canal-json", "--once"),
        ["'no-such-topic'", "does not exist"],
    ),
    Case(
        "kafka-empty-topic",
        _up(lambda e: f"kafka://{e.kafka}/{e.empty_topic}?protocol=canal-json", "--once"),
        ["'bad-input-empty'", "holds no messages"],
    ),
    Case(
        "kafka-protocol-csv",
        _up(lambda e: f"kafka://{e.kafka}/t?protocol=csv", "--once"),
        ["'csv'", "canal-json"],
    ),
    Case(
        "kafka-unknown-param",
        _up(
            lambda e: f"kafka://{e.kafka}/t?protocol=canal-json&sasl-user=u&sasl-password={SECRET}&bogus=1",
            "--once",
        ),
        ["'bogus'"],
    ),
    Case(
        "kafka-not-canal-json",
        _up(lambda e: f"kafka://{e.kafka}/{e.junk_topic}?protocol=canal-json", "--once"),
        ["not a canal-json message"],
    ),
    Case(
        "kafka-avro-on-json-topic",
        _up(
            lambda e: f"kafka://{e.kafka}/{e.junk_topic}?protocol=avro&schema-registry=http://127.0.0.1:1",
            "--once",
        ),
        ["schema-registry", "http://127.0.0.1:1"],
    ),
    # --- downstream URI ---
    Case(
        "down-password-hash", _down(f"mysql://root:p#{SECRET}@127.0.0.1:3306/"), ["percent-encoded"], _store
    ),
    Case("down-bad-ipv6", _down(f"mysql://root:{SECRET}@[::1:3306/"), ["Invalid IPv6"], _store),
    Case("down-scheme", _down(f"postgres://root:{SECRET}@127.0.0.1:5432/"), ["'postgres'"], _store),
    Case("down-unreachable", _down(f"mysql://root:{SECRET}@127.0.0.1:1/"), ["127.0.0.1:1"], _store),
    Case(
        "down-wrong-password",
        lambda e: [
            "--upstream-uri",
            e.store(),
            "--downstream-uri",
            e.down.replace("root:@", f"root:{SECRET}@"),
            "--once",
        ],
        ["root"],
        _store,
    ),
    # --- flags and TOML ---
    Case(
        "flush-interval",
        _up(lambda e: e.store(), "--flush-interval", "soon"),
        ["'soon'", "--flush-interval"],
        _store,
    ),
    Case(
        "flush-interval-zero",
        _up(lambda e: e.store(), "--flush-interval", "0s"),
        ["--flush-interval '0s'"],
        _store,
    ),
    Case(
        "source-wait",
        _up(lambda e: e.store(), "--source-wait", "forever"),
        ["'forever'", "--source-wait"],
        _store,
    ),
    Case(
        "file-index-width",
        _up(lambda e: e.store(), "--once", "--file-index-width", "0"),
        ["--file-index-width 0", "6 to 20"],
        _store,
    ),
    Case(
        "progress-schema-empty",
        _up(lambda e: e.store(), "--once", "--progress-schema", ""),
        ["progress schema name ''"],
        _store,
    ),
    Case("toml-binary", _with_config, ["not UTF-8"], _toml(b"\x00\xff\xfe")),
    Case("toml-unknown-key", _with_config, ["'sink.protocl'"], _toml(b"[sink]\nprotocl = 'csv'\n")),
    Case("missing-downstream", lambda e: ["--upstream-uri", e.store(), "--once"], ["--downstream-uri"]),
]


def _run(case: Case, env_of: Callable[[Path], Env], root: Path) -> tuple[int, str, float]:
    tmp = root / case.id
    tmp.mkdir()
    if case.prepare is not None:
        case.prepare(tmp)
    environ = dict(os.environ, JAVA_HOME=str(tmp / "no-java"))
    t0 = time.monotonic()
    res = subprocess.run(
        [sys.executable, "-m", "sparkcdc.cli.main", "consumer", *case.args(env_of(tmp))],
        capture_output=True,
        text=True,
        timeout=120,
        env=environ,
        cwd=tmp,
    )
    return res.returncode, res.stdout + res.stderr, time.monotonic() - t0


@pytest.fixture(scope="module")
def outcomes(
    downstream: LocalMariaDB, tansu: LocalTansu, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, tuple[int, str, float]]]:
    """Every case run once, four at a time."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": tansu.bootstrap})
    created = admin.create_topics(
        [NewTopic(t, num_partitions=1, replication_factor=1) for t in ("bad-input-empty", "bad-input-junk")]
    )
    for future in created.values():
        future.result(timeout=30)
    producer = Producer({"bootstrap.servers": tansu.bootstrap})
    producer.produce("bad-input-junk", value=b"not a message of any protocol")
    assert producer.flush(30) == 0
    root = tmp_path_factory.mktemp("bad-consumer")

    def env_of(tmp: Path) -> Env:
        return Env(tmp, downstream.uri, tansu.bootstrap, "bad-input-empty", "bad-input-junk")

    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {c.id: pool.submit(_run, c, env_of, root) for c in CASES}
        yield {cid: f.result() for cid, f in futures.items()}


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_consumer_input_is_refused_in_one_line(
    case: Case, outcomes: dict[str, tuple[int, str, float]]
) -> None:
    rc, out, seconds = outcomes[case.id]
    # A running consumer logs its rounds and that it waits (INFO records) before it gives up; the
    # error is one line.
    lines = [line for line in out.strip().splitlines() if not INFO_RECORD.match(line)]
    assert rc != 0, out
    assert len(lines) == 1 and lines[0].startswith("Error: [CDC:Err"), out
    assert "Traceback" not in out, out
    for fragment in case.expect:
        assert fragment in out, f"{fragment!r} missing from:\n{out}"
    for secret in case.secrets:
        assert secret not in out, f"secret {secret!r} printed:\n{out}"
    assert seconds < FAST, f"refusal took {seconds:.1f}s"


def test_a_running_consumer_on_an_empty_topic_says_so(
    downstream: LocalMariaDB, tansu: LocalTansu, outcomes: dict[str, tuple[int, str, float]], tmp_path: Path
) -> None:
    """Without ``--once`` the consumer waits for messages, and says at once that there are none yet."""
    from sparkcdc.services.common import wait_until

    log_path = tmp_path / "consumer.log"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sparkcdc.cli.main",
                "consumer",
                "--upstream-uri",
                f"kafka://{tansu.bootstrap}/bad-input-empty?protocol=canal-json",  # created by ``outcomes``
                "--downstream-uri",
                downstream.uri,
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, JAVA_HOME=str(tmp_path / "no-java")),
        )
        try:
            wait_until(
                lambda: "holds no messages yet" in log_path.read_text() or proc.poll() is not None,
                timeout=FAST,
                what="the consumer to say the topic is empty",
            )
            assert proc.poll() is None, log_path.read_text()  # it keeps waiting for the changefeed
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log_path.read_text()
    assert "WARNING" in text and "Kafka topic bad-input-empty" in text, text
    assert "Traceback" not in text, text
