"""``abc rollout``: collect group rollouts and write credit-contract records (JSON Lines) that ``abc credit`` reads."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from ..argtypes import bounded_float, bounded_int
from ..errors import ConfigError, EnvError
from ..io import json_text, write_stdout
from ..rollout.episodes.runner import MAX_ENV_COPIES, MAX_EPISODE_STEPS, MAX_PENALTY
from ..rollout.hosting.workers import DEFAULT_STEP_TIMEOUT, ENV_BACKENDS
from .commands import COMMANDS

__all__ = ["parse_kv", "policy_engine", "records_text", "register"]

#: The largest task or decoding seed (the trainer's ``seed`` bound; seed + groups stays below 2**63).
SEED_MAX = 2**32 - 1
#: ``--policy`` shorthands for the hf engine's built-in models
HF_SHORTHANDS = ("tiny", "tiny-vl", "smollm2")


def register(sub: Any) -> None:
    p = sub.add_parser("rollout", help=COMMANDS["rollout"],
                       description="G copies of each task seed, stepped together; only active copies generate. "
                       "Example: abc rollout --env sokoban --policy expert --groups 4 --group-size 8 -o out.jsonl")
    p.add_argument("--env", required=True, help="an env family (its default id) or a Gymnasium id; `abc plugins` "
                   "lists the families")
    p.add_argument("--policy", default="expert",
                   help="a rollout engine, NAME or NAME:SPEC (`abc plugins` lists them): expert | random | "
                   "scripted:up,left | hf:MODEL (id or folder; tiny, tiny-vl, smollm2 for short) | vllm:MODEL | "
                   "openai:URL (with --model)")
    p.add_argument("--model", default=None, help="served model name for openai:URL; tokenizer for it (id/folder)")
    p.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the --policy engine, VALUE parsed as JSON when it parses; repeatable; "
                   "checked against the keys the engine takes (`abc plugins`), e.g. threads=1 for hf, "
                   "gpu_memory_utilization=0.8 for vllm, timeout=60 for openai")
    p.add_argument("--groups", type=bounded_int(1, MAX_ENV_COPIES), default=4,
                   help=f"number of tasks (groups); groups x group size at most {MAX_ENV_COPIES}")
    p.add_argument("--group-size", type=bounded_int(1, MAX_ENV_COPIES), default=8, help="G, rollouts per task")
    p.add_argument("--seed", type=bounded_int(0, SEED_MAX), default=0, help="first task seed; task g uses seed + g")
    p.add_argument("--max-steps", type=bounded_int(1, MAX_EPISODE_STEPS), default=None,
                   help="episode cap (default: the env id's step limit)")
    p.add_argument("--temperature", type=bounded_float(0, 100), default=1.0)
    p.add_argument("--top-p", type=bounded_float(0, 1, lo_open=True), default=1.0)
    p.add_argument("--max-tokens", type=bounded_int(1, 1 << 20), default=512, help="response tokens per step")
    p.add_argument("--sample-seed", type=bounded_int(0, SEED_MAX), default=0,
                   help="decoding seed (step t uses seed + t)")
    p.add_argument("--template", default=None, help="paper | compact | a folder of .txt templates "
                   "(default: compact for tiny, else paper)")
    p.add_argument("--invalid-penalty", type=bounded_float(0, MAX_PENALTY), default=0.1,
                   help="reward penalty of an invalid action")
    p.add_argument("--workers", type=bounded_int(0, 4096), default=None, help="env worker processes (0: in process)")
    p.add_argument("--env-backend", default="process", choices=ENV_BACKENDS,
                   help="where the env copies live: worker processes here, `abc serve` servers (--remote-url) or "
                   "Ray actors (--ray-address)")
    p.add_argument("--remote-url", action="append", default=[], metavar="HOST:PORT",
                   help="an `abc serve` server of --env-backend remote; repeatable (token: $ABC_SERVE_TOKEN)")
    p.add_argument("--ray-address", default="", help="--env-backend ray: the cluster (auto, ray://host:port; "
                   "empty: a local one)")
    p.add_argument("--step-timeout", type=bounded_float(0, 1e6, lo_open=True), default=DEFAULT_STEP_TIMEOUT,
                   help="seconds an env may take to reset or step before its episode ends with an error")
    p.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="env keyword argument, VALUE parsed as JSON when it parses; repeatable")
    p.add_argument("--gate", default=None, help="group gate name (e.g. selective_rollout)")
    p.add_argument("--gate-option", action="append", default=[], metavar="KEY=VALUE", help="gate option")
    p.add_argument("-o", "--output", help="write here (atomically) instead of stdout")
    p.add_argument("--quiet", action="store_true", help="no summary line on stderr")
    p.set_defaults(func=run)


def parse_kv(items: list[str], what: str) -> dict[str, Any]:
    from ..credit import parse_option

    out = {}
    for text in items:
        try:
            k, v = parse_option(text)
        except ValueError as exc:
            raise ConfigError(f"{what}: {exc}") from None
        out[k] = v
    return out


def policy_engine(spec: str, env_id: str, *, template: str | None = None, device: str | None = None,
                  model: str | None = None, options: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """``(engine, prompt builder or None)`` for a ``--policy NAME[:SPEC]``: the engine comes from
    :func:`~agentbench_crbc.rollout.engines.factory.build_engine`; token engines get a prompt builder on their tokenizer
    (``--template``; default ``compact`` for ``tiny``, else ``paper``), text policies none. ``options``
    (``--engine-option``) go to the engine's factory, which refuses keys it does not take."""
    from ..rollout.engines.factory import EngineRequest, build_engine, parse_policy
    from ..rollout.episodes.prompts import PromptBuilder

    name, arg = ("hf", spec) if spec in HF_SHORTHANDS else parse_policy(spec)
    engine = build_engine(name, EngineRequest(model_name=model or "", spec=arg, device=device, env_id=env_id,
                                              options=dict(options or {})))
    caps = engine.capabilities  # checked by build_engine
    if caps.acts:
        return engine, None
    if caps.tokenizer is None:
        raise ConfigError(f"--policy {spec}: the {name} engine declares no tokenizer to build prompts with "
                          "(EngineCapabilities.tokenizer)")
    tmpl = template or ("compact" if spec == "tiny" else "paper")
    return engine, PromptBuilder(caps.tokenizer, env_id, template=tmpl, image_processor=caps.image_processor)


def _resolve(env: str) -> tuple[str, Any]:
    """``(env id, family or None)``: a family name or id, or a Gymnasium id that no family declares (registered by
    the caller's own import); anything else raises the resolver's error, which lists the families."""
    import gymnasium

    from ..errors import UnknownNameError
    from ..family import resolve_env

    try:
        r = resolve_env(env)
    except UnknownNameError:
        if env in gymnasium.registry:
            return env, None
        raise
    return r.env_id, r.family


def records_text(groups: Any) -> str:
    """The JSON Lines ``abc rollout`` writes (and ``abc credit`` reads) for rollout groups: one record per line, text
    as it is (``ensure_ascii=False``: a response holding U+2028 keeps it raw, and readers split on ``"\\n"`` only)."""
    return "".join(json_text(rec, ensure_ascii=False) + "\n" for g in groups for rec in g.to_records())


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from ..extras import require_env
    from ..io import atomic_open, check_writable
    from ..rollout.episodes.base import SamplingParams
    from ..rollout.episodes.runner import RolloutRunner, RunnerConfig, env_step_limit
    from ..rollout.hosting.workers import EnvBackend
    from ..trainer.config import check_env_kwargs, check_template

    if args.groups * args.group_size > MAX_ENV_COPIES:  # each bounded by argparse; their product here
        raise ConfigError(f"--groups {args.groups} x --group-size {args.group_size} = "
                          f"{args.groups * args.group_size} env copies; at most {MAX_ENV_COPIES} (lower one of them)")
    if args.output:  # before any work: a path that cannot be written fails now, not after every episode
        check_writable(args.output)
    if args.template is not None:
        check_template(args.template, "--template")
    env_id, family = _resolve(args.env)
    if family is not None:
        require_env(family.name)  # else every episode would end in an env error
    env_kwargs = parse_kv(args.set, "--set")
    if env_kwargs:
        check_env_kwargs(env_id, env_kwargs, "--set")
    max_steps = args.max_steps or env_step_limit(env_id)
    engine, builder = policy_engine(args.policy, env_id, template=args.template, device=args.device,
                                    model=args.model, options=parse_kv(args.engine_option, "--engine-option"))
    sampling = SamplingParams(temperature=args.temperature, top_p=args.top_p, max_tokens=args.max_tokens,
                              seed=args.sample_seed)
    seeds = [args.seed + g for g in range(args.groups)]
    previous = signal.signal(signal.SIGTERM, _interrupt)  # SIGTERM shuts the env workers down like Ctrl-C
    try:
        config = RunnerConfig(group_size=args.group_size, sampling=sampling, max_steps=max_steps,
                              invalid_penalty=args.invalid_penalty, num_workers=args.workers, env_kwargs=env_kwargs,
                              gate=args.gate, step_timeout=args.step_timeout,
                              gate_options=parse_kv(args.gate_option, "--gate-option"),
                              env_backend=EnvBackend(args.env_backend, urls=tuple(args.remote_url),
                                                     ray_address=args.ray_address))
        with RolloutRunner(env_id, engine, builder, config) as runner:
            groups = runner.collect(seeds)
            stats = runner.stats
    finally:
        signal.signal(signal.SIGTERM, previous)
    text = records_text(groups)
    if not text:
        first = next((t.error for g in groups for t in g.trajectories if t.error), None) or "none recorded"
        last = first.strip().splitlines()[-1] if first.strip() else first
        raise EnvError(f"every episode of {env_id} failed before its first step; nothing written. First error: "
                       f"{last}")
    if args.output:
        with atomic_open(args.output) as fh:
            fh.write(text)
    else:
        write_stdout(text)  # chunk by chunk: a reader that stops early is seen (exit 141)
    if not args.quiet:
        trajs = [t for g in groups for t in g.trajectories]
        ok = sum(t.success for t in trajs)
        print(f"abc rollout: {env_id}, {len(groups)} groups x {args.group_size}: success {ok}/{len(trajs)}, "
              f"{stats.llm_calls} policy calls = {sum(len(t.steps) for t in trajs)} steps, "
              f"{stats.invalid_actions} invalid, {stats.worker_errors} env errors, {stats.wall_s:.2f} s",
              file=sys.stderr)
    return 0
