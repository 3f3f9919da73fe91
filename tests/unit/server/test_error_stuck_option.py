"""``sparkcdc server --error-stuck-seconds``: how long passing errors may last before a changefeed fails."""

from __future__ import annotations

import math

import pytest

from sparkcdc.errors import ConfigError
from sparkcdc.server.main import ServerOptions, check_options


@pytest.mark.parametrize("value", [0.0, 0.5, -1.0, math.nan, math.inf])
def test_a_window_under_a_second_or_not_a_number_is_refused(value: float) -> None:
    with pytest.raises(ConfigError, match="invalid --error-stuck-seconds"):
        check_options(ServerOptions(meta_uri="sqlite:///meta.db", error_stuck_seconds=value))


def test_the_default_is_ticdc_s_thirty_minutes() -> None:
    opts = ServerOptions(meta_uri="sqlite:///meta.db")
    assert opts.error_stuck_seconds == 1800.0
    check_options(opts)
