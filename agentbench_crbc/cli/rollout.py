"""``abc rollout``: collect group rollouts and write credit-contract records (JSON Lines) that ``abc credit`` reads."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from typing import Any

from ..errors import ConfigError, EnvError

__all__ = ["DEFAULT_MAX_STEPS", "build_policy", "register"]

#: The paper's episode caps.
DEFAULT_MAX_STEPS = {"sokoban": 15, "alfworld": 50, "webshop": 15}


def register(sub: Any) -> None:
    p = sub.add_parser("rollout", help="collect group rollouts (JSON Lines records for `abc credit`)",
                       description="G copies of each task seed, stepped together; only active copies generate. "
                       "Example: abc rollout --env sokoban --policy expert --groups 4 --group-size 8 -o out.jsonl")
    p.add_argument("--env", required=True, help="sokoban, alfworld, webshop or a registered id (abc/SokobanText-v0)")
    p.add_argument("--policy", default="expert",
                   help="expert | random | tiny | smollm2 | hf:MODEL (id or folder) | openai:URL (with --model)")
    p.add_argument("--model", default=None, help="served model name for openai:URL; tokenizer for it (id/folder)")
    p.add_argument("--groups", type=int, default=4, help="number of tasks (groups)")
    p.add_argument("--group-size", type=int, default=8, help="G, rollouts per task")
    p.add_argument("--seed", type=int, default=0, help="first task seed; task g uses seed + g")
    p.add_argument("--max-steps", type=int, default=None, help="episode cap (default 50/15/15 as in the paper)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--max-tokens", type=int, default=512, help="response tokens per step")
    p.add_argument("--sample-seed", type=int, default=0, help="decoding seed (step t uses seed + t)")
    p.add_argument("--template", default=None, help="paper | compact | a folder of .txt templates "
                   "(default: compact for tiny, else paper)")
    p.add_argument("--invalid-penalty", type=float, default=0.1, help="reward penalty of an invalid action")
    p.add_argument("--workers", type=int, default=None, help="env worker processes (0: in process)")
    p.add_argument("--step-timeout", type=float, default=300.0,
                   help="seconds an env may take to reset or step before its episode ends with an error")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="env keyword argument, VALUE parsed as JSON when it parses; repeatable")
    p.add_argument("--gate", default=None, help="group gate name (e.g. selective_rollout)")
    p.add_argument("--gate-option", action="append", default=[], metavar="KEY=VALUE", help="gate option")
    p.add_argument("-o", "--output", help="write here (atomically) instead of stdout")
    p.add_argument("--quiet", action="store_true", help="no summary line on stderr")
    p.set_defaults(func=run)


def _kv(items: list[str], what: str) -> dict[str, Any]:
    from ..credit import parse_option

    out = {}
    for text in items:
        try:
            k, v = parse_option(text)
        except ValueError as exc:
            raise ConfigError(f"{what}: {exc}") from None
        out[k] = v
    return out


def build_policy(spec: str, env_id: str, *, template: str | None = None, device: str | None = None,
                 model: str | None = None) -> tuple[Any, Any]:
    """``(engine, prompt builder or None)`` for a ``--policy`` spec."""
    from ..rollout.prompts import PromptBuilder

    if spec == "expert":
        from ..rollout.baselines import ExpertPolicy

        return ExpertPolicy(), None
    if spec == "random":
        from ..rollout.baselines import RandomPolicy

        return RandomPolicy(), None
    from ..extras import require

    if spec.startswith("openai:"):
        require("transformers")
        from transformers import AutoTokenizer

        from ..rollout.openai import OpenAIEngine

        if not model:
            raise ConfigError("--policy openai:URL needs --model NAME (also used to load its tokenizer)")
        tok = AutoTokenizer.from_pretrained(model)
        return OpenAIEngine(spec[len("openai:"):], model, tokenizer=tok), PromptBuilder(tok, env_id,
                                                                                         template=template or "paper")
    if spec in ("tiny", "tiny-vl", "smollm2") or spec.startswith("hf:"):
        require("torch", "transformers")
        import torch

        from ..rollout.hf import HFEngine
        from ..rollout.models import load_model

        torch.set_num_threads(1)
        name = spec[3:] if spec.startswith("hf:") else spec
        m, tok = load_model(name, device=device)
        proc = None
        if isinstance(tok, tuple):
            tok, proc = tok
        tmpl = template or ("compact" if spec == "tiny" else "paper")
        return HFEngine(m, tok, image_processor=proc), PromptBuilder(tok, env_id, template=tmpl,
                                                                     image_processor=proc)
    raise ConfigError(f"unknown policy {spec!r}; use expert, random, tiny, smollm2, hf:MODEL or openai:URL")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from ..extras import require_env
    from ..io import atomic_open
    from ..rollout.base import SamplingParams
    from ..rollout.prompts import env_family
    from ..rollout.runner import RolloutRunner, resolve_env_id

    if args.groups < 1 or args.group_size < 1:
        raise ConfigError("--groups and --group-size must be at least 1")
    if not args.step_timeout > 0:
        raise ConfigError(f"--step-timeout must be a positive number of seconds, got {args.step_timeout}")
    env_id = resolve_env_id(args.env)
    require_env(env_family(env_id))  # else every episode would end in an env error
    max_steps = args.max_steps or DEFAULT_MAX_STEPS.get(env_family(env_id), 50)
    engine, builder = build_policy(args.policy, env_id, template=args.template, device=args.device,
                                   model=args.model)
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens,
                              seed=args.sample_seed)
    seeds = [args.seed + g for g in range(args.groups)]
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM shuts the env workers down like Ctrl-C
    try:
        with RolloutRunner(env_id, engine, builder, group_size=args.group_size, sampling=sampling,
                           max_steps=max_steps, invalid_penalty=args.invalid_penalty, num_workers=args.workers,
                           env_kwargs=_kv(args.set, "--set"), gate=args.gate, step_timeout=args.step_timeout,
                           gate_options=_kv(args.gate_option, "--gate-option")) as runner:
            groups = runner.collect(seeds)
            stats = runner.stats
    finally:
        signal.signal(signal.SIGTERM, previous)
    lines = [json.dumps(rec, ensure_ascii=False) for g in groups for rec in g.to_records()]
    if not lines:
        first = next((t.error for g in groups for t in g.trajectories if t.error), None) or "none recorded"
        last = first.strip().splitlines()[-1] if first.strip() else first
        raise EnvError(f"every episode of {env_id} failed before its first step; nothing written. First error: "
                       f"{last}")
    text = "\n".join(lines) + ("\n" if lines else "")
    if args.output:
        with atomic_open(args.output) as fh:
            fh.write(text)
    else:
        sys.stdout.write(text)
    if not args.quiet:
        trajs = [t for g in groups for t in g.trajectories]
        ok = sum(t.success for t in trajs)
        print(f"abc rollout: {env_id}, {len(groups)} groups x {args.group_size}: success {ok}/{len(trajs)}, "
              f"{stats.llm_calls} policy calls = {sum(len(t.steps) for t in trajs)} steps, "
              f"{stats.invalid_actions} invalid, {stats.worker_errors} env errors, {stats.wall_s:.2f} s",
              file=sys.stderr)
    return 0
