"""The training run, top to bottom: warm start (optional) -> validate -> [rollout -> credit -> PPO update -> push
weights -> log -> checkpoint -> validate]* -> validate -> summary. Each step is one call into its own module."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import ConfigError
from ..io import json_text, read_json
from ..revision import code_revision
from ..rollout.episodes.base import SamplingParams
from .checkpoint import checkpoint_manifest, find_checkpoint, load_checkpoint, restore_optimizer, save_snapshot
from .config import (
    TrainConfig,
    check_credit,
    config_hash,
    family_of,
    groups_per_rank,
    load_config,
    resolved_options,
)
from .distributed import Dist, agree, all_reduce_mean, init_distributed, max_int, shutdown, unwrap
from .distributed import broadcast_object as _broadcast
from .distributed import wrap_model as _wrap_model
from .eval import answers_line, headline, precision, summarize, training_seeds, validate
from .metrics import HealthWatch, update_row
from .policy import (
    build_builder,
    build_policy,
    build_rollout_engine,
    compute_dtype,
    export_policy,
    make_reference,
    native_bf16,
)
from .resume import (
    RunState,
    check_edited,
    check_resume,
    check_run_folder,
    find_resume,
    finished_summary,
    fixed_config,
    reference_source,
)
from .rollouts import Rollouts
from .run import Stopped, StopSignal, lock_run_folder, make_run_dir, open_metrics, write_config
from .threads import cpu_plan
from .update import UpdateContext, build_samples, ppo_update
from .validations import AFTER, BEFORE, UNTRAINED, Validation

__all__ = ["Trainer", "build_policy", "compute_dtype", "make_run_dir", "native_bf16", "train"]


class Trainer:
    """One run: builds everything from a resolved :class:`TrainConfig` (or resumes a run folder)."""

    def __init__(self, cfg: TrainConfig, *, run_dir: str | Path | None = None, resume: bool = False) -> None:
        self.cfg = cfg
        self.method, self.options = check_credit(cfg)  # fail fast: unknown method / options
        self.cpu = cpu_plan(cfg.threads)
        if cfg.deterministic:  # kernels pinned (before torch chose them: abc train/bench set them first)
            from .kernels import check_pinned, deterministic_threads, use_deterministic

            check_pinned()
            use_deterministic()
            threads, why = deterministic_threads(cfg.threads)
            self.cpu = dataclasses.replace(self.cpu, threads=threads, why=why)
        self.threads = self.cpu.threads
        torch.set_num_threads(self.threads)
        self.dist: Dist = init_distributed(cfg.device)
        self.device = self.dist.device
        self.groups_per_rank = groups_per_rank(cfg, self.dist.world)  # rollout.groups is the total over ranks
        self._say(headline(cfg))  # the run's first line: which family it trains, and why
        self._say(answers_line(cfg))
        if self.device.type == "cpu":
            self._say(self.cpu.line())
            from .kernels import kernel_info

            k = kernel_info(cfg.deterministic)
            self._say(f"kernels: torch {k['torch']}, MKL {k['mkl']}, ATen {k['isa']}" + (
                ", pinned to AVX2 (deterministic = true)" if cfg.deterministic else
                " (this CPU's best; --set deterministic=true pins them for the same numbers on other CPUs)"))
        torch.manual_seed(cfg.seed + self.dist.rank)
        from ..rollout.engines.models import check_available

        check_available(cfg.model.name)  # a model that cannot load fails here, before a run folder is made
        if run_dir is None:
            run_dir = _broadcast(self.dist, [str(make_run_dir(cfg)) if self.dist.main else None])[0]
        self.run_dir = Path(str(run_dir))
        self.lock = lock_run_folder(self.run_dir) if self.dist.main else None  # one writer per run folder
        if self.dist.main:
            write_config(self.run_dir, cfg)
            from ..io import atomic_write_text
            from .kernels import kernel_info

            self.kernels = kernel_info(cfg.deterministic)  # what computed the run (results.json names it too)
            atomic_write_text(self.run_dir / "kernels.json", json_text(self.kernels, indent=1))
        code_revision()  # read (and cached) now: the run's records name the code it started with, not a later tree
        self.log = open_metrics(cfg, self.run_dir, enabled=self.dist.main)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # no "Writing model shards" bar at every checkpoint
        self.model, self.tok, self.proc = build_policy(cfg, self.device)
        if self.dist.main:
            from .estimate import cpu_warning

            cpu_warning(cfg, self.model, self.device, say=self._say)
        self.builder = build_builder(cfg, self.tok, self.proc)
        self.autocast = compute_dtype(cfg.model.dtype, self.device)
        self.engine = build_rollout_engine(cfg, self.model, self.tok, self.proc, autocast_dtype=self.autocast,
                                           device=self.device, dist=self.dist)
        self.colocated = self.engine.capabilities.colocated  # its own weights: pushed, slept
        # the rollout's log-probs are the old policy's only when the engine samples from the trained model itself,
        # in fp32, in one process (a colocated or unsharded copy, autocast or several ranks: the no-grad pass)
        self.optim = cfg.optim
        if cfg.optim.rollout_old_logprobs and (self.colocated or self.dist.enabled or self.autocast is not None):
            self.optim = dataclasses.replace(cfg.optim, rollout_old_logprobs=False)
        self.rollouts = Rollouts(cfg)
        self.rollout_model: torch.nn.Module | None = None  # FSDP2: an unsharded copy that generates
        self.pad_id = int(self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id)
        self.state = RunState.start(cfg)
        self.optimizer: torch.optim.Optimizer | None = None
        self.ref: Any = None
        self._ref_from: Path | str | None = None  # where the KL reference is rebuilt from (None: the policy now)
        self._resume_ckpt = find_resume(self.run_dir, self.dist, self.log) if resume else None
        self._mid_update: int | None = None  # the update whose optimizer steps are under way (not yet saved)

    # -- entry --------------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run (or continue) the stages; returns the summary also written to ``results.json``."""
        cfg, t0 = self.cfg, time.perf_counter()
        if self._resume_ckpt is not None:
            self._restore()
            if self.colocated:  # the engine was built (and given weights) before the checkpoint's were loaded
                self._push_weights()
        evals = self.state.evals  # (the resumed run's, once restored)
        if self._resume_ckpt is not None and (done := self._finished()) is not None:
            return done
        self._say(f"run folder: {self.run_dir}")
        self._wrap()
        with StopSignal() as stop, self.rollouts:
            try:
                if self.state.stage == "sft":  # stage 1: imitation warm start
                    if self.state.sft_step == 0 and cfg.sft.steps and evals.untrained is None:
                        with stop.now():  # a signal stops it at once (nothing of it is kept)
                            self._validate(0, UNTRAINED, record=False)  # the start of the learning curve
                    self._sft(stop)
                if not stop() and evals.before is None:
                    with stop.now():
                        self._validate(self.state.update, BEFORE)
                    self._save(self.state.update)
                if not stop() and self.state.stage == "rl" and cfg.updates > 0:  # stage 2: group RL
                    self._rl(stop)
                if stop():
                    self._interrupted()
                if cfg.updates == 0 and (before := evals.before) is not None:  # warm start only (abc sft)
                    after = {k: dict(v) for k, v in before.modes.items()}
                else:
                    self._save(self.state.update)
                    with stop.now():
                        after = self._validate(self.state.update, AFTER)
                self._save(self.state.update)
                final = self._final_policy()  # every rank: FSDP2's gathers are collectives
                if self.dist.main:  # the final policy as a loadable folder
                    export_policy(final, self.tok, self.run_dir / "model")
            except Stopped:  # a signal during a step that polls nothing (validation, expert labelling)
                try:
                    self._interrupted()
                finally:
                    self.log.close()
            except BaseException:
                self.log.close()
                raise
        summary = summarize(cfg, self.state, self.run_dir, after, time.perf_counter() - t0, main=self.dist.main,
                            say=self._say, precision_used=precision(cfg, self.autocast),
                            kernels=getattr(self, "kernels", None))
        self.log.close()
        return summary

    # -- stages -------------------------------------------------------------------------------------------
    def _sft(self, stop: StopSignal) -> None:
        from .sft import SFTHooks, expert_data, sft_train

        cfg = self.cfg
        self._say(f"stage 1/2: imitation warm start ({cfg.sft.steps} steps, batch {cfg.sft.batch_size}, "
                  f"lr {cfg.sft.lr:g}, at most {cfg.sft.max_minutes:g} min)")
        t0 = time.perf_counter()
        self._say("  labelling states with the expert on training levels ...")
        with stop.now():  # labelling polls nothing: a signal stops it at once
            data = expert_data(family_of(cfg), cfg.env.id, {**cfg.env.kwargs, **cfg.sft.env_kwargs}, self.builder,
                               self.tok, cfg.sft, seed=cfg.seed, max_steps=cfg.env.max_steps)
        self._say(f"  {data.n_states} expert-labelled states from training levels ({time.perf_counter() - t0:.1f} s)")
        self.optimizer = opt = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad],
                                                 lr=cfg.sft.lr)
        if self.state.sft_optimizer and self._resume_ckpt is not None:
            self._restore_optimizer(opt)
        every = max(cfg.sft.steps // 8, 50)

        def on_step(step: int, values: dict[str, float]) -> None:
            self.state.sft_step = step
            if step % 10 == 0:
                self.log.log(step, values, stage="sft")
            if step % every == 0:
                self._save(step)

        sft_cfg = cfg.sft
        if cfg.sft.max_minutes > 0 and self.state.sft_step:
            left = cfg.sft.max_minutes - self.state.sft_seconds / 60
            sft_cfg = dataclasses.replace(cfg.sft, max_minutes=max(left, 1e-3))
        t1 = time.perf_counter()
        done = sft_train(self.model, data, sft_cfg, pad_id=self.pad_id, device=self.device,
                         seed=cfg.seed + 1000 * self.dist.rank, start_step=self.state.sft_step, optimizer=opt,
                         hooks=SFTHooks(on_step, stop, self._agree, cfg.progress and self.dist.main),
                         autocast_dtype=self.autocast)
        self.state.sft_seconds = self.state.sft_seconds + time.perf_counter() - t1
        self.state.sft_step = done
        self._push_weights()
        if stop():
            return
        cut = (f" (stopped at {done:,} of {cfg.sft.steps:,} steps by sft.max_minutes={cfg.sft.max_minutes:g}; "
               "--set sft.max_minutes=0 runs them all)" if done < cfg.sft.steps else "")
        self._say(f"  warm start done: {done:,} steps in {self.state.sft_seconds:.0f} s{cut}")
        self.state.stage, self.state.sft_optimizer = "rl", False
        self.optimizer = None
        self._save(0)

    def _rl(self, stop: StopSignal) -> None:
        from tqdm.auto import tqdm

        cfg, rank = self.cfg, self.dist.rank
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad], lr=cfg.optim.lr,
                                           weight_decay=cfg.optim.weight_decay, eps=cfg.optim.adam_eps)
        if self._resume_ckpt is not None and self.state.stage == "rl" and self.state.update > 0:
            self._restore_optimizer(self.optimizer)
        self.ref = make_reference(cfg, self.model, rollout_model=self.rollout_model, run_dir=self.run_dir,
                                  update=self.state.update, source=self._ref_from, device=self.device,
                                  dist=self.dist, dtype=self._frozen_dtype())
        shown = resolved_options(self.method, self.options)  # with the method's defaults; it is given self.options
        self._say(f"stage {'2/2' if cfg.sft.steps else '1/1'}: group RL with credit '{cfg.credit.name}' "
                  f"{shown}  ({cfg.updates} updates x {cfg.rollout.groups} groups x G={cfg.rollout.group_size}"
                  f"{f' ({self.groups_per_rank} per rank)' if self.dist.world > 1 else ''}"
                  f", lr {cfg.optim.lr:g}, clip {cfg.optim.clip_ratio}, KL {cfg.optim.kl_coef}"
                  f"{f', at most {cfg.max_minutes:g} min' if cfg.max_minutes else ''})")
        rng = np.random.default_rng([cfg.seed, rank, self.state.update])
        deadline = time.monotonic() + cfg.max_minutes * 60 - self.state.rl_seconds \
            if cfg.max_minutes > 0 else None
        bar = tqdm(total=cfg.updates, initial=self.state.update, desc="rl", dynamic_ncols=True,
                   disable=not (cfg.progress and self.dist.main))
        image_pad = self.tok.convert_tokens_to_ids("<|image_pad|>") if self.proc else None
        ctx = UpdateContext(pad_id=self.pad_id, ref=self.ref, device=self.device, sync_max=self._max_int,
                            world_size=self.dist.world, autocast_dtype=self.autocast, image_processor=self.proc,
                            image_pad_id=image_pad)
        health, kl_stops = HealthWatch(say=self._say), 0
        t_start = time.perf_counter()
        while self.state.update < cfg.updates:
            if self._agree(stop() or (deadline is not None and time.monotonic() > deadline)):
                if not stop():
                    self._say(f"  time limit (max_minutes={cfg.max_minutes:g}) reached after {self.state.update} of "
                              f"{cfg.updates} updates: the run is cut short (the summary ends saying so)")
                break
            u, t0 = self.state.update, time.perf_counter()
            # 1. rollout: G episodes of each sampled training task
            seeds = training_seeds(cfg, rng, self.groups_per_rank)
            sampling = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                      max_tokens=cfg.rollout.max_response_tokens, seed=int(rng.integers(2**31)))
            groups = self.rollouts.collect(self.engine, self.builder, seeds, group_size=cfg.rollout.group_size,
                                           sampling=sampling, prefix=f"u{u}r{rank}-", gate=cfg.rollout.gate,
                                           should_stop=stop)
            if self._agree(stop()):  # Ctrl-C / SIGTERM mid-rollout: partial groups are not trained on
                break
            t_roll, t1 = time.perf_counter() - t0, time.perf_counter()
            # 2. credit: step-level advantages from the credit method
            samples, adv, counts = build_samples(groups, cfg.credit.name, self.options, adv_norm=cfg.optim.adv_norm)
            t_credit = time.perf_counter() - t1
            # 3. PPO update (a colocated engine sleeps meanwhile), 4. new weights to the rollout engine
            # A signal here stops at once (an update takes minutes on a busy CPU, past a supervisor's grace before
            # SIGKILL); its half-done steps are not saved: the run resumes from the last checkpoint. Under torchrun
            # the ranks stop together at the next safe point instead (one rank leaving a collective hangs the rest).
            with stop.now() if not self.dist.enabled else contextlib.nullcontext():
                self._mid_update = u + 1
                if self.colocated:
                    self.engine.sleep()
                logs = ppo_update(self.model, self.optimizer, samples, self.optim, ctx, rng=rng)
                if self.colocated:
                    self.engine.wake_up()
                self._push_weights()
            self._mid_update = None
            # 5. log (averaged over ranks), 6. checkpoint, 7. validate
            row = update_row(groups, adv, counts, time_rollout=t_roll, time_credit=t_credit, **logs)
            keys = sorted(row)
            row = dict(zip(keys, all_reduce_mean([row[k] for k in keys], self.dist), strict=True))
            row["time_update"] = time.perf_counter() - t0
            self.state.update = u + 1
            self.state.rl_seconds = self.state.rl_seconds + row["time_update"]
            self.log.log(u + 1, row)
            health.check(u + 1, row)
            if row.get("kl_stop") and not kl_stops:
                self._say(f"  update {u + 1}: the KL guard stopped the update after {row['optimizer_steps']:.0f} "
                          f"optimizer steps (approx_kl {row['approx_kl_rejected']:.3f} > 1.5 x optim.target_kl "
                          f"{cfg.optim.target_kl:g}; the last step was undone and the learning rate halved, to "
                          f"{row['lr']:.2g}; later stops are counted, not said)")
            kl_stops += int(bool(row.get("kl_stop")))
            bar.update(1)
            bar.set_postfix(succ=f"{row['success']:.2f}", kl=f"{row['kl']:.3f}", inv=f"{row['invalid']:.2f}")
            if (u + 1) % cfg.checkpoint_every == 0:
                self._save(u + 1)
            if cfg.eval.every and (u + 1) % cfg.eval.every == 0 and u + 1 < cfg.updates:
                with stop.now():
                    self._validate(u + 1, f"update-{u + 1}")
        bar.close()
        stops = f"; the KL guard stopped {kl_stops} of them early" if kl_stops else ""
        self._say(f"  RL: {self.state.update} updates in {time.perf_counter() - t_start:.0f} s{stops}")

    # -- steps ----------------------------------------------------------------------------------------------
    def _validate(self, update: int, tag: str, *, record: bool = True) -> dict[str, Any]:
        """Rank 0 validates (the others go on and wait at the next collective); the state keeps aggregates."""
        if not self.dist.main:
            self.state.evals[tag] = Validation(update)
            return {}
        res, self.state.evals[tag] = validate(self.cfg, self.engine, self.builder, self.rollouts,
                                                 run_dir=self.run_dir, update=update, tag=tag, record=record,
                                                 log=self.log, say=self._say)
        return res

    def _restore(self) -> None:
        """Resume: weights and state from the checkpoint (before wrapping: under FSDP2 each rank keeps its shard
        of the full weights; the optimizer state comes back once a stage builds it), metrics cut back to it."""
        assert self._resume_ckpt is not None
        saved = RunState.from_json(load_checkpoint(self._resume_ckpt, model=unwrap(self.model)), self._resume_ckpt)
        self.state = dataclasses.replace(saved, config_hash=config_hash(self.cfg), config=fixed_config(self.cfg))
        self._say(f"resumed from {self._resume_ckpt} (stage {self.state.stage}, update {self.state.update}, "
                  f"sft step {self.state.sft_step})")
        dropped = self.log.rewind(checkpoint_manifest(self._resume_ckpt).get("metrics_bytes"),
                                  sft_step=self.state.sft_step, update=self.state.update)
        if dropped:
            self._say(f"resume: metrics.jsonl cut back to {self._resume_ckpt.name} ({dropped} later rows dropped; "
                      "the resumed run logs them again)")
        self.log.note_resume(self.state.update, checkpoint=self._resume_ckpt.name)
        self._ref_from = reference_source(self.cfg, self.state, self.run_dir, self._say)

    def _finished(self) -> dict[str, Any] | None:
        """A resumed run that had already finished: its saved summary, without validating (and logging) again."""
        after, results = self.state.evals.after, self.run_dir / "results.json"
        if not (after is not None and after.update == self.state.update >= self.cfg.updates
                and self.state.stage == "rl" and results.is_file()):
            return None
        self._say(f"resume: {self.run_dir.name} already finished ({self.state.update} updates, validated); "
                  "nothing to do (--set updates=N continues it)")
        self.log.close()
        summary: dict[str, Any] = read_json(results, error=ConfigError)
        return summary

    def _interrupted(self) -> None:
        """Stop: a checkpoint of where the run is, one line saying how to continue, then KeyboardInterrupt. Stopped
        inside an update, the weights are half-updated: nothing is saved, and the line names the checkpoint a
        resume continues from."""
        if self._mid_update is not None:
            ckpt, _ = find_checkpoint(self.run_dir)
            since = read_json(ckpt / "state.json").get("update") if ckpt is not None else None
            self._say(f"interrupted during update {self._mid_update}: its half-done optimizer steps are not saved; "
                      + (f"`abc train --resume {self.run_dir}` continues from the checkpoint of update {since}"
                         if since is not None else f"no checkpoint to resume from in {self.run_dir}"))
            raise KeyboardInterrupt
        self._save(max(self.state.update, 0))
        self._say(f"interrupted: checkpoint saved; continue with `abc train --resume {self.run_dir}`")
        raise KeyboardInterrupt

    def _wrap(self) -> None:
        """Under torchrun: DDP, or FSDP2 with an unsharded copy for rollouts (ranks generate different lengths, so
        generation must not run collectives); weights are pushed to that copy after each optimizer step."""
        if not self.dist.enabled:
            return
        strategy = self.cfg.strategy
        if strategy == "auto":
            strategy = "fsdp" if self.device.type == "cuda" else "ddp"
        if strategy == "fsdp" and not self.colocated:
            self.rollout_model = copy.deepcopy(self.model).eval()
            if self._frozen_dtype() is not None:  # a frozen copy: compute dtype (bf16), 2 bytes per parameter
                self.rollout_model = self.rollout_model.to(self._frozen_dtype())
            for p in self.rollout_model.parameters():
                p.requires_grad_(False)
            self.engine = build_rollout_engine(self.cfg, self.rollout_model, self.tok, self.proc,
                                               autocast_dtype=self.autocast, device=self.device, dist=self.dist)
            self.rollouts.close()
        self.model = _wrap_model(self.model, self.dist, strategy, compute_dtype=self.autocast)

    def _frozen_dtype(self) -> torch.dtype | None:
        """The dtype of frozen copies (reference, rollout copy): the compute dtype on GPUs (CPU runs keep fp32)."""
        return self.autocast if self.device.type == "cuda" else None

    def _push_weights(self) -> None:
        """New weights to the rollout engine: a no-op when it shares the parameters (single process, DDP + hf)."""
        from .policy import copy_weights_into, full_state

        if self.rollout_model is not None:  # FSDP2 + hf: into the unsharded copy, one parameter at a time
            copy_weights_into(self.rollout_model, self.model)
        elif self.colocated:  # vLLM: the CPU state in the serving dtype, LoRA merged, DDP unwrapped, FSDP2 gathered
            dtype = self.engine.capabilities.serving_dtype or self.autocast
            self.engine.update_weights(full_state(self.model, dtype=dtype))
        else:  # hf shares the parameters (finds its own tensors: loads nothing); a server's weight_sync gets them
            self.engine.update_weights(unwrap(self.model).state_dict())

    def _final_policy(self) -> Any:
        """The policy to export (every rank calls this): the fp32 master weights, never a reduced-precision copy.
        One process and DDP: the policy itself; FSDP2 + hf: the unsharded rollout copy when it is fp32 (CPU runs);
        otherwise (a bf16 rollout copy on GPUs, or FSDP2 + vLLM) the fp32 shards gathered, one parameter at a time,
        into a fresh CPU copy on rank 0 (``None`` elsewhere)."""
        from .distributed import is_sharded
        from .policy import copy_weights_into

        if self.rollout_model is not None and _all_fp32(self.rollout_model):
            return self.rollout_model
        if not is_sharded(self.model, self.dist):
            return unwrap(self.model)
        fresh = build_policy(self.cfg, torch.device("cpu"))[0] if self.dist.main else None
        copy_weights_into(fresh, self.model)
        return fresh

    def _save(self, tag: int) -> None:
        save_snapshot(self.run_dir, tag, model=self.model, optimizer=self.optimizer, state=self.state,
                      dist=self.dist, keep=self.cfg.keep_checkpoints)

    def _restore_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        assert self._resume_ckpt is not None
        restore_optimizer(self._resume_ckpt, model=self.model, optimizer=optimizer, dist=self.dist, say=self._say)

    def _say(self, text: str) -> None:
        if self.dist.main:
            print(text, flush=True)

    def _max_int(self, n: int) -> int:
        return max_int(self.dist, n)

    def _agree(self, flag: bool) -> bool:
        return agree(self.dist, flag)


def _all_fp32(model: torch.nn.Module) -> bool:
    """Whether every floating-point parameter of ``model`` is fp32 (a rollout copy cast to bf16 is not)."""
    return all(p.dtype == torch.float32 for p in model.parameters() if p.is_floating_point())


def _release(lock: Any) -> None:
    """Release the run folder's lock if this rank holds it (only the main rank takes it)."""
    if lock is not None:
        lock.release()


def train(cfg: TrainConfig | None = None, *, resume: str | Path | None = None, overrides: tuple[str, ...] = (),
          **load_kwargs: Any) -> dict[str, Any]:
    """Run a training job (what ``abc train`` calls); ``resume`` continues a run folder from its last checkpoint
    (with ``overrides`` applied to its saved config, e.g. more updates)."""
    if resume is not None:
        run_dir = Path(resume)
        toml = check_run_folder(run_dir)
        check_edited(run_dir, toml)  # by the keys edited, before the edited file is resolved
        cfg = load_config(config=toml, overrides=overrides)
        check_resume(run_dir, load_config(config=toml), cfg)  # before anything is written
        done = finished_summary(run_dir, cfg)
        if done is not None:  # nothing to do, and nothing written (no lock, no metrics row)
            print(f"resume: {run_dir.name} already finished ({done.get('updates', cfg.updates)} updates, "
                  "validated); nothing to do (--set updates=N continues it)", flush=True)
            return done
        trainer = Trainer(cfg, run_dir=run_dir, resume=True)
    else:
        cfg = cfg or load_config(overrides=overrides, **load_kwargs)
        trainer = Trainer(cfg)
    if not trainer.dist.enabled:
        try:
            return trainer.run()
        finally:
            trainer.lock.release()
    try:
        trainer.run()
    except BaseException:  # under torchrun: report, then leave without waiting for the other ranks
        import traceback

        traceback.print_exc()
        _release(trainer.lock)
        shutdown(trainer.dist, 130 if isinstance(sys.exc_info()[1], KeyboardInterrupt) else 1, barrier=False)
    _release(trainer.lock)  # before the exit, so a caller that goes on in this process (a launcher) may resume it
    shutdown(trainer.dist)  # flushes and os._exit(0): gloo can abort at interpreter exit
    raise AssertionError("unreachable")
