"""The built-in environment families: specs registered through entry points, one resolver, the family test kit."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import tomllib
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import agentbench_crbc.envs  # noqa: F401 - registers every family's ids
from agentbench_crbc.family import is_heldout, resolve_env
from agentbench_crbc.host import BUILTIN_DISTRIBUTION, get_host
from agentbench_crbc.testing import check_env_family

ROOT = Path(__file__).resolve().parents[2]
BUILTIN = ("alfworld", "sokoban", "webshop")


def test_builtin_families_register_like_a_third_party() -> None:
    host = get_host()
    entries = {e.name: e for e in host.families.entries()}
    assert set(BUILTIN) <= set(entries)
    assert {entries[n].distribution for n in BUILTIN} == {"agentbench-crbc"}
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["agentbench_crbc"]
    assert {n: eps[n] for n in BUILTIN} == {n: f"agentbench_crbc.envs.{n}.family" for n in BUILTIN}
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="agentbench_crbc")
                 if ep.dist is not None and ep.dist.name.replace("_", "-").lower() == BUILTIN_DISTRIBUTION}
    assert installed == eps  # pyproject's entry points are the one list of built-ins (reinstall after editing it)
    for spec in (s for f in host.families for s in f.ids):
        assert gym.spec(spec.id).max_episode_steps == spec.max_episode_steps  # one place for the step limit


@pytest.mark.parametrize(("typed", "family", "env_id"), [
    ("sokoban", "sokoban", "abc/SokobanText-v0"),  # the text env the trainer uses
    ("abc/Sokoban-v0", "sokoban", "abc/Sokoban-v0"),  # the pixel env, by its id
    ("abc/SokobanText-7x7-2b-v0", "sokoban", "abc/SokobanText-7x7-2b-v0"),
    ("alfworld", "alfworld", "abc/ALFWorld-v0"),
    ("webshop", "webshop", "abc/WebShop-v0"),
    ("abc/WebShop-v0", "webshop", "abc/WebShop-v0"),
])
def test_one_resolver(typed: str, family: str, env_id: str) -> None:
    got = resolve_env(typed)
    assert (got.family.name, got.env_id) == (family, env_id)


def test_unknown_name_lists_the_families() -> None:
    from agentbench_crbc.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="families: alfworld, sokoban, webshop"):
        resolve_env("CartPole-v1")


def test_old_tables_are_derived_from_the_specs() -> None:
    from agentbench_crbc.envs.sokoban import ENV_IDS
    from agentbench_crbc.envs.webshop import ENV_IDS as SHOP_IDS

    assert ENV_IDS["abc/SokobanText-v0"] == (6, 1, 15, "text")
    assert ENV_IDS["abc/Sokoban-10x10-4b-v0"] == (10, 4, 120, "rgb")
    assert SHOP_IDS == {"abc/WebShop-v0": 15}


def test_family_fields_import() -> None:
    for fam in get_host().families:
        for attr in ("expert", "task_key", "imitation", "tabular", "play", "commands"):
            if getattr(fam, attr) is not None:
                assert fam.load(attr) is not None, (fam.name, attr)
        if fam.prompts:
            importlib.import_module(fam.prompts)


def test_sokoban_family_kit() -> None:
    check_env_family("sokoban", seeds=(0, 7), expert_seeds=(0, 1, 2, 3))


def test_webshop_family_kit() -> None:
    pytest.importorskip("flask")
    pytest.importorskip("bm25s")
    check_env_family("webshop", expert_seeds=(0, 1))


@pytest.mark.slow
def test_alfworld_family_kit(tmp_path: Path) -> None:
    pytest.importorskip("alfworld")
    pytest.importorskip("textworld")
    from agentbench_crbc.envs.alfworld.generate import ensure_game

    game = str(ensure_game("train", "pick_and_place_simple", 0, root=str(tmp_path)))
    check_env_family("alfworld", env_kwargs={"game_files": [game]}, seeds=(0,), expert_seeds=(0,))


def test_sokoban_task_key_is_the_canonical_level() -> None:
    from agentbench_crbc.envs.sokoban import canonical_key, task_key

    env = gym.make("abc/SokobanText-v0")
    env.reset(seed=4)
    assert task_key(env) == canonical_key(env.unwrapped.level)
    assert get_host().family("sokoban").load("task_key") is task_key


def test_sokoban_imitation_data_skips_held_out_levels_and_labels_optimal_actions() -> None:
    from agentbench_crbc.envs.sokoban.level import Level, canonical_key
    from agentbench_crbc.envs.sokoban.solver import optimal_actions

    imitation = get_host().family("sokoban").load("imitation")
    seen: list[str] = []

    def build_prompt(obs: str, info: dict) -> tuple[int, ...]:
        seen.append(obs)
        return tuple(ord(c) for c in obs)

    seeds = np.random.default_rng(0).integers(0, 1_000_000, size=64).tolist()
    sample, n = imitation("abc/SokobanText-v0", {}, build_prompt, seeds=seeds, pool=40, augment=True,
                          all_optimal=True)
    assert n >= 40
    env = gym.make("abc/SokobanText-v0")
    starts = {}
    for seed in seeds:
        env.reset(seed=seed)
        starts[canonical_key(env.unwrapped.level)] = seed
    held = {k for k in starts if is_heldout(k)}
    assert held  # the 64 seeds include held-out levels
    rng = np.random.default_rng(1)
    for _ in range(300):
        ids, action = sample(rng)
        level = Level.from_text("".join(chr(i) for i in ids))
        assert action in optimal_actions(level)
        assert canonical_key(level) not in held  # no held-out level (under any symmetry) is shown


def test_tiny_tokenizer_is_unchanged_by_moving_its_words_into_the_families() -> None:
    pytest.importorskip("tokenizers")
    import hashlib
    import json

    from agentbench_crbc.rollout.engines.models import tiny_tokenizer

    model = json.loads(tiny_tokenizer().backend_tokenizer.to_str())["model"]
    digest = hashlib.sha256(json.dumps([model["vocab"], model["merges"]], sort_keys=True).encode()).hexdigest()
    assert digest[:16] == "c3185a51a0b53603"  # the vocabulary and merges before the families owned the words


def test_no_family_name_or_env_id_in_core_code() -> None:
    """Outside docstrings, comments and help texts, no core module names a built-in family or an ``abc/`` id."""
    import ast

    names = re.compile(r"sokoban|alfworld|webshop|abc/", re.I)
    hits = []
    for path in sorted((ROOT / "agentbench_crbc").rglob("*.py")):
        rel = path.relative_to(ROOT / "agentbench_crbc").as_posix()
        tree = ast.parse(path.read_text())
        # docstrings (also attribute docstrings) are bare string statements
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        # help texts are documentation too: argparse's help/description and the config schema's metadata "help"
        texts: list[ast.AST] = [k.value for n in ast.walk(tree) if isinstance(n, ast.Call) for k in n.keywords
                                if k.arg in ("help", "description", "epilog")]
        texts += [v for n in ast.walk(tree) if isinstance(n, ast.Dict) for k, v in zip(n.keys, n.values, strict=True)
                  if isinstance(k, ast.Constant) and k.value == "help"]
        # trainer/schema.py: _f(default, help, ...) and _meta(help, ...) write a field's help into its metadata
        texts += [n.args[{"_f": 1, "_meta": 0}[n.func.id]] for n in ast.walk(tree) if isinstance(n, ast.Call)
                  and isinstance(n.func, ast.Name) and n.func.id in ("_f", "_meta")
                  and len(n.args) > {"_f": 1, "_meta": 0}[n.func.id]]
        docs |= {id(c) for t in texts for c in ast.walk(t) if isinstance(c, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                    and names.search(node.value):
                hits.append(f"{rel}:{node.lineno}: {node.value[:60]!r}")
    assert not hits, "\n".join(hits)


def test_leaderboard_names_labels_and_order_come_from_the_specs() -> None:
    from agentbench_crbc.leaderboard.aggregate import env_order, subtask_order
    from agentbench_crbc.leaderboard.records import env_name
    from agentbench_crbc.leaderboard.report import env_label

    assert env_name("abc/SokobanText-v0") == "sokoban"  # the family's name, never "sokobantext"
    assert env_name("abc/SokobanText-7x7-2b-v0") == "sokoban" and env_name("abc/WebShop-v0") == "webshop"
    assert [env_label(n) for n in ("alfworld", "webshop", "sokoban", "other")] == \
        ["ALFWorld", "WebShop", "Sokoban", "other"]
    assert env_order()[:3] == ("alfworld", "webshop", "sokoban")  # the paper's board order
    assert subtask_order()[:6] == ("pick", "clean", "cool", "look", "heat", "pick2")


def test_play_modes_and_plugins_rows_come_from_the_specs(capsys: pytest.CaptureFixture[str]) -> None:
    from agentbench_crbc.cli import main
    from agentbench_crbc.cli.plugins import rows

    assert main(["play", "alfworld", "--ui", "window"]) == 2
    assert "ALFWorld plays in terminal" in capsys.readouterr().err
    fams = {r["name"]: r for r in rows() if r["kind"] == "family"}
    assert set(BUILTIN) <= set(fams) and fams["sokoban"]["distribution"] == "agentbench-crbc"


def test_extras_come_from_the_specs() -> None:
    from agentbench_crbc.extras import install_hint

    host = get_host()
    assert tuple(host.family("alfworld").requires) == ("alfworld", "textworld") and not host.family("sokoban").requires
    assert "pip install 'agentbench-crbc[alfworld]'" in install_hint("textworld")
    assert "pip install 'agentbench-crbc[webshop]'" in install_hint("bm25s")
    assert "pip install 'agentbench-crbc[sokoban]'" in install_hint("pygame")


def test_play_list_names_each_playable_family_and_its_modes(capsys: pytest.CaptureFixture[str]) -> None:
    from agentbench_crbc.cli import main

    assert main(["play", "--list"]) == 0
    rows = dict(line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines())
    assert rows["sokoban"] == "window terminal" and rows["alfworld"] == "terminal"
    assert rows["webshop"] == "browser terminal"
    assert main(["play", "nosuchgame"]) == 2
    assert "unknown env family 'nosuchgame'; playable: alfworld, sokoban, webshop" in capsys.readouterr().err


def test_webshop_without_its_extra_is_one_line_naming_it(tmp_path) -> None:
    """``gym.make("abc/WebShop-v0")`` without rapidfuzz: the package's one-line error naming the extra."""
    import subprocess
    import sys

    (tmp_path / "rapidfuzz").mkdir()
    (tmp_path / "rapidfuzz" / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'rapidfuzz'\", "
                                                       "name='rapidfuzz')\n")
    code = ("import gymnasium as gym, agentbench_crbc.envs\n"
            "from agentbench_crbc.errors import EnvError\n"
            "try:\n    gym.make('abc/WebShop-v0')\nexcept EnvError as e:\n    print('EnvError:', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert "EnvError: WebShop needs rapidfuzz" in r.stdout and "agentbench-crbc[webshop]" in r.stdout, r.stderr[-2000:]
