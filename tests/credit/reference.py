"""Naive dict-and-loop reference implementations (one dense solve per group): the test oracle for the
vectorised plugins, and the 'straightforward Python' baseline in benchmarks/credit_speed.py."""

from __future__ import annotations

from collections import defaultdict

import numpy as np


def crbc_reference(records: list[dict], beta: float = 0.98, w_traj: float = 1.0, w_step: float = 5.0,
                   sigma_min: float = 0.1) -> list[list[float]]:
    groups: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(records):
        groups[r["group"]].append(i)
    out: list[list[float]] = [[] for _ in records]
    for idx in groups.values():
        R = np.array([float(records[i].get("reward", records[i]["success"])) for i in idx])
        mean, std = R.mean(), (R.std(ddof=1) if len(R) > 1 else 0.0)
        a_g = (R - mean) / (std + 1e-6) if len(R) > 1 else np.zeros(len(R))
        n_s: dict = defaultdict(int)
        n_sa: dict = defaultdict(int)
        n_sax: dict = defaultdict(int)
        for i in idx:
            steps = records[i]["steps"]
            for t, s in enumerate(steps):
                x = steps[t + 1]["anchor"] if t + 1 < len(steps) else ("+" if records[i]["success"] else "-")
                key = (s["anchor"], s["action"])
                n_s[s["anchor"]] += 1
                n_sa[key] += 1
                n_sax[(*key, x)] += 1
        states = list(n_s)
        pos = {s: k for k, s in enumerate(states)}
        M = np.zeros((len(states), len(states)))
        b = np.zeros(len(states))
        for (s, _a, x), n in n_sax.items():
            if x == "+":
                b[pos[s]] += beta * n / n_s[s]
            elif x != "-":
                M[pos[s], pos[x]] += n / n_s[s]
        V = np.linalg.solve(np.eye(len(states)) - beta * M, b)
        value = {s: V[pos[s]] for s in states} | {"+": 1.0, "-": 0.0}
        Q = defaultdict(float)
        for (s, a, x), n in n_sax.items():
            Q[(s, a)] += beta * n / n_sa[(s, a)] * value[x]
        adv = {k: Q[k] - value[k[0]] for k in n_sa}
        sigma = defaultdict(float)
        n_actions = defaultdict(int)
        for (s, a), n in n_sa.items():
            sigma[s] += n / n_s[s] * adv[(s, a)] ** 2
            n_actions[s] += 1
        for j, i in enumerate(idx):
            out[i] = [w_traj * a_g[j] + w_step * (adv[(s["anchor"], s["action"])] / max(np.sqrt(sigma[s["anchor"]]),
                      sigma_min) if n_actions[s["anchor"]] >= 2 else 0.0) for s in records[i]["steps"]]
    return out
