"""Shared pytest setup: GPU tests run only with --run-gpu; no plugin autoload surprises; headless SDL."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# one torch thread per test process (`threads = 0`, the default, reads it): pytest -n 2 on 2 cores, not 4 threads
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-gpu", action="store_true", help="run tests marked gpu (needs CUDA)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-gpu"):
        return
    skip = pytest.mark.skip(reason="needs a CUDA device: run with --run-gpu")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
