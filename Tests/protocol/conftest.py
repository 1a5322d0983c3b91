"""pytest setup for the protocol tests: one run at a time uses the fixture directory."""

from __future__ import annotations

from typing import Iterator

import pytest

from fixtures import lock


@pytest.fixture(scope="session", autouse=True)
def fixture_directory_lock() -> Iterator[None]:
    """Holds the lock on /tmp/docsession-protocol-fixtures for the whole run (see fixtures.py)."""
    handle = lock()
    try:
        yield
    finally:
        handle.close()
