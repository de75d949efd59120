"""The training run: warm start (optional) -> validate -> [rollout -> credit -> PPO -> push weights]* -> validate."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import datetime as _dt
import json
import re
import signal
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError
from ..io import atomic_write_text
from ..rollout.base import SamplingParams
from .checkpoint import (
    checkpoint_manifest,
    find_checkpoint,
    load_checkpoint,
    load_optimizer_state,
    load_weights,
    save_checkpoint,
    set_aside,
    verify_folder,
    write_manifest,
)
from .config import TrainConfig, check_credit, config_hash, load_config, to_dict, to_toml
from .distributed import Dist, all_reduce_mean, collective_device, init_distributed, shutdown, unwrap, wrap_model
from .eval import evaluate, paired_gain, validation_seeds, write_eval
from .metrics import MetricsLogger
from .update import build_samples, ppo_update

__all__ = ["Trainer", "build_policy", "close_runners", "collect", "make_run_dir", "train"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text.rstrip("/").split("/")[-1]).strip("-") or "model"


def make_run_dir(cfg: TrainConfig) -> Path:
    """``{out_dir}/{env}__{method}__{model}__{seed}__{timestamp}`` (created)."""
    ts = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path(cfg.out_dir) / f"{cfg.env.name}__{cfg.credit.name}__{_slug(cfg.model.name)}__{cfg.seed}__{ts}"
    path, k = base, 1
    while path.exists():
        k += 1
        path = base.with_name(f"{base.name}-{k}")
    path.mkdir(parents=True)
    return path


def native_bf16(device: torch.device) -> bool:
    """Whether ``device`` computes in bf16 natively: a GPU that supports it, or a CPU with AVX512-BF16 or AMX (where
    bf16 autocast runs the tiny model's forward and backward about 1.5-2x faster than fp32)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type == "cpu":
        probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
        return any(bool(getattr(torch.cpu, p, lambda: False)()) for p in probes)
    return False


def compute_dtype(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of ``model.dtype`` on ``device`` (None: plain fp32). Parameters stay fp32 either way.

    ``auto`` is bf16 where the device computes it natively (:func:`native_bf16`), else fp32."""
    if name == "auto":
        return torch.bfloat16 if native_bf16(device) else None
    return torch.bfloat16 if name == "bf16" else None


def build_policy(cfg: TrainConfig, device: torch.device) -> tuple[torch.nn.Module, Any, Any]:
    """Model (LoRA-wrapped when asked), tokenizer and image processor (or None) for ``cfg.model``; parameters in
    fp32 (the master weights; ``model.dtype = bf16`` computes in autocast)."""
    from ..rollout import models

    dtype = torch.float32
    proc = None
    if cfg.model.name == "tiny":
        tok = models.tiny_tokenizer()
        model = models.tiny_qwen2(tok, hidden_size=cfg.model.tiny_hidden, num_layers=cfg.model.tiny_layers,
                                  seed=cfg.seed)
        model = model.to(device=device, dtype=dtype)
    else:
        model, tok = models.load_model(cfg.model.name, dtype=dtype, device=str(device))
        if isinstance(tok, tuple):
            tok, proc = tok
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = True  # generation still caches; training forward passes do not need it
    if cfg.model.lora:
        from peft import LoraConfig, get_peft_model

        lcfg = LoraConfig(r=cfg.model.lora_rank, lora_alpha=cfg.model.lora_alpha,
                          lora_dropout=cfg.model.lora_dropout, target_modules=list(cfg.model.lora_targets),
                          task_type="CAUSAL_LM")
        with warnings.catch_warnings():  # peft 0.x calls a transformers 5 deprecated alias
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            model = get_peft_model(model, lcfg)
    return model.eval(), tok, proc


_RUNNERS: dict[tuple[int, int, int, str], Any] = {}


def collect(engine: Any, builder: Any, cfg: TrainConfig, seeds: list[int], *, group_size: int,
            sampling: SamplingParams, prefix: str = "g", gate: str = "", should_stop: Any = None,
            on_step: Any = None) -> list[Any]:
    """Group rollouts through the rollout engine (``agentbench_crbc.rollout``): G copies of each seed's task.

    Runners (and their in-process env copies) are kept per (engine, builder, G, gate) and reused across updates.
    :param gate: a registered group gate (training rollouts pass ``rollout.gate``; validation none).
    :param should_stop: and ``on_step`` go to :meth:`RolloutRunner.collect` (a stop returns partial groups).
    """
    from ..rollout import RolloutRunner

    key = (id(engine), id(builder), group_size, gate)
    runner = _RUNNERS.get(key)
    if runner is None:
        runner = RolloutRunner(cfg.env.id, engine, builder, group_size=group_size, sampling=sampling,
                               max_steps=cfg.env.max_steps, invalid_penalty=cfg.env.invalid_penalty,
                               num_workers=0, env_kwargs=cfg.env.kwargs, gate=gate or None,
                               gate_options=cfg.rollout.gate_options)
        _RUNNERS[key] = runner
    runner.sampling = sampling
    return runner.collect(seeds, group_prefix=prefix, should_stop=should_stop, on_step=on_step)


def close_runners() -> None:
    """Close the cached rollout runners (their env copies)."""
    for r in _RUNNERS.values():
        r.close()
    _RUNNERS.clear()


def _by_name(optimizer_state: dict[str, Any]) -> bool:
    """Whether a saved optimizer state names its parameters (FSDP2's gathered full state) instead of numbering them
    (``optimizer.state_dict()``)."""
    return any(isinstance(k, str) for g in optimizer_state["param_groups"] for k in g["params"])


class _Stop:
    """SIGINT/SIGTERM set a flag; the loop checkpoints at the next safe point and exits (a second Ctrl-C kills)."""

    def __init__(self) -> None:
        self.flag = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _Stop:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.flag:
            raise KeyboardInterrupt
        self.flag = True
        print("\nstopping: saving a checkpoint at the next safe point (Ctrl-C again to abort)", flush=True)

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def __call__(self) -> bool:
        return self.flag


class Trainer:
    """One run: builds everything from a resolved :class:`TrainConfig` (or resumes a run folder)."""

    def __init__(self, cfg: TrainConfig, *, run_dir: str | Path | None = None, resume: bool = False) -> None:
        self.cfg = cfg
        self.method, self.options = check_credit(cfg)  # fail fast: unknown method / options
        torch.set_num_threads(cfg.threads)
        self.dist: Dist = init_distributed(cfg.device)
        self.device = self.dist.device
        torch.manual_seed(cfg.seed + self.dist.rank)
        from ..rollout.models import check_available

        check_available(cfg.model.name)  # a model that cannot load fails here, before a run folder is made
        if run_dir is None:
            run_dir = make_run_dir(cfg) if self.dist.main else None
            if self.dist.enabled:
                obj = [str(run_dir)]
                torch.distributed.broadcast_object_list(obj, src=0)
                run_dir = obj[0]
        self.run_dir = Path(str(run_dir))
        if self.dist.main:
            atomic_write_text(self.run_dir / "config.toml", to_toml(cfg))
            atomic_write_text(self.run_dir / "config.json", json.dumps(to_dict(cfg), indent=1))
        self.log = MetricsLogger(self.run_dir, config=to_dict(cfg), tensorboard=cfg.tensorboard, wandb=cfg.wandb,
                                 wandb_mode=cfg.wandb_mode, wandb_project=cfg.wandb_project,
                                 run_name=cfg.exp_name or self.run_dir.name, enabled=self.dist.main)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Writing model shards" bar at every checkpoint
        self.model, self.tok, self.proc = build_policy(cfg, self.device)
        if self.dist.main:
            from .estimate import cpu_warning

            cpu_warning(cfg, self.model, self.device, say=self._say)
        from ..rollout.hf import HFEngine
        from ..rollout.prompts import PromptBuilder

        self.builder = PromptBuilder(self.tok, cfg.env.id, template=cfg.env.template, history=cfg.env.history,
                                     image_processor=self.proc, max_prompt_tokens=cfg.rollout.max_prompt_tokens)
        self.engine: Any
        self.autocast = compute_dtype(cfg.model.dtype, self.device)
        if cfg.rollout.engine == "vllm":
            try:
                from ..rollout.vllm import VLLMEngine  # type: ignore[import-not-found]
            except ImportError as exc:
                raise ConfigError(f"config key 'rollout.engine': vllm is not available here ({exc}); install the "
                                  "[vllm] extra on a GPU node, or use rollout.engine=hf") from None
            self.engine = VLLMEngine(cfg.model.name, gpu_memory_utilization=cfg.rollout.vllm_gpu_memory_utilization,
                                     enable_sleep_mode=True)
            self.engine.update_weights(unwrap(self.model))
        else:
            self.engine = HFEngine(self.model, self.tok, image_processor=self.proc, autocast_dtype=self.autocast)
        self.colocated = cfg.rollout.engine == "vllm"
        self.pad_id = int(self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id)
        self.state: dict[str, Any] = {"stage": "sft" if cfg.sft.steps > 0 else "rl", "sft_step": 0, "update": 0,
                                      "evals": {}, "config_hash": config_hash(cfg)}
        self.optimizer: torch.optim.Optimizer | None = None
        self.ref: Any = None
        self._ref_from: Path | str | None = None  # where _make_ref gets the KL reference (None: the policy now)
        self._resume_ckpt = self._find_resume() if resume else None

    def _find_resume(self) -> Path | None:
        """The newest intact checkpoint (rank 0 verifies, sets damaged ones aside, and tells the other ranks)."""
        found: list[str] = ["", ""]  # checkpoint path, error
        if self.dist.main:
            ckpt, damaged = find_checkpoint(self.run_dir)
            for bad, why in damaged:
                aside = set_aside(bad)
                then = f"resuming from {ckpt.name}" if ckpt is not None else "no intact checkpoint is left"
                print(f"resume: {bad.name} is damaged ({why}); set aside as {aside.name}, {then}", flush=True)
            if ckpt is None and damaged:
                found[1] = (f"--resume: no intact checkpoint in {self.run_dir / 'checkpoints'}; start a new run "
                            "(the damaged ones are kept as damaged-ckpt-*)")
            elif ckpt is None:
                print(f"resume: no checkpoint in {self.run_dir} yet; starting from the beginning", flush=True)
                self.log.rewind(0, sft_step=0, update=0)  # the rows of the lost start are logged again
            found[0] = str(ckpt or "")
        if self.dist.enabled:
            torch.distributed.broadcast_object_list(found, src=0)
        if found[1]:
            raise ConfigError(found[1])
        return Path(found[0]) if found[0] else None

    def _check_reference(self) -> None:
        """On resume mid-RL: the saved KL reference must be intact, else it is rebuilt from what the RL stage
        started from (the base model without a warm start, else the RL stage's checkpoint 0), or the run stops."""
        cfg = self.cfg
        if self.state["stage"] != "rl" or self.state["update"] == 0 or cfg.optim.kl_coef <= 0 or cfg.model.lora:
            return  # no reference yet (it is the policy now), none needed, or the base with adapters off
        saved = self.run_dir / "reference"
        try:
            verify_folder(saved)
            if not (saved / "state.pt").is_file():
                raise ConfigError("state.pt is missing")
            return
        except ConfigError as exc:
            why = f"reference/{exc}" if saved.is_dir() else "reference/ is missing"
        if not self.state["sft_step"]:
            self._ref_from, source = "base", f"the base model {cfg.model.name!r} (no warm start)"
        else:
            ckpt0 = self.run_dir / "checkpoints" / "ckpt-000000"
            try:
                verify_folder(ckpt0)
                state0 = json.loads((ckpt0 / "state.json").read_text(encoding="utf-8"))
                if (state0.get("stage"), state0.get("update")) != ("rl", 0):
                    raise ConfigError("it is not the start of the RL stage")
            except (ConfigError, OSError):
                raise ConfigError(
                    f"--resume: {why}, and the policy the RL stage started from (checkpoints/ckpt-000000) is gone; "
                    f"put that policy back as {self.run_dir / 'reference'}, or resume with --set optim.kl_coef=0 "
                    "to go on without the KL term") from None
            self._ref_from, source = ckpt0, "checkpoints/ckpt-000000 (the end of the warm start)"
        self._say(f"resume: {why}; the KL reference is rebuilt from {source}")

    # -- helpers ------------------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.dist.main:
            print(text, flush=True)

    def _sharded(self) -> bool:
        """Under torchrun with FSDP2 (``fully_shard`` in place), as opposed to DDP or a single process."""
        return self.dist.enabled and not isinstance(self.model, torch.nn.parallel.DistributedDataParallel)

    def _save(self, tag: int) -> None:
        """Checkpoint (every rank calls this: under FSDP2 the gathers are collectives; rank 0 writes)."""
        if self.state["stage"] == "sft":  # a resume during the warm start reloads the optimizer saved here
            self.state["sft_optimizer"] = self.optimizer is not None
        if self._sharded():  # FSDP2: gather full model and optimizer states onto rank 0's CPU
            from torch.distributed.checkpoint.state_dict import (
                StateDictOptions,
                get_model_state_dict,
                get_optimizer_state_dict,
            )

            opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
            full = get_model_state_dict(self.model, options=opts)
            # a fresh optimizer (no step yet) has nothing to save, and gathering it would initialise its state
            optim = get_optimizer_state_dict(self.model, self.optimizer, options=opts) \
                if self.optimizer is not None and self.optimizer.state else None
            if self.dist.main:
                save_checkpoint(self.run_dir, tag, model=self.model, optimizer=None, state=self.state,
                                keep=self.cfg.keep_checkpoints, state_dict=full, optimizer_state=optim)
            return
        if self.dist.main:
            save_checkpoint(self.run_dir, tag, model=unwrap(self.model), optimizer=self.optimizer,
                            state=self.state, keep=self.cfg.keep_checkpoints)

    def _restore_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Load the resume checkpoint's optimizer state into ``optimizer`` (every rank calls this).

        Single process and DDP: every rank loads ``optimizer.pt`` (``optimizer.state_dict()``, identical on all
        ranks). FSDP2: rank 0 loads the gathered full state and ``set_optimizer_state_dict`` broadcasts it, each rank
        keeping its own shard of the moments. A checkpoint without optimizer state leaves ``optimizer`` as it is.
        """
        assert self._resume_ckpt is not None
        ckpt = self._resume_ckpt
        if not self._sharded():
            osd = load_optimizer_state(ckpt)
            if osd is None:
                self._say(f"resume: {ckpt.name} holds no optimizer state; the optimizer starts afresh")
                return
            if _by_name(osd):
                raise ConfigError(f"--resume: {ckpt}/optimizer.pt was saved under FSDP2 (keyed by parameter name); "
                                  "resume with the same --set strategy=fsdp under torchrun")
            optimizer.load_state_dict(osd)
            return
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        osd, status = None, ["ok"]
        if self.dist.main:
            osd = load_optimizer_state(ckpt)
            if osd is None:
                status = ["missing"]
            elif not _by_name(osd):
                status = ["indexed"]
        torch.distributed.broadcast_object_list(status, src=0)  # every rank takes the same branch below
        if status[0] == "missing":
            self._say(f"resume: {ckpt.name} holds no optimizer state (an FSDP2 checkpoint saved before optimizer "
                      "states were gathered); AdamW's moments start from zero")
            return
        if status[0] == "indexed":
            raise ConfigError(f"--resume: {ckpt}/optimizer.pt was saved by a single process or DDP (keyed by "
                              "index); resume with the same strategy (--set strategy=ddp, or without torchrun)")
        set_optimizer_state_dict(self.model, optimizer, optim_state_dict=osd if osd is not None else {},
                                 options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=True))

    def _wrap(self) -> None:
        """Under torchrun: DDP, or FSDP2 with an unsharded copy for rollouts (ranks generate different lengths, so
        generation must not run collectives); weights are pushed to that copy after each optimizer step."""
        from ..rollout.hf import HFEngine

        self.rollout_model = None
        if not self.dist.enabled:
            return
        strategy = self.cfg.strategy
        if strategy == "auto":
            strategy = "fsdp" if self.device.type == "cuda" else "ddp"
        if strategy == "fsdp" and not self.colocated:
            self.rollout_model = copy.deepcopy(self.model).eval()
            for p in self.rollout_model.parameters():
                p.requires_grad_(False)
            self.engine = HFEngine(self.rollout_model, self.tok, image_processor=self.proc,
                                   autocast_dtype=self.autocast)
            _RUNNERS.clear()
        self.model = wrap_model(self.model, self.dist, strategy, compute_dtype=self.autocast)

    def _push_weights(self) -> None:
        """New weights to the rollout engine: a no-op when it shares the parameters (single process, DDP)."""
        if self.rollout_model is not None or (self.colocated and self.dist.enabled):
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            full = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True))
            self.engine.update_weights(full)
        else:
            self.engine.update_weights(unwrap(self.model))

    def _max_int(self, n: int) -> int:
        """The largest ``n`` over ranks."""
        if not self.dist.enabled:
            return n
        t = torch.tensor([float(n)], device=collective_device())
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return int(t.item())

    def _agree(self, flag: bool) -> bool:
        """True on every rank when it is true on any (stops must be collective under torchrun)."""
        if not self.dist.enabled:
            return flag
        t = torch.tensor([1.0 if flag else 0.0], device=collective_device())
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
        return bool(t.item() > 0)

    def _make_optimizer(self, lr: float) -> torch.optim.Optimizer:
        params = [p for p in self.model.parameters() if p.requires_grad]
        return torch.optim.AdamW(params, lr=lr, weight_decay=self.cfg.optim.weight_decay)

    def _make_ref(self) -> Any:
        if self.cfg.optim.kl_coef <= 0:
            return None
        base = unwrap(self.model)
        if self.cfg.model.lora:
            return lambda: (base, base.disable_adapter())
        if self.rollout_model is not None:  # FSDP2: an unsharded copy (its forward runs no collectives)
            base = self.rollout_model
        # rebuilt on resume from the base model when the run started RL from it (no warm start)
        ref = build_policy(self.cfg, self.device)[0] if self._ref_from == "base" else copy.deepcopy(base).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        saved = self.run_dir / "reference"
        if isinstance(self._ref_from, Path):  # rebuilt on resume from the RL stage's checkpoint 0
            load_weights(ref, self._ref_from / "model")
        elif self._ref_from is None and self.state["update"] > 0:  # resumed mid-RL: the policy RL started from
            load_weights(ref, saved)
            return ref
        if self.dist.main:
            import shutil

            tmp = self.run_dir / ".reference.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            torch.save(ref.state_dict(), tmp / "state.pt")
            write_manifest(tmp)
            shutil.rmtree(saved, ignore_errors=True)
            tmp.replace(saved)
        return ref

    def _evaluate(self, update: int, tag: str, *, record: bool = True) -> dict[str, Any]:
        cfg = self.cfg
        if not self.dist.main:  # rank 0 validates; the others go on and wait at the next collective
            self.state["evals"][tag] = {"update": update}
            return {}
        seeds = validation_seeds(cfg, cfg.eval.episodes)
        res: dict[str, Any] = {}
        modes = [("t0.4" if cfg.eval.temperature == 0.4 else f"t{cfg.eval.temperature:g}", cfg.eval.temperature)]
        if cfg.eval.greedy:
            modes.append(("greedy", 0.0))
        for name, temp in modes:
            t0 = time.perf_counter()
            r = evaluate(self.engine, self.builder, cfg, seeds, temperature=temp, seed=cfg.seed + 10_000,
                         samples=cfg.eval.samples, progress=f"validation {tag} {name}" if cfg.progress else None)
            r["seconds"] = round(time.perf_counter() - t0, 2)
            res[name] = r
        # the trainer state (saved in every checkpoint) keeps aggregates; per-episode outcomes go to eval/*.json
        self.state["evals"][tag] = {"update": update, **{k: {kk: vv for kk, vv in v.items() if kk != "episodes"}
                                                         for k, v in res.items()}}
        if self.dist.main:
            if record:
                write_eval(self.run_dir, cfg, update, res,
                           kind="sft" if tag == "before" and cfg.sft.steps else "rl")
            line = "  ".join(f"{k}: {v['success']:.1%} (n={v['n_episodes']})" for k, v in res.items())
            self._say(f"validation [{tag}, update {update}]  {line}")
            self.log.log(update, {f"val_{k}_success": v["success"] for k, v in res.items()}, stage="eval")
        return res

    # -- stages -------------------------------------------------------------------------------------------
    def _sft(self, stop: _Stop) -> None:
        from .sft import expert_data, sft_train

        cfg = self.cfg
        self._say(f"stage 1/2: imitation warm start ({cfg.sft.steps} steps, batch {cfg.sft.batch_size}, "
                  f"lr {cfg.sft.lr:g}, at most {cfg.sft.max_minutes:g} min)")
        t0 = time.perf_counter()
        self._say("  labelling states with the expert on training levels ...")
        data = expert_data(cfg.env.name, cfg.env.id, cfg.env.kwargs, self.builder, self.tok, cfg.sft,
                           seed=cfg.seed, max_steps=cfg.env.max_steps)
        self._say(f"  {data.n_states} expert-labelled states from training levels ({time.perf_counter() - t0:.1f} s)")
        opt = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=cfg.sft.lr)
        self.optimizer = opt
        if self.state.get("sft_optimizer") and self._resume_ckpt is not None:
            self._restore_optimizer(opt)
        every = max(cfg.sft.steps // 8, 50)

        def on_step(step: int, values: dict[str, float]) -> None:
            self.state["sft_step"] = step
            if step % 10 == 0:
                self.log.log(step, values, stage="sft")
            if step % every == 0:
                self._save(step)

        if cfg.sft.max_minutes > 0 and self.state["sft_step"]:
            left = cfg.sft.max_minutes - self.state.get("sft_seconds", 0.0) / 60
            sft_cfg = dataclasses.replace(cfg.sft, max_minutes=max(left, 1e-3))
        else:
            sft_cfg = cfg.sft
        t1 = time.perf_counter()
        done = sft_train(self.model, data, sft_cfg, pad_id=self.pad_id, device=self.device,
                         seed=cfg.seed + 1000 * self.dist.rank, start_step=self.state["sft_step"], optimizer=opt,
                         on_step=on_step, should_stop=stop, agree=self._agree,
                         progress=cfg.progress and self.dist.main, autocast_dtype=self.autocast)
        self.state["sft_seconds"] = self.state.get("sft_seconds", 0.0) + time.perf_counter() - t1
        self.state["sft_step"] = done
        self._push_weights()
        if stop():
            return
        cut = (f" (stopped at {done:,} of {cfg.sft.steps:,} steps by sft.max_minutes={cfg.sft.max_minutes:g}; "
               "--set sft.max_minutes=0 runs them all)" if done < cfg.sft.steps else "")
        self._say(f"  warm start done: {done:,} steps in {self.state['sft_seconds']:.0f} s{cut}")
        self.state["stage"] = "rl"
        self.state["sft_optimizer"] = False
        self.optimizer = None
        self._save(0)

    def _rl(self, stop: _Stop) -> None:
        from tqdm.auto import tqdm

        cfg = self.cfg
        self.optimizer = self._make_optimizer(cfg.optim.lr)
        if self._resume_ckpt is not None and self.state["stage"] == "rl" and self.state["update"] > 0:
            self._restore_optimizer(self.optimizer)
        self.ref = self._make_ref()
        self._say(f"stage {'2/2' if cfg.sft.steps else '1/1'}: group RL with credit '{cfg.credit.name}' "
                  f"{self.options}  ({cfg.updates} updates x {cfg.rollout.groups} groups x G={cfg.rollout.group_size}"
                  f", lr {cfg.optim.lr:g}, clip {cfg.optim.clip_ratio}, KL {cfg.optim.kl_coef}"
                  f"{f', at most {cfg.max_minutes:g} min' if cfg.max_minutes else ''})")
        rng = np.random.default_rng([cfg.seed, self.dist.rank, self.state["update"]])
        sampling = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                  max_tokens=cfg.rollout.max_response_tokens)
        deadline = time.monotonic() + cfg.max_minutes * 60 - self.state.get("rl_seconds", 0.0) \
            if cfg.max_minutes > 0 else None
        bar = tqdm(total=cfg.updates, initial=self.state["update"], desc="rl", dynamic_ncols=True,
                   disable=not (cfg.progress and self.dist.main))
        t_start = time.perf_counter()
        from .eval import training_seeds

        while self.state["update"] < cfg.updates:
            if self._agree(stop() or (deadline is not None and time.monotonic() > deadline)):
                if not stop():
                    self._say(f"  time limit ({cfg.max_minutes:g} min) reached after {self.state['update']} "
                              "updates")
                break
            u = self.state["update"]
            t0 = time.perf_counter()
            seeds = training_seeds(cfg, rng, cfg.rollout.groups)
            sampling_u = SamplingParams(temperature=sampling.temperature, top_p=sampling.top_p,
                                        max_tokens=sampling.max_tokens, seed=int(rng.integers(2**31)))
            groups = collect(self.engine, self.builder, cfg, seeds, group_size=cfg.rollout.group_size,
                             sampling=sampling_u, prefix=f"u{u}r{self.dist.rank}-", gate=cfg.rollout.gate,
                             should_stop=stop)
            if self._agree(stop()):  # Ctrl-C / SIGTERM mid-rollout: partial groups are not trained on
                break
            t_roll = time.perf_counter() - t0
            t1 = time.perf_counter()
            samples, adv, counts = build_samples(groups, cfg.credit.name, self.options, adv_norm=cfg.optim.adv_norm)
            t_credit = time.perf_counter() - t1
            if self.colocated:
                self.engine.sleep()  # free the rollout engine's memory for the update
            logs = ppo_update(self.model, self.optimizer, samples, cfg.optim, pad_id=self.pad_id, ref=self.ref,
                              device=self.device, rng=rng, sync_max=self._max_int, world_size=self.dist.world,
                              autocast_dtype=self.autocast, image_processor=self.proc,
                              image_pad_id=self.tok.convert_tokens_to_ids("<|image_pad|>") if self.proc else None)
            if self.colocated:
                self.engine.wake_up()
            self._push_weights()  # hf: shared parameters, a no-op; FSDP2 / vllm: full weights pushed
            trajs = [t for g in groups for t in g.trajectories]
            steps = [s for t in trajs for s in t.steps]
            a = np.asarray(adv, dtype=np.float64)
            row = {"success": float(np.mean([t.success for t in trajs])),
                   "return": float(np.mean([t.reward for t in trajs])),
                   "episode_len": float(np.mean([len(t.steps) for t in trajs])),
                   "invalid": float(np.mean([not s.valid for s in steps])) if steps else 0.0,
                   "adv_mean": float(a.mean()) if a.size else 0.0, "adv_std": float(a.std()) if a.size else 0.0,
                   **counts,
                   "time_rollout": t_roll, "time_credit": t_credit, **logs}
            keys = sorted(row)
            row = dict(zip(keys, all_reduce_mean([row[k] for k in keys], self.dist), strict=True))
            row["time_update"] = time.perf_counter() - t0
            self.state["update"] = u + 1
            self.state["rl_seconds"] = self.state.get("rl_seconds", 0.0) + row["time_update"]
            self.log.log(u + 1, row)
            bar.update(1)
            bar.set_postfix(succ=f"{row['success']:.2f}", kl=f"{row['kl']:.3f}", inv=f"{row['invalid']:.2f}")
            if (u + 1) % cfg.checkpoint_every == 0:
                self._save(u + 1)
            if cfg.eval.every and (u + 1) % cfg.eval.every == 0 and u + 1 < cfg.updates:
                self._evaluate(u + 1, f"update-{u + 1}")
        bar.close()
        self._say(f"  RL: {self.state['update']} updates in {time.perf_counter() - t_start:.0f} s")

    # -- entry --------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run (or continue) the stages; returns the summary also written to ``results.json``."""
        cfg = self.cfg
        t0 = time.perf_counter()
        if self._resume_ckpt is not None:
            # before _wrap: every rank loads the full weights into its unsharded model, and FSDP2's fully_shard
            # then keeps each rank's shard of them (the optimizer state is restored once the stage builds it)
            self.state.update(load_checkpoint(self._resume_ckpt, model=unwrap(self.model)))
            self._say(f"resumed from {self._resume_ckpt} (stage {self.state['stage']}, "
                      f"update {self.state['update']}, sft step {self.state['sft_step']})")
            dropped = self.log.rewind(checkpoint_manifest(self._resume_ckpt).get("metrics_bytes"),
                                      sft_step=self.state["sft_step"], update=self.state["update"])
            if dropped:
                self._say(f"resume: metrics.jsonl cut back to {self._resume_ckpt.name} ({dropped} later rows dropped;"
                          " the resumed run logs them again)")
            self._check_reference()
        self._say(f"run folder: {self.run_dir}")
        self._wrap()
        with _Stop() as stop:
            try:
                if self.state["stage"] == "sft":
                    if self.state["sft_step"] == 0 and cfg.sft.steps and "untrained" not in self.state["evals"]:
                        self._evaluate(0, "untrained", record=False)  # the start of the learning curve
                    self._sft(stop)
                if not stop() and "before" not in self.state["evals"]:
                    self._evaluate(self.state["update"], "before")
                    self._save(self.state["update"])
                if not stop() and self.state["stage"] == "rl" and cfg.updates > 0:
                    self._rl(stop)
                if stop():
                    self._save(max(self.state["update"], 0))
                    self._say(f"interrupted: checkpoint saved; continue with `abc train --resume {self.run_dir}`")
                    raise KeyboardInterrupt
                if self.cfg.updates == 0 and "before" in self.state["evals"]:  # warm start only (abc sft)
                    after = {k: v for k, v in self.state["evals"]["before"].items() if k != "update"}
                else:
                    self._save(self.state["update"])
                    after = self._evaluate(self.state["update"], "after")
                self._save(self.state["update"])
                self._export()
            except BaseException:
                self.log.close()
                raise
        summary = self._summary(after, time.perf_counter() - t0)
        self.log.close()
        close_runners()
        return summary

    def _export(self) -> None:
        """The final policy as a loadable folder ``run_dir/model`` (weights or LoRA adapter, and tokenizer)."""
        if not self.dist.main:
            return
        import shutil

        final, tmp = self.run_dir / "model", self.run_dir / ".model.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        model: Any = self.rollout_model if self.rollout_model is not None else unwrap(self.model)  # FSDP2: full copy
        model.save_pretrained(tmp, safe_serialization=True)
        self.tok.save_pretrained(tmp)
        shutil.rmtree(final, ignore_errors=True)
        tmp.replace(final)

    def _episodes_of(self, tag: str) -> dict[str, list[dict[str, Any]]]:
        """Per-episode outcomes of validation ``tag`` by mode, from its ``eval/update-NNNN.json``."""
        ev = self.state["evals"].get(tag)
        path = self.run_dir / "eval" / f"update-{ev['update']:04d}.json" if ev else None
        if path is None or not path.exists():
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
        return {k: v["episodes"] for k, v in data.items() if isinstance(v, dict) and "episodes" in v}

    def _summary(self, after: dict[str, Any], seconds: float) -> dict[str, Any]:
        before = self.state["evals"].get("before", {})
        untrained = self.state["evals"].get("untrained", {})
        out = {"run_dir": str(self.run_dir), "method": self.cfg.credit.name, "updates": self.state["update"],
               "sft_steps": self.state["sft_step"], "seconds_this_session": round(seconds, 1), "modes": {}}
        before_eps = self._episodes_of("before")
        for mode, res in after.items():
            b = before.get(mode, {}).get("success")
            out["modes"][mode] = {"untrained": untrained.get(mode, {}).get("success"), "before": b,
                                  "after": res["success"], "n_episodes": res["n_episodes"],
                                  "stderr_after": res.get("stderr")}
            if before_eps.get(mode) and res.get("episodes") and self.state["update"] > 0:
                out["modes"][mode]["gain"] = paired_gain(before_eps[mode], res["episodes"], seed=self.cfg.seed)
        if self.dist.main:
            from .curves import write_curves

            fig = write_curves(self.run_dir)
            out["curves"] = str(fig) if fig else None
            atomic_write_text(self.run_dir / "results.json", json.dumps(out, indent=1))
            ev = self.cfg.eval
            self._say(f"\nheld-out success ({ev.episodes} levels never trained on, {ev.samples} episodes each at "
                      f"T={ev.temperature:g}, one greedy): untrained -> after the warm start (= before RL) -> after "
                      f"RL with {self.cfg.credit.name}")

            def pct(x: float | None) -> str:
                return "n/a" if x is None else f"{x:.1%}"

            for mode, r in out["modes"].items():
                g = r.get("gain")
                gain = "" if not g or g["mean"] is None else \
                    (f"  gain of RL {g['mean']:+.1%} (95% CI {g['ci95'][0]:+.1%} .. {g['ci95'][1]:+.1%}, "
                     f"paired over {g['n_levels']} levels)")
                self._say(f"  {mode:>7}: {pct(r['untrained'])} -> {pct(r['before'])} -> {pct(r['after'])}  "
                          f"(+-{r['stderr_after']:.1%} s.e.){gain}")
            self._say("  (a fair comparison also needs a control that continues imitation for the same time: "
                      "see docs/training.md)")
            figure = f", {fig.name} (learning curves)" if fig else \
                " (the learning-curve figure needs matplotlib: pip install 'agentbench-crbc[leaderboard]')"
            self._say(f"saved: {self.run_dir}/results.json, eval/records.jsonl{figure}")
            if self.cfg.tensorboard and (self.run_dir / "tensorboard").is_dir():
                self._say(f"curves: tensorboard --logdir {self.run_dir / 'tensorboard'}")
        return out


def train(cfg: TrainConfig | None = None, *, resume: str | Path | None = None, overrides: tuple[str, ...] = (),
          **load_kwargs: Any) -> dict[str, Any]:
    """Run a training job (what ``abc train`` calls); ``resume`` continues a run folder from its last checkpoint
    (with ``overrides`` applied to its saved config, e.g. more updates)."""
    if resume is not None:
        run_dir = Path(resume)
        if not (run_dir / "config.toml").exists():
            raise ConfigError(f"--resume: {run_dir} is not a run folder (no config.toml)")
        cfg = load_config(config=run_dir / "config.toml", overrides=overrides)
        trainer = Trainer(cfg, run_dir=run_dir, resume=True)
    else:
        cfg = cfg or load_config(overrides=overrides, **load_kwargs)
        trainer = Trainer(cfg)
    if not trainer.dist.enabled:
        return trainer.run()
    try:
        trainer.run()
    except BaseException:  # under torchrun: report, then leave without waiting for the other ranks
        import traceback

        traceback.print_exc()
        shutdown(trainer.dist, 130 if isinstance(sys.exc_info()[1], KeyboardInterrupt) else 1, barrier=False)
    shutdown(trainer.dist)  # flushes and os._exit(0): gloo can abort at interpreter exit
    raise AssertionError("unreachable")
