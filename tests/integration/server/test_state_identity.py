"""A changefeed never adopts state that is not its own: another meta database's, another upstream's.

- Two servers with two meta databases and one ``--data-dir``: the second meta database's ``cf-0``
  finds the first's state and fails in one coded line naming both identities, leaving it untouched.
- A server without ``--data-dir`` keeps its state in a folder named after its meta database.
- ``sparkcdc run`` with a data dir and changefeed id that followed another upstream refuses to start.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from sparkcdc.meta import MetaStore
from sparkcdc.pipeline.state import IDENTITY_FILE, STATE_MISMATCH
from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.e2e.workload import CliProcess, run_args, run_cli
from tests.integration.server.conftest import ServerProc, status_of

pytestmark = pytest.mark.integration

SCHEMA = "state_ident"


@pytest.fixture()
def upstream(mariadb: LocalMariaDB) -> Iterator[LocalMariaDB]:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {SCHEMA}",
        f"CREATE DATABASE {SCHEMA}",
        f"CREATE TABLE {SCHEMA}.t (id INT PRIMARY KEY)",
    )
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {SCHEMA}")


def _meta(uri: str) -> tuple[str, str]:
    """(the meta database's identity, cf-0's identity)."""
    store = MetaStore.open(uri)
    try:
        return store.identity(), store.get_changefeed("cf-0").uid
    finally:
        store.close()


@pytest.mark.spark
def test_a_new_meta_database_refuses_the_state_another_left_under_the_same_id(
    upstream: LocalMariaDB, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    body = {
        "changefeed_id": "cf-0",
        "upstream_uri": upstream.uri,
        "sink_uri": f"file://{tmp_path / 'out'}?protocol=csv",
        "replica_config": {"filter": {"rules": [f"{SCHEMA}.*"]}},
    }
    first_meta = f"sqlite:///{tmp_path / 'meta1.db'}"
    one = ServerProc(first_meta, tmp_path, name="one", data_dir=data).start()
    folder = data / "changefeeds" / "default" / "cf-0"
    try:
        with one.client() as c:
            c.create_changefeed(body)
        wait_until(
            lambda: list(folder.glob("epoch-1/checkpoint.json")),
            timeout=240,
            interval=0.5,
            what="the first cf-0 to commit a batch",
            on_timeout=lambda: one.log()[-3000:],
        )
    finally:
        assert one.stop() == 0, one.log()[-3000:]
    first = json.loads((folder / IDENTITY_FILE).read_text())
    offset = (folder / "epoch-1" / "checkpoint.json").read_text()
    second_meta = f"sqlite:///{tmp_path / 'meta2.db'}"
    two = ServerProc(second_meta, tmp_path, name="two", data_dir=data).start()
    try:
        with two.client() as c:
            c.create_changefeed(body)
        failed = wait_until(
            lambda: (st := status_of(two, "cf-0"))["state"] == "failed" and st,
            timeout=60,
            what="the second cf-0 to fail",
            on_timeout=lambda: two.log()[-3000:],
        )
        meta_uid, cf_uid = _meta(second_meta)
    finally:
        assert two.stop() == 0, two.log()[-3000:]
    err = failed["last_error"]
    assert err["code"] == STATE_MISMATCH and "\n" not in err["message"]
    for named in (first["changefeed_uid"], first["meta_uid"], cf_uid, meta_uid):
        assert named in err["message"]
    # the first changefeed's state is untouched, and nothing of it was used
    assert json.loads((folder / IDENTITY_FILE).read_text()) == first
    assert (folder / "epoch-1" / "checkpoint.json").read_text() == offset
    assert "starting from" not in two.log()


def test_the_default_data_dir_is_named_after_the_meta_database(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    folders = []
    for name in ("x", "y"):
        meta = f"sqlite:///{tmp_path / f'{name}.db'}"
        srv = ServerProc(
            meta,
            tmp_path,
            name=name,
            default_data_dir=True,
            env={"TMPDIR": str(tmp)},
            extra=("--max-changefeeds", "0"),
        ).start()
        try:
            ident = MetaStore.open(meta).identity()
            folder = tmp / "sparkcdc-data" / ident
            assert folder.is_dir() and f"data dir {folder}" in srv.log()
            folders.append(folder)
        finally:
            assert srv.stop() == 0, srv.log()[-3000:]
    assert folders[0] != folders[1]


@pytest.mark.spark
def test_run_refuses_a_data_dir_that_followed_another_upstream(
    upstream: LocalMariaDB, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    sink = f"file://{tmp_path / 'out'}?protocol=csv"
    first = CliProcess(run_args(upstream.uri, sink, "cf-up", data), tmp_path / "run1.log")
    try:
        first.wait_started(240)
    finally:
        first.stop(signal.SIGINT)
    recorded = json.loads((data / "cf-up" / "upstream.json").read_text())
    start = (data / "cf-up" / "start.json").read_text()
    with LocalMariaDB() as other:
        res = run_cli(run_args(other.uri, sink, "cf-up", data), timeout=180)
        other_basename = other.query("SELECT @@log_bin_basename")[0][0]
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if STATE_MISMATCH in ln]
    assert len(lines) == 1, res.stderr[-3000:]
    assert recorded["binlog"] in lines[0] and other_basename in lines[0]
    assert recorded["binlog"] != other_basename
    # nothing of the first upstream's state changed
    assert json.loads((data / "cf-up" / "upstream.json").read_text()) == recorded
    assert (data / "cf-up" / "start.json").read_text() == start


def test_update_to_another_upstream_is_refused_and_a_claim_on_another_server_too(
    upstream: LocalMariaDB, tmp_path: Path
) -> None:
    """The meta database records which server a changefeed's offsets belong to.

    ``update --upstream-uri`` to the same server at another address is taken (and the next claim
    uses it); to another server it is refused naming both. A claim that reaches another server
    behind the recorded URI (a name that now points elsewhere) fails in the same coded line.
    """
    from sparkcdc.config.replica import ReplicaConfig
    from sparkcdc.errors import ConfigError
    from sparkcdc.meta import ChangefeedState
    from sparkcdc.pipeline.changefeed import prepare_changefeed
    from sparkcdc.pipeline.spec import ChangefeedSpec
    from sparkcdc.server.service import ChangefeedService

    store = MetaStore.open(f"sqlite:///{tmp_path / 'meta.db'}")
    service = ChangefeedService(store)
    sink = f"file://{tmp_path / 'out'}?protocol=csv"
    cf = service.create(
        {
            "changefeed_id": "cf-up",
            "upstream_uri": upstream.uri,
            "sink_uri": sink,
            "replica_config": {"filter": {"rules": [f"{SCHEMA}.*"]}},
        }
    )
    basename = upstream.query("SELECT @@log_bin_basename")[0][0]
    assert cf.upstream is not None and cf.upstream["binlog"] == basename
    store.update_changefeed(cf, state=ChangefeedState.STOPPED)

    same_server = upstream.uri.replace("127.0.0.1", "localhost")
    assert same_server != upstream.uri
    moved = service.update("cf-up", "default", {"upstream_uri": same_server})
    assert moved.upstream_uri == same_server and moved.upstream["address"].startswith("localhost:")
    with LocalMariaDB() as other:
        other_basename = other.query("SELECT @@log_bin_basename")[0][0]
        with pytest.raises(ConfigError) as err:
            service.update("cf-up", "default", {"upstream_uri": other.uri})
        assert err.value.code == STATE_MISMATCH
        assert basename in err.value.message and other_basename in err.value.message
        assert store.get_changefeed("cf-up").upstream_uri == same_server

        # The recorded URI now reaches the other server: the claim's start refuses it.
        spec = ChangefeedSpec(
            changefeed_id="cf-up",
            upstream_uri=other.uri,
            sink_uri=sink,
            config=ReplicaConfig.from_stored(moved.config),
            checkpoint_dir=str(tmp_path / "claim"),
            upstream_identity=moved.upstream,
        )
        with pytest.raises(ConfigError) as err:
            prepare_changefeed(spec)
        assert err.value.code == STATE_MISMATCH and "meta database" in err.value.message
        assert not (tmp_path / "claim" / "start.json").exists()
    store.close()
