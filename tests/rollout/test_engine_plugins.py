"""Rollout engines as plugins: built-ins through entry points, one builder, a third-party engine in two files."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import sys
import tomllib
from pathlib import Path

import gymnasium
import pytest

from agentbench_crbc import hookimpl
from agentbench_crbc.cli import main
from agentbench_crbc.errors import ConfigError, MissingDependencyError, PluginError, UnknownNameError
from agentbench_crbc.host import Host, get_host, get_plugin_manager, reset_host
from agentbench_crbc.rollout.engines.baselines import ExpertPolicy, RandomPolicy, ScriptedPolicy
from agentbench_crbc.rollout.engines.factory import EngineRequest, build_engine, engine_names, parse_policy
from agentbench_crbc.rollout.episodes.base import EngineCapabilities
from agentbench_crbc.rollout.episodes.runner import RolloutRunner, TextPolicy

from .._fake_vllm import fake_vllm

ROOT = Path(__file__).resolve().parents[2]
BUILTIN_ENGINES = {"hf": "agentbench_crbc.rollout.engines.hf", "vllm": "agentbench_crbc.rollout.engines.vllm",
                   "openai": "agentbench_crbc.rollout.engines.openai",
                   "baselines": "agentbench_crbc.rollout.engines.baselines"}


def test_builtin_engines_register_through_entry_points_like_a_third_party():
    host = Host()
    assert set(engine_names(host)) >= {"hf", "vllm", "openai", "expert", "random", "scripted"}
    for e in host.engines.entries():
        if e.name in ("hf", "vllm", "openai", "expert", "random", "scripted"):
            assert e.distribution == "agentbench-crbc" and e.summary
    assert host.engine("hf").extra == "train" and host.engine("vllm").extra == "vllm"
    eps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["agentbench_crbc"]
    installed = {ep.name: ep.value for ep in importlib.metadata.entry_points(group="agentbench_crbc")}
    for name, module in BUILTIN_ENGINES.items():
        assert eps[name] == module and installed[name] == module  # pyproject's entry points: the one list


def test_without_installed_entry_points_the_host_says_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentbench_crbc.host as host_mod

    monkeypatch.setattr(host_mod.md, "entry_points", lambda **kw: [])
    host = Host(get_plugin_manager())
    assert host.credit.names() == [] and host.engines.names() == []
    (broken,) = host.broken
    assert broken.distribution == "agentbench-crbc" and "pip install -e ." in broken.error


def test_engine_modules_import_without_torch():
    code = ("import sys; from agentbench_crbc.host import Host; h = Host(); "
            "print(sorted(h.engines.names()), 'torch' in sys.modules, 'transformers' in sys.modules)")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split("]")[1].split() == ["False", "False"], out.stdout


def test_unknown_engine_lists_the_installed_ones():
    with pytest.raises(UnknownNameError, match=r"unknown rollout engine 'hff'; installed: expert, hf, openai"):
        build_engine("hff", EngineRequest())
    with pytest.raises(UnknownNameError, match=r"installed: .*scripted"):
        parse_policy("nope:x")


def test_parse_policy_splits_name_and_spec_at_the_first_colon():
    assert parse_policy("expert") == ("expert", "")
    assert parse_policy("hf:Qwen/Qwen2.5-0.5B") == ("hf", "Qwen/Qwen2.5-0.5B")
    assert parse_policy("openai:http://localhost:8000/v1") == ("openai", "http://localhost:8000/v1")


def test_baseline_engines_are_text_policies_that_share_no_weights():
    expert = build_engine("expert", EngineRequest())
    rnd = build_engine("random", EngineRequest(options={"seed": 3, "invalid_rate": 0.5}))
    scripted = build_engine("scripted", EngineRequest(spec="up, up,left"))
    assert isinstance(expert, ExpertPolicy) and isinstance(rnd, RandomPolicy) and isinstance(scripted, ScriptedPolicy)
    assert (rnd.seed, rnd.invalid_rate) == (3, 0.5)
    assert scripted.script == ["<action>up</action>", "<action>up</action>", "<action>left</action>"]
    assert all(e.capabilities.acts and not e.capabilities.colocated for e in (expert, rnd, scripted))
    assert [e.capabilities.needs_expert for e in (expert, rnd, scripted)] == [True, False, False]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")
def test_missing_extra_is_one_line_naming_it():
    with pytest.raises(MissingDependencyError, match=r"^vllm is not installed; pip install 'agentbench-crbc\[vllm\]'"):
        build_engine("vllm", EngineRequest(model_name="some/model"))


def test_each_engine_declares_its_capabilities_in_one_record(monkeypatch):
    torch = pytest.importorskip("torch")
    from agentbench_crbc.rollout.engines import models
    from agentbench_crbc.rollout.engines.hf import HFEngine
    from agentbench_crbc.rollout.engines.openai import OpenAIEngine
    from agentbench_crbc.rollout.engines.vllm import VLLMEngine

    fake_vllm(monkeypatch)
    vllm = VLLMEngine("some/model", dtype="bfloat16").capabilities
    assert (vllm.colocated, vllm.serving_dtype, vllm.acts, vllm.constrains) == (True, torch.bfloat16, False, False)
    tok = models.tiny_tokenizer()
    model = models.tiny_qwen2(tok)
    hf = HFEngine(model, tok).capabilities
    assert (hf.colocated, hf.constrains, hf.acts, hf.tokenizer, hf.model) == (False, True, False, tok, model)
    assert hf.vocab_size == model.get_input_embeddings().num_embeddings
    served = OpenAIEngine("http://localhost:1/v1", "m", tokenizer=tok).capabilities
    assert (served.colocated, served.tokenizer, served.model) == (False, tok, None)
    assert TextPolicy.capabilities == EngineCapabilities(acts=True)


def test_engines_that_need_input_say_what_is_missing():
    with pytest.raises(ConfigError, match="openai:http://HOST:PORT/v1"):
        build_engine("openai", EngineRequest(model_name="m"))
    with pytest.raises(ConfigError, match="needs --model NAME"):
        build_engine("openai", EngineRequest(spec="http://localhost:1/v1"))


def test_openai_engine_takes_its_server_url_from_the_spec():
    calls = []

    def post(url, body, headers, timeout):
        calls.append((url, body["model"], headers.get("Authorization")))
        return {"choices": [{"text": "<action>up</action>", "finish_reason": "stop",
                             "logprobs": {"tokens": ["token_id:7"], "token_logprobs": [-0.25]}}]}

    from agentbench_crbc.rollout.episodes.base import SamplingParams

    eng = build_engine("openai", EngineRequest(spec="http://localhost:9/v1/", model_name="served", tokenizer=object(),
                                               options={"post": post, "api_key": "k"}))
    (c,) = eng.generate([[1, 2, 3]], SamplingParams(max_tokens=4))
    assert c.token_ids == (7,) and c.logprobs == (-0.25,) and c.text == "<action>up</action>"
    assert calls == [("http://localhost:9/v1/completions", "served", "Bearer k")]


# -- a third-party engine: one module (here, this class) + one entry point (here, pm.register) ---------------------
class AlwaysRight(TextPolicy):
    """Answers ``right`` whatever it sees."""

    def __init__(self, action: str = "right") -> None:
        self.action = action

    def act(self, observations, infos, steps, sampling):
        return [f"<action>{self.action}</action>" for _ in observations]


def always_right(request: EngineRequest) -> AlwaysRight:
    return AlwaysRight(request.spec or "right")


class _EnginePlugin:
    @hookimpl
    def abc_register_rollout_engines(self, register):
        register.add("always", always_right, summary="always the same action")
        register.add("lazy", "tests.rollout.test_engine_plugins:always_right")  # imported on first use
        register.add("broken", lambda request: object())
        register.add("bare", lambda request: type("E", (), {"generate": lambda self, *a: []})())
        register.add("wrongtype", lambda request: type("E", (), {"capabilities": {"colocated": False},
                                                                  "generate": lambda self, *a: []})())
        register.add("noact", lambda request: type("E", (), {"capabilities": EngineCapabilities(acts=True),
                                                              "generate": lambda self, *a: []})())
        register.add("needs_extra", "tests.rollout.no_such_engine_module:build", extra="fancy")
        register.add("strict", always_right, options=("action",))


def test_engine_options_are_checked_against_the_keys_the_engine_registered(engine_host):
    # declared keys: anything else is refused before the factory runs, naming the engine's keys
    assert isinstance(build_engine("strict", EngineRequest(options={"action": "x"})), AlwaysRight)
    with pytest.raises(ConfigError, match=r"^rollout.engine_options: rollout engine 'strict' takes no option "
                       r"'threads'; its options: action$"):
        build_engine("strict", EngineRequest(options={"threads": 1}))
    # an engine that declared nothing gets every key
    assert isinstance(build_engine("always", EngineRequest(options={"anything": 1})), AlwaysRight)


@pytest.fixture
def engine_host():
    pm = get_plugin_manager()
    pm.register(_EnginePlugin(), name="engine-plugin")
    reset_host(Host(pm))
    try:
        yield get_host()
    finally:
        reset_host(None)


def test_a_third_party_engine_is_built_by_name(engine_host):
    assert engine_host.engine("always").distribution != "agentbench-crbc"
    eng = build_engine("always", EngineRequest(spec="left"))
    assert isinstance(eng, AlwaysRight) and eng.action == "left"
    assert isinstance(build_engine("lazy", EngineRequest()), AlwaysRight)


def test_a_factory_that_returns_no_engine_is_a_plugin_error(engine_host):
    # the record is the contract: none, one of another type, or one naming a method the engine lacks is refused in
    # one line that names the engine and the fix
    cases = {"broken": r"object declares no capabilities; give it capabilities = EngineCapabilities\(\.\.\.\)",
             "bare": r"E declares no capabilities; give it capabilities = EngineCapabilities\(\.\.\.\)",
             "wrongtype": r"E\.capabilities is dict, not an EngineCapabilities record; set capabilities = ",
             "noact": r"E\.capabilities declares acts=True but it has no act\(\) method; define act\(\), or "
                      r"declare acts=False if it generates"}
    for name, message in cases.items():
        with pytest.raises(PluginError, match=rf"^rollout engine '{name}' of \S+: {message}") as err:
            build_engine(name, EngineRequest())
        assert "\n" not in str(err.value)
    with pytest.raises(MissingDependencyError, match=r"pip install 'agentbench-crbc\[fancy\]'"):
        build_engine("needs_extra", EngineRequest())


def test_an_engine_built_by_hand_is_checked_where_it_is_run():
    class Bare:
        def generate(self, prompt_ids, sampling, images=None):
            raise AssertionError("never called")

    with pytest.raises(PluginError, match=r"^rollout engine Bare \(tests\.rollout\.test_engine_plugins\): Bare "
                                          r"declares no capabilities"):
        RolloutRunner("abc/SokobanText-v0", Bare(), object())


def test_a_record_with_a_flag_that_is_no_bool_is_refused():
    with pytest.raises(PluginError, match=r"^EngineCapabilities\.colocated is 'yes' \(str\); give True or False$"):
        EngineCapabilities(colocated="yes")  # type: ignore[arg-type]
    with pytest.raises(PluginError, match=r"^EngineCapabilities\.vocab_size is 0; give a positive int"):
        EngineCapabilities(vocab_size=0)


def test_abc_rollout_plays_a_third_party_engine(engine_host, tmp_path, capsys):
    if "test/Corridor-v0" not in gymnasium.registry:
        gymnasium.register("test/Corridor-v0", entry_point="tests.rollout.toyenv:Corridor")
    out = tmp_path / "out.jsonl"
    assert main(["rollout", "--env", "test/Corridor-v0", "--policy", "always:right", "--groups", "2",
                 "--group-size", "2", "--workers", "0", "-o", str(out)]) == 0
    assert "success 4/4" in capsys.readouterr().err
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 4 and all(s["action"] == "right" for r in recs for s in r["steps"])
    assert main(["rollout", "--env", "test/Corridor-v0", "--policy", "always:left", "--groups", "1",
                 "--group-size", "2", "--workers", "0", "--max-steps", "3", "-o", str(out)]) == 0
    assert "success 0/2" in capsys.readouterr().err


# -- the newcomer count, out of process: an engine is one module plus one entry point --------------------------------
ENGINE_MODULE = '''"""A third-party rollout engine: always the same action."""
from agentbench_crbc import hookimpl
from agentbench_crbc.rollout.episodes.runner import TextPolicy


class Steady(TextPolicy):
    def __init__(self, action):
        self.action = action

    def act(self, observations, infos, steps, sampling):
        return [f"<action>{self.action}</action>" for _ in observations]


@hookimpl
def abc_register_rollout_engines(register):
    register.add("steady", lambda request: Steady(request.spec or "right"), summary="always one action")
'''

ENGINE_PYPROJECT = '''[build-system]
requires = ["setuptools>=70"]
build-backend = "setuptools.build_meta"

[project]
name = "abc-engine-steady"
version = "0.1.0"

[project.entry-points.agentbench_crbc]
steady = "abc_engine_steady"

[tool.setuptools]
py-modules = ["abc_engine_steady"]
'''


@pytest.mark.slow
def test_an_installed_engine_of_two_files_plays_in_abc_rollout(tmp_path):
    import os
    import subprocess

    src = tmp_path / "src"
    src.mkdir()
    (src / "abc_engine_steady.py").write_text(ENGINE_MODULE)
    (src / "pyproject.toml").write_text(ENGINE_PYPROJECT)
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(site), str(src)], check=True, capture_output=True)
    launch = ("import sys, gymnasium; "
              "gymnasium.register('test/Corridor-v0', entry_point='tests.rollout.toyenv:Corridor'); "
              "from agentbench_crbc.cli import main; sys.exit(main(sys.argv[1:]))")
    out = tmp_path / "out.jsonl"
    res = subprocess.run([sys.executable, "-c", launch, "rollout", "--env", "test/Corridor-v0", "--policy",
                          "steady:right", "--groups", "2", "--group-size", "2", "--workers", "0", "-o", str(out)],
                         capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": f"{site}:{ROOT}"})
    assert res.returncode == 0, res.stderr
    assert "success 4/4" in res.stderr
    assert all(s["action"] == "right" for line in out.read_text().splitlines() for s in json.loads(line)["steps"])
