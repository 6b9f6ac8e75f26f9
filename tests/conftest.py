"""Shared pytest fixtures: paths to the shared real data."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    assert SHARED_DATA.is_dir(), f"expected the shared data at {SHARED_DATA}"
    return SHARED_DATA
