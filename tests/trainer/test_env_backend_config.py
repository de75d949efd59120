"""rollout.env_backend and its keys: validated in the config, turned into the runner's EnvBackend."""

from __future__ import annotations

import pytest

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.rollout.hosting.workers import EnvBackend
from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.rollouts import Rollouts, env_backend


def test_default_is_the_in_process_pool_as_before():
    assert env_backend(load_config()) == EnvBackend("process", workers=0)


def test_remote_and_ray_keys_reach_the_backend():
    cfg = load_config(overrides=['rollout.env_backend=remote', 'rollout.remote_urls=["h1:8000", "ws://h2:9/ws"]'])
    assert env_backend(cfg) == EnvBackend("remote", urls=("h1:8000", "ws://h2:9/ws"))
    cfg = load_config(overrides=['rollout.env_backend=ray', 'rollout.ray_address=auto'])
    assert env_backend(cfg) == EnvBackend("ray", ray_address="auto", workers=None)  # 0: one actor per CPU
    cfg = load_config(overrides=['rollout.env_backend=ray', "rollout.env_workers=3"])
    assert env_backend(cfg).workers == 3


def test_bad_backend_values_name_the_key():
    with pytest.raises(ConfigError, match=r"rollout\.env_backend"):
        load_config(overrides=['rollout.env_backend=threads'])
    with pytest.raises(ConfigError, match=r"rollout\.env_workers"):
        load_config(overrides=["rollout.env_workers=-1"])
    cfg = load_config(overrides=['rollout.env_backend=remote'])
    with pytest.raises(ConfigError, match=r"rollout\.remote_urls is empty|needs server URLs"):
        Rollouts(cfg).collect(None, None, [0], group_size=1, sampling=None)


def test_placement_keys_leave_the_hash_and_may_change_on_resume():
    from agentbench_crbc.trainer.config import config_hash
    from agentbench_crbc.trainer.resume import fixed_config

    base = load_config()
    moved = load_config(overrides=["rollout.env_backend=remote", 'rollout.remote_urls=["h:1"]',
                                   "rollout.env_workers=4"])
    assert config_hash(moved) == config_hash(base)  # same records on every backend: the same run
    assert fixed_config(moved) == fixed_config(base)
    assert not any(k.startswith(("rollout.env_backend", "rollout.remote", "rollout.ray", "rollout.env_workers"))
                   for k in fixed_config(base))  # a run saved before these keys existed still resumes
    assert config_hash(load_config(overrides=["rollout.groups=3"])) != config_hash(base)


def test_one_list_of_env_backends():
    import dataclasses

    from agentbench_crbc.cli import build_parser
    from agentbench_crbc.rollout.hosting.workers import ENV_BACKENDS
    from agentbench_crbc.trainer.schema import RolloutConfig

    (fld,) = [f for f in dataclasses.fields(RolloutConfig) if f.name == "env_backend"]
    assert fld.metadata["choices"] is ENV_BACKENDS
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    (opt,) = [a for a in sub.choices["rollout"]._actions if a.dest == "env_backend"]
    assert opt.choices is ENV_BACKENDS
