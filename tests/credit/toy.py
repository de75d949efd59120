"""The toy group of credit-methods.md section 0 as credit-contract records."""

TOY = [
    {"group": "toy", "steps": [{"anchor": "A", "action": "a1"}, {"anchor": "B", "action": "b1"}], "success": True},
    {"group": "toy", "steps": [{"anchor": "A", "action": "a1"}, {"anchor": "B", "action": "b2"},
                               {"anchor": "C", "action": "c1"}], "success": False},
    {"group": "toy", "steps": [{"anchor": "A", "action": "a2"}, {"anchor": "D", "action": "d1"},
                               {"anchor": "C", "action": "c2"}], "success": True},
    {"group": "toy", "steps": [{"anchor": "A", "action": "a3"}, {"anchor": "A", "action": "a4"},
                               {"anchor": "C", "action": "c1"}], "success": False},
]


def toy(reward: float | None = None) -> list[dict]:
    """Fresh copies of the toy records; ``reward`` sets R = reward * success (verl-agent uses 10)."""
    out = []
    for rec in TOY:
        r = {**rec, "steps": [dict(s) for s in rec["steps"]]}
        if reward is not None:
            r["reward"] = reward * rec["success"]
        out.append(r)
    return out
