"""When a changefeed that stopped on an error starts again, and when it fails for good.

One policy for whoever runs the changefeed: ``sparkcdc run`` (``cli.cmd_run``) and the
server's scheduler (``server.scheduler``) both ask a ``RestartPolicy`` after every failure
and tell it when the changefeed made progress. The rules:

- a permanent error fails the changefeed at once;
- a known passing fault (upstream or sink down, a lost executor) restarts it after a backoff
  that doubles from ``backoff_base`` up to ``backoff_max``;
- an error sparkcdc does not recognise restarts it ``MAX_UNCLASSIFIED_RETRIES`` times in a
  row, then fails it (``errors.retry_verdict``);
- errors that last ``error_stuck_seconds`` without progress fail it with the last one;
- progress (a committed batch, a checkpoint that moved) forgets the earlier failures.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from sparkcdc.errors import (
    MAX_UNCLASSIFIED_RETRIES,
    ConfigError,
    PermanentError,
    SparkCdcError,
    UnclassifiedError,
    map_spark_error,
    retry_verdict,
)

DEFAULT_ERROR_STUCK_SECONDS = 1800.0
BACKOFF_BASE = 1.0
"""Seconds before the first restart; each restart in a row waits twice as long as the one before."""
BACKOFF_MAX = 30.0
"""The longest wait before a restart."""


def check_error_stuck_seconds(value: float, flag: str = "--error-stuck-seconds") -> None:
    """Refuse a stuck limit that is no number of seconds, or under one second."""
    if not math.isfinite(value) or value < 1:
        raise ConfigError(f"invalid {flag} {value}: must be a number of seconds, at least 1")


@dataclass(frozen=True)
class Restart:
    """Start the changefeed again after ``delay`` seconds."""

    error: SparkCdcError
    """The error it stopped with."""
    delay: float
    attempt: int
    """Restarts in a row without progress, this one included."""
    unclassified: int
    """Of those, restarts after errors sparkcdc does not recognise."""

    def describe(self) -> str:
        """``retrying in 2s (attempt 2)``, with the count of unrecognised errors when there were any."""
        tail = f"attempt {self.attempt}"
        if self.unclassified:
            tail += f", {self.unclassified} of {MAX_UNCLASSIFIED_RETRIES} retries for an unrecognised error"
        return f"retrying in {self.delay:g}s ({tail})"


@dataclass(frozen=True)
class Fail:
    """Fail the changefeed with ``error``."""

    error: SparkCdcError
    """What it fails with: the error itself, or a permanent one that names it."""
    cause: SparkCdcError
    """The error it stopped with."""
    stuck_seconds: float | None = None
    """Set when it fails because errors lasted ``error_stuck_seconds`` without progress."""


class RestartPolicy:
    """The failures of one changefeed since its last progress, and what follows the next one."""

    def __init__(
        self,
        *,
        backoff_base: float = BACKOFF_BASE,
        backoff_max: float = BACKOFF_MAX,
        error_stuck_seconds: float = DEFAULT_ERROR_STUCK_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.error_stuck_seconds = error_stuck_seconds
        self.clock = clock
        self.attempts = 0
        self.unclassified = 0
        self.first_error_at: float | None = None

    @property
    def failing(self) -> bool:
        """Whether failures happened since the last progress."""
        return self.first_error_at is not None

    def progressed(self) -> None:
        """The changefeed made progress: the failures before are over."""
        self.attempts = 0
        self.unclassified = 0
        self.first_error_at = None

    def failed(self, exc: BaseException) -> Restart | Fail:
        """The changefeed stopped with ``exc`` (a sparkcdc error, or a Spark failure that carries one)."""
        now = self.clock()
        if self.first_error_at is None:
            self.first_error_at = now
        err = map_spark_error(exc)
        verdict = retry_verdict(err, self.unclassified)
        if verdict is not None:
            return Fail(verdict, err)
        stuck = now - self.first_error_at
        if stuck >= self.error_stuck_seconds:
            return Fail(
                PermanentError(
                    f"errors for {stuck:.0f}s without progress (--error-stuck-seconds); last: {err.message}",
                    code=err.code,
                ),
                err,
                stuck_seconds=stuck,
            )
        self.attempts += 1
        if isinstance(err, UnclassifiedError):
            self.unclassified += 1
        delay = min(self.backoff_max, self.backoff_base * 2 ** (self.attempts - 1))
        return Restart(err, delay, self.attempts, self.unclassified)
