"""Offline ALFWorld game generation from the room layouts in the alfworld wheel, for all six task families.

A game folder holds what ALFWorld's own data holds: ``initial_state.pddl``, ``traj_data.json`` (task type and
``pddl_params``) and ``game.tw-pddl`` (domain, grammar with the task text, problem, ``solvable``, ``walkthrough``).
Each game is built from a seeded placement of the room's objects, and the generator writes the walkthrough its own
placement implies; the game is kept only when the real engine (TextWorld's PDDL env behind ALFWorld's wrappers)
admits every walkthrough command and reports the goal won at its end.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentbench_crbc.errors import EnvError
from agentbench_crbc.io import json_text, read_text

from .layouts import PAPER_NAMES, SPLITS, TASK_TYPES, load_layout, scenes_for

__all__ = [
    "GENERATOR_VERSION",
    "POOL_SIZES",
    "Game",
    "build_game",
    "default_cache_dir",
    "ensure_game",
    "game_dir",
    "generate_games",
    "verify_walkthrough",
    "write_game",
]

#: Bump when generated games change, so caches of an older generator are not reused.
GENERATOR_VERSION = 1
#: Games per split, as ALFWorld's text data (3553 train, 140 seen and 134 unseen validation games).
POOL_SIZES = {"train": 3553, "valid_seen": 140, "valid_unseen": 134}

_LAMP_HOSTS = ("SideTable", "Desk", "Dresser", "Shelf", "DiningTable", "CoffeeTable", "TVStand")
_APPLIANCE = {"pick_clean_then_place_in_recep": "SinkBasin", "pick_heat_then_place_in_recep": "Microwave",
              "pick_cool_then_place_in_recep": "Fridge"}
_ACTION_VERB = {"SinkBasin": "clean", "Microwave": "heat", "Fridge": "cool"}
_PROPERTY = {"pick_clean_then_place_in_recep": "Cleanable", "pick_heat_then_place_in_recep": "Heatable",
             "pick_cool_then_place_in_recep": "Coolable"}


def _constants() -> Any:
    try:
        import alfworld.gen.constants as constants
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise EnvError("ALFWorld needs the alfworld package: pip install 'agentbench-crbc[alfworld]'") from exc
    return constants


def _mangle(text: str) -> str:
    """ALFRED's id escaping for PDDL names (``PlannedGameState.fix_pddl_str_chars``)."""
    for a, b in (("-", "_minus_"), ("|", "_bar_"), ("+", "_plus_"), (".", "_dot_"), (",", "_comma_")):
        text = text.replace(a, b)
    return text


def _coord(v: float) -> str:
    return f"{v:+06.2f}"


@dataclass(frozen=True, slots=True)
class Game:
    """One generated game: its PDDL problem, ALFRED-style trajectory data and walkthrough in entity ids.

    ``walkthrough`` holds ``(template, ids)`` pairs, e.g. ``("take {} from {}", (obj_id, recep_id))``; the
    engine's names (``apple 1``) are only known once the engine numbers the entities, see ``verify_walkthrough``.
    """

    name: str
    task_type: str
    scene: int
    pddl_problem: str
    traj_data: dict[str, Any]
    task_desc: str
    walkthrough: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())


@dataclass
class _Scene:
    receptacles: dict[str, str] = field(default_factory=dict)  # id -> type
    recep_loc: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    objects: dict[str, str] = field(default_factory=dict)  # id -> type
    inside: dict[str, str] = field(default_factory=dict)  # object id -> receptacle id
    start: tuple[int, int, int, int] = (0, 0, 0, 30)


def _build_scene(scene: int, rng: random.Random, task: dict[str, Any]) -> _Scene | None:
    """Place the room's objects; the task's constraints (counts, forbidden receptacles) are honoured."""
    c = _constants()
    layout = load_layout(scene)
    static = set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES)
    out = _Scene()
    used_ids: set[str] = set()
    for key, (x, z, rot, hor) in layout.receptacles:
        rtype = key.split("|", 1)[0]
        if rtype in ("Sink", "Bathtub"):
            key, rtype = f"{key}|{rtype}Basin", f"{rtype}Basin"
        if rtype not in static:
            continue
        out.receptacles[key] = rtype
        out.recep_loc[key] = (round(x / 0.25), round(z / 0.25), (rot // 90) % 4, hor)
        used_ids.add(key)
    present = set(out.receptacles.values())
    for otype in layout.object_types:  # receptacles without a precomputed pose (stove burners, toasters...)
        rtype = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}.get(otype, otype)
        if rtype in static and rtype not in present:
            for _ in range(4 if rtype == "StoveBurner" else 1):
                x, z = rng.choice(layout.points)
                rid = f"{rtype}|{_coord(x)}|{_coord(rng.uniform(0.5, 1.0))}|{_coord(z)}"
                if rid in used_ids:
                    continue
                used_ids.add(rid)
                out.receptacles[rid] = rtype
                out.recep_loc[rid] = (round(x / 0.25), round(z / 0.25), rng.randrange(4), 30)
            present.add(rtype)
    if not out.receptacles:
        return None
    locs = set(out.recep_loc.values())
    taken = {(a, b) for a, b, _, _ in locs}
    free = [p for p in layout.points if (round(p[0] / 0.25), round(p[1] / 0.25)) not in taken]
    sx, sz = rng.choice(free or list(layout.points))
    out.start = (round(sx / 0.25), round(sz / 0.25), rng.randrange(4), 30)

    by_type: dict[str, list[str]] = {}
    for rid, rtype in sorted(out.receptacles.items()):
        by_type.setdefault(rtype, []).append(rid)
    placeable = set().union(*c.VAL_RECEPTACLE_OBJECTS.values())
    target, forbidden = task["object"], set(task["forbidden"])
    for otype in layout.object_types:
        if otype not in placeable or otype.endswith("Sliced") or otype in static:
            continue
        count = rng.randint(*task["count"]) if otype == target else rng.randint(1, 2)
        hosts = [rid for rtype, rids in by_type.items() if otype in c.VAL_RECEPTACLE_OBJECTS.get(rtype, ())
                 for rid in rids if not (otype == target and rtype in forbidden)]
        if not hosts:
            if otype == target:
                return None
            continue
        for _ in range(count):
            host = rng.choice(hosts)
            oid = f"{otype}|{_coord(rng.uniform(-3, 3))}|{_coord(rng.uniform(0, 2))}|{_coord(rng.uniform(-3, 3))}"
            if oid in used_ids:
                continue
            used_ids.add(oid)
            out.objects[oid] = otype
            out.inside[oid] = host
    if task.get("toggle"):
        hosts = [rid for rtype in _LAMP_HOSTS for rid in by_type.get(rtype, [])]
        if not hosts:
            return None
        x, y, z = rng.uniform(-3, 3), rng.uniform(0.5, 1.5), rng.uniform(-3, 3)
        lamp = f"{task['toggle']}|{_coord(x)}|{_coord(y)}|{_coord(z)}"
        out.objects[lamp] = task["toggle"]
        out.inside[lamp] = rng.choice(sorted(hosts))
    return out


def _choose_task(task_type: str, scene: int, rng: random.Random) -> dict[str, Any] | None:
    """Object and receptacle targets that the room can host, ALFRED's ``pddl_params`` style."""
    c = _constants()
    layout = load_layout(scene)
    types = set(layout.object_types) | {"SinkBasin" if "Sink" in layout.object_types else ""}
    static = set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES)
    placeable = set().union(*c.VAL_RECEPTACLE_OBJECTS.values()) - static
    objs = sorted(t for t in types if t in placeable and not t.endswith("Sliced"))
    receps = sorted(t for t in types if t in static)
    appliance = _APPLIANCE.get(task_type)
    if appliance and appliance not in receps:
        return None
    if task_type in _PROPERTY:
        objs = [o for o in objs if o in c.VAL_ACTION_OBJECTS[_PROPERTY[task_type]]]
    task: dict[str, Any] = {"toggle": "", "forbidden": (), "count": (1, 2)}
    if task_type == "look_at_obj_in_light":
        if "DeskLamp" not in types or not objs:
            return None
        task.update(object=rng.choice(objs), parent="", toggle="DeskLamp")
        return task
    pairs = [(o, r) for o in objs for r in receps
             if o in c.VAL_RECEPTACLE_OBJECTS.get(r, ()) and r != appliance and r not in ("SinkBasin", "BathtubBasin")
             and sum(o in c.VAL_RECEPTACLE_OBJECTS.get(h, ()) for h in receps if h != r) > 0]
    if not pairs:
        return None
    obj, recep = rng.choice(pairs)
    forbidden = {recep} | ({appliance} if appliance else set())
    task.update(object=obj, parent=recep, forbidden=tuple(sorted(forbidden)),
                count=(2, 3) if task_type == "pick_two_obj_and_place" else (1, 2))
    return task


def _walkthrough(task_type: str, scene: _Scene, task: dict[str, Any], rng: random.Random
                 ) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The command sequence (in entity ids) that solves the game, read off the placement."""
    c = _constants()
    openable = set(c.OPENABLE_CLASS_LIST)
    steps: list[tuple[str, tuple[str, ...]]] = []
    state: dict[str, Any] = {"at": None, "opened": set()}

    def goto(rid: str) -> None:
        if state["at"] != rid:
            steps.append(("go to {}", (rid,)))
            state["at"] = rid

    def reach(rid: str) -> None:
        goto(rid)
        if scene.receptacles[rid] in openable and rid not in state["opened"]:
            steps.append(("open {}", (rid,)))
            state["opened"].add(rid)

    def take(oid: str) -> None:
        host = scene.inside[oid]
        reach(host)
        steps.append(("take {} from {}", (oid, host)))

    targets = sorted(o for o, t in scene.objects.items() if t == task["object"])
    rng.shuffle(targets)
    n = 2 if task_type == "pick_two_obj_and_place" else 1
    parents = sorted(r for r, t in scene.receptacles.items() if t == task["parent"])
    parent = rng.choice(parents) if parents else ""
    for oid in targets[:n]:
        take(oid)
        if task_type in _APPLIANCE:
            app = rng.choice(sorted(r for r, t in scene.receptacles.items() if t == _APPLIANCE[task_type]))
            goto(app)
            steps.append((f"{_ACTION_VERB[_APPLIANCE[task_type]]} {{}} with {{}}", (oid, app)))
        if task_type == "look_at_obj_in_light":
            lamp = next(o for o, t in scene.objects.items() if t == task["toggle"])
            goto(scene.inside[lamp])
            steps.append(("use {}", (lamp,)))
        else:
            reach(parent)
            steps.append(("move {} to {}", (oid, parent)))
    return tuple(steps)


def _problem(name: str, task_type: str, scene: _Scene, task: dict[str, Any]) -> str:
    c = _constants()
    import alfworld.gen.goal_library as glib

    static = set(c.RECEPTACLES) - set(c.MOVABLE_RECEPTACLES)
    otypes = sorted((set(c.OBJECTS) | set(c.MOVABLE_RECEPTACLES)) - static)
    rtypes = sorted(static)
    acts = c.VAL_ACTION_OBJECTS
    locs = sorted(set(scene.recep_loc.values()) | {scene.start})

    def loc(p: tuple[int, int, int, int]) -> str:
        return "loc|{}|{}|{}|{}".format(*p)

    objs = sorted(scene.objects)
    receps = sorted(scene.receptacles)
    decl = ["agent1 - agent"]
    decl += [f"{t}Type - otype" for t in otypes] + [f"{t}Type - rtype" for t in rtypes]
    decl += [f"{o} - object" for o in objs] + [f"{r} - receptacle" for r in receps]
    decl += [f"{loc(p)} - location" for p in locs]
    init = [f"(atLocation agent1 {loc(scene.start)})"]
    present_o = sorted(set(scene.objects.values()))
    for r in receps:
        rtype = scene.receptacles[r]
        init.append(f"(receptacleType {r} {rtype}Type)")
        init.append(f"(receptacleAtLocation {r} {loc(scene.recep_loc[r])})")
        if rtype in c.OPENABLE_CLASS_SET:
            init.append(f"(openable {r})")
    for rtype in sorted(set(scene.receptacles.values())):
        init += [f"(canContain {rtype}Type {o}Type)" for o in present_o
                 if o in c.VAL_RECEPTACLE_OBJECTS.get(rtype, ())]
    for o in objs:
        otype = scene.objects[o]
        host = scene.inside[o]
        init.append(f"(objectType {o} {otype}Type)")
        init.append(f"(inReceptacle {o} {host})")
        init.append(f"(objectAtLocation {o} {loc(scene.recep_loc[host])})")
        if otype == task.get("toggle"):
            init.append(f"(toggleable {o})")
            continue
        init.append(f"(pickupable {o})")
        if otype in c.MOVABLE_RECEPTACLES_SET:
            init.append(f"(isReceptacleObject {o})")
        for prop, pred in (("Cleanable", "cleanable"), ("Heatable", "heatable"), ("Coolable", "coolable"),
                           ("Sliceable", "sliceable")):
            if otype in acts[prop]:
                init.append(f"({pred} {o})")
    goal = glib.gdict[task_type]["pddl"].format(obj=task["object"], recep=task["parent"], toggle=task["toggle"],
                                                mrecep="")
    goal = goal.replace("#", "-")
    nl = "\n        "
    text = (f"(define (problem plan_{name})\n    (:domain alfred)\n    (:objects\n        {nl.join(decl)}\n    )\n"
            f"    (:init\n        {nl.join(init)}\n    )\n{goal}")
    return _mangle(text.replace(" - ", " # ")).replace(" # ", " - ")


def build_game(split: str, task_type: str, index: int, *, max_tries: int = 200) -> Game:
    """Build game ``index`` of ``task_type`` in ``split`` (pure function of its arguments; no engine call).

    :param split: ``train``, ``valid_seen`` or ``valid_unseen`` (rooms disjoint from the other two).
    :param task_type: one of :data:`TASK_TYPES`.
    :param index: game number in the split; any non-negative int.
    """
    if task_type not in TASK_TYPES:
        raise EnvError(f"unknown task type {task_type!r}; choose from {', '.join(TASK_TYPES)}")
    scenes = scenes_for(split, task_type)
    rng = random.Random(f"abc-alfworld/{GENERATOR_VERSION}/{split}/{task_type}/{index}")
    for _ in range(max_tries):
        scene_no = rng.choice(scenes)
        task = _choose_task(task_type, scene_no, rng)
        if task is None:
            continue
        scene = _build_scene(scene_no, rng, task)
        if scene is None:
            continue
        n_target = sum(t == task["object"] for t in scene.objects.values())
        if n_target < (2 if task_type == "pick_two_obj_and_place" else 1):
            continue
        name = f"{task_type}-{task['object']}-None-{task['parent'] or 'None'}-{scene_no}-{split}-{index}"
        templates = __import__("alfworld.gen.goal_library", fromlist=["gdict"]).gdict[task_type]["templates"]
        desc = rng.choice(templates).format(obj=task["object"].lower(), recep=task["parent"].lower(),
                                            toggle=task["toggle"].lower(), mrecep="")
        traj = {
            "task_type": task_type,
            "task_id": name,
            "scene": {"floor_plan": f"FloorPlan{scene_no}", "scene_num": scene_no},
            "pddl_params": {"object_target": task["object"], "parent_target": task["parent"],
                            "toggle_target": task["toggle"], "mrecep_target": "", "object_sliced": False},
            "turk_annotations": {"anns": [{"task_desc": desc + "."}]},
            "split": split,
            "generator": f"agentbench_crbc.envs.alfworld v{GENERATOR_VERSION}",
            "subtask": PAPER_NAMES[task_type],
        }
        return Game(name=name, task_type=task_type, scene=scene_no,
                    pddl_problem=_problem(f"{split}_{index}", task_type, scene, task), traj_data=traj,
                    task_desc=desc, walkthrough=_walkthrough(task_type, scene, task, rng))
    raise EnvError(f"could not build a {task_type} game for {split} #{index} in {max_tries} tries")


def _game_logic(desc: str) -> dict[str, str]:
    import importlib.util

    spec = importlib.util.find_spec("alfworld")
    assert spec is not None and spec.submodule_search_locations
    data = Path(next(iter(spec.submodule_search_locations))) / "data"
    grammar = read_text(data / "alfred.twl2", error=EnvError).replace("UNKNOWN GOAL", desc)
    return {"pddl_domain": read_text(data / "alfred.pddl", error=EnvError), "grammar": grammar}


def verify_walkthrough(game: Game, gamedata: dict[str, Any], engine: Any = None) -> list[str] | None:
    """Play the walkthrough on the real engine; the commands (engine names) if each is admissible and it wins.

    :param engine: a ``make_engine()`` to reuse (it is left holding this game); default a fresh one.
    """
    from .engine import make_engine

    engine = engine if engine is not None else make_engine()
    engine.load(gamedata)
    state = engine.reset()
    if state["won"]:
        return None
    names = {key: info.name for key, info in state["_entity_infos"].items()}
    commands = []
    for template, ids in game.walkthrough:
        try:
            cmd = template.format(*(names[_mangle(i).lower()] for i in ids))
        except KeyError:
            return None
        if cmd not in state["admissible_commands"]:
            return None
        state, _, _ = engine.step(cmd)
        commands.append(cmd)
    return commands if state["won"] else None


def write_game(folder: str | os.PathLike[str], game: Game, *, verify: bool = True, engine: Any = None) -> Path:
    """Write ``initial_state.pddl``, ``traj_data.json`` and ``game.tw-pddl`` (atomically) into ``folder``."""
    from agentbench_crbc.io import atomic_write_text

    folder = Path(folder)
    gamedata: dict[str, Any] = dict(_game_logic(game.task_desc), pddl_problem=game.pddl_problem,
                                    solvable=None, walkthrough=None)
    if verify:
        walk = verify_walkthrough(game, gamedata, engine)
        if walk is None:
            raise EnvError(f"generated game {game.name} failed its engine check; please report this "
                           f"(generator v{GENERATOR_VERSION})")
        gamedata.update(solvable=True, walkthrough=walk)
    atomic_write_text(folder / "initial_state.pddl", game.pddl_problem)
    atomic_write_text(folder / "traj_data.json", json_text(game.traj_data, indent=1))
    atomic_write_text(folder / "game.tw-pddl", json_text(gamedata))  # last: its presence marks a complete game
    return folder / "game.tw-pddl"


def default_cache_dir() -> Path:
    """``$ABC_CACHE_DIR/alfworld``, else ``$XDG_CACHE_HOME/agentbench_crbc/alfworld``, else ``~/.cache/...``."""
    if os.environ.get("ABC_CACHE_DIR"):
        return Path(os.environ["ABC_CACHE_DIR"]) / "alfworld"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "agentbench_crbc" / "alfworld"


def game_dir(root: str | os.PathLike[str], split: str, task_type: str, index: int) -> Path:
    """Where game ``index`` lives under a generated-data root (ALFWorld's ``split/task-folder`` shape)."""
    return Path(root) / f"v{GENERATOR_VERSION}" / split / task_type / f"{index:05d}"


def ensure_game(split: str, task_type: str, index: int, root: str | os.PathLike[str] | None = None,
                engine: Any = None) -> Path:
    """Path of the ``game.tw-pddl`` for one game, generating and engine-checking it first when not cached
    (with ``engine`` when given, which then holds the new game)."""
    folder = game_dir(root if root is not None else default_cache_dir(), split, task_type, index)
    path = folder / "game.tw-pddl"
    if not path.exists():
        write_game(folder, build_game(split, task_type, index), engine=engine)
    return path


def generate_games(out: str | os.PathLike[str], n: int, seed: int = 0, split: str = "train",
                   task_types: Sequence[str] = TASK_TYPES, jobs: int = 1) -> Iterator[Path]:
    """Generate ``n`` engine-checked games under ``out``, cycling through ``task_types``; yields each game file.

    Game ``i`` is game number ``seed + i // len(task_types)`` of task type ``task_types[i % len(task_types)]``,
    so the same ``seed`` always gives the same games, and so does ``ensure_game`` for that number. ``jobs > 1``
    builds and engine-checks games in that many worker processes (each game is a pure function of its number, so
    the files are the same); paths are still yielded in game order.
    """
    if split not in SPLITS:
        raise EnvError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    if jobs < 1:
        raise EnvError(f"jobs must be at least 1, got {jobs}")
    games = [(split, task_types[i % len(task_types)], seed + i // len(task_types), out) for i in range(n)]
    if jobs == 1 or n == 1:
        for game in games:
            yield ensure_game(*game)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: workers start clean (no inherited engine state or threads), the same on every platform
    with ProcessPoolExecutor(max_workers=min(jobs, n), mp_context=multiprocessing.get_context("spawn")) as pool:
        yield from pool.map(ensure_game, *zip(*games, strict=True))
