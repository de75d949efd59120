"""Config: presets, TOML round trip, --set overrides, one-line errors naming the bad key."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.trainer.config import (
    PRESETS,
    check_credit,
    config_hash,
    field_docs,
    load_config,
    to_toml,
)

ROOT = Path(__file__).resolve().parents[2]


def test_default_is_the_cpu_demo_with_crbc_paper_options():
    cfg = load_config()
    assert cfg.preset == "cpu-demo" and cfg.env.name == "sokoban" and cfg.model.name == "tiny"
    assert cfg.credit.name == "crbc"
    assert cfg.credit.options == {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0}
    assert cfg.sft.steps > 0 and cfg.eval.episodes >= 64 and cfg.eval.temperature == 0.4


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_presets_resolve_and_match_the_paper(name):
    cfg = load_config(preset=name)
    check_credit(cfg)
    if name != "cpu-demo":
        assert cfg.rollout.group_size == 8 and cfg.optim.lr == 1e-6 and cfg.optim.kl_coef == 0.01
        assert cfg.updates == 150 and cfg.eval.episodes == 128 and cfg.eval.every == 5
        assert cfg.rollout.groups == (32 if cfg.env.name == "sokoban" else 16)
        assert cfg.env.max_steps == {"alfworld": 50, "webshop": 15, "sokoban": 15}[cfg.env.name]
        assert cfg.rollout.max_prompt_tokens == {"alfworld": 2048, "webshop": 5120, "sokoban": 1024}[cfg.env.name]


def test_method_options_follow_the_chosen_method():
    assert load_config(preset="alfworld-qwen2.5-7b", credit="gigpo").credit.options == {"gamma": 0.95,
                                                                                          "step_weight": 1.0}
    assert load_config(credit="grpo").credit.options == {}
    cfg = load_config(overrides=["credit.options.beta=0.9", "optim.lr=3e-5", "env.kwargs.size=7"])
    assert cfg.credit.options["beta"] == 0.9 and cfg.credit.options["w_step"] == 5.0
    assert cfg.optim.lr == 3e-5 and cfg.env.kwargs == {"size": 7}


def test_toml_round_trip_and_hash(tmp_path):
    cfg = load_config(preset="webshop-qwen2.5-1.5b", overrides=["seed=3", "model.lora=true"])
    path = tmp_path / "c.toml"
    path.write_text(to_toml(cfg))
    again = load_config(config=path)
    assert again == cfg and config_hash(again) == config_hash(cfg)
    assert config_hash(load_config(overrides=["seed=4"])) != config_hash(load_config())


@pytest.mark.parametrize("path", sorted((ROOT / "examples" / "configs").glob("*.toml")))
def test_example_configs_load(path):
    check_credit(load_config(config=path))


@pytest.mark.parametrize("override, key", [
    ("optim.lr=abc", "optim.lr"), ("optim.lrr=1", "optim.lrr"), ("optim.loss_agg=mean", "optim.loss_agg"),
    ("updates=-1", "updates"), ("optim.clip_ratio=1.5", "optim.clip_ratio"), ("model.lora=maybe", "model.lora"),
    ("rollout.group_size=0", "rollout.group_size"), ("credit.options.betta=0.9", "credit.options"),
    ("credit.name=gipgo", "credit.name"), ("preset=nope", "preset"),
])
def test_bad_values_name_the_key(override, key):
    with pytest.raises(ConfigError) as info:
        check_credit(load_config(overrides=[override]))
    msg = str(info.value)
    assert key in msg and "\n" not in msg


def test_bad_toml_names_file_and_key(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[optim]\nlr = 'fast'\n")
    with pytest.raises(ConfigError, match=r"optim\.lr"):
        load_config(config=bad)
    bad.write_text("[optim\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(config=bad)


def test_cli_bad_config_is_one_line(capsys):
    from agentbench_crbc.cli import main

    assert main(["train", "--set", "optim.lr=abc"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "optim.lr" in err and err.startswith("abc train: error:")


def test_cli_print_config(capsys):
    from agentbench_crbc.cli import main

    assert main(["train", "--credit", "gigpo", "--print-config", "--set", "optim.lr=1e-5"]) == 0
    out = capsys.readouterr().out
    assert 'name = "gigpo"' in out and "lr = 1e-05" in out


def test_every_field_has_a_docstring():
    import dataclasses

    from agentbench_crbc.trainer import config as c

    docs = field_docs()
    for cls, prefix in [(c.ModelConfig, "model."), (c.EnvConfig, "env."), (c.RolloutConfig, "rollout."),
                        (c.CreditConfig, "credit."), (c.OptimConfig, "optim."), (c.SFTConfig, "sft."),
                        (c.EvalConfig, "eval.")]:
        for f in dataclasses.fields(cls):
            assert docs.get(prefix + f.name), prefix + f.name


def test_model_label_of_hub_ids_run_folders_and_generic_folders(tmp_path):
    from agentbench_crbc.trainer.eval import model_label

    assert model_label("Qwen/Qwen2.5-1.5B-Instruct") == "Qwen2.5-1.5B-Instruct"
    assert model_label("tiny") == "tiny-qwen2"
    sft = tmp_path / "sft-run"
    (sft / "model").mkdir(parents=True)
    (sft / "config.toml").write_text('[model]\nname = "Qwen/Qwen2.5-7B-Instruct"\n')
    assert model_label(str(sft / "model")) == "Qwen2.5-7B-Instruct"
    rl = tmp_path / "rl-run"  # trained from the SFT run's folder: still labelled by the base model
    (rl / "model").mkdir(parents=True)
    (rl / "config.toml").write_text(f'[model]\nname = "{sft / "model"}"\n')
    assert model_label(str(rl / "model")) == "Qwen2.5-7B-Instruct"
    loose = tmp_path / "my-finetune" / "final"
    loose.mkdir(parents=True)
    assert model_label(str(loose)) == "my-finetune/final"
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "model").mkdir()
    (tmp_path / "broken" / "config.toml").write_text("not toml [")
    assert model_label(str(tmp_path / "broken" / "model")) == "broken/model"
