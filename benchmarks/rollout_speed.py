"""Active-only group rollouts vs lockstep generation (verl-agent: generate for every copy until the slowest ends).

A 1M-parameter random Qwen2 generates every response on CPU (the real cost). So that episodes end at different
times, as with a partly trained policy, each response is replaced by the env expert's action with probability
``--expert-p`` (seeded by group, copy and step, so both modes play identical trajectories); the model's own text
is almost always invalid (a no-op step). Same seeds in both modes; the script checks the trajectories match.

    python benchmarks/rollout_speed.py --groups 8 --group-size 8 --max-steps 15 --max-tokens 16
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="abc/SokobanText-v0")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--template", default="compact")
    ap.add_argument("--expert-p", type=float, default=0.5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(1)
    from agentbench_crbc.rollout import PromptBuilder, RolloutRunner, RunnerConfig, SamplingParams
    from agentbench_crbc.rollout.engines.baselines import wrap_action
    from agentbench_crbc.rollout.engines.hf import HFEngine
    from agentbench_crbc.rollout.engines.models import tiny_qwen2, tiny_tokenizer

    tok = tiny_tokenizer()
    engine = HFEngine(tiny_qwen2(tok), tok)
    # the env workers attach info["expert_action"]
    engine.capabilities = dataclasses.replace(engine.capabilities, needs_expert=True)

    class Steered(RolloutRunner):
        def _act(self, call, t):  # type: ignore[no-untyped-def]
            texts, comps, prompts = super()._act(call, t)
            for i, e in enumerate(call):
                rng = np.random.default_rng([e.slot, t, 12345])
                if not e.done and e.info.get("expert_action") and rng.random() < args.expert_p:
                    texts[i] = wrap_action(e.info["expert_action"])
            return texts, comps, prompts

    seeds = list(range(args.groups))
    sp = SamplingParams(temperature=1.0, max_tokens=args.max_tokens, seed=0)
    results = {}
    plays = {}
    for mode in ("active", "lockstep"):
        walls, gens = [], []
        with Steered(args.env, engine, PromptBuilder(tok, args.env, template=args.template),
            RunnerConfig(group_size=args.group_size, max_steps=args.max_steps, sampling=sp, num_workers=0,
                         lockstep=mode == "lockstep")) as r:
            r.collect(seeds[:1])  # warm up
            for _ in range(args.repeats):
                groups = r.collect(seeds)
                walls.append(r.stats.wall_s)
                gens.append(r.stats.generate_s)
            st = r.stats
        plays[mode] = [[s.action for s in t.steps] for g in groups for t in g.trajectories]
        lengths = [len(t.steps) for g in groups for t in g.trajectories]
        results[mode] = {"llm_calls": st.llm_calls, "sum_lengths": sum(lengths), "generated_tokens":
                         st.generated_tokens, "wall_s": min(walls), "generate_s": min(gens),
                         "success": float(np.mean([t.success for g in groups for t in g.trajectories])),
                         "mean_length": float(np.mean(lengths)), "max_length": max(lengths)}
    same = plays["active"] == plays["lockstep"]
    a, b = results["active"], results["lockstep"]
    summary = {"env": args.env, "groups": args.groups, "group_size": args.group_size, "max_steps": args.max_steps,
               "max_tokens": args.max_tokens, "template": args.template, "same_trajectories": same, **{
                   f"{m}_{k}": v for m, r in results.items() for k, v in r.items()},
               "calls_ratio_lockstep_over_active": b["llm_calls"] / a["llm_calls"],
               "wall_ratio_lockstep_over_active": b["wall_s"] / a["wall_s"],
               "generate_ratio_lockstep_over_active": b["generate_s"] / a["generate_s"]}
    if args.json:
        print(json.dumps(summary))
        return
    print(f"{args.env}: {args.groups} groups x {args.group_size}, max {args.max_steps} steps, "
          f"{args.max_tokens} response tokens, {args.template} prompt; identical trajectories: {same}")
    print(f"  success {a['success']:.2f}, episode length mean {a['mean_length']:.1f} / max {a['max_length']}")
    print("  mode       LLM calls  tokens   generate s  wall s")
    for m, r in results.items():
        print(f"  {m:<9} {r['llm_calls']:>10} {r['generated_tokens']:>7} {r['generate_s']:>11.2f} {r['wall_s']:>7.2f}")
    print(f"  lockstep / active: calls x{summary['calls_ratio_lockstep_over_active']:.2f}, "
          f"generate time x{summary['generate_ratio_lockstep_over_active']:.2f}, "
          f"wall time x{summary['wall_ratio_lockstep_over_active']:.2f}")


if __name__ == "__main__":
    main()
