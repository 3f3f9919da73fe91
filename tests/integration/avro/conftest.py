"""A real registry process (``sparkcdc schema-registry``) on a free 127.0.0.1 port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sparkcdc.registry.local import LocalSchemaRegistry


@pytest.fixture(scope="module")
def registry() -> Iterator[LocalSchemaRegistry]:
    """One registry for the module; tests use distinct topics so subjects never collide."""
    with LocalSchemaRegistry() as reg:
        yield reg
