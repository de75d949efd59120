"""``abc/ALFWorld-v0``: ALFWorld's text games on the real alfworld/TextWorld engine, behind the Gymnasium API."""

from __future__ import annotations

import functools
import os
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
from gymnasium import spaces

from agentbench_crbc.errors import EnvError
from agentbench_crbc.io import read_json

from .anchors import EngineView, get_extractor, item_states
from .layouts import PAPER_NAMES, SPLITS, TASK_TYPES, task_type_of

__all__ = ["ALFWorldEnv", "find_official_games"]

_OFFICIAL_SPLIT = {"train": "train", "valid_seen": "valid_seen", "valid_unseen": "valid_unseen"}


def find_official_games(root: str | os.PathLike[str], split: str, task_types: Sequence[str]) -> list[Path]:
    """Solvable ``game.tw-pddl`` files of ALFWorld's data under ``root`` (``$ALFWORLD_DATA``), filtered as
    ``AlfredTWEnv.collect_game_files`` does (no movable/sliced tasks, ``solvable`` true), sorted by path."""
    return list(_official_games(str(Path(root).expanduser().resolve()), split, tuple(task_types)))


@functools.lru_cache(maxsize=16)
def _official_games(root_text: str, split: str, task_types: tuple[str, ...]) -> tuple[Path, ...]:
    root = Path(root_text)
    if not root.is_dir():
        return ()
    base = next((p for p in (root / "json_2.1.1" / _OFFICIAL_SPLIT[split], root / split) if p.is_dir()), root)
    games = []
    for path in sorted(base.rglob("game.tw-pddl")):
        folder = str(path.parent)
        if "movable" in folder or "Sliced" in folder or not (path.parent / "traj_data.json").exists():
            continue
        traj = read_json(path.parent / "traj_data.json", error=EnvError)
        if traj.get("task_type") not in task_types:
            continue
        if read_json(path, error=EnvError).get("solvable"):
            games.append(path)
    return tuple(games)


def _default_root() -> Path:
    from .generate import default_cache_dir

    return default_cache_dir()


class ALFWorldEnv(gym.Env[str, str]):
    """ALFWorld text games (the real engine), with games generated offline from the wheel's room layouts.

    Observation: the engine's text (the intro with the task at reset, then the feedback of each command).
    Action: a command string; one the engine does not admit is answered as the engine answers it
    (``"Nothing happens."``) and flagged ``info["action_valid"] = False``. Reward 1.0 when the goal is reached
    (then ``terminated``). ``info``: ``admissible_actions`` (sorted, without ``help``), ``subtask`` (pick, look,
    clean, heat, cool, pick2), ``task_type``, ``task``, ``success``, ``action_valid``, ``anchor``, ``gamefile``.

    :param split: ``train``, ``valid_seen`` or ``valid_unseen`` (generated unseen rooms never occur in train).
    :param task_types: families to draw from (paper or ALFWorld names); default all six.
    :param anchor: anchor extractor name: ``paper`` (default), ``observation`` or ``state``.
    :param data_path: official ALFWorld data (default ``$ALFWORLD_DATA`` when set); otherwise games are generated.
    :param cache_dir: where generated games are kept (default: the user cache folder, see ``default_cache_dir``).
    :param game_files: explicit game files to draw from (overrides the other sources).
    :param fast_parse: run the engine with the exact speedups of ``fastparse`` (byte-identical observations,
        commands, rewards and anchors; faster steps) and the per-process PDDL translation cache of ``resetcache``
        (cheap repeated loads/resets of a game; ``$ABC_ALFWORLD_RESETCACHE=0`` turns off only that); ``None``
        (default) follows ``$ABC_ALFWORLD_FASTPARSE`` (on unless ``0``/``false``/``off``/``no``).
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi", "human"]}

    def __init__(self, split: str = "train", task_types: Sequence[str] | None = None, anchor: str = "paper",
                 data_path: str | None = None, cache_dir: str | None = None,
                 game_files: Sequence[str] | None = None, render_mode: str | None = None,
                 max_text: int = 20000, fast_parse: bool | None = None) -> None:
        if split not in SPLITS:
            raise EnvError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise EnvError(f"unknown render_mode {render_mode!r}; choose ansi or human")
        self.split = split
        self.task_types = tuple(task_type_of(t) for t in (task_types or TASK_TYPES))
        self.anchor_name = anchor
        self._extract = get_extractor(anchor)
        self.render_mode = render_mode
        self.cache_dir = cache_dir
        self._files: list[Path] | None = None
        if game_files:
            self._files = [Path(p) for p in game_files]
        elif data_path:
            self._files = find_official_games(data_path, split, self.task_types)
            if not self._files:
                raise EnvError(f"no solvable ALFWorld games of {split} under data_path={data_path!r}; point it "
                               "at ALFWorld's data (the folder holding json_2.1.1) or leave it out to generate games")
        elif os.environ.get("ALFWORLD_DATA"):
            # alfworld itself sets ALFWORLD_DATA to ~/.cache/alfworld on import: use it only when it holds games
            self._files = find_official_games(os.environ["ALFWORLD_DATA"], split, self.task_types) or None
        self.observation_space = spaces.Text(max_length=max_text, charset=string.printable)
        self.action_space = spaces.Text(max_length=200, charset=string.printable)
        from .engine import make_engine

        self._engine = make_engine(fast_parse=fast_parse)
        self._loaded: Path | None = None
        self._engine_holds: Path | None = None
        self._state: Any = None
        self._traj: dict[str, Any] = {}
        self._initial: dict[str, Any] = {}
        self._last_obs = ""
        self._task = ""
        self._walkthrough: list[str] = []
        self.history: list[str] = []  # commands the engine executed (admissible ones) since reset

    # -- game selection ---------------------------------------------------------------------------------------
    @property
    def num_games(self) -> int:
        """Size of the game pool ``reset(seed=s)`` draws from (game ``s % num_games``)."""
        if self._files is not None:
            return len(self._files)
        from .generate import POOL_SIZES

        return POOL_SIZES[self.split]

    def game_path(self, index: int, task_types: Sequence[str] | None = None) -> Path:
        """Where the game file of pool entry ``index`` is (a generated one may not exist yet: see :meth:`game_file`);
        games of different splits never share a path."""
        types = tuple(task_type_of(t) for t in task_types) if task_types else self.task_types
        if self._files is not None:
            return self._files[index % len(self._files)]
        from .generate import game_dir

        task_type, number = types[index % len(types)], index // len(types)
        return game_dir(self.cache_dir or _default_root(), self.split, task_type, number) / "game.tw-pddl"

    def game_file(self, index: int, task_types: Sequence[str] | None = None) -> Path:
        """The game file of pool entry ``index`` (generated and cached on first use)."""
        types = tuple(task_type_of(t) for t in task_types) if task_types else self.task_types
        path = self.game_path(index, types)
        if self._files is not None or path.exists():
            return path
        from .generate import ensure_game

        task_type, number = types[index % len(types)], index // len(types)
        path = ensure_game(self.split, task_type, number, root=self.cache_dir or _default_root(), engine=self._engine)
        self._engine_holds = path  # the engine check left this game loaded
        return path

    # -- gymnasium API ------------------------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start a game: ``seed`` picks pool entry ``seed % num_games``; ``options`` may give ``task_type`` (one
        name or a list), ``index`` (a pool entry) or ``game_file`` (a path)."""
        super().reset(seed=seed)
        options = options or {}
        if options.get("game_file"):
            path = Path(options["game_file"])
        else:
            if "index" in options:
                index = int(options["index"])
            elif seed is not None:
                index = int(seed) % self.num_games
            else:
                index = int(self.np_random.integers(self.num_games))
            types = options.get("task_type")
            path = self.game_file(index, [types] if isinstance(types, str) else types)
        if path != self._loaded:
            try:
                gamedata = read_json(path, error=EnvError, where=f"ALFWorld game {path}")
                if path != self._engine_holds:
                    self._engine.load(gamedata)  # a mapping: PddlEnv would leave the file open
            except (OSError, ValueError, KeyError) as exc:
                raise EnvError(f"cannot load ALFWorld game {path}: {exc}") from exc
            self._engine._gamefile = str(path)  # AlfredInfos reports it as infos['extra.gamefile']
            self._walkthrough = list(gamedata.get("walkthrough") or [])
            self._traj = read_json(path.parent / "traj_data.json", error=EnvError)
            self._loaded, self._engine_holds = path, None
        self._state = self._engine.reset()
        self.history = []
        view = self._view()
        self._initial = item_states(view)
        self._last_obs = self._state["feedback"]
        self._task = self._last_obs.split("Your task is to:", 1)[-1].strip() if "Your task is to:" in \
            self._last_obs else ""
        return self._last_obs, self._info(view, valid=True)

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send one command to the engine; never raises on a malformed command."""
        if self._state is None:
            raise EnvError("call reset() before step()")
        command = str(action).strip()
        valid = command in self._admissible()
        if self._state["won"]:  # already won: a step after termination changes nothing and pays nothing
            return self._last_obs, 0.0, True, False, self._info(self._view(), valid=valid)
        self._state, _, _ = self._engine.step(command)
        if valid:
            self.history.append(command)
        view = self._view()
        won = bool(self._state["won"])
        self._last_obs = self._state["feedback"]
        return self._last_obs, 1.0 if won else 0.0, won, False, self._info(view, valid=valid)

    def render(self) -> str | None:
        if self.render_mode == "human":
            print(self._last_obs)
            return None
        return self._last_obs

    def close(self) -> None:
        self._engine = None  # the engine holds no OS resources beyond memory

    # -- helpers ------------------------------------------------------------------------------------------------
    def _admissible(self) -> list[str]:
        return [c for c in self._state["admissible_commands"] if c != "help"]

    def _view(self) -> EngineView:
        return EngineView.from_state(self._state, self._admissible())

    @property
    def task_type(self) -> str:
        """ALFWorld task type of the loaded game."""
        return str(self._traj.get("task_type", ""))

    @property
    def walkthrough(self) -> list[str]:
        """The engine-checked walkthrough stored in the loaded game file (empty if it has none)."""
        return list(self._walkthrough)

    @property
    def engine(self) -> Any:
        """The wrapped TextWorld environment (for experts and benchmarks)."""
        return self._engine

    def _info(self, view: EngineView, valid: bool) -> dict[str, Any]:
        return {
            "admissible_actions": list(view.admissible),
            "subtask": PAPER_NAMES.get(self.task_type, self.task_type),
            "task_type": self.task_type,
            "task": self._task,
            "success": bool(self._state["won"]),
            "won": bool(self._state["won"]),
            "action_valid": valid,
            "anchor": self._extract(self._state["feedback"], view, self._initial),
            "gamefile": str(self._loaded),
        }
