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
    resolved_options,
    to_toml,
)

ROOT = Path(__file__).resolve().parents[2]


def test_default_is_the_cpu_demo_with_crbc_paper_options():
    cfg = load_config()
    assert cfg.preset == "cpu-demo" and cfg.env.name == "sokoban" and cfg.model.name == "tiny"
    assert cfg.credit.name == "crbc"
    assert cfg.credit.options == {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 5.0, "sigma_min": 1.0}
    assert cfg.eval.episodes >= 64 and cfg.eval.temperature == 0.4
    # reward only from a random start, answers restricted to the legal moves, one lr for every method, no KL guard
    assert cfg.sft.steps == 0 and cfg.rollout.constrain and cfg.optim.target_kl == 0 and cfg.optim.lr == 3e-4
    assert load_config(credit="grpo").optim == cfg.optim  # the same update for every method
    assert cfg.env.kwargs == {"view": "egocentric", "max_moves": 4} and cfg.env.max_steps == 8


def test_another_family_on_the_cpu_demo_drops_sokobans_env_settings():
    """The CPU demo's Sokoban kwargs (view, move range) and step cap stay with Sokoban; ALFWorld's table keeps free
    text."""
    cfg = load_config(env="alfworld")
    assert cfg.env.kwargs == {} and cfg.env.max_steps == 50 and not cfg.rollout.constrain
    assert cfg.optim.ppo_epochs == 4 and cfg.optim.mini_batch_size == 64  # the trainer's own settings carry over
    assert cfg.optim.target_kl == 0.1 and cfg.optim.lr == 1e-3  # free-text answers: ALFWorld's table keeps the guard


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
    assert cfg.optim.lr == 3e-5 and cfg.env.kwargs == {"view": "egocentric", "max_moves": 4, "size": 7}


def test_toml_round_trip_and_hash(tmp_path):
    cfg = load_config(preset="webshop-qwen2.5-1.5b", overrides=["seed=3", "model.lora=true"])
    path = tmp_path / "c.toml"
    path.write_text(to_toml(cfg))
    again = load_config(config=path)
    assert again == cfg and config_hash(again) == config_hash(cfg)
    assert config_hash(load_config(overrides=["seed=4"])) != config_hash(load_config())


def test_the_banner_shows_the_methods_defaults_under_the_given_options():
    method, opts = check_credit(load_config(credit="grpo"))
    assert opts == {}  # what the method is given: nothing, it fills in its own defaults
    assert resolved_options(method, opts) == {"norm": "std", "cross_steps": False}
    method, opts = check_credit(load_config(overrides=["credit.options.w_step=2"]))
    shown = resolved_options(method, opts)
    assert shown["w_step"] == 2.0 and shown["beta"] == 0.98 and shown["sigma_min"] == 1.0  # given over preset
    assert opts == {"beta": 0.98, "depth": "inf", "w_traj": 1.0, "w_step": 2.0, "sigma_min": 1.0}  # not the display's
    method, opts = check_credit(load_config(preset="alfworld-qwen2.5-1.5b"))
    assert resolved_options(method, opts)["sigma_min"] == 0.1  # the paper presets keep the paper's floor


@pytest.mark.slow
def test_the_run_banner_shows_the_resolved_options(tmp_path):
    from ._util import run_abc, set_args

    r = run_abc(["train", "--credit", "grpo", *set_args(["updates=1", "sft.steps=0", "eval.episodes=2",
                                                         f"out_dir={tmp_path}"])], cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "group RL with credit 'grpo' {'norm': 'std', 'cross_steps': False}  (1 updates" in r.stdout


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


# -- checked when the config is resolved, not at the first RL update (issue 17) --------------------------------------
@pytest.mark.parametrize("override, key, says", [
    ("credit.options.beta=2", "credit.options", "beta=2.0 must be a finite number in (0, 1]"),
    ("credit.options.depth=1e9", "credit.options", "must be an integer in [0, 1000]"),
    ("model.name=/no/such/folder", "model.name", "the local folder '/no/such/folder' does not exist"),
    ("model.name=./missing", "model.name", "does not exist"),
    ("model.name=bad name!", "model.name", "neither tiny, smollm2, a local folder nor a Hugging Face id"),
    ("env.id=abc/Nope-v0", "env.id", "unknown environment 'abc/Nope-v0'; families: alfworld, sokoban, webshop"),
    ("env.kwargs.bogus=1", "env.kwargs", "abc/SokobanText-v0 has no option 'bogus'; its options: size, num_boxes"),
    ("env.kwargs.size=abc", "env.kwargs", "Expect `size` to be an integer in [4, 128] or a (height, width) pair of"),
    # #40 item 10: every size bounded before work
    ("env.kwargs.size=10001", "env.kwargs", "Expect `size` to be an integer in [4, 128]"),
    ("env.kwargs.cell_px=100000", "env.kwargs", "Expect `cell_px` to be an integer in [1, 64]"),
    ("rollout.groups=1000000000000", "rollout.groups", "must be an integer in [1, 65536], got 1000000000000"),
    ("rollout.group_size=1000000000", "rollout.group_size", "must be an integer in [1, 65536]"),
    ("eval.episodes=1000000000000", "eval.episodes", "must be an integer in [1, 100000]"),
    ("eval.samples=1000000", "eval.samples", "must be an integer in [1, 1024]"),
    ("sft.pool=1000000000000", "sft.pool", "must be an integer in [1, 1048576]"),
    ("eval.temperature=1e300", "eval.temperature", "must be in [0, 100]"),
    ("env.kwargs.obs_mode=sound", "env.kwargs", "obs_mode='sound'"),
    ("seed=-1", "seed", "must be an integer in [0, 2**32 - 1], got -1"),
    ("seed=4294967296", "seed", "got 4294967296"),
    ("seed=1.5", "seed", "is not an integer"),
    ("rollout.gate=nogate", "rollout.gate", "unknown group gate 'nogate'"),
])
def test_bad_values_fail_when_the_config_is_resolved(override, key, says):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[override])
    msg = str(info.value)
    assert msg.startswith(f"config key {key!r}") and says in msg and "\n" not in msg


def test_env_copies_per_update_are_bounded_together():
    with pytest.raises(ConfigError, match=r"^config keys 'rollout.groups' x 'rollout.group_size': 1024 x 1024 = "
                                          r"1048576 env copies per update; at most 65536"):
        load_config(overrides=["rollout.groups=1024", "rollout.group_size=1024"])


def test_gate_options_and_out_dir_are_checked_too(tmp_path):
    with pytest.raises(ConfigError, match=r"^config key 'rollout.gate_options': selective_rollout: option "
                                          r"end_fraction=2.0 must be a finite number in \[0, 1\]$"):
        load_config(overrides=["rollout.gate=selective_rollout", "rollout.gate_options.end_fraction=2.0"])
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match=r"^config key 'out_dir': .*file is a file, not a folder"):
        load_config(overrides=[f"out_dir={tmp_path / 'file' / 'runs'}"])
    assert load_config(overrides=[f"out_dir={tmp_path / 'new' / 'runs'}"]).out_dir  # created later, by the run
    assert not (tmp_path / "new").exists()


def test_good_env_kwargs_and_a_local_model_folder_resolve(tmp_path):
    (tmp_path / "config.json").write_text("{}")  # a model folder (save_pretrained writes config.json)
    cfg = load_config(overrides=["env.kwargs.size=7", "env.kwargs.num_boxes=2", f"model.name={tmp_path}"])
    assert cfg.env.kwargs == {"view": "egocentric", "max_moves": 4, "size": 7, "num_boxes": 2}  # over the preset's
    assert cfg.model.name == str(tmp_path)


def test_a_hub_id_must_be_cached_when_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    assert load_config(model="someorg/not-downloaded").model.name == "someorg/not-downloaded"  # online: fetched later
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"^config key 'model.name': 'someorg/not-downloaded' is not in the "
                                          r"Hugging Face cache .* HF_HUB_OFFLINE is set"):
        load_config(model="someorg/not-downloaded")
    snap = tmp_path / "models--someorg--not-downloaded"
    (snap / "snapshots" / "abc").mkdir(parents=True)
    (snap / "refs").mkdir()
    (snap / "refs" / "main").write_text("abc")
    (snap / "snapshots" / "abc" / "config.json").write_text("{}")
    assert load_config(model="someorg/not-downloaded").model.name == "someorg/not-downloaded"


def test_print_config_stops_at_a_bad_option_with_one_line(capsys):
    from agentbench_crbc.cli import main

    assert main(["train", "--set", "credit.options.beta=2", "--print-config"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "credit.options" in err and "beta=2.0" in err


@pytest.mark.parametrize("urls, shown", [
    ('"x"', None), ('["ws://"]', "'ws://'"), ('["http://"]', "'http://'"), ('["mailto:x"]', "'mailto:x'"),
    ('["ftp://x"]', "'ftp://x'"), ('["h:99999"]', "'h:99999'"), ('"\\"x\\""', "'\"x\"'"),
])
def test_remote_urls_are_checked_when_the_config_is_resolved(urls, shown):
    # #54 item 5: `ws://` became ws://ws:/ws and `"x"` became ["\"x\""], found only when the pool connected
    if shown is None:
        assert load_config(overrides=[f"rollout.remote_urls={urls}"]).rollout.remote_urls == ["x"]
        return
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[f"rollout.remote_urls={urls}"])
    msg = str(info.value)
    assert msg.startswith(f"config key 'rollout.remote_urls': remote env server {shown} must be host:port or an "
                          "http(s):// or ws(s):// URL with a host") and "\n" not in msg


def _outside(bound, integer: bool) -> list:
    """Values just outside ``bound`` (below its low end, above its high end or past the integer ceiling)."""
    import math

    from agentbench_crbc.trainer.schema import MAX_CONFIG_INT

    step = 1 if integer else 0.5
    out = [bound.lo if bound.lo_open else bound.lo - step]
    if math.isfinite(bound.hi):
        out.append(bound.hi if bound.hi_open else bound.hi + step)
    elif integer:
        out += [MAX_CONFIG_INT + 1, 99999999999999999999]
    return [int(v) if integer else v for v in out]


def _bounded_keys() -> list[tuple[str, bool]]:
    from agentbench_crbc.trainer.schema import leaf_fields

    return [(k, f.type in (int, "int")) for k, f in leaf_fields().items() if f.metadata.get("bounds") is not None]


@pytest.mark.parametrize("key, integer", _bounded_keys())
def test_every_keys_bound_and_type_are_checked_when_the_config_is_resolved(key, integer, tmp_path):
    # #54 item 6: updates=99999999999999999999 and model.tiny_layers=100000 passed, found after the run folder
    from agentbench_crbc.trainer.schema import leaf_fields

    bound = leaf_fields()[key].metadata["bounds"]
    out = tmp_path / "runs"
    bad = [str(v) for v in _outside(bound, integer)] + ["abc", "nan", *(["1.5"] if integer else [])]
    for text in bad:
        with pytest.raises(ConfigError) as info:
            load_config(overrides=[f"{key}={text}", f"out_dir={out}"])
        msg = str(info.value)
        assert msg.startswith(f"config key {key!r}: ") and "\n" not in msg and len(msg) < 300, (text, msg)
    *parents, leaf = key.split(".")  # a number written as a string in TOML is refused, not read as 1
    lines = [f"[{'.'.join(parents)}]"] if parents else []
    (tmp_path / "c.toml").write_text("\n".join([*lines, f'{leaf} = "1"']) + "\n")
    with pytest.raises(ConfigError, match=rf"^config key {key!r}: '1' is a string, not (an integer|a number); "
                                          "write it without quotes$"):
        load_config(config=tmp_path / "c.toml")
    assert not out.exists()


@pytest.mark.parametrize("override, says", [
    ("model.tiny_hidden=12", "must be a multiple of 8"),
    ("env.template=/etc", "the folder '/etc' holds no .txt templates"),
    ("env.template=/no/such/folder", "'/no/such/folder' is neither paper, compact nor an existing folder"),
])
def test_the_tiny_width_and_the_template_folder_are_checked_too(override, says):
    with pytest.raises(ConfigError) as info:
        load_config(overrides=[override])
    assert says in str(info.value) and str(info.value).startswith(f"config key {override.split('=')[0]!r}")


def test_a_number_out_of_bounds_stops_train_before_its_run_folder(tmp_path, capsys):
    from agentbench_crbc.cli import main

    out = tmp_path / "runs"
    for argv in (["train", "--set", "updates=99999999999999999999", "--set", f"out_dir={out}"],
                 ["train", "--set", "updates=99999999999999999999", "--print-config"],
                 ["train", "--set", "model.tiny_layers=100000", "--set", f"out_dir={out}"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "days" not in err and err.startswith("abc train: error: config key '")
    assert not out.exists()


@pytest.mark.parametrize("argv, says", [
    (["--seed", "-1"], "argument --seed: '-1' is out of range; give an integer in [0, 4294967295]"),
    (["--seed", str(2**64)], "argument --seed: '18446744073709551616' is out of range"),
    (["--set", "optim.lr=abc"], "config key 'optim.lr': 'abc' is not a number"),
    (["--set", "noequals"], "--set 'noequals' must look like KEY=VALUE"),
    (["--set", "model.tiny_layers=100000"], "config key 'model.tiny_layers': must be an integer in [1, 64]"),
])
def test_bench_checks_its_seeds_and_overrides_before_any_worker(argv, says, tmp_path, capsys):
    # a real run failed inside a worker and ended with a misleading `rec.jsonl: no such file`
    from agentbench_crbc.cli import main

    out = tmp_path / "bench"
    if argv[0] == "--seed":  # argparse's own refusal
        with pytest.raises(SystemExit) as e:
            main(["bench", *argv, "--out", str(out)])
        assert e.value.code == 2
    else:
        assert main(["bench", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("template, says", [
    ("/etc", "--template: the folder '/etc' holds no .txt templates"),
    ("/no/such/folder", "--template: '/no/such/folder' is neither paper, compact nor an existing folder"),
])
def test_rollout_refuses_a_template_folder_that_holds_no_templates(template, says, tmp_path, capsys):
    from agentbench_crbc.cli import main

    out = tmp_path / "r.jsonl"
    assert main(["rollout", "--env", "sokoban", "--policy", "random", "--template", template, "--groups", "1",
                 "--group-size", "1", "-o", str(out)]) == 2
    assert says in capsys.readouterr().err and not out.exists()
