"""``check_env_family``: the test kit of an environment family (spec, Gymnasium API, info contract, expert)."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from .errors import PluginError
from .family import (
    ADMISSIBLE_ACTIONS,
    ALLOWED_PLACEHOLDERS,
    MAX_ACTION_CHARS,
    EnvFamily,
    action_problem,
    load_ref,
    register_gym_ids,
)
from .io import read_text

__all__ = ["check_env_family"]

#: The fields every ``info`` of a step carries.
_STEP_INFO = ("success", "action_valid")


def _expect(ok: Any, message: str) -> None:
    if not ok:
        raise AssertionError(message)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _check_spec(fam: EnvFamily) -> None:
    where = f"env family {fam.name!r}"
    _expect(isinstance(fam, EnvFamily), f"{fam!r} is not an EnvFamily")
    _expect(fam.label, f"{where}: give it a display label")
    for spec in fam.ids:
        _expect(spec.max_episode_steps > 0, f"{where}: {spec.id} needs a positive max_episode_steps")
        _expect(spec.observation in ("text", "rgb"), f"{where}: {spec.id} observation must be 'text' or 'rgb'")
        _expect(":" in spec.entry_point, f"{where}: {spec.id} entry point must be 'package.module:Class'")
    for attr in ("expert", "task_key", "imitation", "play", "commands"):
        if getattr(fam, attr) is not None:
            _expect(callable(fam.load(attr)), f"{where}: {attr} {getattr(fam, attr)!r} is not callable")
    if fam.tabular is not None:
        twin = fam.load("tabular")
        _expect(isinstance(twin, Mapping) and {"quick", "full"} <= set(twin),
                f"{where}: the tabular twin must be a mapping with 'quick' and 'full' settings")
    _expect(len(set(fam.subtasks)) == len(fam.subtasks), f"{where}: a subtask is listed twice")
    _expect(len(set(fam.anchors)) == len(fam.anchors), f"{where}: an anchor is listed twice")
    _expect(bool(fam.extra) or not fam.requires, f"{where}: requires modules but names no extra to install them")
    _expect(fam.play is not None or fam.play_modes == ("terminal",) or not fam.play_modes,
            f"{where}: play_modes without a play function")


def _check_prompts(fam: EnvFamily, obs_text: str, admissible: Sequence[str]) -> None:
    if fam.prompts is None:
        return
    where = f"env family {fam.name!r} prompts {fam.prompts!r}"
    values: dict[str, Any] = {"task_description": "the task", "step_count": 1, "history_length": 1,
                              "action_history": "\n[Observation 1: 'o', Action 1: 'a']", "current_step": 2,
                              "current_observation": obs_text, ADMISSIBLE_ACTIONS: ", ".join(admissible)}
    _expect(set(values) == set(ALLOWED_PLACEHOLDERS), "check_env_family: the template fields changed")
    try:
        folder = fam.prompt_folder()
    except PluginError as exc:  # a package that does not import
        raise AssertionError(str(exc)) from None
    names = [f"{fam.name}.txt", f"{fam.name}_first.txt"]
    if any(spec.observation == "rgb" for spec in fam.ids):
        names += [n for n in (f"{fam.name}_vision.txt", f"{fam.name}_vision_first.txt")
                  if folder.joinpath(n).is_file()]
    for name in names:
        _expect(folder.joinpath(name).is_file(), f"{where}: no template {name}")
        text = read_text(folder.joinpath(name), error=AssertionError, where=f"{where}/{name}")
        try:
            rendered = text.format_map(values)
        except (KeyError, IndexError, ValueError) as exc:
            raise AssertionError(f"{where}/{name} does not render: {exc!r}; placeholders are "
                                 f"{', '.join(ALLOWED_PLACEHOLDERS)} and literal braces must be doubled") from None
        _expect("vision" in name or obs_text in rendered, f"{where}/{name} does not show the observation")


def _check_reset_info(fam: EnvFamily, env_id: str, info: Mapping[str, Any]) -> None:
    where = f"{env_id}: reset info"
    _expect("anchor" in info, f"{where} has no 'anchor'")
    _expect(isinstance(info["anchor"], Hashable), f"{where}: anchor {type(info['anchor']).__name__} is not hashable")
    hash(info["anchor"])
    if ADMISSIBLE_ACTIONS in info:
        adm = info[ADMISSIBLE_ACTIONS]
        _expect(isinstance(adm, (list, tuple)) and all(isinstance(a, str) for a in adm),
                f"{where}: admissible_actions must be a list of strings")
        _check_answerable(where, adm)
    if fam.subtasks:
        _expect(info.get("subtask") in fam.subtasks,
                f"{where}: subtask {info.get('subtask')!r} is not one of the family's {fam.subtasks}")


def _check_answerable(where: str, admissible: Sequence[str]) -> None:
    """Every admissible action is one the action parser accepts (else taking it is always penalised)."""
    for action in admissible:
        problem = action_problem(action)
        _expect(problem is None, f"{where}: admissible action {action[:60]!r} {problem}; the action parser never "
                f"accepts it (list only printable-ASCII actions of 1-{MAX_ACTION_CHARS} characters without tags)")


def _obs_text(obs: Any, info: Mapping[str, Any]) -> str:
    if isinstance(obs, str):
        return obs
    text = info.get("text")
    return text if isinstance(text, str) else ""


def _episode(env: Any, env_id: str, seed: int, make_policy: Any, limit: int) -> tuple[bool, int]:
    """Play one episode from ``reset(seed)`` with ``make_policy(env)`` (built after the reset, as the workers do)."""
    obs, info = env.reset(seed=seed)
    policy = make_policy(env)
    for step in range(limit):
        action = policy(obs, info)
        obs, _, terminated, truncated, info = env.step(action)
        for key in _STEP_INFO:
            _expect(key in info, f"{env_id}: step info has no {key!r}")
        _expect("anchor" in info and isinstance(info["anchor"], Hashable), f"{env_id}: step info has no hashable "
                "'anchor'")
        if isinstance(info.get(ADMISSIBLE_ACTIONS), (list, tuple)):
            _check_answerable(f"{env_id}: step info", info[ADMISSIBLE_ACTIONS])
        if terminated or truncated:
            return bool(info["success"]), step + 1
    return bool(info.get("success")), limit


def _wanderer(fam: EnvFamily) -> Any:
    """A seeded uniform choice among the admissible (else the family's default) actions, for families without an
    expert."""
    rng = np.random.default_rng(0)
    default = fam.prompt_style.default_actions

    def make(env: Any) -> Any:
        def act(obs: Any, info: Mapping[str, Any]) -> str:
            adm = list(info.get(ADMISSIBLE_ACTIONS) or default)
            _expect(bool(adm), f"{fam.name}: an observation lists no admissible actions and the family has no "
                    "expert and no PromptStyle.default_actions to play; give it one of them")
            return str(adm[int(rng.integers(len(adm)))])

        return act

    return make


def check_env_family(family: EnvFamily | str, *, env_ids: Sequence[str] | None = None,
                     env_kwargs: Mapping[str, Any] | None = None, seeds: Sequence[int] = (0, 1),
                     expert_seeds: Sequence[int] = (0, 1, 2), check_api: bool = True) -> None:
    """Assert what the package relies on in an environment family; raises ``AssertionError`` naming the break.

    The spec is well formed (its ``"module:attr"`` fields import, its prompt templates render with every
    placeholder), every id builds and passes Gymnasium's ``check_env``, ``reset(seed)`` is deterministic (within
    one env and across two), ``info`` carries a hashable ``anchor``, ``admissible_actions`` as strings (when
    given) and a ``subtask`` among :attr:`~EnvFamily.subtasks` (when the family declares them), every step's
    ``info`` carries ``success`` and ``action_valid``, the expert (if any) succeeds on ``expert_seeds`` within the
    step limit, and the task key is the same across resets of one seed.

    :param family: the spec, or the name of a registered family.
    :param env_ids: the ids to build (default: all of the family's).
    :param env_kwargs: keyword arguments for every ``gymnasium.make`` (ALFWorld: ``game_files``).
    :param check_api: run Gymnasium's ``check_env`` on each id (slow envs may skip it after their own test).
    """
    import gymnasium as gym

    if isinstance(family, str):
        from .host import get_host

        family = get_host().family(family)
    fam = family
    _check_spec(fam)
    register_gym_ids(fam)
    kw = dict(env_kwargs or {})
    expert = load_ref(fam.expert, what=f"env family {fam.name!r} expert")
    task_key = load_ref(fam.task_key, what=f"env family {fam.name!r} task_key")
    for env_id in env_ids or [spec.id for spec in fam.ids]:
        spec = fam.env_id(env_id)
        _expect(gym.spec(env_id).max_episode_steps == spec.max_episode_steps,
                f"{env_id}: registered with another step limit than the spec's {spec.max_episode_steps}")
        env, twin = gym.make(env_id, **kw), gym.make(env_id, **kw)
        try:
            if check_api:
                from gymnasium.utils.env_checker import check_env

                check_env(env.unwrapped, skip_render_check=True)
            for seed in seeds:
                obs, info = env.reset(seed=seed)
                _check_reset_info(fam, env_id, info)
                key = task_key(env) if task_key is not None else None
                _expect(key is None or isinstance(key, str), f"{env_id}: task_key must be a string or None")
                obs2, info2 = twin.reset(seed=seed)
                _expect(_same(obs, obs2) and info["anchor"] == info2["anchor"],
                        f"{env_id}: reset(seed={seed}) gives another observation or anchor in a second env")
                if task_key is not None:
                    _expect(task_key(twin) == key, f"{env_id}: task_key differs across resets of seed {seed}")
                obs3, info3 = env.reset(seed=seed)
                _expect(_same(obs, obs3) and info["anchor"] == info3["anchor"],
                        f"{env_id}: reset(seed={seed}) twice gives another observation or anchor")
                if task_key is not None:
                    _expect(task_key(env) == key, f"{env_id}: task_key differs across resets of seed {seed}")
                if spec.observation == "text" or _obs_text(obs, info):
                    _check_prompts(fam, _obs_text(obs, info), list(info.get(ADMISSIBLE_ACTIONS) or ()))
            if expert is not None:
                for seed in expert_seeds:
                    ok, _ = _episode(env, env_id, seed, expert, spec.max_episode_steps)
                    _expect(ok, f"{env_id}: the expert did not succeed on seed {seed} within "
                                f"{spec.max_episode_steps} steps")
            else:
                _episode(env, env_id, seeds[0] if seeds else 0, _wanderer(fam), spec.max_episode_steps)
        finally:
            env.close()
            twin.close()
