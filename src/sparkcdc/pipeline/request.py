"""The checks of a changefeed request that ``sparkcdc run`` and the server's create both make, once.

A start-ts or target-ts means the same at both front doors: a commit ts from 1 to ``MAX_TS``
(an unsigned 64-bit number, as in TiCDC), with 0 or none meaning none (a start "now", no
target). A target must come after the start, whether the start was given or is "now".
"""

from __future__ import annotations

from typing import Any

from sparkcdc.errors import ConfigError

MAX_TS = (1 << 64) - 1
"""The largest ts (an unsigned 64-bit number, as in TiCDC)."""

TARGET_BEFORE_START = "CDC:ErrTargetTsBeforeStartTs"


def _shown(value: Any) -> str:
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else repr(value)
    return text if len(text) <= 40 else f"{text[:35]}... ({len(text)} characters)"


def commit_ts(name: str, value: Any) -> int | None:
    """A start-ts or target-ts as given: None for none (absent or 0), else the ts.

    ``name``: the flag or field as the user wrote it (``--start-ts``, ``start_ts``).
    """
    if value is None or (value == 0 and not isinstance(value, bool)):
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_TS:
        raise ConfigError(
            f"invalid {name} {_shown(value)}: expected a non-negative integer commit ts, from 0 to {MAX_TS} "
            "(0: none)"
        )
    return value


def check_target_after_start(
    start_ts: int | None, target_ts: int | None, *, start_is_now: bool = False
) -> None:
    """Refuse a target-ts at or before the start-ts (``start_is_now``: the start-ts is the upstream's now)."""
    if start_ts is None or target_ts is None or target_ts > start_ts:
        return
    if start_is_now:
        raise ConfigError(
            f"the target-ts {target_ts} is not after the start-ts {start_ts} (now, when --start-ts is omitted); "
            "choose a later target-ts",
            code=TARGET_BEFORE_START,
        )
    raise ConfigError(
        f"the start-ts {start_ts} is larger than or equal to the target-ts {target_ts}; "
        "choose a target-ts after the start-ts (or none)",
        code=TARGET_BEFORE_START,
    )
