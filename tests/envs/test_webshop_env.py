"""abc/WebShop-v0 in text mode: the env contract, WebShop's pages and actions, the oracle, security and isolation."""

from __future__ import annotations

import argparse
import dataclasses
import re
import string
import threading
import tracemalloc
import urllib.parse
import urllib.request
from urllib.parse import quote

import pytest

pytest.importorskip("flask")
pytest.importorskip("bm25s")

import gymnasium as gym
from gymnasium.utils.env_checker import check_env

import agentbench_crbc.envs  # noqa: F401
from agentbench_crbc.envs.webshop import oracle_policy, random_policy
from agentbench_crbc.envs.webshop.app import Shop, serve
from agentbench_crbc.envs.webshop.catalogue import Catalogue, generate_products, product_prices
from agentbench_crbc.envs.webshop.goals import build_goals
from agentbench_crbc.envs.webshop.text import parse_page
from agentbench_crbc.errors import ConfigError


def play(env, policy, seed=None, options=None):
    obs, info = env.reset(seed=seed, options=options)
    trace = [(None, obs, info)]
    for _ in range(15):
        action = policy(obs, info)
        obs, _, terminated, truncated, info = env.step(action)
        trace.append((action, obs, info))
        if terminated or truncated:
            break
    return trace


@pytest.fixture(scope="module")
def env():
    e = gym.make("abc/WebShop-v0")
    yield e
    e.close()


@pytest.mark.parametrize("anchor", ["page", "state"])
def test_check_env(anchor):
    e = gym.make("abc/WebShop-v0", anchor=anchor)
    assert e.spec.max_episode_steps == 15
    check_env(e.unwrapped)
    e.close()


def test_same_seed_same_task_and_the_search_page(env):
    obs, info = env.reset(seed=11)
    other = gym.make("abc/WebShop-v0")
    assert other.reset(seed=11)[0] == obs and other.reset(seed=12)[0] != obs
    goal = env.unwrapped.goal
    assert obs == f"WebShop [SEP] Instruction: [SEP] {goal['instruction_text']} [SEP] [button] Search [button_]"
    assert info["admissible_actions"] == ["search[<query>]"]
    assert info["subtask"] == goal["category"] and info["goal_index"] == 500 + 11
    assert (info["success"], info["action_valid"], info["score"]) == (False, True, 0.0)
    test_env = gym.make("abc/WebShop-v0", split="test")
    assert test_env.reset(seed=11)[1]["goal_index"] == 11


def test_pages_actions_and_instruction_everywhere(env):
    obs, info = env.reset(seed=3)
    u = env.unwrapped
    goal, instruction = u.goal, u.goal["instruction_text"]
    obs, reward, term, _, info = env.step(f"search[{goal['query']}]")
    assert info["action_valid"] and reward == 0 and not term
    head = re.match(re.escape(f"Instruction: {instruction} [SEP] Current Query: {goal['query']} [SEP] "
                              "[button] Back to Search [button_] [SEP] "
                              "[button] Next > [button_] [SEP] Page 1 (1-10) of ") + r"(\d+) total results \[SEP\] "
                    r"\[button\] B0", obs)
    assert head and 10 < int(head.group(1)) <= 50
    total = int(head.group(1))
    products = [a for a in info["admissible_actions"] if a.startswith("click[b0")]
    assert len(products) == 10 and info["admissible_actions"][:2] == ["click[back to search]", "click[next >]"]
    obs, *_, info = env.step("click[Next >]")  # case-insensitive, as WebShop lower-cases the argument
    assert f"Page 2 (11-20) of {total} total results" in obs and "click[< prev]" in info["admissible_actions"]
    page2 = obs
    obs, *_, info = env.step(products[0].replace("click[b0", "click[B0"))  # a page-1 product is not on page 2
    assert obs == page2 and not info["action_valid"]
    asin = next(a for a in info["admissible_actions"] if a.startswith("click[b0"))
    obs, *_, info = env.step(asin)
    product = u.catalogue.by_asin[asin[6:-1].upper()]
    assert f"[SEP] {product['Title']} [SEP] Price: {product['Price']} [SEP]" in obs
    assert obs.endswith("[button] Description [button_] [SEP] [button] Features [button_] [SEP] "
                        "[button] Reviews [button_] [SEP] [button] Buy Now [button_]")
    name, values = next(iter(product["options"].items()))
    assert f"{name} [SEP] [button] {values[0]} [button_]" in obs
    obs, *_, info = env.step(f"click[{values[-1]}]")
    assert f"[clicked button] {values[-1]} [clicked button_]" in obs and info["action_valid"]
    obs, *_, info = env.step("click[description]")
    assert product["Description"] in obs and "click[buy now]" not in info["admissible_actions"]
    obs, *_, info = env.step("click[< prev]")  # back to the item page, the option still selected
    assert f"[clicked button] {values[-1]} [clicked button_]" in obs
    obs, *_, info = env.step("click[< prev]")  # back to the results page it came from
    assert f"Page 2 (11-20) of {total}" in obs
    obs, *_, info = env.step("click[back to search]")
    assert obs.startswith("WebShop [SEP] Instruction: [SEP]")
    for _, page_obs, _ in play(env, oracle_policy(env), seed=3)[1:]:
        assert instruction in page_obs


def test_oracle_reaches_one_on_train_and_test_goals():
    for split in ("train", "test"):
        e = gym.make("abc/WebShop-v0", split=split)
        policy = oracle_policy(e)
        for seed in range(0, 500, 5):
            trace = play(e, policy, seed)
            action, obs, info = trace[-1]
            assert all(i["action_valid"] for _, _, i in trace)
            assert action == "click[buy now]" and info["success"] and info["score"] == 1.0
            assert obs.endswith("Your score (min 0.0, max 1.0) [SEP] 1.0 [SEP] Purchased " + e.unwrapped.goal["asin"])
            assert len(trace) - 1 <= 15


def test_random_policy_scores_near_zero(env):
    scores, wins = [], 0
    for seed in range(100):
        info = play(env, random_policy(env, seed=seed), seed)[-1][2]
        scores.append(info["score"])
        wins += info["success"]
    assert wins <= 2 and sum(scores) / len(scores) < 0.3


@pytest.mark.parametrize("action", ["", "buy it", "click[nothing here]", "click[search]", "search[]", "search[  ]",
                                    "jump[b0]", "click[", "\x00\x01"])
def test_bad_actions_change_nothing_and_are_flagged(env, action):
    obs0, info0 = env.reset(seed=1)
    obs, reward, term, trunc, info = env.step(action)
    assert (obs, reward, term, trunc) == (obs0, 0.0, False, False)
    assert not info["action_valid"] and info["anchor"] == info0["anchor"]


def test_search_without_a_search_box_is_invalid(env):
    env.reset(seed=1)
    obs, *_, info = env.step("search[lotion]")
    assert info["action_valid"]
    obs2, *_, info = env.step("search[shampoo]")
    assert obs2 == obs and not info["action_valid"]


def test_anchors_ignore_the_session():
    a = gym.make("abc/WebShop-v0", anchor="state")
    b = gym.make("abc/WebShop-v0", anchor="state")
    ta, tb = play(a, oracle_policy(a), 4), play(b, oracle_policy(b), 4)
    assert a.unwrapped.session_id != b.unwrapped.session_id
    assert [i["anchor"] for *_, i in ta] == [i["anchor"] for *_, i in tb]
    kinds = [i["anchor"][0] for *_, i in ta]
    assert kinds[:3] == ["index", "search_results", "item_page"] and kinds[-1] == "done"
    page = gym.make("abc/WebShop-v0")
    assert [i["anchor"] for *_, i in play(page, oracle_policy(page), 4)] == [o for _, o, _ in ta]


def _injected_shop():
    products = generate_products(30, seed=5)
    bad = "<script>alert(1)</script><b>bold</b> & \"quotes\""
    products[0] = {**products[0], "Title": bad + " lotion", "Description": "<img src=x onerror=alert(2)>",
                   "options": {"color": ['<i>red</i>" onclick="x', "blue"]}}
    prices = product_prices(products)
    goals = build_goals(products, prices)
    cat = Catalogue(tuple(products), {p["asin"]: p for p in products}, prices, tuple(goals), "injected")
    return Shop(cat), products[0], bad


def test_markup_in_products_and_queries_is_escaped():
    shop, product, bad = _injected_shop()
    sid = "inj_fixed_0"
    shop.open(f"/{sid}")
    html, _ = shop.open(f"/{sid}", {"search_query": "<img src=y onerror=alert(3)> lotion"})
    assert "<script>" not in html and "<img src=y" not in html and "&lt;script&gt;" in html
    assert f"[SEP] {bad} lotion [SEP]" in parse_page(html).text
    html, _ = shop.open(shop.item_url(sid, product["asin"], ["lotion"], 1, {}))
    assert 'onclick="x' not in html and "<i>red</i>" not in html
    page = parse_page(html)
    assert '[button] <i>red</i>" onclick="x [button_]' in page.text
    html, _ = shop.open(page.clickable('<i>red</i>" onclick="x').target)  # the option round-trips via its URL
    assert '[clicked button] <i>red</i>" onclick="x [clicked button_]' in parse_page(html).text
    html, _ = shop.open(shop.sub_url(sid, product["asin"], ["lotion"], 1, "Description", {}))
    assert "<img src=x" not in html and "[SEP] <img src=x onerror=alert(2)>" in parse_page(html).text
    from agentbench_crbc.envs.webshop.app import create_app

    client = create_app(shop).test_client()
    resp = client.post(f"/{sid}", data={"search_query": "<svg onload=alert(4)>"}, follow_redirects=True)
    assert resp.status_code == 200 and b"<svg" not in resp.data
    assert b"Current Query: &lt;svg onload=alert(4)&gt;" in resp.data
    resp = client.get("/item_page/s_fixed_0/%3Cscript%3E/x/1/%7B%7D")
    assert resp.status_code == 404 and b"<script>" not in resp.data
    assert client.get("/item_page/s_fixed_0/" + product["asin"] + "/x/1/notjson").status_code == 404
    assert client.get("/search_results/s_fixed_0/x/first").status_code == 404
    assert client.get("/bad%20session!").status_code == 404


def test_deep_options_are_404_and_long_queries_are_cut():
    shop, product, _ = _injected_shop()
    from agentbench_crbc.envs.webshop.app import MAX_QUERY_CHARS, create_app

    client = create_app(shop).test_client()
    deep = quote("[" * 1000 + "]" * 1000)
    assert client.get(f"/item_page/s_fixed_0/{product['asin']}/x/1/{deep}").status_code == 404
    assert client.get(f"/done/s_fixed_0/{product['asin']}/{deep}").status_code == 404
    resp = client.post("/s_fixed_0", data={"search_query": "lotion " + "a" * 1_000_000})
    assert resp.status_code in (302, 303) and len(resp.headers["Location"]) < 2 * MAX_QUERY_CHARS


@pytest.mark.parametrize("port", ["99999", "-1", "", "http"])
def test_play_refuses_a_bad_port(port):
    from agentbench_crbc.envs.webshop.play import start

    with pytest.raises(ConfigError, match=f"--set 'port={port}'"):
        start(argparse.Namespace(seed=0, ui="terminal", set=[f"port={port}"]))


def test_the_server_binds_loopback_only(env):
    with pytest.raises(ConfigError, match="loopback"):
        serve(env.unwrapped.shop, host="0.0.0.0")
    with serve(env.unwrapped.shop) as server:
        assert server.host == "127.0.0.1" and server.port > 0


def test_concurrent_sessions_are_isolated(env):
    shop = env.unwrapped.shop
    results: dict[int, object] = {}

    def run_env(seed):
        e = gym.make("abc/WebShop-v0")
        trace = play(e, oracle_policy(e), seed)
        results[seed] = (trace[-1][2]["score"], trace[0][2]["instruction"] == e.unwrapped.goal["instruction_text"],
                         all(e.unwrapped.goal["instruction_text"] in o for _, o, _ in trace))
        e.close()

    threads = [threading.Thread(target=run_env, args=(s,)) for s in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {s: (1.0, True, True) for s in range(24)}

    with serve(shop) as server:
        pages: dict[int, tuple[str, str]] = {}

        def http(i):
            sid = f"conc{i}_fixed_{i}"
            urllib.request.urlopen(f"{server.url}/{sid}").read()
            data = urllib.parse.urlencode({"search_query": shop.catalogue.goals[i]["query"]}).encode()
            html = urllib.request.urlopen(f"{server.url}/{sid}", data=data).read().decode()
            pages[i] = (parse_page(html).text, shop.catalogue.goals[i]["instruction_text"])

        threads = [threading.Thread(target=http, args=(i,)) for i in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(pages) == 32
    for text, instruction in pages.values():
        assert text.startswith(f"Instruction: {instruction} [SEP] Current Query:") and "total results" in text


def test_observations_are_printable_and_memory_per_env_is_small(env):
    env.reset(seed=0)  # the catalogue, index and shop exist before measuring
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    envs = [gym.make("abc/WebShop-v0") for _ in range(40)]
    for i, e in enumerate(envs):
        obs, _ = e.reset(seed=i)
        assert set(obs) <= set(string.printable)
    per_env = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(before, "filename")) / len(envs)
    tracemalloc.stop()
    assert per_env < 100_000, per_env  # bytes: the index and catalogue are shared, not copied
    for e in envs:
        e.close()


def test_real_webshop_data_plays_end_to_end(tmp_path):
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("_webshop_catalogue_tests",
                                                  Path(__file__).with_name("test_webshop_catalogue.py"))
    helpers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(helpers)
    items, attrs = helpers._write_real_files(tmp_path)
    e = gym.make("abc/WebShop-v0", split="all", items_path=str(items), attributes_path=str(attrs))
    check_env(e.unwrapped)
    trace = play(e, oracle_policy(e), 0)
    assert trace[-1][2]["success"] and all(set(o) <= set(string.printable) for _, o, _ in trace)
    assert "Cafe Creme Body Lotion" in trace[2][1]  # accents folded to ASCII
    with pytest.raises(ConfigError, match="split='test'"):
        gym.make("abc/WebShop-v0", items_path=str(items), attributes_path=str(attrs))


def test_play_serves_the_goal_page():
    from agentbench_crbc.envs.webshop.play import start

    server, url = start(argparse.Namespace(seed=2, ui="terminal", set=["split=test"]))
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("_fixed_2")
        html = urllib.request.urlopen(url).read().decode()
        from agentbench_crbc.envs.webshop.catalogue import get_catalogue

        assert get_catalogue().goals[2]["instruction_text"] in parse_page(html).text  # test goal 2 = seed 2
    finally:
        server.close()
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        start(argparse.Namespace(seed=0, ui="terminal", set=["colour=red"]))


@pytest.mark.parametrize("module", ["", ".anchors", ".app", ".browser", ".catalogue", ".env", ".goals", ".oracle",
                                    ".play", ".reward", ".search", ".text"])
def test_all_is_sorted_and_resolves(module):
    import importlib

    mod = importlib.import_module("agentbench_crbc.envs.webshop" + module)
    assert list(mod.__all__) == sorted(mod.__all__)
    assert all(getattr(mod, name) is not None for name in mod.__all__)


def test_registering_imports_no_engine():
    import subprocess
    import sys

    code = ("import sys, agentbench_crbc.envs, gymnasium; assert 'abc/WebShop-v0' in gymnasium.registry; "
            "print(sorted(m for m in ('flask', 'bm25s', 'selenium', 'rapidfuzz', 'jinja2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_mode_and_anchor_are_refused():
    with pytest.raises(ConfigError, match="mode="):
        gym.make("abc/WebShop-v0", mode="pixels")
    from agentbench_crbc.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="page, state"):
        gym.make("abc/WebShop-v0", anchor="nope")
    assert dataclasses.is_dataclass(parse_page(""))


def test_play_terminal_is_the_text_env_of_the_same_split_and_seed():
    from agentbench_crbc.envs.webshop.play import play_terminal

    env = gym.make("abc/WebShop-v0", split="test")
    actions = [a for a, _obs, _info in play(env, oracle_policy(env), seed=2)[1:]]
    typed = iter(["fly away", "?", *actions])
    said: list[str] = []
    info = play_terminal(argparse.Namespace(seed=2, ui="terminal", set=[]), input_fn=lambda _p: next(typed),
                         print_fn=said.append)
    assert info["success"] and info["goal_index"] == env.unwrapped.goal_index
    assert "split 'test' (the task of gym.make('abc/WebShop-v0', split='test').reset(seed=2))" in said[0]
    assert said[1] == "'fly away' is not an action on this page; ? lists them" and said[2] == "search[<query>]"
    assert said[-1] == "bought: score 1.00 (success)"
