"""`threads = 0` (the default): OMP_NUM_THREADS when set, else one thread (fewer cores than that per local rank
never), and OpenMP's passive waiting set before torch loads unless the environment chose a policy."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentbench_crbc.trainer.threads import DEFAULT_THREADS, cpu_plan, prepare_openmp, torch_threads


def test_explicit_threads_win() -> None:
    assert torch_threads(5, {"OMP_NUM_THREADS": "3"}) == (5, "threads")


def test_omp_num_threads_is_read() -> None:
    assert torch_threads(0, {"OMP_NUM_THREADS": "3"}) == (3, "OMP_NUM_THREADS")


def test_default_is_one_thread_whatever_the_cores() -> None:
    n, why = torch_threads(0, {"OMP_NUM_THREADS": ""})
    assert DEFAULT_THREADS == 1 and n == 1 and why.startswith("threads = 0: one")
    n, _ = torch_threads(0, {"LOCAL_WORLD_SIZE": "4096"})  # a rank never gets less than one
    assert n == 1


def test_passive_is_set_only_when_the_environment_chose_nothing() -> None:
    env: dict[str, str] = {}
    if "torch" not in sys.modules:
        assert prepare_openmp(env) == "set" and env == {"OMP_WAIT_POLICY": "PASSIVE"}
    for key, value in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "300000"), ("KMP_BLOCKTIME", "0")):
        env = {key: value}
        assert prepare_openmp(env) == f"{key}={value} from the environment" and env == {key: value}
        assert cpu_plan(2, env).wait == f"{key}={value}"


def test_after_torch_loaded_it_sets_nothing_and_says_so() -> None:
    import torch  # noqa: F401

    env: dict[str, str] = {}
    assert prepare_openmp(env).startswith("torch was imported before abc could set it") and env == {}
    plan = cpu_plan(2, env)
    assert (plan.threads, plan.wait) == (2, "spin") and "set it in the environment" in plan.wait_why


def test_the_cli_sets_passive_before_torch_loads() -> None:
    """``abc train`` prepares OpenMP before it imports the trainer (and torch); the first lines name the choice."""
    code = ("import os, sys; sys.argv = ['abc', 'train', '--print-config']\n"
            "from agentbench_crbc.trainer.threads import prepare_openmp\n"
            "from agentbench_crbc.cli import train as t\n"
            "import agentbench_crbc.trainer.threads as th\n"
            "assert 'torch' not in sys.modules\n"
            "print(prepare_openmp(), os.environ.get('OMP_WAIT_POLICY'), th.cpu_plan(0).line())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME",
                                                            "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.startswith("set PASSIVE torch CPU threads: 1 (threads = 0: one")
    assert "OpenMP waiting: passive (OMP_WAIT_POLICY=PASSIVE, set by abc before torch loaded" in out


def test_cli_train_prepares_openmp_before_the_trainer_import() -> None:
    import inspect

    from agentbench_crbc.cli import train

    src = inspect.getsource(train.run)
    assert src.index("prepare_openmp()") < src.index("from ..trainer.loop import train")


def test_config_default_is_auto() -> None:
    from agentbench_crbc.trainer.config import load_config

    assert load_config().threads == 0
    with pytest.raises(Exception, match="threads"):
        load_config(overrides=["threads=-1"])
