"""A remote server's malformed reply ends one slot's episode, never the rollout (#40 item 6): a fake ``abc serve``
answers one slot's reset or step with each bad shape; that slot gets ``error`` (as a dead env process does), the
other slot and the run go on, and the OpenEnv client reports the same replies as an error observation."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading

import pytest

from agentbench_crbc.errors import ConfigError
from tests.rollout.servers import need_serve

need_serve()

GOOD_OBS = {"text": "push the box", "admissible_actions": ["up"], "success": False, "terminated": False,
            "truncated": False, "info": {"admissible_actions": ["up"]}}
WIN_OBS = {**GOOD_OBS, "success": True, "terminated": True, "info": {"admissible_actions": ["up"], "success": True}}


def _observation(obs=None, **data):
    return json.dumps({"type": "observation", "data": {"observation": obs or GOOD_OBS, "reward": 0.0,
                                                       "done": False, **data}})


def _deep(n: int) -> str:
    return "[" * n + "]" * n


#: name -> the frame the bad slot receives (raw text: some shapes are not even JSON objects).
SHAPES = {
    "empty list": "[]",
    "a string": '"hello"',
    "not json": "this is not json",
    "data as a list": json.dumps({"type": "observation", "data": [1, 2]}),
    "observation as a string": json.dumps({"type": "observation", "data": {"observation": "x", "reward": 0}}),
    "unknown type": json.dumps({"type": "banana", "data": {}}),
    "reward abc": _observation(reward="abc"),
    "reward 400 digits": ('{"type": "observation", "data": {"observation": ' + json.dumps(GOOD_OBS)
                          + ', "reward": ' + "9" * 400 + "}}"),
    "reward float marker": _observation(reward={"__float__": [1]}),
    "reward true": _observation(reward=True),
    "info as a list": _observation({**GOOD_OBS, "info": [1, 2]}),
    "info as a tuple marker": _observation({**GOOD_OBS, "info": {"__tuple__": [1]}}),
    "tuple marker of an int": _observation({**GOOD_OBS, "obs": {"__tuple__": 5}}),
    "float marker of a list": _observation({**GOOD_OBS, "info": {"x": {"__float__": [1]}}}),
    "float marker of junk": _observation({**GOOD_OBS, "info": {"x": {"__float__": "abc"}}}),
    "ndarray not a list": _observation({**GOOD_OBS, "image": {"__ndarray__": "x"}}),
    "ndarray two items": _observation({**GOOD_OBS, "image": {"__ndarray__": ["|u1", [1]]}}),
    "ndarray object dtype": _observation({**GOOD_OBS, "image": {"__ndarray__": ["|O", [1], "AAAAAAAAAAA="]}}),
    "ndarray bad dtype": _observation({**GOOD_OBS, "image": {"__ndarray__": ["nope", [1], "AA=="]}}),
    "ndarray structured dtype": _observation({**GOOD_OBS, "image": {"__ndarray__": ["i4,f8", [1], "AA=="]}}),
    "ndarray size mismatch": _observation({**GOOD_OBS, "image": {"__ndarray__": ["|u1", [5], "AAA="]}}),
    "ndarray bad base64": _observation({**GOOD_OBS, "image": {"__ndarray__": ["|u1", [1], "!!"]}}),
    "ndarray negative shape": _observation({**GOOD_OBS, "image": {"__ndarray__": ["|u1", [-1], ""]}}),
    "ndarray shape of text": _observation({**GOOD_OBS, "image": {"__ndarray__": ["|u1", ["a"], ""]}}),
    "ndarray huge zero-size shape": _observation({**GOOD_OBS, "image": {"__ndarray__": ["|u1", [0, 2**39, 2**39,
                                                                                                 2**39], ""]}}),
    "nesting 900 deep": _observation({**GOOD_OBS, "info": {"deep": json.loads(_deep(900))}}),
    "nesting 100000 deep": '{"type": "observation", "data": ' + _deep(100_000) + "}",
    "terminated false string": _observation({**GOOD_OBS, "terminated": "false"}),
    "truncated false string": _observation({**GOOD_OBS, "truncated": "false"}),
    "success false string": _observation({**WIN_OBS, "success": "false"}),
    "info success false string": _observation({**WIN_OBS, "info": {"success": "false"}}),
    "text as a list": _observation({**GOOD_OBS, "text": ["a"]}),
}


class FakeServer:
    """A WebSocket server speaking ``abc serve``'s protocol: a session reset with seed 1 gets ``self.shape`` at
    ``self.phase`` ("reset" or "step"), with ``self.fault`` (:data:`ORDER_FAULTS`) in the order of its replies;
    every other answer is well formed (reset: a level, step: solved; state: the session's step count)."""

    def __init__(self) -> None:
        import websockets

        self.shape, self.phase, self.fault = "[]", "reset", None
        self.loop = asyncio.new_event_loop()
        ready, self._port = threading.Event(), []
        self._stop = self.loop.create_future()

        async def session(ws):
            bad, steps, last = False, 0, None
            with contextlib.suppress(Exception):
                async for text in ws:
                    msg = json.loads(text)
                    if msg["type"] == "state":
                        mine = bad and last == self.phase
                        count = 7 if mine and self.fault == "miscount" else steps
                        if not (mine and self.fault == "no state"):
                            await ws.send(json.dumps({"type": "state", "data": {"episode_id": None,
                                                                                "step_count": count}}))
                        continue
                    last = msg["type"]
                    if msg["type"] == "reset":
                        bad, steps = msg["data"].get("seed") == 1, 0
                        answer = self.shape if bad and self.phase == "reset" else _observation()
                    else:
                        steps += 1
                        answer = (self.shape if bad and self.phase == "step" else
                                  _observation(WIN_OBS, reward=1.0, done=True))
                    mine = bad and self.phase == msg["type"]
                    if mine and self.fault == "state first":
                        await ws.send(json.dumps({"type": "state", "data": {"episode_id": None, "step_count": 0}}))
                    await ws.send(answer)
                    if mine and self.fault == "twice":
                        await ws.send(answer)

        async def main() -> None:
            async with websockets.serve(session, "127.0.0.1", 0, max_size=None) as srv:
                self._port.append(srv.sockets[0].getsockname()[1])
                ready.set()
                await self._stop

        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(main(),), daemon=True)
        self.thread.start()
        assert ready.wait(10)
        self.url = f"127.0.0.1:{self._port[0]}"

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self._stop.set_result, None)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture(scope="module")
def fake():
    server = FakeServer()
    yield server
    server.stop()


#: Faults in the order of a fake server's replies (#54 item 4): an answer sent twice (the leftover reset frame was
#: taken as the next step's result), the state before the answer, the state left out, a wrong step count.
ORDER_FAULTS = ("twice", "state first", "no state", "miscount")


@pytest.mark.parametrize("phase", ["reset", "step"])
@pytest.mark.parametrize("fault", ORDER_FAULTS)
def test_a_reply_that_answers_another_request_ends_the_slot_with_an_error(fake, fault, phase):
    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    fake.shape, fake.phase, fake.fault = _observation(), phase, fault
    with RemoteEnvPool([fake.url], 2, step_timeout=3) as pool:
        first = pool.reset({0: 0, 1: 1})
        assert first[0].error is None
        res = pool.step({0: "up", 1: "up"}) if phase == "step" or first[1].error is None else {0: None, 1: first[1]}
        bad = first[1] if phase == "reset" else res[1]
        assert bad.error is not None and "\n" not in bad.error, (fault, phase, first, res)
        assert ("malformed reply" in bad.error if fault != "no state" else "gave no answer within 3 s" in bad.error)
        assert 1 not in pool.sessions()
        if phase == "reset":
            assert res[1].error is not None  # never the leftover reset frame taken for the step's answer
        fake.fault = None
        again = pool.reset({0: 0, 1: 1})
        assert all(r.error is None for r in again.values())
        assert all(r.error is None for r in pool.step({0: "up", 1: "up"}).values())


@pytest.mark.parametrize("phase", ["reset", "step"])
@pytest.mark.parametrize("name", list(SHAPES))
def test_a_malformed_reply_ends_only_its_slot(fake, name, phase):
    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    fake.shape, fake.phase, fake.fault = SHAPES[name], phase, None
    with RemoteEnvPool([fake.url], 2, step_timeout=10) as pool:
        first = pool.reset({0: 0, 1: 1})
        assert first[0].error is None and first[0].obs == "push the box"
        if phase == "reset":
            assert "malformed reply" in first[1].error, first[1]
            bad = first[1]
        else:
            assert first[1].error is None
        res = pool.step({0: "up", 1: "up"} if phase == "step" else {0: "up"})
        assert res[0].error is None and res[0].terminated and res[0].info["success"] is True
        if phase == "step":
            bad = res[1]
            assert "malformed reply" in bad.error, bad
        assert len(bad.error) < 600 and "\n" not in bad.error
        assert 1 not in pool.sessions()  # the bad session is closed; the slot starts afresh at the next reset
        fake.phase = "never"
        again = pool.reset({0: 0, 1: 1})
        assert all(r.error is None for r in again.values())


@pytest.mark.parametrize("phase", ["reset", "step"])
@pytest.mark.parametrize("name", list(SHAPES))
def test_a_rollout_goes_on_and_records_the_bad_slot(fake, name, phase):
    from agentbench_crbc.rollout import EnvBackend, RolloutRunner, RunnerConfig
    from agentbench_crbc.rollout.engines.baselines import ScriptedPolicy

    fake.shape, fake.phase, fake.fault = SHAPES[name], phase, None
    with RolloutRunner("sokoban", ScriptedPolicy(["up"]),
        config=RunnerConfig(group_size=1, env_backend=EnvBackend("remote", urls=(fake.url,)))) as runner:
        good, bad = runner.collect([0, 1])
    assert good.trajectories[0].error is None and good.trajectories[0].success
    t = bad.trajectories[0]
    assert t.error is not None and "malformed reply" in t.error and not t.success
    assert runner.stats.worker_errors == 1


def test_the_remote_pool_never_shows_a_url_password(fake):
    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool, redact, ws_url

    assert redact("ws://bob:hunter2@h:1/ws") == "ws://bob:***@h:1/ws"
    with pytest.raises(ConfigError) as err:
        ws_url("ftp://bob:hunter2@h:1")
    assert "hunter2" not in str(err.value) and "bob:***@" in str(err.value)
    with RemoteEnvPool(["ws://bob:hunter2@127.0.0.1:1"], 1, connect_timeout=2) as pool:  # nothing listens there
        error = pool.reset({0: 0})[0].error
    assert "no remote env server answered" in error and "hunter2" not in error and "***" in error
    fake.shape, fake.phase, fake.fault = SHAPES["reward abc"], "reset", None
    with RemoteEnvPool([f"ws://bob:hunter2@{fake.url}"], 2) as pool:
        error = pool.reset({0: 0, 1: 1})[1].error
    assert "malformed reply" in error and "hunter2" not in error and "bob:***@" in error


@pytest.mark.parametrize("token", ["s3cr3t\nb", "s3cr3t\u2028", "s3cr3t\u20ac", " s3cr3t ", "s3 cr3t"])
def test_a_token_no_server_accepts_is_refused_without_showing_it(fake, monkeypatch, token):
    # websockets refused the header with an error quoting it: the token (and its line break) in the slot's error
    from agentbench_crbc.rollout.hosting.openenv_client import AbcEnvClient
    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    for make in (lambda: RemoteEnvPool([fake.url], 1, token=token), lambda: AbcEnvClient(f"ws://{fake.url}",
                                                                                          token=token)):
        with pytest.raises(ConfigError) as err:
            make()
        assert "cr3t" not in str(err.value) and "\n" not in str(err.value)
    monkeypatch.setenv("ABC_SERVE_TOKEN", token)
    with pytest.raises(ConfigError, match=r"^\$ABC_SERVE_TOKEN is not printable ASCII"):
        RemoteEnvPool([fake.url], 1)


def test_a_bad_ray_address_is_one_error():
    pytest.importorskip("ray")
    from agentbench_crbc.rollout.hosting.ray_pool import ray_init

    with pytest.raises(ConfigError, match="cannot start or reach a Ray cluster at 'not an address'"):
        ray_init("not an address")


def test_a_bad_ray_address_is_one_line_on_the_command_line(capsys):
    pytest.importorskip("ray")
    from agentbench_crbc.cli import main

    assert main(["rollout", "--env", "sokoban", "--policy", "random", "--env-backend", "ray", "--ray-address",
                 "not an address", "--groups", "1", "--group-size", "1"]) == 2  # a bad address is a configuration error
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert err.splitlines()[-1].startswith("abc rollout: error: cannot start or reach a Ray cluster")


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_openenv_client_reports_a_malformed_reply_as_an_error(fake, name):
    from agentbench_crbc.rollout.hosting.openenv_client import AbcEnvClient

    fake.shape, fake.phase, fake.fault = SHAPES[name], "reset", None
    with AbcEnvClient(f"ws://{fake.url}").sync() as env:
        good = env.reset(seed=0)
        assert good.observation.error is None and good.observation.text == "push the box"
        bad = env.reset(seed=1)
        assert bad.done and bad.observation.error and "malformed reply" in bad.observation.error
        assert not bad.observation.success


@pytest.mark.parametrize("url", ["ws://", "http://", "mailto:x", "ftp://x", "wss://:80", "h:0", "ws://h/?q=1", ""])
def test_a_url_no_server_can_have_is_refused_when_the_pool_is_made(url):
    from agentbench_crbc.rollout import EnvBackend
    from agentbench_crbc.rollout.hosting.remote import RemoteEnvPool

    for make in (lambda: RemoteEnvPool([url], 1), lambda: EnvBackend("remote", urls=(url,))):
        with pytest.raises(ConfigError, match=r"^remote env server .* must be host:port or an http\(s\):// or "
                                              r"ws\(s\):// URL with a host"):
            make()


@pytest.mark.parametrize("action", [None, 3, {"text": "up"}])
def test_the_openenv_client_refuses_a_step_with_no_action_text_in_one_line(fake, action):
    """``step(None)`` (or any value with no string ``text``) is one EnvError naming what to pass, raised before a
    message goes out, so the session goes on: the next step is answered as usual."""
    from agentbench_crbc.errors import EnvError
    from agentbench_crbc.rollout.hosting.openenv_client import AbcEnvClient

    fake.shape, fake.phase, fake.fault = "[]", "reset", None
    with AbcEnvClient(f"ws://{fake.url}").sync() as env:
        env.reset(seed=0)
        with pytest.raises(EnvError) as info:
            env.step(action)
        assert str(info.value) == (f"step() takes the action's text (e.g. step('up')) or an AbcAction, got "
                                   f"{type(action).__name__}; reset(seed=...) starts an episode, step(None) is "
                                   f"no action")
        after = env.step("up")
        assert after.done and after.observation.success and after.reward == 1.0
