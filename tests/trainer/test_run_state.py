"""RunState: the trainer state a checkpoint's state.json holds, round-tripped and checked field by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentbench_crbc.errors import ConfigError
from agentbench_crbc.trainer.config import load_config
from agentbench_crbc.trainer.resume import RunState, fixed_config
from agentbench_crbc.trainer.validations import Validation, Validations

CKPT = Path("ckpt-000003")

_json_scalars = st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=8)
_aggregates = st.dictionaries(st.text(max_size=6), _json_scalars, max_size=3)
_modes = st.dictionaries(st.text(max_size=6).filter(lambda k: k not in ("update", "reference")), _aggregates,
                         max_size=2)
_validations = st.builds(Validation, update=st.integers(0, 2**31 - 1), modes=_modes,
                         reference=st.none() | st.dictionaries(st.text(max_size=6), _aggregates, max_size=2))
_states = st.builds(
    RunState,
    stage=st.sampled_from(["sft", "rl"]),
    sft_step=st.integers(0, 2**31 - 1),
    update=st.integers(0, 2**31 - 1),
    evals=st.dictionaries(st.text(min_size=1, max_size=8), _validations, max_size=3).map(Validations),
    config_hash=st.text(alphabet="0123456789abcdef", max_size=12),
    config=st.dictionaries(st.text(min_size=1, max_size=10), _json_scalars, max_size=4),
    sft_seconds=st.floats(0, 1e9),
    rl_seconds=st.floats(0, 1e9),
    sft_optimizer=st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(_states)
def test_state_json_round_trips(state):
    text = json.dumps(state.to_json())
    assert RunState.from_json(json.loads(text), CKPT) == state


def test_a_new_run_starts_at_zero_and_keeps_its_fixed_config():
    cfg = load_config(overrides=("updates=3",))
    state = RunState.start(cfg)
    assert (state.stage, state.update, state.sft_step, state.evals) == ("rl", 0, 0, Validations())
    assert state.config == fixed_config(cfg) and "updates" not in state.config  # a resume may change updates
    assert RunState.start(load_config(overrides=("sft.steps=5",))).stage == "sft"


def test_an_older_checkpoint_without_the_later_fields_loads_with_defaults():
    state = RunState.from_json({"stage": "rl", "update": 4, "sft_step": 0, "evals": {}, "unknown_later": 1}, CKPT)
    assert state == RunState("rl", update=4)


@pytest.mark.parametrize(("saved", "named"), [
    ([], "is not a JSON object"),
    ({"stage": "ppo", "update": 0, "sft_step": 0}, "stage 'ppo'"),
    ({"stage": "rl", "update": -1, "sft_step": 0}, "update -1"),
    ({"stage": "rl", "update": True, "sft_step": 0}, "update True"),
    ({"stage": "rl", "update": 1, "sft_step": 2**31}, "sft_step"),
    ({"stage": "rl", "update": 1, "sft_step": 0, "rl_seconds": "5"}, "rl_seconds '5'"),
    ({"stage": "rl", "update": 1, "sft_step": 0, "sft_seconds": -1.0}, "sft_seconds -1.0"),
    ({"stage": "rl", "update": 1, "sft_step": 0, "evals": []}, "evals is not a JSON object"),
    ({"stage": "rl", "update": 1, "sft_step": 0, "evals": {"after": {"t0.4": {}}}}, "evals['after'] is not an object"),
    ({"stage": "rl", "update": 1, "sft_step": 0, "evals": {"after": {"update": 1, "t0.4": 0.5}}}, "evals['after']"),
    ({"stage": "rl", "update": 1, "sft_step": 0, "config": "x"}, "config is not a JSON object"),
    ({"stage": "rl", "update": 1, "sft_step": 0, "sft_optimizer": "false"}, "sft_optimizer is not true or false"),
])
def test_a_bad_field_is_one_line_naming_the_checkpoint_and_field(saved, named):
    with pytest.raises(ConfigError) as exc:
        RunState.from_json(saved, CKPT)
    msg = str(exc.value)
    assert msg.startswith("--resume: ckpt-000003/state.json") and named in msg and "\n" not in msg


def test_read_names_an_unreadable_file(tmp_path):
    ckpt = tmp_path / "ckpt-000001"
    ckpt.mkdir()
    (ckpt / "state.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"ckpt-000001/state.json is unreadable"):
        RunState.read(ckpt)
    (ckpt / "state.json").write_text(json.dumps(RunState("sft", sft_step=7).to_json()), encoding="utf-8")
    assert RunState.read(ckpt) == RunState("sft", sft_step=7)


def test_the_code_revision_is_read_when_a_run_starts_not_when_its_records_are_written(tmp_path):
    pytest.importorskip("torch")
    from agentbench_crbc.revision import code_revision
    from agentbench_crbc.trainer.loop import Trainer

    code_revision.cache_clear()
    cfg = load_config(overrides=("updates=1", "rollout.groups=1", "rollout.group_size=2", "tensorboard=false",
                                 f"out_dir={tmp_path}", "threads=1"))
    trainer = Trainer(cfg)
    try:
        assert code_revision.cache_info().currsize == 1  # a later edit of the tree cannot change the rows' revision
    finally:
        trainer.lock.release()
        trainer.log.close()


def test_a_validation_reads_back_as_the_trainer_wrote_it():
    saved = {"before": {"update": 0, "t0.4": {"success": 0.25, "n_episodes": 8},
                        "reference": {"random": {"success": 0.0, "n_episodes": 8, "stderr": 0.0}}},
             "after": {"update": 3}}
    state = RunState.from_json({"stage": "rl", "update": 3, "sft_step": 0, "evals": saved}, CKPT)
    assert state.evals.before == Validation(0, {"t0.4": {"success": 0.25, "n_episodes": 8}},
                                            {"random": {"success": 0.0, "n_episodes": 8, "stderr": 0.0}})
    assert state.evals.success("before", "t0.4") == 0.25 and state.evals.success("after", "t0.4") is None
    assert state.evals.untrained is None and state.to_json()["evals"] == saved
