"""Every env pool satisfies the one ``EnvPool`` Protocol the runner and the server are written against."""

from __future__ import annotations

import pytest

from agentbench_crbc.rollout import EnvPool, EnvRecipe, ProcessEnvPool
from agentbench_crbc.rollout.hosting.ray_pool import RayEnvPool
from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool


@pytest.mark.parametrize("cls", [ProcessEnvPool, RemoteEnvPool, RayEnvPool])
def test_each_pool_class_is_an_env_pool(cls: type) -> None:
    assert issubclass(cls, EnvPool)


def test_a_class_without_step_is_not_an_env_pool() -> None:
    class Half:
        def reset(self, seeds, options=None): ...
        def close(self): ...

    assert not issubclass(Half, EnvPool)


def test_the_backend_builds_an_env_pool_that_steps() -> None:
    from agentbench_crbc.rollout.hosting.workers import EnvBackend

    with EnvBackend("process").pool(EnvRecipe("abc/Sokoban-v0"), 2, num_workers=0) as pool:
        assert isinstance(pool, EnvPool)
        res = pool.reset({0: 1, 1: 2})
        assert sorted(res) == [0, 1] and all(r.error is None for r in res.values())
