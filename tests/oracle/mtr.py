"""Replay MariaDB's own test files (the Debian ``mariadb-test`` package) against a running server.

The files are a workload no one here wrote. The runner, ``mariadb-test`` (mysqltest), runs one
``.test`` file against a server; its result is not compared with anything: the oracle is a
replica of the server (native, or sparkcdc's delivery paths), compared table by table afterwards.

The harness calls one function::

    upstream = LocalMariaDB(extra_args=SERVER_ARGS)    # mtr's defaults: latin1, MyISAM
    databases = replay_mtr(upstream, list_files())   # the databases the files wrote

- ``list_files()``: the files of ``mtr_files.txt`` (paths relative to the suite root, e.g.
  ``suite/binlog/t/binlog_row_mix_innodb_myisam.test``); ``excluded_files()``: the files looked at
  and left out, with the reason, from ``mtr_excluded.txt``.
- Each file runs with ``--database=mtr_<suite>_<name>`` (dropped and created just before), and a
  fresh ``test`` database as well, since many files name it. With ``keep_tables`` (the default) the
  ``DROP TABLE`` statements that end a file (its cleanup) are left out so its tables survive for the
  comparison; nothing else of the file is changed.
- A file that errors out partway is fine (what it wrote before still replicates); a file that
  outlives its timeout, or after which the server no longer answers, raises ``MtrReplayError``.
  Each file's output is kept in ``log_dir`` (a temporary directory unless given) and the tail of
  a failing file's output is in its ``MtrRun``.
- ``static_exclusion_reason(path)`` reads a file (and the test bodies it sources) and says why it
  cannot run on one plain server with a ROW binlog; the lists are checked against it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sparkcdc.services.mariadb import LocalMariaDB
from tests.oracle.tablediff import user_databases

HERE = Path(__file__).resolve().parent
FILES_LIST = HERE / "mtr_files.txt"
EXCLUDED_LIST = HERE / "mtr_excluded.txt"
SUITE_ROOTS = ("/usr/share/mysql/mysql-test", "/usr/share/mariadb/mariadb-test", "/usr/mysql-test")
# The server options of mtr's default configuration (include/default_mysqld.cnf) that the files
# count on: latin1 by default, MyISAM by default, stored functions without DETERMINISTIC in a
# binlog. Start the upstream with ``LocalMariaDB(extra_args=SERVER_ARGS)``.
SERVER_ARGS = (
    "--character-set-server=latin1",
    "--collation-server=latin1_swedish_ci",
    "--default-storage-engine=MyISAM",
    "--log-bin-trust-function-creators=1",
    "--local-infile=1",
)
SKIPPED_EXIT = 62  # mysqltest's exit code after ``--skip`` (a have_*.inc the server lacks)


class MtrReplayError(RuntimeError):
    """A test file could not be replayed: it hung, or the server stopped answering."""


@dataclass
class MtrRun:
    """What one ``mariadb-test`` run of one file did."""

    file: str
    database: str
    returncode: int
    seconds: float
    log: Path
    output_tail: str
    timed_out: bool = False

    @property
    def skipped(self) -> bool:
        return self.returncode == SKIPPED_EXIT

    @property
    def completed(self) -> bool:
        return self.returncode == 0


def suite_root() -> Path:
    """The directory holding ``main/``, ``suite/`` and ``include/`` of the mysql-test suites."""
    for candidate in (os.environ.get("MTR_SUITE_ROOT", ""), *SUITE_ROOTS):
        if candidate and (Path(candidate) / "include").is_dir() and (Path(candidate) / "main").is_dir():
            return Path(candidate)
    raise FileNotFoundError(
        f"the mysql-test suites are not installed (looked in {SUITE_ROOTS}): "
        "apt-get install mariadb-test, run scripts/setup.sh, or set MTR_SUITE_ROOT"
    )


def runner() -> str:
    """The path of the ``mariadb-test`` (mysqltest) program."""
    for name in ("mariadb-test", "mysqltest"):
        found = shutil.which(name)
        if found:
            return found
    raise FileNotFoundError("mariadb-test (mysqltest) not found: apt-get install mariadb-test")


def _read_list(path: Path) -> list[tuple[str, str]]:
    entries: list[tuple[str, str]] = []
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        name, _, reason = line.partition(" ")
        entries.append((name, reason.strip()))
    return entries


def list_files(path: Path = FILES_LIST) -> list[str]:
    """The replayable test files, relative to ``suite_root()``, in replay order."""
    return [name for name, _ in _read_list(path)]


def excluded_files(path: Path = EXCLUDED_LIST) -> dict[str, str]:
    """The test files looked at and left out, each with its reason."""
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        name, _, reason = raw.strip().partition(" ")
        out[name] = reason.strip()
    return out


def database_for(file: str) -> str:
    """``suite/binlog/t/binlog_xa.test`` -> ``mtr_binlog_binlog_xa`` (at most 64 characters)."""
    parts = Path(file).parts
    suite = parts[1] if parts[0] == "suite" and len(parts) > 1 else parts[0]
    name = re.sub(r"[^0-9a-zA-Z_]", "_", f"mtr_{suite}_{Path(file).stem}").lower()
    return name[:64]


# The statements that end a file's cleanup: left out so the tables stay for the comparison.
_DROP_TABLE = re.compile(r"^\s*drop\s+(?:temporary\s+)?tables?\s+(?:if\s+exists\s+)?([^;]*);\s*$", re.I)
_IGNORABLE_TAIL = re.compile(
    r"^\s*(?:$|#|--\s*(?:echo|disable_\w+|enable_\w+|disconnect|connection|source\s+include/"
    r"(?:wait_until_count_sessions|check_events_off|show_binlog_events|rpl_end)\.inc)\b|"
    r"echo\b|disconnect\b|connection\b)",
    re.I,
)


_BINLOG_RESET = re.compile(
    r"^(\s*)(reset\s+master\b[^;]*;|purge\s+(?:binary|master)\s+logs\b[^;]*;)", re.I | re.M
)


def _neutralize(text: str) -> str:
    """The file without its one-line RESET MASTER / PURGE BINARY LOGS statements.

    They delete the binlog a replica (native or sparkcdc) is reading; in the binlog suite they only
    make the file's SHOW BINLOG EVENTS output start clean, and that output is not compared.
    """
    return _BINLOG_RESET.sub(r"\1# (left out: it deletes the binlog a replica reads) \2", text)


def strip_trailing_drops(text: str) -> str:
    """The file without the unqualified ``DROP TABLE ...;`` lines of its final cleanup."""
    lines = text.splitlines(keepends=True)
    i = len(lines) - 1
    while i >= 0:
        drop = _DROP_TABLE.match(lines[i])
        if drop and "." not in drop.group(1) and "$" not in drop.group(1):
            lines[i] = "# (left for the replica comparison) " + lines[i].lstrip()
        elif not (drop or _IGNORABLE_TAIL.match(lines[i])):
            break
        i -= 1
    return "".join(lines)


def _absolute_sources(text: str, directory: Path) -> str:
    """The copy runs elsewhere: its ``source`` lines naming files of the original's suite become absolute."""

    def fix(match: re.Match[str]) -> str:
        name = match.group(2)
        if "$" in name or Path(name).is_absolute() or (suite_root() / name).is_file():
            return match.group(0)
        for base in (directory, directory.parent):
            if (base / name).is_file():
                return f"{match.group(1)}{base / name}"
        return match.group(0)

    return re.sub(r"^(\s*(?:--\s*)?source\s+)([^\s;]+)", fix, text, flags=re.I | re.M)


def _env(upstream: LocalMariaDB, vardir: Path, root: Path) -> dict[str, str]:
    """The variables mtr would export that the replayable files read."""
    env = dict(os.environ)
    env.update(
        MYSQLTEST_VARDIR=str(vardir),
        MYSQL_TMP_DIR=str(vardir / "tmp"),
        MYSQL_TEST_DIR=str(root),
        MASTER_MYPORT=str(upstream.port),
        MASTER_MYSOCK=upstream.socket,
        MYSQL_CHARSETSDIR="/usr/share/mysql/charsets",
    )
    return env


def run_file(
    upstream: LocalMariaDB,
    file: str,
    *,
    log_dir: Path,
    timeout: float = 60.0,
    keep_tables: bool = True,
) -> MtrRun:
    """Run one test file against ``upstream`` in its own database; never raises for the file's errors."""
    root = suite_root()
    source = root / file
    if not source.is_file():
        raise FileNotFoundError(f"{file} is not under {root}: is this mariadb-test's version?")
    database = database_for(file)
    upstream.execute(
        f"DROP DATABASE IF EXISTS `{database}`",
        f"CREATE DATABASE `{database}`",
        "DROP DATABASE IF EXISTS `test`",
        "CREATE DATABASE `test`",
    )
    vardir = log_dir / "var"
    (vardir / "tmp").mkdir(parents=True, exist_ok=True)
    (vardir / "log").mkdir(parents=True, exist_ok=True)
    text = _neutralize(_absolute_sources(source.read_text(errors="replace"), source.parent))
    test_file = log_dir / f"{database}.test"
    test_file.write_text(strip_trailing_drops(text) if keep_tables else text)
    log = log_dir / f"{database}.log"
    cmd = [
        runner(),
        f"--host={upstream.host}",
        f"--port={upstream.port}",
        f"--socket={upstream.socket}",
        f"--user={upstream.user}",
        f"--database={database}",
        f"--basedir={root}/",  # mysqltest appends names to it as is
        f"--suite-dir={source.parent.parent if source.parent.name == 't' else source.parent}",
        f"--tmpdir={vardir / 'tmp'}",
        f"--logdir={vardir / 'log'}",
        f"--test-file={test_file}",
        f"--result-file={log_dir / (database + '.result')}",
        "--record",
        "--silent",
        "--max-connect-retries=3",
        "--tail-lines=40",
    ]
    if upstream.password:
        cmd.append(f"--password={upstream.password}")
    started = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=root, stdout=out, stderr=subprocess.STDOUT, env=_env(upstream, vardir, root)
        )
        try:
            code = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait(timeout=10)
            timed_out = True
    tail = log.read_text(errors="replace")[-3000:]
    return MtrRun(file, database, code, time.monotonic() - started, log, tail, timed_out)


def _alive(upstream: LocalMariaDB) -> bool:
    try:
        upstream.query("SELECT 1")
        return True
    except Exception:  # any failure to answer means the server is gone
        return False


def run_files(
    upstream: LocalMariaDB,
    files: list[str],
    *,
    log_dir: Path | None = None,
    timeout: float = 60.0,
    keep_tables: bool = True,
) -> list[MtrRun]:
    """Run each file in turn; raise ``MtrReplayError`` on a timeout or when the server stops answering."""
    directory = log_dir or Path(tempfile.mkdtemp(prefix="sparkcdc-mtr-"))
    directory.mkdir(parents=True, exist_ok=True)
    runs: list[MtrRun] = []
    for file in files:
        run = run_file(upstream, file, log_dir=directory, timeout=timeout, keep_tables=keep_tables)
        runs.append(run)
        if run.timed_out:
            raise MtrReplayError(
                f"{file} ran longer than {timeout:.0f}s (log {run.log}): drop it from mtr_files.txt "
                f"or raise the timeout\n{run.output_tail}"
            )
        if not _alive(upstream):
            raise MtrReplayError(
                f"the server on port {upstream.port} stopped answering after {file} (log {run.log}): "
                f"move it to mtr_excluded.txt\n{run.output_tail}"
            )
    return runs


def prepare_server(upstream: LocalMariaDB) -> None:
    """Create what mtr's bootstrap gives every test and the files call: ``mtr.add_suppression``.

    Here it does nothing (no error log is checked); without it a file stops at its first line.
    """
    upstream.execute(
        "CREATE DATABASE IF NOT EXISTS mtr",
        "CREATE PROCEDURE IF NOT EXISTS mtr.add_suppression(pattern VARCHAR(255)) BEGIN END",
    )


def databases_written(upstream: LocalMariaDB, runs: list[MtrRun], before: list[str]) -> list[str]:
    """The user databases that exist now and did not before the runs (each file's own among them)."""
    return sorted(set(user_databases(upstream)) - set(before))


def replay_mtr(
    upstream: LocalMariaDB,
    files: list[str],
    *,
    log_dir: Path | None = None,
    timeout: float = 60.0,
    keep_tables: bool = True,
) -> list[str]:
    """Replay ``files`` against ``upstream`` and return the databases they wrote (compare these)."""
    prepare_server(upstream)
    before = [d for d in user_databases(upstream) if d != "test"]
    runs = run_files(upstream, files, log_dir=log_dir, timeout=timeout, keep_tables=keep_tables)
    return databases_written(upstream, runs, before)


# -- Why a file cannot be replayed on one plain server with a ROW binlog --------------------------

_SOURCE = re.compile(r"^\s*(?:--\s*)?source\s+([^\s;]+)", re.I | re.M)

_INCLUDE_REASONS: tuple[tuple[str, str], ...] = (
    (r"have_debug(_sync)?\.inc", "needs a debug build ({inc})"),
    (
        r"(master-slave|rpl_init|rpl_connect|rpl_sync|rpl_reset|rpl_change_topology)\.inc",
        "needs mtr's own replication setup ({inc}: a second server)",
    ),
    (
        r"(restart_mysqld|shutdown_mysqld|kill_mysqld|start_mysqld|restart_and_reconnect|crash_mysqld|kill_and_restart_mysqld)\.inc",
        "restarts the server ({inc})",
    ),
    (
        r"have_binlog_format_(statement|mixed|mixed_or_statement|statement_or_mixed)\.inc",
        "statement/mixed binlog format only ({inc})",
    ),
    (r"have_(wsrep|galera)\w*\.inc|galera\w*\.inc", "needs Galera ({inc})"),
    (r"have_example_plugin\.inc|have_xtrabackup\.inc", "needs a plugin the server lacks ({inc})"),
)

# Options of a file's ``.opt`` that only change its output or logging, not what it writes: a file
# with these alone is replayed without them (mtr_files.txt names them beside the file).
_HARMLESS_OPTION = re.compile(
    r"^--(loose-)?(timezone=\S+|skip-stack-trace|skip-core-file|max[-_]binlog[-_]size=\d+\w?|"
    r"binlog[-_]checksum=\w+|binlog[-_]annotate[-_]row[-_]events(=\w+)?|log[-_]warnings=\d+|verbose(=\d)?|"
    r"skip-external-locking|binlog[-_](stmt[-_])?cache[-_]size=\d+)$",
    re.I,
)

_TEXT_REASONS: tuple[tuple[str, str, bool], ...] = (
    # (pattern, reason, also in the shared include/*.inc helpers the file sources)
    (r"debug_dbug|debug_sync|@@debug\b|\bdbug_", "needs a debug build (debug_dbug / debug_sync)", False),
    (
        r"^\s*connection\s+slave|sync_slave_with_master|sync_with_master|\$SLAVE_MYPORT",
        "needs a second server of its own (slave connection)",
        False,
    ),
    (r"change\s+master|start\s+slave|stop\s+slave|reset\s+slave", "sets up replication itself", True),
    (
        r"--\s*(shutdown_server|send_shutdown)|\.expect\b|wait_until_disconnected",
        "restarts or shuts down the server",
        True,
    ),
    (
        r"binlog_format\s*=\s*['\"]?(statement|mixed)\b",
        "switches the binlog format to STATEMENT/MIXED",
        False,
    ),
    (
        r"sql_log_bin\s*=\s*(0|off|false)\b(?!\s*for\s+call\s+mtr\.)",
        "writes with sql_log_bin=0: those changes are not replicated by design",
        True,
    ),
    (
        r"reset\s+master|purge\s+(binary|master)\s+logs|delete_domain_id|binlog_expire|expire_logs_days",
        "removes binlog files the replica reads (RESET MASTER in a sourced file, PURGE, expiry)",
        True,
    ),
    (r"(?<![\w$])server_id\s*=", "changes server_id (a replica ignores events carrying its own id)", True),
    (r"gtid_(domain_id|seq_no|slave_pos|binlog_state|strict_mode)\s*=", "changes the GTID state", True),
    (
        r"^\s*(--\s*)?exec\b|\$MYSQL_BINLOG|\$MYSQL_DUMP|\$MYSQLADMIN|\$MYSQL_CLIENT|\$MYSQL\b",
        "runs an external program only mtr's environment provides (--exec / $MYSQL_BINLOG ...)",
        False,
    ),
    (
        r"^\s*(--\s*)?(copy_file|remove_file|move_file|remove_files_wildcard)\b.*(DATADIR|\$MYSQLTEST_VARDIR/mysqld)",
        "edits the server's data directory",
        False,
    ),
    (
        r"set\s+(@@)?global\b|@@global\.\w+\s*=",
        "changes global settings that later files would inherit",
        False,
    ),
    (r"\bwsrep\b", "needs Galera", True),
)


def _bodies(path: Path, root: Path, seen: set[Path], includes: list[str]) -> list[tuple[str, bool]]:
    """The text of ``path`` and of the test bodies it sources, recursively; every sourced name goes
    to ``includes``. The shared ``include/*.inc`` helpers are followed for their names only: their
    text (saving and restoring globals, say) is not the test's own."""
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    text = path.read_text(errors="replace")
    own = not (path.suffix == ".inc" and path.parent == root / "include")
    texts = [(text, own)]
    for match in _SOURCE.finditer(_uncommented(text)):
        name = match.group(1).strip("'\"")
        includes.append(name)
        if "$" in name:
            continue
        for base in (path.parent, root, path.parent.parent):
            candidate = (base / name).resolve()
            if candidate.is_file():
                texts.extend(_bodies(candidate, root, seen, includes))
                break
    return texts


def _uncommented(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def static_exclusion_reason(file: str) -> str | None:
    """Why ``file`` cannot be replayed on one server with a ROW binlog, or None when nothing says so."""
    root = suite_root()
    path = root / file
    if not path.is_file():
        return f"not in this mariadb-test version ({root / file} is absent)"
    includes: list[str] = []
    texts = _bodies(path, root, set(), includes)
    # The replayed copy of the file itself has its RESET MASTER lines left out (see run_file).
    texts[0] = (_neutralize(texts[0][0]), True)
    for pattern, reason in _INCLUDE_REASONS:
        for inc in includes:
            if re.search(pattern, inc, re.I):
                return reason.format(inc=Path(inc).name)
    stem = path.with_suffix("")
    for extra in ("-master.opt", ".opt", ".cnf"):
        option_file = Path(f"{stem}{extra}")
        if option_file.is_file():
            options = " ".join(option_file.read_text(errors="replace").split())
            if extra == ".cnf" or not all(_HARMLESS_OPTION.match(o) for o in options.split()):
                return f"needs server options of its own ({option_file.name}: {options[:90]})"
    own_text = _uncommented("\n".join(t for t, own in texts if own))
    all_text = _uncommented("\n".join(t for t, _ in texts))
    for pattern, reason, everywhere in _TEXT_REASONS:
        if re.search(pattern, all_text if everywhere else own_text, re.I | re.M):
            return reason
    return None


def ignored_options(file: str) -> str:
    """The options of ``file``'s ``.opt`` files that a replay does without (only harmless ones)."""
    stem = (suite_root() / file).with_suffix("")
    found = [Path(f"{stem}{e}") for e in ("-master.opt", ".opt") if Path(f"{stem}{e}").is_file()]
    return " ".join(" ".join(f.read_text(errors="replace").split()) for f in found)
