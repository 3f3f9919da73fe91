"""The dashboard in a real headless browser (Debian's chromium through chromium-driver and selenium).

A server with a token runs two real changefeeds: one copies a table with an initial snapshot and
then streams a steady load into CSV files, the other sends to an HTTP receiver that refuses every
request, so it fails with an error code. The test signs in with the token, checks the list (a row
per changefeed, the lag figure), the charts drawn from the last hour's samples, the snapshot's
ranges and the error, then pauses a changefeed with a click and sees its state change. Screenshots
go to the test's tmp dir.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.services.common import wait_until
from sparkcdc.services.mariadb import LocalMariaDB
from tests.integration.server.conftest import ServerProc, status_of

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.spark]

TOKEN = "dashboard-Token-9"
DB = "dash_e2e"
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SNAPSHOT_ROWS = 6000


class Refuse(BaseHTTPRequestHandler):
    """An HTTP sink receiver that refuses every batch (a 4xx fails the changefeed)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = b"schema not accepted here"
        self.send_response(422)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def receiver() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/cdc"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture()
def upstream(mariadb: LocalMariaDB) -> Iterator[LocalMariaDB]:
    mariadb.execute(
        f"DROP DATABASE IF EXISTS {DB}",
        f"CREATE DATABASE {DB}",
        f"CREATE TABLE {DB}.orders (id INT PRIMARY KEY, item VARCHAR(40), qty INT)",
        f"CREATE TABLE {DB}.customers (id INT PRIMARY KEY, name VARCHAR(40))",
        f"CREATE TABLE {DB}.refused (id INT PRIMARY KEY)",
    )
    for start in range(0, SNAPSHOT_ROWS, 1000):
        values = ", ".join(f"({i}, 'item {i}', {i % 7})" for i in range(start, start + 1000))
        mariadb.execute(f"INSERT INTO {DB}.orders VALUES {values}")
    mariadb.execute(
        f"INSERT INTO {DB}.customers VALUES " + ", ".join(f"({i}, 'customer {i}')" for i in range(300))
    )
    yield mariadb
    mariadb.execute(f"DROP DATABASE IF EXISTS {DB}")


class Load(threading.Thread):
    """Small inserts into the streamed table until stopped, so the charts have something to show."""

    def __init__(self, db: LocalMariaDB) -> None:
        super().__init__(daemon=True)
        self.db = db
        self.stop_event = threading.Event()
        self.rows = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = self.db.connect()
            try:
                with conn.cursor() as cur:
                    k = 100_000
                    while not self.stop_event.wait(0.05):
                        cur.execute(
                            f"INSERT INTO {DB}.orders VALUES "
                            + ", ".join(f"({k + i}, 'load', {i})" for i in range(20))
                        )
                        k += 20
                        self.rows += 20
            finally:
                conn.close()
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> None:
        self.stop_event.set()
        self.join(30)
        assert self.error is None, self.error


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,1000",
        # nothing but the server under test: no update checks, sync, metrics or other calls home
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        "--disable-extensions",
        "--disable-domain-reliability",
        "--no-first-run",
        "--no-pings",
    ):
        opts.add_argument(arg)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def pixels(driver: Any, canvas_id: str, rgb: tuple[int, int, int]) -> int:
    """How many pixels of a canvas are close to a colour (its series' line)."""
    return int(
        driver.execute_script(
            """
            const c = document.getElementById(arguments[0]);
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 0; i < d.length; i += 4) {
              if (Math.abs(d[i] - arguments[1]) < 40 && Math.abs(d[i + 1] - arguments[2]) < 40
                  && Math.abs(d[i + 2] - arguments[3]) < 40 && d[i + 3] > 200) n++;
            }
            return n;
            """,
            canvas_id,
            *rgb,
        )
    )


def test_dashboard_in_a_browser(upstream: LocalMariaDB, receiver: str, tmp_path: Path) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server = ServerProc(f"sqlite:///{tmp_path / 'meta.db'}", tmp_path, token=TOKEN, lease=5).start()
    # The sink's folder shows on the page (and in the screenshot): a short neutral name.
    out = Path(tempfile.mkdtemp(prefix="shop-"))
    load = Load(upstream)
    driver = None
    try:
        with server.client() as c:
            c.create_changefeed(
                {
                    "changefeed_id": "shop-files",
                    "upstream_uri": upstream.uri,
                    "sink_uri": f"file://{out}?protocol=csv",
                    "replica_config": {
                        "filter": {"rules": [f"{DB}.orders", f"{DB}.customers"]},
                        "snapshot": {"mode": "initial", "chunk-size": 500},
                    },
                }
            )
            c.create_changefeed(
                {
                    "changefeed_id": "refused-http",
                    "upstream_uri": upstream.uri,
                    "sink_uri": f"{receiver}?protocol=canal-json&max-retries=0",
                    "replica_config": {"filter": {"rules": [f"{DB}.refused"]}},
                }
            )

        def logs() -> str:
            return server.log()[-4000:]

        def streaming() -> bool:
            with server.client() as c:
                snap = c.request("GET", "/changefeeds/shop-files/snapshot")
            ranges_done = snap["total"] == 2 and all(
                t["ranges_done"] == t["ranges_total"] for t in snap["items"]
            )
            stats = status_of(server, "shop-files")["stats"] or {}
            # the stream reports (no snapshot figures) once the snapshot is written
            return ranges_done and "lag_s" in stats and "snapshot" not in stats

        wait_until(
            streaming,
            timeout=300,
            interval=1,
            what="shop-files streaming after its snapshot",
            on_timeout=logs,
        )
        load.start()
        upstream.execute(f"INSERT INTO {DB}.refused VALUES (1)")
        wait_until(
            lambda: status_of(server, "refused-http")["state"] == "failed",
            timeout=240,
            interval=1,
            what="refused-http failed by its receiver",
            on_timeout=logs,
        )

        driver = browser()
        # The page redraws the list and the detail on every refresh: an element read between two
        # redraws is stale, so every read happens inside a wait that reads it again.
        wait = WebDriverWait(
            driver, 60, poll_frequency=0.25, ignored_exceptions=(StaleElementReferenceException,)
        )
        driver.get(server.url + "/")
        # no token yet: the page asks for it
        wait.until(lambda d: d.find_element(By.ID, "login").is_displayed())
        driver.find_element(By.ID, "token").send_keys(TOKEN)
        driver.find_element(By.CSS_SELECTOR, "#login-form button[type=submit]").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.cf-row")) == 2)

        def row(cf_id: str) -> Any:
            return driver.find_element(By.CSS_SELECTOR, f'tr.cf-row[data-id="{cf_id}"]')

        def cell(cf_id: str, cls: str) -> str:
            """The text of one cell of a changefeed's row, read again if a redraw made it stale."""
            text: str = wait.until(lambda d: (row(cf_id).find_element(By.CLASS_NAME, cls).text,))[0]
            return text

        ids = wait.until(
            lambda d: [r.get_attribute("data-id") for r in d.find_elements(By.CSS_SELECTOR, "tr.cf-row")]
        )
        assert ids == ["refused-http", "shop-files"]
        assert cell("refused-http", "cf-state") == "failed"
        wait.until(lambda d: row("shop-files").find_element(By.CLASS_NAME, "cf-state").text == "normal")
        lag = cell("shop-files", "cf-lag")
        assert re.fullmatch(r"\d+\.\d (s|min|h)", lag), lag
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", cell("shop-files", "cf-checkpoint"))

        # the failed changefeed: its error and code
        row("refused-http").click()
        wait.until(lambda d: d.find_element(By.ID, "detail-title").text == "refused-http")
        wait.until(lambda d: d.find_element(By.ID, "problem").is_displayed())
        assert driver.find_element(By.ID, "problem-kind").text == "Error:"
        assert driver.find_element(By.ID, "problem-code").text.startswith("CDC:Err")
        assert "422" in driver.find_element(By.ID, "problem-message").text
        assert driver.find_element(By.ID, "btn-resume").is_enabled()

        # the streaming changefeed: charts over the last hour, the snapshot's ranges
        row("shop-files").click()
        wait.until(lambda d: d.find_element(By.ID, "detail-title").text == "shop-files")
        # a few samples (one every 5 s) of the steady load after the snapshot
        WebDriverWait(driver, 120, poll_frequency=0.5).until(
            lambda d: (
                int(d.find_element(By.ID, "chart-rate").get_attribute("data-points") or 0) >= 6
                and float(d.find_element(By.ID, "chart-rate").get_attribute("data-last") or 0) > 0
            )
        )
        assert pixels(driver, "chart-rate", (0x25, 0x63, 0xEB)) > 100  # the throughput line
        assert pixels(driver, "chart-lag", (0xD9, 0x77, 0x06)) > 100  # the lag line (at 0 when caught up)
        assert not driver.find_element(By.ID, "problem").is_displayed()

        def snapshot_view(d: Any) -> tuple[set[str], list[str], str]:
            tables = {
                t.get_attribute("data-table"): t for t in d.find_elements(By.CSS_SELECTOR, ".snapshot-table")
            }
            orders = tables.get(f"{DB}.orders")
            ranges = [] if orders is None else orders.find_elements(By.CSS_SELECTOR, ".range")
            return (
                set(tables),
                [r.get_attribute("class") for r in ranges],
                "" if orders is None else orders.text,
            )

        names, range_classes, orders_text = wait.until(snapshot_view)
        assert names == {f"{DB}.orders", f"{DB}.customers"}
        assert len(range_classes) >= 2 and all("done" in c for c in range_classes)
        assert "6,000" in orders_text
        rate = cell("shop-files", "cf-rate")
        assert re.fullmatch(r"[\d,]+", rate), rate
        driver.save_screenshot(str(tmp_path / "dashboard.png"))

        # pause with a click: the list and the detail show it stopped
        assert driver.find_element(By.ID, "btn-pause").is_enabled()
        driver.find_element(By.ID, "btn-pause").click()
        wait.until(lambda d: row("shop-files").find_element(By.CLASS_NAME, "cf-state").text == "stopped")
        wait.until(lambda d: d.find_element(By.ID, "detail-state").text == "stopped")
        assert driver.find_element(By.ID, "btn-resume").is_enabled()
        assert not driver.find_element(By.ID, "btn-pause").is_enabled()
        assert status_of(server, "shop-files")["state"] == "stopped"
        driver.save_screenshot(str(tmp_path / "dashboard-paused.png"))
        for name in ("dashboard.png", "dashboard-paused.png"):
            assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        if driver is not None:
            driver.quit()
        if load.is_alive():
            load.stop()
        rc = server.stop()
        shutil.rmtree(out, ignore_errors=True)
    assert rc == 0, server.log()[-3000:]
