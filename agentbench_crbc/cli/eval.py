"""``abc eval --run DIR`` or ``abc eval --model M --env E``: held-out validation written as leaderboard records."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .commands import COMMANDS

__all__ = ["register"]


def register(sub: Any) -> None:
    from ..argtypes import bounded_float, bounded_int
    from ..trainer.schema import MAX_EVAL_EPISODES, TEMPERATURE
    from .train import env_argument

    p = sub.add_parser("eval", help=COMMANDS["eval"],
                       description="Validation decoding at temperature 0.4 (the paper's) and greedy; per-subtask "
                       "success and score as leaderboard records. With --run, beside the run's own results: "
                       "RUN_DIR/eval/rerun-TIMESTAMP/ (the run's eval/update-NNNN.json and eval/records.jsonl stay "
                       "as training wrote them, unless --force).")
    p.add_argument("--run", metavar="DIR", help="a run folder of `abc train` / `abc sft` (uses DIR/model)")
    p.add_argument("--model", metavar="PATH_OR_ID", help="a model to evaluate instead (tiny, smollm2, id, folder)")
    p.add_argument("--env", type=env_argument, metavar="NAME_OR_ID",
                   help="environment family or one of its ids (with --model; `abc plugins` lists them)")
    p.add_argument("--episodes", type=bounded_int(1, MAX_EVAL_EPISODES),
                   help="validation episodes (default: the config's eval.episodes)")
    p.add_argument("--temperature", type=bounded_float(TEMPERATURE.lo, TEMPERATURE.hi),
                   help=f"sampling temperature in [0, {TEMPERATURE.hi:g}] (default 0.4)")
    p.add_argument("--no-greedy", action="store_true", help="skip the greedy pass")
    p.add_argument("--method", default=None, help="method label of the records with --model (default 'base'); with "
                   "--run the labels are the run's own")
    p.add_argument("--out", metavar="DIR", help="where to write: with --model the folder that gets eval/ (default "
                   "runs/eval__...); with --run the records' folder (default RUN_DIR/eval/rerun-TIMESTAMP)")
    p.add_argument("--force", action="store_true", help="replace an existing result: with --run the run's own for its "
                   "final update (eval/update-NNNN.json and its rows of eval/records.jsonl), or the one in --out")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                   help="config override, as in `abc train`")
    p.add_argument("--engine-option", action="append", default=[], metavar="KEY=VALUE",
                   help="an option of the rollout engine (rollout.engine_options.KEY), VALUE parsed as JSON when it "
                   "parses; repeatable; checked against the keys the engine takes (`abc plugins`)")
    p.set_defaults(func=run)


def _engine_overrides(items: list[str]) -> list[str]:
    """``--engine-option KEY=VALUE`` as ``rollout.engine_options.KEY=VALUE`` config overrides."""
    out = []
    for text in items:
        key, sep, value = text.partition("=")
        if not sep or not key.strip() or "." in key:
            raise ConfigError(f"--engine-option {text!r} must look like KEY=VALUE (e.g. threads=1)")
        out.append(f"rollout.engine_options.{key.strip()}={value}")
    return out


def run(args: argparse.Namespace) -> int:
    import datetime as _dt

    from ..trainer.threads import prepare_openmp

    prepare_openmp()  # before anything imports torch (and its OpenMP runtime), as abc train does
    from ..io import check_writable
    from ..trainer.config import load_config
    from ..trainer.eval import evaluate, model_params, validation_seeds, write_eval
    from .train import require_for

    if bool(args.run) == bool(args.model):
        raise ConfigError("give --run DIR or --model M (with --env E)")
    args.overrides = [*args.overrides, *_engine_overrides(args.engine_option)]
    ts = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder: Path | None = None
    lock = None
    if args.run:
        run_dir = Path(args.run)
        if not (run_dir / "config.toml").is_file():
            raise ConfigError(f"--run: {run_dir} is not a run folder (no config.toml)")
        # the run's recorded out_dir is where it was made, not where this writes (the records go to --out or into
        # the run): a recorded folder that is gone or read-only now refuses nothing
        here = [f"out_dir={run_dir.resolve().parent}"]
        own = load_config(config=run_dir / "config.toml", overrides=here)
        cfg = load_config(config=run_dir / "config.toml", overrides=[*here, *args.overrides])
        _labels_from_the_run(own, cfg, args.method)
        update = _final_update(run_dir, cfg.updates)
        method = own.credit.name
        if not (run_dir / "model" / "config.json").is_file() and not (run_dir / "model" / "adapter_config.json"
                                                                        ).is_file():
            raise ConfigError(f"--run: {run_dir}/model is missing or incomplete (the run has not finished; resume "
                              "it first)")
        base_name = cfg.model.name
        cfg.model.name = str(run_dir / "model")
        cfg.model.lora = False
        if args.force:
            folder = Path(args.out) if args.out else None
        else:
            folder = Path(args.out) if args.out else run_dir / "eval" / f"rerun-{ts}"
            if folder.resolve() == (run_dir / "eval").resolve():
                raise ConfigError(f"--out {folder} is the run's own eval folder; add --force to replace its result")
            k = 1
            while folder.exists() and not args.out:
                k += 1
                folder = run_dir / "eval" / f"rerun-{ts}-{k}"
        from ..trainer.run import lock_run_folder

        lock = lock_run_folder(run_dir, "abc eval --run")  # noqa: F841 (held until the command ends)
    else:
        cfg = load_config(env=args.env, model=args.model, overrides=args.overrides)
        update, method = 0, args.method or "base"
        base_name = cfg.model.name
        name = base_name.rstrip("/").split("/")[-1]
        run_dir = Path(args.out or Path(cfg.out_dir) / f"eval__{cfg.env.name}__{name}__{ts}")
    dest = folder or run_dir / "eval"
    if not args.force and any((dest / n).exists() for n in ("records.jsonl", f"update-{update:04d}.json")):
        raise ConfigError(f"--out: {dest} already holds a result (records.jsonl); add --force to replace it, or "
                          "give another --out")
    check_writable(dest / "records.jsonl")
    from ..trainer.resume import check_outputs

    check_outputs("--run" if args.run else "--out", records=(dest / "records.jsonl",))
    if args.episodes is not None:
        cfg.eval.episodes = args.episodes
    require_for(cfg.env.name)
    import torch

    from ..trainer.threads import torch_threads

    torch.set_num_threads(torch_threads(cfg.threads)[0])
    device = torch.device("cuda" if cfg.device != "cpu" and torch.cuda.is_available() else "cpu")
    model, tok, proc = _load_checked(cfg, run_dir if args.run else None, device)
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
    write_eval(run_dir, cfg, update, results, kind="rl" if args.run else "prompting", n_params=model_params(model),
               method=method, folder=folder)
    _print_results(results, (folder or run_dir / "eval") / "records.jsonl")
    return 0


def _load_checked(cfg: Any, run_dir: Path | None, device: Any) -> tuple[Any, Any, Any]:
    """:func:`_load`, with a damaged model folder of ``--run`` said in one line (transformers has many ways)."""
    try:
        return _load(cfg, run_dir, device)
    except ConfigError:
        raise
    except (OSError, ValueError, KeyError) as exc:
        if run_dir is None:
            raise
        text = str(exc).strip().splitlines()
        raise ConfigError(f"--run: {run_dir}/model cannot be loaded ({type(exc).__name__}: "
                          f"{text[0][:200] if text else ''}); resume the run to export it again") from None


def _print_results(results: dict[str, Any], records: Path) -> None:
    """One line per mode (success, its standard error, score, invalid answers, per-subtask success), then where
    the records went."""
    for mode, r in results.items():
        subs = "  ".join(f"{k} {v['success']:.1%}" for k, v in r["subtasks"].items() if len(r["subtasks"]) > 1)
        print(f"{mode:>7}: success {r['success']:.1%} +- {r['stderr']:.1%} (n={r['n_episodes']}), "
              f"score {r['score']:.2f}, invalid {r['invalid']:.1%}  {subs}")
    print(f"records: {records}")


#: What the records of ``abc eval --run`` are labelled with; they come from the run and cannot be set.
_LABELS = (("credit.name", lambda c: c.credit.name), ("seed", lambda c: c.seed), ("env.id", lambda c: c.env.id),
           ("model.name", lambda c: c.model.name))


def _labels_from_the_run(own: Any, cfg: Any, method: str | None) -> None:
    """``--method`` or ``--set`` may not relabel a run's model: a crbc seed-0 model's rows say crbc, seed 0."""
    if method is not None and method != own.credit.name:
        raise ConfigError(f"--method {method}: the run was trained with {own.credit.name!r} and its records say so; "
                          "drop --method (or evaluate the folder as --model DIR/model)")
    for key, get in _LABELS:
        if get(cfg) != get(own):
            raise ConfigError(f"--set {key}: the records of a run are labelled from the run ({key} = "
                              f"{get(own)!r}); drop the --set (or evaluate the folder as --model DIR/model)")


def _final_update(run_dir: Path, default: int) -> int:
    """The run's last update, from ``results.json`` when there is one; a damaged file is one line naming it."""
    path = run_dir / "results.json"
    if not path.exists():
        return default
    from ..io import read_text

    try:
        state = json.loads(read_text(path, error=ConfigError))
    except (ValueError, RecursionError):
        state = None
    updates = state.get("updates") if isinstance(state, dict) else None
    if isinstance(updates, bool) or not isinstance(updates, int) or not 0 <= updates <= 10**9:
        raise ConfigError(f"--run: {path} is damaged (no whole 'updates' count); repair it, or move it away to "
                          "evaluate the run's final model")
    return updates


def _load(cfg: Any, run_dir: Path | None, device: Any) -> tuple[Any, Any, Any]:
    from ..rollout.engines.models import check_weights
    from ..trainer.policy import build_policy

    if run_dir is not None:
        check_weights(run_dir / "model")  # a truncated file: one line naming it, not a safetensors traceback
    if run_dir is not None and (run_dir / "model" / "adapter_config.json").exists():
        from peft import AutoPeftModelForCausalLM
        from transformers import AutoTokenizer

        model = AutoPeftModelForCausalLM.from_pretrained(run_dir / "model").to(device).eval()
        tok = AutoTokenizer.from_pretrained(run_dir / "model")
        tok.padding_side = "left"
        return model, tok, None
    return build_policy(cfg, device)
