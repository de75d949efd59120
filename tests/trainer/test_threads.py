"""`threads = 0` (the default): OMP_NUM_THREADS when set, else the cores the process may use over its local ranks."""

from __future__ import annotations

import os

import pytest

from agentbench_crbc.trainer.distributed import torch_threads


def test_explicit_threads_win(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert torch_threads(5) == (5, "threads")


def test_omp_num_threads_is_read(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert torch_threads(0) == (3, "OMP_NUM_THREADS")


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux-only")
def test_affinity_shared_among_local_ranks(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    assert torch_threads(0) == (cores, f"the {cores} cores this process may use")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cores * 4))
    n, why = torch_threads(0)
    assert n == 1 and why.endswith(f"over {cores * 4} ranks")


def test_config_default_is_auto():
    from agentbench_crbc.trainer.config import load_config

    assert load_config().threads == 0
    with pytest.raises(Exception, match="threads"):
        load_config(overrides=["threads=-1"])
