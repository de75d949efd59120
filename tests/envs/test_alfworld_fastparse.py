"""ALFWorld's exact engine speedup (``envs/alfworld/fastparse.py``): identical play with it on and off, the caches."""

from __future__ import annotations

import copy
import random

import pytest

pytest.importorskip("alfworld")
pytest.importorskip("textworld")

import gymnasium as gym

import agentbench_crbc.envs  # noqa: F401
from agentbench_crbc.envs.alfworld import fastparse
from agentbench_crbc.envs.alfworld.engine import make_engine, uses_fast_parse
from agentbench_crbc.envs.alfworld.generate import ensure_game
from agentbench_crbc.envs.alfworld.layouts import TASK_TYPES

# Commands the engine does not admit ("help" is answered but flagged invalid): the "Nothing happens." path.
_JUNK = ("jump", "help", "go to the moon", "")


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("alfworld-fastparse-cache"))


@pytest.fixture(scope="module")
def available() -> bool:
    assert fastparse.install(), fastparse.unavailable_reason()  # textworld 1.7.0 is what the extra installs
    return True


def _snapshot(env, obs: str, reward: float, terminated: bool, truncated: bool, info: dict) -> tuple:
    """Everything a step returns, plus the engine's unsorted command list (the order ``step`` indexes into)."""
    state = env.unwrapped._state
    return (obs, reward, terminated, truncated, info, list(state["_valid_commands"]), state["feedback"],
            sorted(map(str, state["_facts"])), bool(state["won"]))


def _play(game: str, fast: bool, seed: int, random_steps: int) -> list[tuple]:
    """Random admissible (and some junk) commands from the start, then from a fresh reset the walkthrough."""
    env = gym.make("abc/ALFWorld-v0", game_files=[game], fast_parse=fast)
    assert uses_fast_parse(env.unwrapped.engine) is fast
    rng = random.Random(seed)
    trace = []
    obs, info = env.reset(seed=0)
    trace.append(_snapshot(env, obs, 0.0, False, False, info))
    for _ in range(random_steps):
        pool = info["admissible_actions"] if rng.random() < 0.85 else _JUNK
        obs, reward, terminated, truncated, info = env.step(rng.choice(pool))
        trace.append(_snapshot(env, obs, reward, terminated, truncated, info))
        if terminated:
            break
    obs, info = env.reset(seed=0)
    trace.append(_snapshot(env, obs, 0.0, False, False, info))
    for command in env.unwrapped.walkthrough:
        obs, reward, terminated, truncated, info = env.step(command)
        trace.append(_snapshot(env, obs, reward, terminated, truncated, info))
    assert terminated and reward == 1.0 and info["success"], "the walkthrough wins"
    env.close()
    return trace


@pytest.mark.slow
@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_play_is_identical_with_and_without_the_speedup(task_type: str, cache: str, available: bool) -> None:
    # checked (and its walkthrough written in engine names) by the plain engine, independent of the code under test
    game = str(ensure_game("train", task_type, 1, root=cache, engine=make_engine(fast_parse=False)))
    before = fastparse.cache_info()
    fast = _play(game, True, seed=7, random_steps=20)
    middle = fastparse.cache_info()
    slow = _play(game, False, seed=7, random_steps=20)
    assert fastparse.cache_info() == middle, "the engine with the speedup off never touches the caches"
    assert middle["symbols"]["hits"] > before["symbols"]["hits"] and \
        middle["queries"]["hits"] > before["queries"]["hits"], "the fast run went through the caches"
    assert len(fast) == len(slow)
    for i, (a, b) in enumerate(zip(fast, slow, strict=True)):
        assert a == b, f"step {i} differs"
    assert any(not s[4]["action_valid"] for s in fast), "junk commands were played"


def test_anchor_extractors_agree_on_a_short_game(cache: str, available: bool) -> None:
    game = str(ensure_game("train", "pick_and_place_simple", 1, root=cache))
    for anchor in ("paper", "state", "observation"):
        runs = []
        for fast in (True, False):
            env = gym.make("abc/ALFWorld-v0", game_files=[game], anchor=anchor, fast_parse=fast)
            _obs, info = env.reset(seed=0)
            runs.append([info["anchor"]] + [env.step(c)[4]["anchor"] for c in env.unwrapped.walkthrough])
            env.close()
        assert runs[0] == runs[1]


def test_environment_variable_and_kwarg_switch(monkeypatch: pytest.MonkeyPatch, available: bool) -> None:
    monkeypatch.setenv(fastparse.ENV_VAR, "0")
    assert not fastparse.enabled_by_default()
    assert not uses_fast_parse(make_engine())
    assert uses_fast_parse(make_engine(fast_parse=True))
    monkeypatch.setenv(fastparse.ENV_VAR, "1")
    assert fastparse.enabled_by_default() and uses_fast_parse(make_engine())
    assert not uses_fast_parse(make_engine(fast_parse=False))
    monkeypatch.delenv(fastparse.ENV_VAR)
    assert fastparse.enabled_by_default()


def test_unknown_textworld_falls_back_to_the_plain_engine(monkeypatch: pytest.MonkeyPatch, available: bool) -> None:
    import textworld
    from textworld.envs.pddl import textgen

    patched = textgen._parse_and_convert
    fastparse.uninstall()
    try:
        assert textgen._parse_and_convert is patched.__wrapped__
        monkeypatch.setattr(textworld, "__version__", "0.0.1")
        assert fastparse.install() is False
        assert "0.0.1" in (fastparse.unavailable_reason() or "")
        assert textgen._parse_and_convert is patched.__wrapped__  # nothing was replaced
        engine = make_engine(fast_parse=True)  # no error: the plain PddlEnv
        assert not uses_fast_parse(engine)
    finally:
        monkeypatch.undo()
        assert fastparse.install()


# -- the caches themselves -------------------------------------------------------------------------------------------
def test_lru_cache_counts_hits_and_stays_bounded() -> None:
    lru = fastparse.LRUCache(maxsize=3)
    assert lru.get("a") is fastparse.MISS
    for k in "abc":
        lru.put(k, k.upper())
    assert lru.get("a") == "A"  # "a" is now the most recent, "b" the oldest
    lru.put("d", "D")
    assert len(lru) == 3 and "b" not in lru and "a" in lru and "d" in lru
    for i in range(100):
        lru.put(i, i)
    assert len(lru) == 3 and lru.info() == {"hits": 1, "misses": 1, "size": 3, "maxsize": 3}
    lru.clear()
    assert lru.info() == {"hits": 0, "misses": 0, "size": 0, "maxsize": 3}
    with pytest.raises(ValueError):
        fastparse.LRUCache(0)


_TEXTS = ("go to [{r.name | receptacleatlocation(r:receptacle, lend:location)}]", "#GotoLocation.feedback#",
          "You are carrying: [{o.indefinite + ' ' + o.name | holds(a:agent, o:object)}].", "take {o} from {r}",
          "[{#overview(o)# | atlocation(a:agent, l:location) & objectatlocation(o:object, l:location)}]")


def test_symbol_cache_hits_hand_out_fresh_copies_equal_to_a_parse(available: bool) -> None:
    from textworld.envs.pddl import textgen

    original = textgen._parse_and_convert.__wrapped__
    fastparse.SYMBOLS.clear()
    for text in _TEXTS:
        assert textgen._parse_and_convert(text, rule_name="symbols") is not None  # flag off: not cached
    assert fastparse.SYMBOLS.info()["size"] == 0
    with fastparse.active():
        for text in _TEXTS:
            first = textgen._parse_and_convert(text, rule_name="symbols")
            second = textgen._parse_and_convert(text, rule_name="symbols")
            reference = original(text, rule_name="symbols")
            assert repr(first) == repr(second) == repr(reference)
            for a, b, r in zip(second, first, reference, strict=True):
                assert a is not b and type(a) is type(r) and vars(a).keys() == vars(r).keys()
                # the same shared default context a fresh parse carries, never a context set by an earlier derive
                assert a.context is r.context and a.context == {}
            for symbol in second:  # what derive does to the symbols it gets: must not leak into the next hit
                symbol.context = {"variables": {"x": 1}}
                if isinstance(symbol, textgen.ListSymbol):
                    symbol.symbol.context = {"mutated": True}
            third = textgen._parse_and_convert(text, rule_name="symbols")
            assert third is not second and repr(third) == repr(reference) and all(s.context == {} for s in third)
            for a, b, r in zip(third, second, reference, strict=True):
                assert a is not b
                if isinstance(a, textgen.ListSymbol):
                    assert a.symbol is not b.symbol and a.symbol.context is r.symbol.context
        # the rule name is part of the key: the same text under another rule is that rule's parse (one symbol)
        one = textgen._parse_and_convert(_TEXTS[1], rule_name="Symbol")
        assert isinstance(one, textgen.NonterminalSymbol) and repr(one) == repr(original(_TEXTS[1], rule_name="Symbol"))
    info = fastparse.SYMBOLS.info()
    assert info["size"] == len(_TEXTS) and info["hits"] == 2 * len(_TEXTS) and info["misses"] == len(_TEXTS) + 1


def test_symbol_cache_is_bounded_and_stays_correct(monkeypatch: pytest.MonkeyPatch, available: bool) -> None:
    from textworld.envs.pddl import textgen

    monkeypatch.setattr(fastparse.SYMBOLS, "maxsize", 4)
    fastparse.SYMBOLS.clear()
    texts = [f"You see {i} [{{o.name | inreceptacle(o:object, r:receptacle)}}]." for i in range(10)]
    with fastparse.active():
        for _ in range(2):
            for text in texts:
                got = textgen._parse_and_convert(text, rule_name="symbols")
                assert repr(got) == repr(textgen._parse_and_convert.__wrapped__(text, rule_name="symbols"))
                assert len(fastparse.SYMBOLS) <= 4
    assert fastparse.SYMBOLS.info()["hits"] == 0  # cycling 10 texts through 4 slots never hits
    with fastparse.active():
        textgen._parse_and_convert(texts[-1], rule_name="symbols")
    assert fastparse.SYMBOLS.info()["hits"] == 1
    fastparse.SYMBOLS.clear()


def test_query_cache_builds_a_new_equal_rule_each_time(available: bool) -> None:
    from textworld.envs.pddl import textgen
    from textworld.logic import Rule

    expr = "atlocation(a:agent, l:location) & receptacleatlocation(r:receptacle, l:location)"
    fastparse.QUERIES.clear()
    with fastparse.active():
        a = textgen.Rule.parse_conjunctive_query(expr)
        b = textgen.Rule.parse_conjunctive_query(expr)
    assert type(a) is Rule and type(b) is Rule and a is not b
    assert a == b == Rule.parse_conjunctive_query(expr) and b.placeholders == a.placeholders
    assert b.preconditions == Rule.parse_conjunctive_query(expr).preconditions
    assert fastparse.QUERIES.info() == {"hits": 1, "misses": 1, "size": 1, "maxsize": fastparse.CACHE_SIZE}
    fastparse.QUERIES.clear()


def test_context_copy_is_the_deep_copy(available: bool) -> None:
    from textworld.envs.pddl import textgen
    from textworld.generator.game import EntityInfo
    from textworld.logic import Placeholder, Variable

    lamp = EntityInfo("desklamp_1", "object")
    lamp.name, lamp.synonyms = "desklamp 1", ["lamp"]
    table = EntityInfo("sidetable_1", "receptacle")
    table.name = "sidetable 1"
    context = {"state": object(), "facts": [1, 2], "entity_infos": {"x": lamp},
               "variables": {"o": lamp, "r": table, "o2": lamp},
               "mapping": {Placeholder("o", "object"): Variable("desklamp_1", "object"),
                           Placeholder("r", "receptacle"): Variable("sidetable_1", "receptacle")}}
    with fastparse.active():
        fast = textgen.copy_context(context)
    reference = textgen.copy_context.__wrapped__(context)
    assert list(fast) == list(reference) == ["state", "facts", "variables", "mapping", "entity_infos"]
    for key in ("state", "facts", "entity_infos"):
        assert fast[key] is context[key] is reference[key]
    for key in ("variables", "mapping"):
        assert fast[key] == reference[key] == context[key] and list(fast[key]) == list(reference[key])
        assert fast[key] is not context[key]
    assert fast["variables"]["o"] is not lamp and fast["variables"]["o"] is fast["variables"]["o2"]  # memo kept
    assert fast["variables"]["o"].synonyms == ["lamp"] and fast["variables"]["o"].synonyms is not lamp.synonyms
    assert all(k is not c for k, c in zip(fast["mapping"], context["mapping"], strict=True))
    assert copy.deepcopy(context["mapping"]) == fast["mapping"]
