"""A real outside client: TRL's GRPOTrainer (its OpenEnv ``environment_factory``) trains two steps against
`abc serve`, and OpenEnv's own client plays a level from a plain script (the two examples)."""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path

import pytest

from tests._ci import unavailable
from tests.rollout.servers import Server, need_serve

need_serve()
if importlib.util.find_spec("trl") is None:
    unavailable("trl is not installed: pip install 'agentbench-crbc[trl]'")

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def server():
    s = Server("--env", "sokoban")
    s.url  # noqa: B018  (waits for the startup line)
    yield s
    s.stop()


def test_plain_openenv_client_script_solves_a_level(server, capsys):
    ret = runpy.run_path(str(EXAMPLES / "openenv_client.py"))["main"](server.url, 3)
    out = capsys.readouterr().out
    assert "success=True" in out and ret > 10 and "anchor (" in out  # anchors decoded back to tuples
    assert server.wait_idle()["active_sessions"] == 0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning")
def test_trl_grpo_trainer_trains_two_steps_over_openenv(server, tmp_path, monkeypatch):
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    example = runpy.run_path(str(EXAMPLES / "trl_grpo_openenv.py"))
    trainer = example["train"](server.url, steps=2, output_dir=str(tmp_path))
    assert trainer.state.global_step == 2
    logged = [row for row in trainer.state.log_history if "rewards/SokobanOverOpenEnv/mean" in row]
    assert len(logged) == 2  # the env's get_reward was TRL's reward source at both steps
    envs = example["OPEN"]
    assert sum(e.resets for e in envs) >= 4  # every rollout reset a session on the server
    # the tool TRL exposes to the model steps the served env (the tiny random model seldom calls it itself)
    env = example["SokobanOverOpenEnv"]()
    try:
        board = env.reset()
        after = env.move("left")
        assert "P" in board and len(after.splitlines()) == 6 and env.get_reward() == pytest.approx(-0.1)
    finally:
        env._close()
    assert server.wait_idle()["active_sessions"] == 0
    from agentbench_crbc.rollout.engines.models import CHATML_TEMPLATE, tiny_tokenizer

    tok = tiny_tokenizer()  # the example trained a copy: the process-wide tiny tokenizer keeps its template
    assert tok.chat_template == CHATML_TEMPLATE and not getattr(tok, "response_template", None)
