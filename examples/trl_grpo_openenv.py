"""TRL's GRPOTrainer training a model on our Sokoban through its OpenEnv integration (``environment_factory``).

    abc serve --env sokoban --port 8000 &
    python examples/trl_grpo_openenv.py ws://127.0.0.1:8000 [MODEL]

Each rollout gets one ``SokobanOverOpenEnv``: ``reset`` opens an OpenEnv session on the server and returns the
level's text, the ``move`` tool steps it, ``get_reward`` is the episode's return. Without MODEL it trains the
package's tiny random Qwen2 (CPU, offline, two steps): it rarely emits a well-formed tool call, so its episodes are
mostly a reset and a zero return; a real tool-calling model (``Qwen/Qwen3-0.6B``) plays the level.
"""

from __future__ import annotations

import copy
import itertools
import sys
import tempfile
from typing import Any

from agentbench_crbc.rollout.hosting.openenv_client import AbcEnvClient

URL = "ws://127.0.0.1:8000"
_seeds = itertools.count()
OPEN: list[SokobanOverOpenEnv] = []


class SokobanOverOpenEnv:
    """One rollout's Sokoban, played over OpenEnv; its public methods are the model's tools."""

    def __init__(self) -> None:
        self.client = AbcEnvClient(URL).sync()
        self.client.connect()
        self.ret, self.done, self.resets, self.steps = 0.0, False, 0, 0
        OPEN.append(self)

    def reset(self, **kwargs: Any) -> str:
        result = self.client.reset(seed=next(_seeds))
        self.ret, self.done = 0.0, False
        self.resets += 1
        return ("Push every box (X) onto a target (O); you are P. Call `move` once per step.\n"
                + result.observation.text)

    def move(self, direction: str) -> str:
        """Move the player one cell, pushing a box in the way.

        Args:
            direction: one of up, down, left, right.

        Returns:
            The board after the move.
        """
        if self.done:
            return "The episode is over."
        result = self.client.step(direction)
        self.steps += 1
        self.ret += float(result.reward or 0.0)
        self.done = bool(result.done)
        return result.observation.text

    def get_reward(self) -> float:
        return self.ret

    def _close(self) -> None:  # private: every public method is a tool the model sees
        self.client.close()


def tiny_model() -> tuple[Any, Any]:
    """The package's tiny random Qwen2 with Qwen3's tool-calling chat template (TRL parses its tool calls)."""
    from trl.chat_template_utils import qwen3_chat_template

    from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer

    tok = copy.deepcopy(tiny_tokenizer())  # a copy: tiny_tokenizer() is cached and shared by the whole process
    tok.chat_template = qwen3_chat_template
    return tiny_qwen2(tok, hidden_size=64, num_layers=2), tok


def train(url: str, model: str | None = None, *, steps: int = 2, output_dir: str | None = None) -> Any:
    """Run ``steps`` GRPO updates against the server at ``url``; returns the trainer."""
    global URL
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    URL = url
    net, tok = tiny_model() if model is None else (model, None)
    prompts = [[{"role": "user", "content": "Solve this Sokoban level."}]] * 4
    args = GRPOConfig(output_dir=output_dir or tempfile.mkdtemp(prefix="abc-trl-"), max_steps=steps,
                      per_device_train_batch_size=2, num_generations=2, max_completion_length=24,
                      max_tool_calling_iterations=4, learning_rate=1e-4, logging_steps=1, save_strategy="no",
                      report_to=[], use_cpu=True, bf16=False, seed=0, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=net, args=args, train_dataset=Dataset.from_dict({"prompt": prompts}),
                          processing_class=tok, environment_factory=SokobanOverOpenEnv)
    try:
        trainer.train()
    finally:
        for env in OPEN:
            env._close()
    return trainer


if __name__ == "__main__":
    t = train(sys.argv[1] if len(sys.argv) > 1 else URL, sys.argv[2] if len(sys.argv) > 2 else None)
    print(f"steps {t.state.global_step}; resets {sum(e.resets for e in OPEN)}, moves {sum(e.steps for e in OPEN)}")
