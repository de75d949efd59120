"""The ALFWorld expert as a policy: the game's engine-checked walkthrough while on it, else the engine's planner.

The planner is TextWorld's Fast Downward ``replan`` from the current game state (what ALFWorld's ``planner``
expert returns as ``policy_commands``). It is fast on most games but can take a minute on some kitchens with many
openable receptacles, so it runs in a forked child under a time limit.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from agentbench_crbc.errors import EnvError

__all__ = ["expert_policy", "plan"]

# Commands that only look: they never move the game away from the walkthrough.
_LOOKING = ("look", "inventory", "examine ", "help")


def _pddl_env(engine: Any) -> Any:
    env = engine
    while not hasattr(env, "_pddl_state"):
        env = env._wrapped
    return env


def _plan_child(conn: Any, pddl: Any) -> None:  # pragma: no cover - runs in the forked child
    try:
        conn.send(pddl._pddl_state.replan(pddl._entity_infos))
    finally:
        conn.close()


def plan(env: Any, timeout: float | None = 30.0) -> list[str] | None:
    """The engine planner's command plan from ``env``'s current state; ``None`` when it times out.

    :param env: an ``abc/ALFWorld-v0`` env (wrapped or not) after ``reset``.
    :param timeout: seconds; ``None`` plans in-process without a limit.
    """
    pddl = _pddl_env(env.unwrapped.engine)
    if timeout is None:
        return list(pddl._pddl_state.replan(pddl._entity_infos))
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_plan_child, args=(send, pddl), daemon=True)
    proc.start()
    send.close()
    try:
        if recv.poll(timeout):
            return list(recv.recv())
        return None
    except EOFError:
        return None
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        recv.close()


def expert_policy(env: Any, *, mode: str = "auto", planner_timeout: float | None = 30.0
                  ) -> Callable[[str, dict[str, Any]], str]:
    """A callable ``(obs, info) -> command`` that plays ``env`` (an ``abc/ALFWorld-v0``) like ALFWorld's expert.

    :param mode: ``auto`` (walkthrough while the executed commands follow it, else the planner), ``walkthrough``
        (only the stored walkthrough) or ``planner`` (the engine's planner at every step).
    :param planner_timeout: seconds per planner call (``None``: no limit, in-process); on a timeout the policy
        answers ``"look"``, which changes nothing.
    """
    if mode not in ("auto", "walkthrough", "planner"):
        raise EnvError(f"unknown expert mode {mode!r}; choose auto, walkthrough or planner")
    base = env.unwrapped
    cache: dict[str, Any] = {"game": None, "walk": [], "plan": []}

    def act(obs: str, info: dict[str, Any]) -> str:
        if cache["game"] != base._loaded:
            cache.update(game=base._loaded, walk=base.walkthrough, plan=[])
        done = [c for c in base.history if not c.startswith(_LOOKING)]
        walk = cache["walk"]
        if mode != "planner" and done == walk[: len(done)] and len(done) < len(walk):
            return str(walk[len(done)])
        if mode == "walkthrough":
            raise EnvError("the game left its walkthrough; use mode='auto' or 'planner' to replan")
        # reuse the last plan while the executed commands follow it
        prev = cache["plan"]
        if prev and done[: len(prev[0])] == prev[0] and len(done) - len(prev[0]) < len(prev[1]) and \
                done[len(prev[0]):] == prev[1][: len(done) - len(prev[0])]:
            return str(prev[1][len(done) - len(prev[0])])
        commands = plan(env, planner_timeout)
        if not commands:
            return "look"
        cache["plan"] = (list(done), commands)
        return str(commands[0])

    return act
