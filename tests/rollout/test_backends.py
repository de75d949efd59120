"""The three env backends give the same answer: identical records (trajectories, anchors, rewards) from the expert
through worker processes, `abc serve` sessions and Ray actors, and identical `abc credit` output of the three."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import time

import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.errors import ConfigError
from agentbench_crbc.rollout import EnvBackend, RolloutRunner, RunnerConfig
from agentbench_crbc.rollout.engines.baselines import ExpertPolicy
from tests._ci import unavailable
from tests.rollout.servers import Server, need_serve

need_serve()
if importlib.util.find_spec("ray") is None:
    unavailable("ray is not installed: pip install 'agentbench-crbc[ray]'")


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of this test process (auth off: RAY_AUTH_MODE=disabled, set in conftest)."""
    import ray

    from agentbench_crbc.rollout.hosting.ray_pool import ray_init

    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray_init()
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def sokoban_servers():
    servers = [Server("--env", "sokoban", "--max-sessions", "16"), Server("--env", "sokoban")]
    yield servers
    for s in servers:
        s.stop()


def _three_ways(tmp_path, env: str, urls: list[str], groups: int, group_size: int) -> list[bytes]:
    outs = []
    for backend, extra in (("process", ["--workers", "2"]), ("remote", [a for u in urls for a in ("--remote-url", u)]),
                           ("ray", [])):
        out, credited = tmp_path / f"{backend}.jsonl", tmp_path / f"{backend}.credit.jsonl"
        assert main(["rollout", "--env", env, "--policy", "expert", "--groups", str(groups), "--group-size",
                     str(group_size), "--seed", "3", "--env-backend", backend, *extra, "-o", str(out),
                     "--quiet"]) == 0
        assert main(["credit", "crbc", str(out), "-o", str(credited)]) == 0
        outs += [out.read_bytes(), credited.read_bytes()]
    return outs


@pytest.mark.slow
def test_sokoban_same_records_and_credit_on_every_backend(tmp_path, sokoban_servers, ray_cluster):
    urls = [s.url for s in sokoban_servers]
    proc, proc_credit, remote, remote_credit, ray_out, ray_credit = _three_ways(tmp_path, "sokoban", urls, 3, 4)
    assert proc == remote == ray_out and proc_credit == remote_credit == ray_credit
    assert proc.count(b'"success": true') == 12 and b'"anchor": [' in proc  # tuple anchors survived the wire
    for s in sokoban_servers:  # the pool closed its sessions, and both servers had some (load-balanced)
        assert s.wait_idle()["active_sessions"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("family", ["alfworld", "webshop"])
def test_text_families_same_records_and_credit_on_every_backend(tmp_path, family, ray_cluster):
    from agentbench_crbc.extras import require_env

    try:
        require_env(family)
    except Exception as exc:
        unavailable(str(exc))
    server = Server("--env", family)
    try:
        proc, proc_credit, remote, remote_credit, ray_out, ray_credit = _three_ways(tmp_path, family, [server.url],
                                                                                    2, 2)
    finally:
        server.stop()
    assert proc == remote == ray_out and proc_credit == remote_credit == ray_credit
    assert b'"success": true' in proc


def test_the_trainers_rollouts_use_the_configured_backend():
    from agentbench_crbc.rollout.episodes.base import SamplingParams
    from agentbench_crbc.trainer.config import load_config
    from agentbench_crbc.trainer.rollouts import Rollouts

    # the server plays the CPU demo's levels: the same env kwargs as the trainer's config (it refuses others)
    server = Server("--env", "sokoban", "--set", "view=egocentric", "--set", "max_moves=4")
    try:
        cfg = load_config(overrides=["rollout.env_backend=remote", f'rollout.remote_urls=["{server.url}"]'])
        assert cfg.env.kwargs == {"view": "egocentric", "max_moves": 4}
        with Rollouts(cfg) as rollouts:
            groups = rollouts.collect(ExpertPolicy(), None, [0, 1], group_size=2, sampling=SamplingParams())
            assert server.status()["active_sessions"] == 4  # the runner keeps its sessions across updates
        assert all(t.success for g in groups for t in g.trajectories)
        assert server.wait_idle()["active_sessions"] == 0  # closing the trainer's rollouts closes them
    finally:
        server.stop()


def test_remote_pool_spreads_sessions_and_survives_a_killed_server(sokoban_servers):
    a = Server("--env", "sokoban")
    b = sokoban_servers[1]
    try:
        with RolloutRunner("sokoban", ExpertPolicy(),
            config=RunnerConfig(group_size=2, env_backend=EnvBackend("remote", urls=(a.url, b.url)))) as runner:
            pool = runner.pool(4)
            first = pool.reset({s: 0 for s in range(4)})
            assert all(r.error is None for r in first.values())
            on = pool.sessions()
            assert sorted(on.values()) == sorted([a.url, a.url, b.url, b.url])  # fewest sessions first
            a.kill()
            t0 = time.monotonic()
            res = pool.step({s: "up" for s in range(4)})
            assert time.monotonic() - t0 < 10
            lost = {s for s, r in res.items() if r.error is not None}
            assert lost == {s for s, u in on.items() if u == a.url}
            assert all("lost" in res[s].error for s in lost)
            again = pool.reset({s: 0 for s in range(4)})  # reconnects, to the live server
            assert all(r.error is None for r in again.values()) and set(pool.sessions().values()) == {b.url}
            groups = runner.collect([0, 1])  # a whole collect still works on the survivor
            assert all(t.success for g in groups for t in g.trajectories)
    finally:
        a.stop()
    assert b.wait_idle()["active_sessions"] == 0


def test_remote_pool_times_out_a_server_that_never_answers():
    import asyncio
    import threading

    import websockets

    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    loop = asyncio.new_event_loop()
    ready, port = threading.Event(), []
    stop = loop.create_future()

    async def silent(ws):
        with contextlib.suppress(Exception):
            await ws.wait_closed()

    async def serve_silently() -> None:
        async with websockets.serve(silent, "127.0.0.1", 0) as srv:
            port.append(srv.sockets[0].getsockname()[1])
            ready.set()
            await stop

    t = threading.Thread(target=loop.run_until_complete, args=(serve_silently(),), daemon=True)
    t.start()
    assert ready.wait(10)
    try:
        with RemoteEnvPool([f"127.0.0.1:{port[0]}"], 2, step_timeout=0.5) as pool:
            t0 = time.monotonic()
            res = pool.reset({0: 0, 1: 1})
            assert time.monotonic() - t0 < 5
            assert all("gave no answer within" in r.error for r in res.values())
            assert pool.sessions() == {}  # timed-out sessions are closed, the next reset reconnects
            res = pool.step({0: "up"})
            assert "has no session" in res[0].error
        with RemoteEnvPool(["127.0.0.1:1"], 1, connect_timeout=2) as pool:  # nothing listens on port 1
            assert "no remote env server answered" in pool.reset({0: 0})[0].error
    finally:
        loop.call_soon_threadsafe(stop.set_result, None)
        t.join(10)
        loop.close()


def test_ray_pool_reports_a_killed_actor_and_replaces_it(ray_cluster):
    from agentbench_crbc.rollout.hosting.ray_pool import RayEnvPool
    from agentbench_crbc.rollout.hosting.workers import EnvRecipe

    with RayEnvPool(EnvRecipe("abc/SokobanText-v0"), 4, num_actors=2) as pool:
        assert all(r.error is None for r in pool.reset({s: s for s in range(4)}).values())
        pids = pool.actor_pids()
        os.kill(pids[1], signal.SIGKILL)  # holds slots 1 and 3
        res = pool.step({s: "up" for s in range(4)})
        assert res[0].error is None and res[2].error is None
        assert "env actor 1 lost" in res[1].error and "env actor 1" in res[3].error
        assert "not running" in pool.step({1: "up"})[1].error
        assert all(r.error is None for r in pool.reset({s: s for s in range(4)}).values())
        assert pool.actor_pids()[1] not in (None, pids[1])


def test_pixel_observations_cross_the_wire_exactly():
    import numpy as np

    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool
    from agentbench_crbc.rollout.hosting.workers import EnvRecipe, ProcessEnvPool

    server = Server("--env", "abc/Sokoban-v0")
    try:
        with ProcessEnvPool(EnvRecipe("abc/Sokoban-v0"), 2, num_workers=0, with_expert=True) as here, \
                RemoteEnvPool([server.url], 2, env_id="abc/Sokoban-v0", with_expert=True) as there:
            a, b = here.reset({0: 5, 1: 6}), there.reset({0: 5, 1: 6})
            for _ in range(2):
                for s in (0, 1):
                    assert a[s].obs.dtype == b[s].obs.dtype == np.uint8 and a[s].obs.ndim == 3
                    assert np.array_equal(a[s].obs, b[s].obs) and a[s].info == b[s].info
                moves = {s: a[s].info.get("expert_action") or "up" for s in (0, 1)}
                a, b = here.step(moves), there.step(moves)
                assert all(a[s].reward == b[s].reward for s in (0, 1))
    finally:
        server.stop()


def test_ray_backend_defaults_to_one_actor_per_cluster_cpu(ray_cluster):
    from agentbench_crbc.rollout.hosting.workers import EnvRecipe

    cpus = int(ray_cluster.cluster_resources()["CPU"])
    pool = EnvBackend("ray").pool(EnvRecipe("abc/SokobanText-v0"), 16, num_workers=0)  # the trainer passes 0
    try:
        assert pool.num_actors == min(16, cpus)
    finally:
        pool.close()


def test_backend_config_errors():
    with pytest.raises(ConfigError, match="needs server URLs"):
        EnvBackend("remote")
    with pytest.raises(ConfigError, match="not one of process, remote, ray"):
        EnvBackend("threads")
    from agentbench_crbc.rollout.hosting.remote import ws_url

    assert ws_url("10.0.0.5:8000") == "ws://10.0.0.5:8000/ws"
    assert ws_url("https://envs.example/") == "wss://envs.example/ws"
    assert ws_url("ws://h:1/ws") == "ws://h:1/ws"
    with pytest.raises(ConfigError, match="must be host:port"):
        ws_url("ftp://h:1")
