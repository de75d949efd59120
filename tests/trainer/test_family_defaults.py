"""A new family chosen on the CPU demo gets the demo's settings a user expects: the trainer's own, and constrained
answers where its answers are a finite list (docs/families.md, "Training a new family"); the short run there scales
with the family's step limit."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agentbench_crbc.family import EnvFamily, EnvId, PromptStyle
from agentbench_crbc.hookspecs import hookimpl
from agentbench_crbc.host import Host, get_plugin_manager, reset_host
from agentbench_crbc.trainer.config import load_config

DOCS = (Path(__file__).resolve().parents[2] / "docs" / "families.md").read_text()
CORRIDOR = "tests.rollout.toyenv:Corridor"


def _family(name: str, **kw: object) -> EnvFamily:
    """A third party's text family: walk 10 cells right (the expert), 20 steps at most, admissible actions listed."""
    return EnvFamily(name=name, label=name.title(), default_id=f"abc-test/{name}-v0",
                     ids=(EnvId(f"abc-test/{name}-v0", CORRIDOR, 20, {"length": 10}),),
                     anchors=("text",), expert="tests.rollout.toyenv:expert_policy", **kw)  # type: ignore[arg-type]


class _Families:
    @hookimpl
    def abc_register_env_families(self, register):
        register.add(_family("walk"))
        register.add(_family("walkfree", prompt_style=PromptStyle(free_arguments=("<text>",))))
        register.add(_family("walkplain", training={"rollout": {"constrain": False}}))


@pytest.fixture
def families():
    pm = get_plugin_manager()
    pm.register(_Families(), name="walk-families")
    reset_host(Host(pm))
    yield
    reset_host(None)


def test_a_new_family_gets_the_cpu_demos_settings_and_constrained_answers(families):
    demo, cfg = load_config(), load_config(env="walk")
    assert cfg.rollout.constrain  # it lists its admissible actions: answers restricted to them, as Sokoban's
    assert cfg.optim == demo.optim and cfg.model == demo.model and cfg.credit == demo.credit
    assert (cfg.updates, cfg.rollout.groups, cfg.rollout.group_size) == (demo.updates, 8, 8)
    # Sokoban's own env settings stay with Sokoban: the family's step limit, no kwargs
    assert cfg.env.max_steps == 20 and cfg.env.kwargs == {} and demo.env.max_steps == 8


def test_constrained_answers_off_where_answers_are_free_or_the_family_or_user_says(families):
    assert not load_config(env="walkfree").rollout.constrain  # answers take free arguments
    assert not load_config(env="walkplain").rollout.constrain  # its training table says so
    assert not load_config(env="walk", overrides=["rollout.constrain=false"]).rollout.constrain
    assert load_config(env="walkplain", overrides=["rollout.constrain=true"]).rollout.constrain


def test_the_packaged_families_keep_their_answers():
    assert load_config().rollout.constrain  # Sokoban's cpu-demo
    assert not load_config(env="alfworld").rollout.constrain  # free text, as measured (its table says so)
    assert not load_config(env="webshop").rollout.constrain  # search[<query>] takes any query


def _short_run() -> list[str]:
    """The ``--set`` values of the short run docs/families.md gives for a new family."""
    section = DOCS.split("## Training a new family")[1].split("\n## ")[0]
    command = re.search(r"```bash\n(abc train --env FAMILY.*?)```", section, re.S).group(1)
    assert "env.max_steps" not in command  # the family's own step limit, whatever it is
    return re.findall(r"--set (\S+)", command)


def test_the_documented_short_run_keeps_the_familys_step_limit(families):
    cfg = load_config(env="walk", overrides=_short_run())
    assert cfg.env.max_steps == 20 and cfg.updates <= 3 and cfg.rollout.groups * cfg.rollout.group_size <= 8
    assert load_config(env="alfworld", overrides=_short_run()).env.max_steps == 50


@pytest.mark.slow
def test_the_short_run_trains_a_longer_family_with_constrained_answers(families, tmp_path, capsys):
    """A 10-step task: the expert reference solves every level within the step limit, and no answer is invalid."""
    from agentbench_crbc.cli import main

    sets = [*_short_run(), f"out_dir={tmp_path}"]
    assert main(["train", "--env", "walk", "--credit", "grpo", *[a for s in sets for a in ("--set", s)]]) == 0
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    config = json.loads((run / "config.json").read_text())
    assert config["rollout"]["constrain"] is True and config["env"]["max_steps"] == 20
    assert json.loads((run / "results.json").read_text())["reference"]["expert"]["success"] == 1.0
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if '"rl"' in line]
    assert len(rows) == 3 and all(r["invalid"] == 0 for r in rows)
    assert "answers: constrained" in capsys.readouterr().out
