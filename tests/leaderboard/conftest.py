"""Fixtures shared by the leaderboard tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working folder with no leaderboards/ in it, and a fresh user data folder."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path
