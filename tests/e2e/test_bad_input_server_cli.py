"""`sparkcdc server` flags and `sparkcdc cli changefeed` refuse bad input in one line: the catalogue.

Every case runs the real command line as a subprocess (in parallel, a few at a time)
with one bad input. It must end within 30 s with a non-zero exit code and print one
line, ``Error: [CDC:Err...] ...``, that names the bad value and the fix, without a
traceback or a password. The cli cases that reach a server use one real server; a
last test starts a server whose standalone Spark master does not answer and checks
that a changefeed says so as its warning instead of looking healthy.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from sparkcdc.services.common import free_port, wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.server.conftest import ServerProc, _env

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

FAST = 30.0
SECRET = "Pw-Cli-Secret-7717"
UP_BAD = f"mysql://cdc:{SECRET}@127.0.0.1:1/"
LONG_ID = "a" * 200


@dataclass(frozen=True)
class Case:
    """One command line with one bad input; ``{...}`` fields are filled from the test's places."""

    name: str
    args: tuple[str, ...]
    fragments: tuple[str, ...]


def _run(argv: list[str], cwd: Path) -> tuple[int, str, float]:
    env = dict(_env(), JAVA_HOME=str(cwd / "no-java"))  # a Spark start would fail loudly, not hang
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            [sys.executable, "-m", "sparkcdc.cli.main", *argv],
            capture_output=True,
            text=True,
            timeout=FAST + 30,
            env=env,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as exc:
        return -1, f"still running after {exc.timeout}s: {exc.stdout!r} {exc.stderr!r}", FAST + 30
    return res.returncode, res.stdout + res.stderr, time.monotonic() - t0


def _check(case: Case, rc: int, out: str, elapsed: float) -> None:
    assert rc not in (0, -1), f"{case.name}: exit {rc}: {out}"
    assert elapsed < FAST, f"{case.name}: refused after {elapsed:.1f}s"
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, f"{case.name}: expected one line, got:\n{out}"
    line = lines[0]
    assert line.startswith("Error: [CDC:Err"), f"{case.name}: {line}"
    assert "Traceback" not in out, out
    assert SECRET not in out, f"{case.name}: a password in {line}"
    for fragment in case.fragments:
        assert fragment in line, f"{case.name}: {fragment!r} not in {line!r}"


def _run_all(cases: list[Case], build: Callable[[Case], list[str]], cwd: Path) -> None:
    argvs = [build(c) for c in cases]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda argv: _run(argv, cwd), argvs))
    for case, (rc, out, elapsed) in zip(cases, results, strict=True):
        _check(case, rc, out, elapsed)


# ---------------------------------------------------------------------- server flags

SERVER_CASES = [
    Case(
        "spark-master-garbage", ("--spark-master", "garbage"), ("'garbage'", "local[N]", "spark://HOST:PORT")
    ),
    Case("spark-master-zero-threads", ("--spark-master", "local[0]"), ("'local[0]'", "local[2]")),
    Case("spark-master-no-port", ("--spark-master", "spark://master"), ("'master'", "HOST:PORT")),
    Case("listen-port-range", ("--listen", "127.0.0.1:99999"), ("port 99999", "1 to 65535")),
    Case("listen-bad-host", ("--listen", "999.1.1.1:8300"), ("'999.1.1.1'", "address of this machine")),
    Case(
        "listen-not-local",
        ("--listen", "192.0.2.1:8300"),
        ("192.0.2.1:8300", "not an address of this machine"),
    ),
    Case("listen-in-use", ("--listen", "127.0.0.1:{busy}"), ("127.0.0.1:{busy}", "choose another port")),
    Case(
        "meta-under-file",
        ("--meta-uri", "sqlite:///{file}/meta.db"),
        ("'{file}' is a file", "parent folders"),
    ),
    Case(
        "meta-folder-missing",
        ("--meta-uri", "sqlite:///{dir}/mistyped/meta.db"),
        ("'{dir}/mistyped' does not exist", "mkdir -p"),
    ),
    Case("meta-is-folder", ("--meta-uri", "sqlite:///{dir}"), ("is a directory", "sqlite:///{dir}/meta.db")),
    Case("meta-not-sqlite", ("--meta-uri", "sqlite:///{text}"), ("not a SQLite database",)),
    Case(
        "meta-unreachable",
        ("--meta-uri", f"postgresql://cdc:{SECRET}@127.0.0.1:{{closed}}/meta"),
        ("postgresql://cdc:xxxxx@127.0.0.1:{closed}/meta", "check that it is running"),
    ),
    Case("meta-scheme", ("--meta-uri", f"mysql://cdc:{SECRET}@db/meta"), ("scheme 'mysql'", "postgresql://")),
    Case("data-dir-file", ("--data-dir", "{file}"), ("'{file}' is a file", "give a directory")),
    Case(
        "data-dir-s3-unreachable",
        (
            "--data-dir",
            f"s3://b/p?access-key=AK&secret-access-key={SECRET}&endpoint=http://127.0.0.1:{{closed}}",
        ),
        ("secret-access-key=xxxxx", "cannot write to the data dir"),
    ),
    Case("max-changefeeds-negative", ("--max-changefeeds", "-1"), ("--max-changefeeds -1", "0")),
    Case("binlog-relay-mb-negative", ("--binlog-relay-mb", "-5"), ("--binlog-relay-mb -5", "0 (no relay)")),
    Case("lease-seconds-text", ("--lease-seconds", "abc"), ("--lease-seconds", "'abc'")),
    Case(
        "spark-conf-no-value",
        ("--spark-conf", "spark.executor.memory"),
        ("'spark.executor.memory'", "KEY=VALUE"),
    ),
    Case("auth-token-empty", ("--auth-token", " "), ("--auth-token is empty",)),
    Case("advertise-addr", ("--advertise-addr", "nohost"), ("--advertise-addr 'nohost'", "HOST:PORT")),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Paths and ports the cases refer to; a port held busy while the module runs."""
    root = tmp_path_factory.mktemp("bad-input-places")
    (root / "afile").write_text("not a folder")
    (root / "text.db").write_text("plain text, certainly not a SQLite database file")
    (root / "folder").mkdir()
    (root / "binary.toml").write_bytes(bytes(range(256)) * 4)
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    yield {
        "root": str(root),
        "file": str(root / "afile"),
        "dir": str(root / "folder"),
        "text": str(root / "text.db"),
        "binary": str(root / "binary.toml"),
        "busy": str(busy.getsockname()[1]),
        "closed": str(free_port()),
    }
    busy.close()


def _fill(case: Case, places: dict[str, str]) -> Case:
    return Case(
        case.name,
        tuple(a.format(**places) for a in case.args),
        tuple(f.format(**places) for f in case.fragments),
    )


def test_server_flags_are_refused_before_serving(places: dict[str, str], tmp_path: Path) -> None:
    cases = [_fill(c, places) for c in SERVER_CASES]
    port = free_port()

    def build(case: Case) -> list[str]:
        defaults = {
            "--listen": f"127.0.0.1:{port}",
            "--meta-uri": f"sqlite:///{tmp_path / (case.name + '.db')}",
            "--data-dir": str(tmp_path / "data"),
        }
        given = dict(zip(case.args[::2], case.args[1::2], strict=True))
        return ["server", *(x for k, v in {**defaults, **given}.items() for x in (k, v))]

    _run_all(cases, build, tmp_path)


# ---------------------------------------------------------------------- cli changefeed

CLI_CASES = [
    Case("query-empty-id", ("query", "-c", ""), ("changefeed id ''", "^[a-zA-Z0-9]+")),
    Case("query-id-200-chars", ("query", "-c", LONG_ID), ("(200 characters)", "at most 128")),
    Case("pause-id-underscore", ("pause", "-c", "a_b"), ("changefeed id 'a_b'", "single dashes")),
    Case("resume-id-space", ("resume", "-c", "x y"), ("changefeed id 'x y'",)),
    Case("remove-id-leading-dash", ("remove", "--changefeed-id=-a"), ("changefeed id '-a'",)),
    Case("update-id-dot", ("update", "-c", "a.b", "--target-ts", "5"), ("changefeed id 'a.b'",)),
    Case(
        "create-id-double-dash",
        ("create", "-c", "a--b", "--sink-uri", "file:///tmp/x?protocol=csv", "--upstream-uri", UP_BAD),
        ("changefeed id 'a--b'",),
    ),
    Case(
        "server-unreachable",
        ("query", "-c", "ok", "--server", "http://127.0.0.1:{closed}"),
        ("cannot reach the sparkcdc server at http://127.0.0.1:{closed}", "--server"),
    ),
    Case(
        "server-unreachable-password",
        ("query", "-c", "ok", "--server", f"http://u:{SECRET}@127.0.0.1:{{closed}}"),
        ("http://u:xxxxx@127.0.0.1:{closed}", "--server"),
    ),
    Case(
        "server-not-http",
        ("query", "-c", "ok", "--server", "ftp://h"),
        ("--server 'ftp://h'", "http://HOST:PORT"),
    ),
    Case(
        "start-ts-not-integer",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            "file:///tmp/x?protocol=csv",
            "--upstream-uri",
            UP_BAD,
            "--start-ts",
            "abc",
        ),
        ("'abc'", "commit ts"),
    ),
    Case(
        "start-ts-negative",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            "file:///tmp/x?protocol=csv",
            "--upstream-uri",
            UP_BAD,
            "--start-ts=-5",
        ),
        ("'-5'", "non-negative"),
    ),
    Case(
        "target-not-after-start",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            "file:///tmp/x?protocol=csv",
            "--upstream-uri",
            UP_BAD,
            "--start-ts",
            "10",
            "--target-ts",
            "5",
        ),
        ("target-ts 5", "start-ts 10", "CDC:ErrTargetTsBeforeStartTs"),
    ),
    Case(
        "resume-ts-not-integer",
        ("resume", "-c", "ok", "--overwrite-checkpoint-ts", "x1"),
        ("'x1'", "commit ts"),
    ),
    Case(
        "config-missing",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            "file:///tmp/x?protocol=csv",
            "--upstream-uri",
            UP_BAD,
            "--config",
            "{root}/missing.toml",
        ),
        ("missing.toml", "No such file"),
    ),
    Case(
        "config-binary",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            "file:///tmp/x?protocol=csv",
            "--upstream-uri",
            UP_BAD,
            "--config",
            "{binary}",
        ),
        ("binary.toml", "TOML"),
    ),
    Case("config-folder", ("update", "-c", "ok", "--config", "{dir}"), ("folder", "Is a directory")),
    Case("list-bad-namespace", ("list", "-n", "a_b"), ("namespace 'a_b'",)),
    Case("query-missing", ("query", "-c", "no-such-feed"), ("'no-such-feed' does not exist",)),
    Case(
        "update-missing",
        ("update", "-c", "no-such-feed", "--target-ts", "5"),
        ("'no-such-feed' does not exist",),
    ),
    Case(
        "sink-unreachable-password",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            f"mysql://cdc:{SECRET}@127.0.0.1:{{closed}}/",
            "--upstream-uri",
            UP_BAD,
        ),
        ("mysql://cdc:xxxxx@127.0.0.1:{closed}/",),
    ),
    Case(
        "upstream-unreachable-password",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            "file://{root}/sink?protocol=csv",
            "--upstream-uri",
            f"mysql://cdc:{SECRET}@127.0.0.1:{{closed}}/",
        ),
        ("127.0.0.1:{closed}", "--upstream-uri"),
    ),
    Case(
        "upstream-unparsable-password",
        (
            "create",
            "-c",
            "ok",
            "--sink-uri",
            "file://{root}/sink?protocol=csv",
            "--upstream-uri",
            f"mysql://cdc:{SECRET}@[bad/",
        ),
        ("upstream URI",),
    ),
]


@pytest.fixture(scope="module")
def server(places: dict[str, str]) -> Iterator[ServerProc]:
    srv = ServerProc(f"sqlite:///{places['root']}/meta.db", Path(places["root"]), lease=5).start()
    yield srv
    rc = srv.stop()
    log = srv.log()
    assert rc == 0, log[-3000:]
    assert "Traceback" not in log and SECRET not in log, log[-3000:]


def test_cli_refuses_bad_input_in_one_line(
    server: ServerProc, places: dict[str, str], tmp_path: Path
) -> None:
    cases = [_fill(c, places) for c in CLI_CASES]

    def build(case: Case) -> list[str]:
        verb, rest = case.args[0], list(case.args[1:])
        if "--server" not in rest:
            rest += ["--server", server.url]
        return ["cli", "changefeed", verb, *rest]

    _run_all(cases, build, tmp_path)


def test_catalogue_size() -> None:
    assert len(SERVER_CASES) + len(CLI_CASES) >= 20


# ---------------------------------------------------------------------- an unreachable Spark master


def test_unreachable_spark_master_is_the_changefeeds_warning(mariadb: LocalMariaDB, tmp_path: Path) -> None:
    mariadb.execute(
        "DROP USER IF EXISTS 'cdc_badin'@'%'",
        f"CREATE USER 'cdc_badin'@'%' IDENTIFIED BY '{SECRET}'",
        "GRANT ALL PRIVILEGES ON *.* TO 'cdc_badin'@'%'",
    )
    master = f"spark://127.0.0.1:{free_port()}"
    srv = ServerProc(
        f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, lease=5, extra=("--spark-master", master)
    ).start()
    try:
        res = srv.cli(
            "changefeed", "create", "-c", "no-spark",
            "--sink-uri", f"file://{tmp_path / 'sink'}?protocol=canal-json",
            "--upstream-uri", f"mysql://cdc_badin:{SECRET}@127.0.0.1:{mariadb.port}/",
        )  # fmt: skip
        assert res.returncode == 0, res.stderr

        def warned() -> bool:
            with srv.client() as c:
                st = c.changefeed_status("no-spark")
            warning = st.get("last_warning") or ""
            error = (st.get("last_error") or {}).get("message", "")
            return "CDC:ErrSparkMasterUnreachable" in warning or "unreachable" in error

        wait_until(warned, timeout=FAST, what="the changefeed's warning about the Spark master")
        with srv.client() as c:
            st = c.changefeed_status("no-spark")
        text = str(st)
        assert master in text and "--spark-master" in text, text
        assert SECRET not in text
    finally:
        srv.stop()
    log = srv.log()
    assert f"the Spark master {master} is unreachable" in log, log[-3000:]
    assert "Traceback" not in log and SECRET not in log, log[-3000:]
