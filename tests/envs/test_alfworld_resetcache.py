"""ALFWorld's per-process PDDL translation and grammar caches (``envs/alfworld/resetcache.py``): identical play with
them on and off (several games, two env copies interleaved, repeated resets), and the caches (hits, copies, bound,
switch)."""

from __future__ import annotations

import json
import pickle
import random
import sys
from pathlib import Path

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

import gymnasium as gym

import agentbench_crbc.envs  # noqa: F401
from agentbench_crbc.envs.alfworld import fastparse, resetcache
from agentbench_crbc.envs.alfworld.engine import make_engine
from agentbench_crbc.envs.alfworld.expert import plan
from agentbench_crbc.envs.alfworld.generate import ensure_game

_JUNK = ("jump", "help", "")
# (family, number): small rooms whose planner call from the start takes well under a second
_GAMES = (("pick_and_place_simple", 0), ("pick_heat_then_place_in_recep", 0), ("look_at_obj_in_light", 0))


@pytest.fixture(scope="module")
def games(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    assert fastparse.install(), fastparse.unavailable_reason()
    assert resetcache.install(), resetcache.unavailable_reason()  # the alfworld extra installs the tested pair
    root = str(tmp_path_factory.mktemp("alfworld-resetcache"))
    engine = make_engine(fast_parse=False)  # checked by the plain engine, independent of the code under test
    return [str(ensure_game("train", t, n, root=root, engine=engine)) for t, n in _GAMES]


def _snap(env, out: tuple) -> tuple:
    """A step's (or reset's) return value plus the engine state the anchors and the expert read."""
    state = env.unwrapped._state
    pddl = env.unwrapped.engine
    while not hasattr(pddl, "_pddl_state"):
        pddl = pddl._wrapped
    return (out, list(state["_valid_commands"]), sorted(map(str, state["_facts"])), bool(state["won"]),
            pddl._pddl_state.sas, pddl._pddl_state.sas_replan)


def _session(game: str, seed: int) -> list[tuple]:
    """Two env copies of one game, interleaved as a training group's copies are, with repeated resets."""
    rng = random.Random(seed)
    one = gym.make("abc/ALFWorld-v0", game_files=[game])
    two = gym.make("abc/ALFWorld-v0", game_files=[game])
    trace: list[tuple] = []

    def walk(env, info: dict, n: int) -> dict:
        for _ in range(n):
            pool = info["admissible_actions"] if rng.random() < 0.85 else _JUNK
            out = env.step(rng.choice(pool))
            trace.append(_snap(env, out))
            info = out[4]
            if out[2]:
                break
        return info

    out = one.reset(seed=0)
    trace.append(_snap(one, out))
    info1 = out[1]
    info1 = walk(one, info1, 8)
    out = two.reset(seed=0)  # env 2 to the same game: a cache hit when on
    trace.append(_snap(two, out))
    info2 = out[1]
    trace.append(("plan", plan(two, timeout=None)))  # the expert's planner, from the start
    info2 = walk(two, info2, 8)
    info1 = walk(one, info1, 4)  # back to env 1, mid-episode
    trace.append(("plan", plan(one, timeout=None)))
    for env in (one, two):  # each resets again (no load: only PddlEnv.reset's translation)
        out = env.reset(seed=0)
        trace.append(_snap(env, out))
    for command in one.unwrapped.walkthrough:
        out = one.step(command)
        trace.append(_snap(one, out))
    assert out[2] and out[1] == 1.0 and out[4]["success"], "the walkthrough wins"
    walk(two, info2, 6)
    one.close()
    two.close()
    return trace


@pytest.mark.slow
def test_play_is_identical_with_and_without_the_translation_cache(games: list[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    resetcache.clear()
    on = [_session(g, seed=i) for i, g in enumerate(games)]
    info = resetcache.cache_info()
    assert info["translations"]["misses"] == 2 * len(games), "each game translated once per mode"
    assert info["translations"]["hits"] >= 6 * len(games), "env 2's load and every reset were hits"
    assert info["grammars"]["misses"] == info["grammars"]["hits"] == len(games), "env 2's load parsed nothing"
    monkeypatch.setenv(resetcache.ENV_VAR, "0")
    off = [_session(g, seed=i) for i, g in enumerate(games)]
    assert resetcache.cache_info() == info, "switched off, the caches are not touched"
    for g, a, b in zip(games, on, off, strict=True):
        assert len(a) == len(b), g
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert x == y, f"{g}: entry {i} differs"


# -- the cache itself ----------------------------------------------------------------------------------------------
def _texts(game: str) -> tuple[str, str]:
    data = json.loads(Path(game).read_text())
    return data["pddl_domain"], data["pddl_problem"]


def test_a_hit_is_a_fresh_copy_of_what_a_translation_returns(games: list[str]) -> None:
    import fast_downward

    domain, problem = _texts(games[0])
    plain = resetcache._installed["original"]
    resetcache.clear()
    with fastparse.active():
        first = fast_downward.pddl2sas(domain, problem)
        second = fast_downward.pddl2sas(domain, problem)
        third = fast_downward.pddl2sas(domain, problem)
    assert resetcache.TRANSLATIONS.info() == {"hits": 2, "misses": 1, "size": 1, "maxsize": resetcache.CACHE_SIZE}
    reference = plain(domain, problem)
    blob = pickle.dumps(reference[0], protocol=pickle.HIGHEST_PROTOCOL)
    for task, sas in (first, second, third):
        assert sas == reference[1] and pickle.dumps(task, protocol=pickle.HIGHEST_PROTOCOL) == blob
    assert len({id(first[0]), id(second[0]), id(third[0])}) == 3
    assert second[0].init is not first[0].init and second[0].actions[0] is not first[0].actions[0]
    # what a caller may do to its task must not reach the next caller
    second[0].init.clear()
    second[0].objects[0].name = "mutated"
    second[0].actions.pop()
    with fastparse.active():
        fourth = fast_downward.pddl2sas(domain, problem)
    assert pickle.dumps(fourth[0], protocol=pickle.HIGHEST_PROTOCOL) == blob


def test_a_grammar_hit_is_a_fresh_copy_of_the_parse(games: list[str]) -> None:
    from textworld.envs.pddl import logic as pddl_logic

    grammar = json.loads(Path(games[1]).read_text())["grammar"]
    plain = resetcache._installed["parse"]
    resetcache.clear()
    with fastparse.active():
        first = pddl_logic.GameLogic(domain="", grammar=grammar)
        second = pddl_logic._parse_and_convert(grammar, rule_name="pddlStart")
        third = pddl_logic._parse_and_convert(grammar, rule_name="pddlStart")
        reference = plain(grammar, rule_name="pddlStart")  # with the symbol cache on, as GameLogic parses
    assert resetcache.GRAMMARS.info() == {"hits": 2, "misses": 1, "size": 1, "maxsize": resetcache.CACHE_SIZE}
    blob = pickle.dumps(reference, protocol=pickle.HIGHEST_PROTOCOL)
    assert pickle.dumps(second, protocol=pickle.HIGHEST_PROTOCOL) == blob == \
        pickle.dumps(third, protocol=pickle.HIGHEST_PROTOCOL)
    assert second[1] is not third[1] and second[0]["gotolocation"] is not third[0]["gotolocation"]
    assert list(first.actions) == list(reference[0]) and list(first.grammar._rules) == list(reference[1]._rules)
    second[1]._rules.clear()  # a caller's mutation does not reach the next one
    second[0]["gotolocation"].template = "mutated"
    with fastparse.active():
        fourth = pddl_logic._parse_and_convert(grammar, rule_name="pddlStart")
    assert pickle.dumps(fourth, protocol=pickle.HIGHEST_PROTOCOL) == blob


def test_the_key_is_domain_problem_and_optimize(games: list[str]) -> None:
    import fast_downward

    plain = resetcache._installed["original"]
    resetcache.clear()
    with fastparse.active():
        for game in games[:2]:
            domain, problem = _texts(game)
            for optimize in (False, True):
                got = fast_downward.pddl2sas(domain, problem, optimize=optimize)
                hit = fast_downward.pddl2sas(domain, problem, optimize=optimize)
                assert got[1] == hit[1] == plain(domain, problem, optimize=optimize)[1]
    assert resetcache.TRANSLATIONS.info()["misses"] == 4 and resetcache.TRANSLATIONS.info()["hits"] == 4
    with fastparse.active():  # another domain text is another entry, even with the same problem
        fast_downward.pddl2sas(domain + "\n", problem)
    assert resetcache.TRANSLATIONS.info()["misses"] == 5


def test_the_cache_is_bounded(games: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import fast_downward

    monkeypatch.setattr(resetcache.TRANSLATIONS, "maxsize", 2)
    resetcache.clear()
    texts = [_texts(g) for g in games[:2]]
    with fastparse.active():
        for _ in range(2):  # 4 keys cycling through 2 slots never hit
            for domain, problem in texts:
                for optimize in (False, True):
                    fast_downward.pddl2sas(domain, problem, optimize=optimize)
                    assert len(resetcache.TRANSLATIONS) <= 2
        assert resetcache.TRANSLATIONS.info()["hits"] == 0
        fast_downward.pddl2sas(*texts[-1], optimize=True)  # the most recent one is still there
    assert resetcache.TRANSLATIONS.info() == {"hits": 1, "misses": 8, "size": 2, "maxsize": 2}
    resetcache.clear()


def test_second_reset_hits_and_the_switches(games: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    resetcache.clear()
    env = gym.make("abc/ALFWorld-v0", game_files=[games[0]])
    env.reset(seed=0)  # load (plain + optimized translation: misses) and reset (hits)
    assert resetcache.TRANSLATIONS.info()["misses"] == 2 and resetcache.TRANSLATIONS.info()["hits"] == 2
    env.reset(seed=0)
    assert resetcache.TRANSLATIONS.info()["misses"] == 2 and resetcache.TRANSLATIONS.info()["hits"] == 4
    monkeypatch.setenv(resetcache.ENV_VAR, "off")
    assert not resetcache.enabled()
    env.reset(seed=0)
    plain = gym.make("abc/ALFWorld-v0", game_files=[games[0]], fast_parse=False)
    monkeypatch.delenv(resetcache.ENV_VAR)
    assert resetcache.enabled()
    plain.reset(seed=0)  # fast_parse=False: the plain path, the cache is not used
    assert resetcache.TRANSLATIONS.info()["hits"] == 4
    import fast_downward

    fast_downward.pddl2sas(*_texts(games[0]))  # outside an engine: the plain function
    assert resetcache.TRANSLATIONS.info()["hits"] == 4
    with fastparse.active():
        fast_downward.pddl2sas(*_texts(games[0]), verbose=True)  # TW_PDDL_DEBUG output: bypassed
    assert resetcache.TRANSLATIONS.info()["hits"] == 4
    env.close()
    plain.close()


def test_a_hit_leaves_the_process_as_a_translation_does(games: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import fast_downward

    domain, problem = _texts(games[0])
    resetcache.clear()
    monkeypatch.setattr(sys, "argv", ["pytest"])
    with fastparse.active():
        fast_downward.pddl2sas(domain, problem, optimize=True)
        after_miss = (list(sys.argv), resetcache._options_state())
        fast_downward.pddl2sas(domain, problem, optimize=False)
        sys.argv = ["somebody", "else"]
        fast_downward.pddl2sas(domain, problem, optimize=True)  # a hit
    assert resetcache.TRANSLATIONS.info()["hits"] == 1
    from fast_downward.translate import options  # imported by the first translation

    assert (sys.argv, resetcache._options_state()) == after_miss and after_miss[1]
    assert sys.argv == ["translate.py", "domain", "task"] and options.filter_unimportant_vars is True


def test_untested_versions_fall_back_to_translating(games: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import fast_downward
    from textworld.envs.pddl import logic as pddl_logic

    cached, parse = fast_downward.pddl2sas, pddl_logic._parse_and_convert
    resetcache.uninstall()
    try:
        assert fast_downward.pddl2sas is cached.__wrapped__ and pddl_logic._parse_and_convert is parse.__wrapped__
        monkeypatch.setattr(resetcache, "TESTED_FAST_DOWNWARD", ("0.0.1",))
        assert resetcache.install() is False and "not a tested pair" in (resetcache.unavailable_reason() or "")
        assert fast_downward.pddl2sas is cached.__wrapped__  # nothing replaced
        resetcache.clear()
        env = gym.make("abc/ALFWorld-v0", game_files=[games[0]])  # no error; translates every time
        env.reset(seed=0)
        env.reset(seed=0)
        assert resetcache.TRANSLATIONS.info()["hits"] == resetcache.TRANSLATIONS.info()["misses"] == 0
        assert resetcache.GRAMMARS.info()["hits"] == resetcache.GRAMMARS.info()["misses"] == 0
        env.close()
    finally:
        monkeypatch.undo()
        assert resetcache.install()
