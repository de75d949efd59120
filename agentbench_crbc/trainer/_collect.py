"""Private stand-in for the rollout engine's group collection (in-process envs, active-only generation).

Used only while ``agentbench_crbc.rollout`` has no ``collect``; the trainer prefers the engine's own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..rollout.base import RolloutGroup, RolloutStep, RolloutTrajectory, SamplingParams
from ..rollout.parse import parse_action
from ..rollout.prompts import observation_text, task_description

__all__ = ["collect_groups"]


def collect_groups(engine: Any, builder: Any, env_id: str, seeds: Sequence[int], *, group_size: int,
                   sampling: SamplingParams, max_steps: int, invalid_penalty: float = 0.1,
                   env_kwargs: dict[str, Any] | None = None, group_prefix: str = "g") -> list[RolloutGroup]:
    """G copies of each seed's env, stepped together; only active copies generate."""
    import gymnasium as gym
    import agentbench_crbc.envs  # noqa: F401 - registers the abc/* ids

    envs, metas = [], []
    for gi, seed in enumerate(seeds):
        for _ in range(group_size):
            env = gym.make(env_id, max_episode_steps=max_steps, **(env_kwargs or {}))
            obs, info = env.reset(seed=int(seed))
            envs.append(env)
            metas.append({"group": gi, "obs": obs, "info": info, "steps": [], "history": [], "done": False,
                          "success": False, "ret": 0.0, "trunc": False,
                          "task": task_description(observation_text(obs, info), info)})
    for t in range(max_steps):
        active = [i for i, m in enumerate(metas) if not m["done"]]
        if not active:
            break
        prompts = [builder.build(metas[i]["obs"], metas[i]["info"], metas[i]["history"], t, metas[i]["task"])
                   for i in active]
        images = [list(p.images) or None for p in prompts]
        comps = engine.generate([p.ids for p in prompts], sampling,
                                images=images if any(images) else None)
        for i, p, c in zip(active, prompts, comps, strict=True):
            m = metas[i]
            text = c.text or engine.tokenizer.decode(c.token_ids, skip_special_tokens=True)
            parsed = parse_action(text, m["info"].get("admissible_actions"))
            obs, r, term, trunc, info = envs[i].step(parsed.action)
            reward = float(r) - (0.0 if parsed.valid else invalid_penalty)
            m["steps"].append(RolloutStep(tuple(p.ids), tuple(c.token_ids), tuple(c.logprobs), m["info"]["anchor"],
                                          parsed.action, text, parsed.valid, reward,
                                          observation_text(m["obs"], m["info"])))
            m["history"].append((observation_text(m["obs"], m["info"]), parsed.action))
            m["ret"] += reward
            m["obs"], m["info"] = obs, info
            if term or trunc:
                m["done"], m["success"], m["trunc"] = True, bool(info.get("success", False)), bool(trunc and not term)
    out = []
    for gi, seed in enumerate(seeds):
        trajs = tuple(RolloutTrajectory(tuple(m["steps"]), m["success"], m["ret"], m["info"].get("subtask"),
                                        m["trunc"]) for m in metas if m["group"] == gi and m["steps"])
        out.append(RolloutGroup(f"{group_prefix}{gi}-{seed}", env_id, int(seed), trajs))
    for env in envs:
        env.close()
    return out
