"""The start-ts/target-ts rules ``sparkcdc run``, ``cli changefeed create`` and the server's create share."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.pipeline.request import MAX_TS, TARGET_BEFORE_START, check_target_after_start, commit_ts

SRC = Path(__file__).resolve().parents[3] / "src" / "sparkcdc"


@pytest.mark.parametrize(("given", "want"), [(None, None), (0, None), (1, 1), (MAX_TS, MAX_TS)])
def test_a_commit_ts_or_none(given: Any, want: int | None) -> None:
    assert commit_ts("--start-ts", given) == want


@pytest.mark.parametrize("bad", [-1, MAX_TS + 1, "12", True, 1.5])
def test_anything_else_is_refused_naming_the_flag_and_the_value(bad: Any) -> None:
    with pytest.raises(ConfigError) as err:
        commit_ts("start_ts", bad)
    assert err.value.message.startswith(
        f"invalid start_ts {bad!r}" if isinstance(bad, str) else "invalid start_ts "
    )
    assert "non-negative integer commit ts" in err.value.message and str(MAX_TS) in err.value.message


def test_a_target_must_come_after_the_start() -> None:
    check_target_after_start(None, 5)
    check_target_after_start(5, None)
    check_target_after_start(5, 6)
    with pytest.raises(ConfigError) as err:
        check_target_after_start(10, 10)
    assert err.value.code == TARGET_BEFORE_START and "start-ts 10" in err.value.message
    with pytest.raises(ConfigError) as err:
        check_target_after_start(10, 5, start_is_now=True)
    assert "(now, when --start-ts is omitted)" in err.value.message


@pytest.mark.parametrize("rel", ["cli/cmd_run.py", "cli/cli_changefeed.py", "server/service.py"])
def test_every_front_door_asks_the_one_rule(rel: str) -> None:
    tree = ast.parse((SRC / rel).read_text())
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert "check_target_after_start" in names, rel
    codes = [
        n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == TARGET_BEFORE_START
    ]
    assert codes == [] or rel == "server/service.py", f"{rel} words a target-ts refusal of its own"
