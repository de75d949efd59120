"""``abc eval --run DIR`` or ``abc eval --model M --env E``: held-out validation written as leaderboard records."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError

__all__ = ["register"]


def register(sub: Any) -> None:
    from .train import env_argument

    p = sub.add_parser("eval", help="validate a trained run or a model on held-out tasks (leaderboard records)",
                       description="Validation decoding at temperature 0.4 (the paper's) and greedy; per-subtask "
                       "success and score as leaderboard records. With --run, beside the run's own results: "
                       "RUN_DIR/eval/rerun-TIMESTAMP/ (the run's eval/update-NNNN.json and eval/records.jsonl stay "
                       "as training wrote them, unless --force).")
    p.add_argument("--run", metavar="DIR", help="a run folder of `abc train` / `abc sft` (uses DIR/model)")
    p.add_argument("--model", metavar="PATH_OR_ID", help="a model to evaluate instead (tiny, smollm2, id, folder)")
    p.add_argument("--env", type=env_argument, metavar="NAME_OR_ID",
                   help="environment family or one of its ids (with --model; `abc plugins` lists them)")
    p.add_argument("--episodes", type=int, help="validation episodes (default: the config's eval.episodes)")
    p.add_argument("--temperature", type=float, help="sampling temperature (default 0.4)")
    p.add_argument("--no-greedy", action="store_true", help="skip the greedy pass")
    p.add_argument("--method", default=None, help="method label of the records (default: the run's credit name, "
                   "or 'base' for --model)")
    p.add_argument("--out", metavar="DIR", help="where to write: with --model the folder that gets eval/ (default "
                   "runs/eval__...); with --run the records' folder (default RUN_DIR/eval/rerun-TIMESTAMP)")
    p.add_argument("--force", action="store_true", help="with --run: replace the run's own result for its final "
                   "update (eval/update-NNNN.json and its rows of eval/records.jsonl)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="config override, as in `abc train`")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import datetime as _dt

    from ..trainer.config import load_config
    from ..trainer.eval import evaluate, validation_seeds, write_eval
    from .train import require_for

    if bool(args.run) == bool(args.model):
        raise ConfigError("give --run DIR or --model M (with --env E)")
    if args.force and not args.run:
        raise ConfigError("--force replaces a run's own result: give it with --run DIR")
    ts = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder: Path | None = None
    if args.run:
        run_dir = Path(args.run)
        if not (run_dir / "config.toml").exists():
            raise ConfigError(f"--run: {run_dir} is not a run folder (no config.toml)")
        cfg = load_config(config=run_dir / "config.toml", overrides=args.overrides)
        state = json.loads((run_dir / "results.json").read_text()) if (run_dir / "results.json").exists() else {}
        update = int(state.get("updates", cfg.updates))
        method = args.method or cfg.credit.name
        if not (run_dir / "model").exists():
            raise ConfigError(f"--run: {run_dir}/model is missing (the run has not finished; resume it first)")
        base_name = cfg.model.name
        cfg.model.name = str(run_dir / "model")
        cfg.model.lora = False
        if not args.force:
            folder = Path(args.out) if args.out else run_dir / "eval" / f"rerun-{ts}"
            if folder.resolve() == (run_dir / "eval").resolve():
                raise ConfigError(f"--out {folder} is the run's own eval folder; add --force to replace its result")
            k = 1
            while folder.exists() and not args.out:
                k += 1
                folder = run_dir / "eval" / f"rerun-{ts}-{k}"
    else:
        cfg = load_config(env=args.env, model=args.model, overrides=args.overrides)
        update, method = 0, args.method or "base"
        base_name = cfg.model.name
        name = base_name.rstrip("/").split("/")[-1]
        run_dir = Path(args.out or Path(cfg.out_dir) / f"eval__{cfg.env.name}__{name}__{ts}")
    if args.episodes is not None:
        cfg.eval.episodes = args.episodes
    require_for(cfg.env.name)
    import torch

    torch.set_num_threads(cfg.threads)
    device = torch.device("cuda" if cfg.device != "cpu" and torch.cuda.is_available() else "cpu")
    model, tok, proc = _load(cfg, run_dir if args.run else None, device)
    from ..trainer.policy import build_builder, build_rollout_engine

    builder = build_builder(cfg, tok, proc)
    engine = build_rollout_engine(cfg, model, tok, proc, device=device)  # a colocated one loads cfg.model.name
    seeds = validation_seeds(cfg, cfg.eval.episodes)
    temp = cfg.eval.temperature if args.temperature is None else args.temperature
    from ..trainer.rollouts import Rollouts

    with Rollouts(cfg) as rollouts:  # both modes share the runners (and their env copies)
        results = {f"t{temp:g}": evaluate(engine, builder, cfg, seeds, temperature=temp, seed=cfg.seed,
                                          rollouts=rollouts)}
        if not args.no_greedy:
            results["greedy"] = evaluate(engine, builder, cfg, seeds, temperature=0.0, seed=cfg.seed,
                                         rollouts=rollouts)
    cfg.model.name = base_name
    n_params = sum(p.numel() for p in model.parameters())
    write_eval(run_dir, cfg, update, results, kind="rl" if args.run else "prompting", n_params=n_params,
               method=method, folder=folder)
    for mode, r in results.items():
        subs = "  ".join(f"{k} {v['success']:.1%}" for k, v in r["subtasks"].items() if len(r["subtasks"]) > 1)
        print(f"{mode:>7}: success {r['success']:.1%} +- {r['stderr']:.1%} (n={r['n_episodes']}), "
              f"score {r['score']:.2f}, invalid {r['invalid']:.1%}  {subs}")
    print(f"records: {(folder or run_dir / 'eval') / 'records.jsonl'}")
    return 0


def _load(cfg: Any, run_dir: Path | None, device: Any) -> tuple[Any, Any, Any]:
    from ..trainer.policy import build_policy

    if run_dir is not None and (run_dir / "model" / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        model = AutoPeftModelForCausalLM.from_pretrained(run_dir / "model").to(device).eval()
        tok = AutoTokenizer.from_pretrained(run_dir / "model")
        tok.padding_side = "left"
        return model, tok, None
    return build_policy(cfg, device)
