"""``rollout.engine_options`` / ``--engine-option``: checked against the keys each engine registers, at config
time and when the engine is built; engine defaults live in the engine (vLLM's share of the GPU beside the trainer),
and the trainer names no engine."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from agentbench_crbc.cli import main
from agentbench_crbc.errors import ConfigError
from agentbench_crbc.host import get_host
from agentbench_crbc.rollout.engines.factory import EngineRequest, build_engine
from agentbench_crbc.trainer.config import load_config

from .._fake_vllm import fake_vllm

TRAINER = Path(__file__).resolve().parents[2] / "agentbench_crbc" / "trainer"


def test_builtin_engines_register_the_options_they_read():
    engines = get_host().engines
    assert engines.get("hf").options == ("threads", "stop_token_ids")
    assert {"gpu_memory_utilization", "enable_sleep_mode", "llm_kwargs"} <= set(engines.get("vllm").options)
    assert engines.get("vllm").gpu_share == ("gpu_memory_utilization", 0.4)
    assert engines.get("random").options == ("seed", "invalid_rate", "actions")
    assert engines.get("expert").options == () and engines.get("hf").gpu_share is None


def test_hf_refuses_an_option_it_does_not_read_before_loading_anything():
    with pytest.raises(ConfigError, match=r"rollout engine 'hf' takes no option 'gpu_memory_utilization'; its "
                       r"options: threads, stop_token_ids"):
        build_engine("hf", EngineRequest(model_name="tiny", options={"gpu_memory_utilization": 0.4}))


def test_the_config_checks_engine_options_with_the_engine_it_names():
    with pytest.raises(ConfigError, match=r"^config key 'rollout.engine_options': rollout engine 'hf' takes no "
                       r"option 'gpu_memory_utilization'"):
        load_config(overrides=["rollout.engine_options.gpu_memory_utilization=0.5"])
    cfg = load_config(overrides=["rollout.engine=vllm", "model.name=Qwen/Qwen2.5-1.5B-Instruct",
                                 "rollout.engine_options.gpu_memory_utilization=0.5"])
    assert cfg.rollout.engine_options == {"gpu_memory_utilization": 0.5}
    assert load_config().rollout.engine_options == {}  # the default run gives its engine nothing


def test_the_old_vllm_key_is_one_line_naming_its_replacement(tmp_path):
    from agentbench_crbc.trainer.config import to_toml

    text = to_toml(load_config(overrides=["rollout.engine=vllm", "model.name=Qwen/Qwen2.5-1.5B-Instruct"]))
    (tmp_path / "config.toml").write_text(text.replace("engine_options = {}", "vllm_gpu_memory_utilization = 0.7"))
    with pytest.raises(ConfigError, match=r"rollout\.vllm_gpu_memory_utilization.*engine_options"):
        load_config(config=tmp_path / "config.toml")


def test_vllm_takes_its_colocated_defaults_beside_the_trainer_only(monkeypatch):
    pytest.importorskip("torch")
    made = fake_vllm(monkeypatch)
    build_engine("vllm", EngineRequest(model_name="m", beside_trainer=True))
    build_engine("vllm", EngineRequest(model_name="m", beside_trainer=True, options={"gpu_memory_utilization": 0.6}))
    build_engine("vllm", EngineRequest(model_name="m"))  # abc rollout --policy vllm:m: vLLM's own defaults
    assert made[0] == {"gpu_memory_utilization": 0.4, "enable_sleep_mode": True}
    assert made[1] == {"gpu_memory_utilization": 0.6, "enable_sleep_mode": True}
    assert "gpu_memory_utilization" not in made[2]


def test_the_memory_estimate_reads_the_engines_registered_share():
    pytest.importorskip("torch")
    from agentbench_crbc.trainer.memory import memory_plan

    base = ["rollout.engine=vllm", "model.name=Qwen/Qwen2.5-1.5B-Instruct"]
    default = dict(memory_plan(load_config(overrides=base), gpu_gib=80).parts)
    half = dict(memory_plan(load_config(overrides=[*base, "rollout.engine_options.gpu_memory_utilization=0.5"]),
                            gpu_gib=80).parts)
    key = "vllm engine while awake (gpu_memory_utilization)"
    assert default[key] == pytest.approx(0.4 * 80) and half[key] == pytest.approx(0.5 * 80)


def test_no_trainer_module_branches_on_an_engine_name():
    names = set(get_host().engines.names())
    found = []
    for path in sorted(TRAINER.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Compare):
                for c in [node.left, *node.comparators]:
                    if isinstance(c, ast.Constant) and c.value in names:
                        found.append(f"{path.name}:{node.lineno} {c.value!r}")
    assert found == []


def test_abc_rollout_passes_engine_options_to_the_engine(tmp_path, capsys):
    out = tmp_path / "r.jsonl"
    assert main(["rollout", "--env", "sokoban", "--policy", "random", "--groups", "1", "--group-size", "2",
                 "--workers", "0", "--engine-option", "invalid_rate=1.0", "-o", str(out)]) == 0
    steps = [s for line in out.read_text().splitlines() for s in json.loads(line)["steps"]]
    assert steps and not any(s["valid"] for s in steps)  # every answer invalid, as the option asks


@pytest.mark.parametrize("command", [
    ["rollout", "--env", "sokoban", "--policy", "random", "--engine-option", "threads=1"],
    ["eval", "--model", "tiny", "--env", "sokoban", "--engine-option", "gpu_memory_utilization=0.5"],
])
def test_an_option_the_engine_does_not_take_is_one_line_and_exit_2(command, capsys):
    assert main(command) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "takes no option" in err[0] and "its options:" in err[0], err
