"""Imitation warm start from the environment's expert (``abc sft`` and the first stage of the CPU demo)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ConfigError
from ..family import EnvFamily, ensure_gym_ids, is_heldout
from .config import SFTConfig

__all__ = ["ExpertData", "SFTHooks", "expert_data", "is_heldout", "sft_lr", "sft_train"]


@dataclass
class ExpertData:
    """A pool of expert-labelled states and a sampler of (prompt_ids, response_ids) examples from it.

    ``sample(rng)`` draws one example: from the family's own imitation data where it has them (Sokoban: a random
    one of the 8 symmetries of a stored state, the target drawn from all optimal actions), else a stored prompt and
    the expert's action.
    """

    sample: Callable[[np.random.Generator], tuple[tuple[int, ...], tuple[int, ...]]]
    n_states: int


def _answer_ids(tokenizer: Any, action: str) -> tuple[int, ...]:
    ids = tokenizer(f"<action>{action}</action>", add_special_tokens=False)["input_ids"]
    return (*ids, tokenizer.eos_token_id)


def _imitation_data(imitation: Callable[..., Any], env_id: str, env_kwargs: dict[str, Any], builder: Any,
                    tokenizer: Any, cfg: SFTConfig, seeds: Sequence[int]) -> ExpertData:
    """The family's ``imitation_data`` (prompt ids and action text) with the answers tokenized once per action."""
    ensure_gym_ids()
    sample_text, n_states = imitation(env_id, env_kwargs, lambda obs, info: builder.build(obs, info).ids,
                                      seeds=seeds, pool=cfg.pool, augment=cfg.augment, all_optimal=cfg.all_optimal)
    answers: dict[str, tuple[int, ...]] = {}

    def sample(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
        prompt, action = sample_text(rng)
        if action not in answers:
            answers[action] = _answer_ids(tokenizer, action)
        return prompt, answers[action]

    return ExpertData(sample, n_states)


def _generic_data(env_id: str, env_kwargs: dict[str, Any], expert_fn: Callable[..., Any], builder: Any,
                  tokenizer: Any, cfg: SFTConfig, seeds: Sequence[int], max_steps: int) -> ExpertData:
    """Expert episodes through the prompt builder: each visited state's prompt and the expert's action."""
    import gymnasium as gym

    from agentbench_crbc.rollout.episodes.prompts import observation_text, task_description

    ensure_gym_ids()
    env = gym.make(env_id, **env_kwargs)
    examples: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    for seed in seeds:
        obs, info = env.reset(seed=int(seed))
        policy = expert_fn(env)
        task = task_description(observation_text(obs, info), info)
        history: list[tuple[str, str]] = []
        for step in range(max_steps):
            action = policy(obs, info)
            examples.append((builder.build(obs, info, history, step, task).ids, _answer_ids(tokenizer, action)))
            history.append((observation_text(obs, info), action))
            obs, _, term, trunc, info = env.step(action)
            if term or trunc:
                break
        if len(examples) >= cfg.pool:
            break
    env.close()

    def sample(rng: np.random.Generator) -> tuple[tuple[int, ...], tuple[int, ...]]:
        return examples[int(rng.integers(len(examples)))]

    return ExpertData(sample, len(examples))


def expert_data(family: EnvFamily | str, env_id: str, env_kwargs: dict[str, Any], builder: Any, tokenizer: Any,
                cfg: SFTConfig, *, seed: int = 0, max_steps: int = 50) -> ExpertData:
    """Expert-labelled states from training tasks (held-out ones skipped): the family's ``imitation`` data where
    it declares them, else its ``expert`` replayed through the prompts.

    :param family: the env's family (or its name).
    :raises ConfigError: the family has neither (no warm start is possible: ``--set sft.steps=0``).
    """
    if isinstance(family, str):
        from ..family import resolve_env as resolve

        family = resolve(family).family
    rng = np.random.default_rng(seed)
    imitation = family.load("imitation")
    seeds = rng.integers(0, 1_000_000, size=cfg.pool * 4 if imitation is not None else max(cfg.pool // 8, 8))
    if imitation is not None:
        return _imitation_data(imitation, env_id, env_kwargs, builder, tokenizer, cfg, seeds.tolist())
    expert = family.load("expert")
    if expert is None:
        raise ConfigError(f"config key 'sft.steps': env family {family.name!r} has no expert to imitate; "
                          "use --set sft.steps=0")
    return _generic_data(env_id, env_kwargs, expert, builder, tokenizer, cfg, seeds.tolist(), max_steps)


def _batch(examples: Sequence[tuple[tuple[int, ...], tuple[int, ...]]], pad_id: int, device: Any
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    L = max(len(p) + len(r) for p, r in examples)
    ids = torch.full((len(examples), L), pad_id, dtype=torch.long)
    att = torch.zeros_like(ids)
    labels = torch.full_like(ids, -100)
    for i, (p, r) in enumerate(examples):
        n = len(p) + len(r)
        ids[i, :n] = torch.tensor(p + r)
        att[i, :n] = 1
        labels[i, len(p):n] = torch.tensor(r)
    return ids.to(device), att.to(device), labels.to(device)


def sft_lr(cfg: SFTConfig, step: int) -> float:
    """The learning rate of (0-based) ``step``: linear warm-up over ``cfg.warmup`` steps, then ``cfg.schedule``
    (``constant``, or ``cosine`` down to a tenth of ``cfg.lr`` at the last step)."""
    warm = cfg.lr * min(1.0, (step + 1) / max(cfg.warmup, 1))
    if cfg.schedule != "cosine" or step < cfg.warmup:
        return warm
    frac = min(1.0, (step - cfg.warmup) / max(cfg.steps - 1 - cfg.warmup, 1))
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * frac)))


@dataclass(frozen=True)
class SFTHooks:
    """What the caller of :func:`sft_train` hears and decides between steps.

    :param on_step: called after each step with ``(step, {"loss", "acc", "lr"})`` (logging, checkpoints).
    :param should_stop: polled each step (time limits, Ctrl-C).
    :param agree: under torchrun, turns a local stop flag into one all ranks share (an all-reduce).
    :param progress: show a progress bar.
    """

    on_step: Callable[[int, dict[str, float]], None] | None = None
    should_stop: Callable[[], bool] | None = None
    agree: Callable[[bool], bool] | None = None
    progress: bool = True


def sft_train(model: torch.nn.Module, data: ExpertData, cfg: SFTConfig, *, pad_id: int, device: Any = "cpu",
              seed: int = 0, start_step: int = 0, optimizer: torch.optim.Optimizer | None = None,
              hooks: SFTHooks | None = None, autocast_dtype: torch.dtype | None = None) -> int:
    """Cross-entropy on the expert's answer tokens, AdamW with linear warm-up; returns the steps done in total.

    :param hooks: step callbacks, the stop poll and the progress bar (:class:`SFTHooks`; default: none, a bar).
    :param autocast_dtype: forward and backward in ``torch.autocast`` of this dtype (parameters stay fp32).
    """
    hooks = hooks or SFTHooks()
    on_step, should_stop, agree, progress = hooks.on_step, hooks.should_stop, hooks.agree, hooks.progress
    from contextlib import nullcontext

    from tqdm.auto import tqdm

    rng = np.random.default_rng(seed + 7919 * start_step)
    opt = optimizer or torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr,
                                         weight_decay=0.0)
    deadline = time.monotonic() + cfg.max_minutes * 60 if cfg.max_minutes > 0 else None
    bar = tqdm(total=cfg.steps, initial=start_step, desc="sft", disable=not progress, dynamic_ncols=True)
    step = start_step
    model.train()
    ema = None
    while step < cfg.steps:
        flag = (deadline is not None and time.monotonic() > deadline) or (should_stop is not None and should_stop())
        if agree(flag) if agree is not None else flag:
            break
        for g in opt.param_groups:
            g["lr"] = sft_lr(cfg, step)
        ids, att, labels = _batch([data.sample(rng) for _ in range(cfg.batch_size)], pad_id, device)
        with torch.autocast(ids.device.type, dtype=autocast_dtype) if autocast_dtype is not None else nullcontext():
            logits = model(input_ids=ids, attention_mask=att).logits[:, :-1].float()
        tgt = labels[:, 1:]
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1), ignore_index=-100)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        with torch.no_grad():
            m = tgt != -100
            acc = float(((logits.argmax(-1) == tgt) & m).sum() / m.sum())
        lv = float(loss.detach())
        ema = lv if ema is None else 0.95 * ema + 0.05 * lv
        bar.update(1)
        bar.set_postfix(loss=f"{ema:.3f}", acc=f"{acc:.2f}")
        if on_step is not None:
            on_step(step, {"loss": lv, "acc": acc, "lr": opt.param_groups[0]["lr"]})
    bar.close()
    model.eval()
    return step
