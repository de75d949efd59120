"""Every installed credit method through verl's advantage step, checked against ``abc credit`` (CPU, no Ray cluster).

    pip install torch==2.13.0 verl==0.9.1 -e ".[verl]"     # its own environment: verl pins transformers<5.11
    python examples/verl_step_credit.py [--groups 4] [--group-size 8] [--max-steps 8]

``abc rollout --env sokoban --policy random`` plays the trajectories (twice: anchors as the board text, which is
the observation, and as the family's ``state`` extractor). Each rollout becomes a verl ``DataProto`` in both layouts:

- ``steps`` (verl-agent): one row per step, ``uid``/``traj_uid``/``anchor_obs``/``rewards``, the episode return on
  every row's last response token;
- ``turns`` (verl's multi-turn agent loop): one row per trajectory, each turn's response tokens (mask 1) followed by
  the next observation's tokens (mask 0), the turn's reward on its last token.

Tokens are UTF-8 bytes. The text-anchor rollout is read with the default anchor (the observation: ``anchor_obs``,
or the tokens before each turn); the state-anchor rollout with ``anchor=KEY``, the key holding the env's
``info["anchor"]``. For every method, :func:`agentbench_crbc.integrations.verl.compute_advantage` writes the token
advantages, and they are compared, token by token, with ``abc credit METHOD rollouts.jsonl`` placed on the same
tokens. The last line is ``max |verl - abc credit| = X over N methods``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch
from verl import DataProto

from agentbench_crbc.cli import main as abc
from agentbench_crbc.credit import assign
from agentbench_crbc.host import get_host
from agentbench_crbc.integrations.verl import compute_advantage


def rollout(path: Path, args: argparse.Namespace, anchor: str) -> list[dict[str, Any]]:
    """``abc rollout`` into ``path``; its records."""
    rc = abc(["rollout", "--env", "sokoban", "--policy", "random", "--groups", str(args.groups), "--group-size",
              str(args.group_size), "--max-steps", str(args.max_steps), "--workers", "0", "--set", f"anchor={anchor}",
              "--quiet", "-o", str(path)])
    assert rc == 0, f"abc rollout exited {rc}"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert not any(r["error"] for r in records), "an episode ended in an env error"
    return records


def ids(text: str) -> list[int]:
    return list(text.encode())


def grid(rows: list[list[int]], left: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows padded into ``(ids, mask)``; left padding for prompts."""
    width = max(map(len, rows))
    out = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        sl = slice(width - len(r), width) if left else slice(0, len(r))
        out[i, sl] = torch.tensor(r)
        mask[i, sl] = 1
    return out, mask


def anchor_text(anchor: Any) -> str:
    return anchor if isinstance(anchor, str) else json.dumps(anchor)


def steps_layout(records: list[dict[str, Any]], key: str | None) -> tuple[DataProto, list[tuple[int, slice]]]:
    """verl-agent's layout; and where each step's credit lies (row, response token slice)."""
    prompts, responses, rewards, places = [], [], [], []
    nt: dict[str, list[Any]] = {k: [] for k in ("uid", "traj_uid", "anchor_obs", "rewards", "is_action_valid",
                                                 "success")}
    if key:
        nt[key] = []
    for rec in records:
        for s in rec["steps"]:
            resp = ids(s["response"])
            places.append((len(responses), slice(0, len(resp))))
            prompts.append(ids(anchor_text(s["anchor"])))
            responses.append(resp)
            r = [0.0] * len(resp)
            r[-1] = rec["reward"]  # verl-agent's episode reward manager: the return on every step's last token
            rewards.append(r)
            nt["uid"].append(rec["group"])
            nt["traj_uid"].append(f"{rec['group']}/{rec['rollout']}")
            nt["anchor_obs"].append(anchor_text(s["anchor"]))
            nt["rewards"].append(s["reward"])
            nt["is_action_valid"].append(s["valid"])
            nt["success"].append(rec["success"])
            if key:
                nt[key].append(s["anchor"])
    return proto(prompts, responses, rewards, nt), places


def turns_layout(records: list[dict[str, Any]], key: str | None) -> tuple[DataProto, list[tuple[int, slice]]]:
    """verl's multi-turn layout; and where each step's credit lies."""
    prompts, responses, rewards, masks, places = [], [], [], [], []
    nt: dict[str, list[Any]] = {"uid": [], "success": []}
    if key:
        nt[key] = []
    for i, rec in enumerate(records):
        steps = rec["steps"]
        prompts.append(ids(anchor_text(steps[0]["anchor"])))
        toks: list[int] = []
        mask: list[int] = []
        rew: list[float] = []
        for k, s in enumerate(steps):
            resp = ids(s["response"])
            places.append((i, slice(len(toks), len(toks) + len(resp))))
            toks += resp
            mask += [1] * len(resp)
            rew += [0.0] * (len(resp) - 1) + [s["reward"]]
            if k + 1 < len(steps):
                obs = ids(anchor_text(steps[k + 1]["anchor"]))
                toks += obs
                mask += [0] * len(obs)
                rew += [0.0] * len(obs)
        responses.append(toks)
        masks.append(mask)
        rewards.append(rew)
        nt["uid"].append(rec["group"])
        nt["success"].append(rec["success"])
        if key:
            nt[key].append([s["anchor"] for s in steps])
    return proto(prompts, responses, rewards, nt, masks), places


def proto(prompts: list[list[int]], responses: list[list[int]], rewards: list[list[float]],
          nt: dict[str, list[Any]], masks: list[list[int]] | None = None) -> DataProto:
    p, p_attn = grid(prompts, left=True)
    r, r_attn = grid(responses)
    resp_mask = r_attn.clone()
    tlr = torch.zeros(r.shape, dtype=torch.float64)  # float64: the comparison is at 1e-9 (float32 rounds -0.1)
    for i, row in enumerate(rewards):
        tlr[i, :len(row)] = torch.tensor(row, dtype=torch.float64)
        if masks is not None:
            resp_mask[i, :len(masks[i])] = torch.tensor(masks[i])
    non_tensors = {}
    for k, v in nt.items():
        col = np.empty(len(v), dtype=object)
        col[:] = v
        non_tensors[k] = col
    return DataProto.from_dict(tensors={"prompts": p, "responses": r, "input_ids": torch.cat([p, r], 1),
                                        "attention_mask": torch.cat([p_attn, r_attn], 1),
                                        "response_mask": resp_mask, "token_level_rewards": tlr},
                               non_tensors=non_tensors)


def abc_credit(method: str, path: Path) -> list[list[float]]:
    """``abc credit METHOD FILE`` (the CLI, in process): each record's advantages."""
    out = path.with_suffix(f".{method}.jsonl")
    with contextlib.redirect_stderr(io.StringIO()):
        rc = abc(["credit", method, str(path), "-q", "-o", str(out)])
    assert rc == 0, f"abc credit {method} exited {rc}"
    return [json.loads(line)["advantages"] for line in out.read_text().splitlines()]


def best_ms(fn: Any, repeat: int) -> float:
    """The least CPU time of ``repeat`` calls, in milliseconds (CPU time: on a shared machine wall time measures
    the other processes)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=1, help="time each call this many times, print the least CPU time")
    args = ap.parse_args()
    methods = get_host().credit.names()
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="verl-step-credit-") as tmp:
        for anchor, key in (("text", None), ("state", "abc_anchor")):
            path = Path(tmp) / f"rollouts-{anchor}.jsonl"
            records = rollout(path, args, anchor)
            n_steps = sum(len(r["steps"]) for r in records)
            expected = {m: [a for adv in abc_credit(m, path) for a in adv] for m in methods}
            for layout, build in (("steps", steps_layout), ("turns", turns_layout)):
                data, places = build(records, key)
                print(f"{layout} layout, anchor {'observation' if key is None else 'key ' + key} "
                      f"({anchor} anchors): {len(records)} trajectories, {n_steps} steps, {len(data)} rows")
                for m in methods:
                    want = torch.zeros_like(data.batch["token_level_rewards"])
                    for (row, sl), a in zip(places, expected[m], strict=True):
                        want[row, sl] = a
                    ms = best_ms(partial(compute_advantage, data, m, layout=layout, anchor=key), args.repeat)
                    alone = best_ms(partial(assign, m, records), args.repeat)
                    got = data.batch["advantages"]
                    err = float((got - want).abs().max())
                    worst = max(worst, err)
                    print(f"  {m:<12} max |verl - abc credit| = {err:.3g}   verl path {ms:.2f} ms CPU "
                          f"(credit alone {alone:.2f} ms)")
    print(f"max |verl - abc credit| = {worst:.3g} over {len(methods)} methods")


if __name__ == "__main__":
    main()
